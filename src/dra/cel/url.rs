//! The Kubernetes URL library: `url()`, `isURL()`, `getScheme`, `getHost`,
//! `getHostname`, `getPort`, `getEscapedPath` and `getQuery`, with Go's
//! `url.ParseRequestURI` rules (an absolute URL or an absolute path; no
//! fragment; `%` escapes must be valid).

use std::collections::HashMap;

use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, STRING_TYPE, Type};
use cel::common::value::Val;
use cel::{Env, ExecutionError};

use super::{arg, function_error, owned, static_val};

/// `net.URL`'s CEL type.
pub(super) static URL_TYPE: Type = Type::new_unspecified_type("net.URL");

/// A parsed request URI.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Url {
    scheme: String,
    host: String,
    raw_path: String,
    raw_query: String,
}

static_val!(Url, URL_TYPE);

fn unescape(s: &str, query: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(
                    u8::from_str_radix(hex, 16)
                        .ok()
                        .filter(|_| hex.bytes().all(|b| b.is_ascii_hexdigit()))?,
                );
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Go's `shouldEscape(c, encodePath)` negated.
fn path_safe(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&c)
}

fn escape_path(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if path_safe(b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Url {
    /// `url.ParseRequestURI`.
    pub fn parse(raw: &str) -> Result<Url, String> {
        let error = |why: &str| format!("parse {raw:?}: {why}");
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(error("net/url: invalid control character in URL"));
        }
        if raw.is_empty() {
            return Err(error("empty url"));
        }
        let (scheme, rest) = split_scheme(raw).map_err(&error)?;
        let (rest, raw_query) = match rest.strip_suffix('?').filter(|r| !r.contains('?')) {
            Some(r) => (r, ""),
            None => rest.split_once('?').unwrap_or((rest, "")),
        };
        if !rest.starts_with('/') {
            return Err(error("invalid URI for request"));
        }
        let (host, path) = match rest.strip_prefix("//").filter(|_| !scheme.is_empty()) {
            Some(authority_and_path) => {
                let split = authority_and_path
                    .find('/')
                    .unwrap_or(authority_and_path.len());
                let (authority, path) = authority_and_path.split_at(split);
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                check_host(host).map_err(|e| error(&e))?;
                (host.to_owned(), path)
            }
            None => (String::new(), rest),
        };
        unescape(path, false).ok_or_else(|| error("invalid URL escape"))?;
        Ok(Url {
            scheme: scheme.to_ascii_lowercase(),
            host,
            raw_path: path.to_owned(),
            raw_query: raw_query.to_owned(),
        })
    }

    fn hostname(&self) -> &str {
        let (host, _) = split_port(&self.host);
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }

    fn port(&self) -> &str {
        split_port(&self.host).1
    }

    /// `URL.EscapedPath`: the path as written when that is a valid
    /// encoding, else its canonical escaping.
    fn escaped_path(&self) -> String {
        let valid = self
            .raw_path
            .bytes()
            .all(|b| path_safe(b) || b"!'()*[]%".contains(&b));
        if valid {
            self.raw_path.clone()
        } else {
            escape_path(&unescape(&self.raw_path, false).unwrap_or_default())
        }
    }

    /// `URL.Query()`: pairs with bad escapes or `;` are dropped, as Go does.
    fn query(&self) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for pair in self
            .raw_query
            .split('&')
            .filter(|p| !p.is_empty() && !p.contains(';'))
        {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Some(k), Some(v)) = (unescape(k, true), unescape(v, true)) {
                out.entry(k).or_default().push(v);
            }
        }
        out
    }
}

/// Go's `getScheme`.
fn split_scheme(raw: &str) -> Result<(&str, &str), &'static str> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme"),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn split_port(host: &str) -> (&str, &str) {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => (&host[..i], &host[i + 1..]),
        _ => (host, ""),
    }
}

/// Go's `parseHost` checks: a bracketed IPv6 literal, a numeric port.
fn check_host(host: &str) -> Result<(), String> {
    let port_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let (_, after) = rest.split_once(']').ok_or("missing ']' in host")?;
        if !(after.is_empty() || after.starts_with(':') && port_ok(&after[1..])) {
            return Err(format!("invalid port {after:?} after host"));
        }
        return Ok(());
    }
    if let Some((_, port)) = host.rsplit_once(':')
        && !port_ok(port)
    {
        return Err(format!("invalid port \":{port}\" after host"));
    }
    Ok(())
}

fn url_arg<'a>(
    args: &'a [cel::common::value::CowVal<'_, '_>],
    f: &str,
) -> Result<&'a Url, ExecutionError> {
    arg::<Url>(args, 0, f)
}

fn string(s: impl Into<String>) -> CelString<'static> {
    CelString::from(s.into())
}

/// Registers the URL library.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let u = || URL_TYPE.to_owned();
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], |a| {
        let raw = arg::<CelString>(&a, 0, "url")?.inner();
        owned(Url::parse(raw).map_err(|e| function_error("url", e))?)
    })?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], |a| {
        owned(CelBool::from(
            Url::parse(arg::<CelString>(&a, 0, "isURL")?.inner()).is_ok(),
        ))
    })?;
    env.add_member_overload("getScheme", "url_get_scheme", u(), vec![], |a| {
        owned(string(url_arg(&a, "getScheme")?.scheme.clone()))
    })?;
    env.add_member_overload("getHost", "url_get_host", u(), vec![], |a| {
        owned(string(url_arg(&a, "getHost")?.host.clone()))
    })?;
    env.add_member_overload("getHostname", "url_get_hostname", u(), vec![], |a| {
        owned(string(url_arg(&a, "getHostname")?.hostname()))
    })?;
    env.add_member_overload("getPort", "url_get_port", u(), vec![], |a| {
        owned(string(url_arg(&a, "getPort")?.port()))
    })?;
    env.add_member_overload("getEscapedPath", "url_get_escaped_path", u(), vec![], |a| {
        owned(string(url_arg(&a, "getEscapedPath")?.escaped_path()))
    })?;
    env.add_member_overload("getQuery", "url_get_query", u(), vec![], |a| {
        let query = url_arg(&a, "getQuery")?.query();
        let map: HashMap<CelMapKey, Box<dyn Val>> = query
            .into_iter()
            .map(|(k, vs)| {
                let values: Vec<Box<dyn Val>> = vs
                    .into_iter()
                    .map(|v| Box::new(string(v)) as Box<dyn Val>)
                    .collect();
                (
                    CelMapKey::from(k),
                    Box::new(CelList::from(values)) as Box<dyn Val>,
                )
            })
            .collect();
        owned(CelMap::from(map))
    })?;
    Ok(())
}
