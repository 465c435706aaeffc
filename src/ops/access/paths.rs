//! `--authorization-always-allow-paths`: paths served without
//! authentication or authorization, matched as kube-scheduler's path
//! authorizer matches them (`k8s.io/apiserver/pkg/authorization/path`): an
//! entry is an exact path, or a prefix when it ends in `*`; the leading `/`
//! is optional; `*` anywhere else is an error.

/// The health paths kube-scheduler allows by default
/// (`DelegatingAuthorizationOptions.AlwaysAllowPaths`).
pub const DEFAULT: &[&str] = &["/healthz", "/readyz", "/livez"];

/// The compiled list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlwaysAllow {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AlwaysAllow {
    /// Compiles `entries`; names the first entry with a `*` before its end.
    pub fn new<S: AsRef<str>>(entries: &[S]) -> Result<AlwaysAllow, String> {
        let mut allow = AlwaysAllow::default();
        for entry in entries {
            let entry = entry.as_ref();
            let path = entry.strip_prefix('/').unwrap_or(entry);
            match path.strip_suffix('*') {
                _ if path.is_empty() => allow.exact.push(String::new()),
                Some(prefix) if !prefix.contains('*') => allow.prefixes.push(prefix.to_owned()),
                None if !path.contains('*') => allow.exact.push(path.to_owned()),
                _ => return Err(format!("{entry:?}: only a trailing * is allowed")),
            }
        }
        Ok(allow)
    }

    /// Whether `path` (a request's path, query excluded) is always allowed.
    pub fn matches(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|e| e == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_paths_and_trailing_star_prefixes() {
        let allow = AlwaysAllow::new(&["/healthz", "readyz", "/debug/*", "/"]).unwrap();
        for yes in ["/healthz", "/readyz", "/debug/zones", "/debug/", "/"] {
            assert!(allow.matches(yes), "{yes}");
        }
        // As in kube-scheduler: "/healthz" does not match "/healthz/" or below.
        for no in ["/healthz/", "/healthz/ping", "/metrics", "/debug"] {
            assert!(!allow.matches(no), "{no}");
        }
    }

    #[test]
    fn the_defaults_are_the_health_paths() {
        let allow = AlwaysAllow::new(DEFAULT).unwrap();
        assert!(allow.matches("/livez"));
        assert!(!allow.matches("/metrics"));
    }

    #[test]
    fn a_star_before_the_end_is_refused() {
        let e = AlwaysAllow::new(&["/a*/b"]).unwrap_err();
        assert_eq!(e, r#""/a*/b": only a trailing * is allowed"#);
        assert!(AlwaysAllow::new(&["/**"]).is_err());
    }
}
