//! The names in `/explain/pods/{namespace}/{name}`, checked as the API server
//! checks them (`k8s.io/apimachinery/pkg/util/validation`): a namespace is a
//! DNS-1123 label, a pod name a DNS-1123 subdomain. A bad one is a 400 that
//! names the part and the first offending character, before any lookup.

/// Longest DNS-1123 label (namespaces, and each dot-separated part of a subdomain).
pub const LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain (pod names).
pub const SUBDOMAIN_MAX: usize = 253;

const LABEL_RULE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')";
const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')";

/// Checks a namespace; the error names it as `namespace`.
pub fn validate_namespace(namespace: &str) -> Result<(), String> {
    label(namespace).map_err(|why| format!("namespace {}: {why}: {LABEL_RULE}", quoted(namespace)))
}

/// Checks a pod name; the error names it as `name`.
pub fn validate_pod_name(name: &str) -> Result<(), String> {
    if name.len() > SUBDOMAIN_MAX {
        return Err(format!(
            "name {}: must be no more than {SUBDOMAIN_MAX} characters (it has {})",
            quoted(name),
            name.chars().count()
        ));
    }
    let mut offset = 0;
    for part in name.split('.') {
        if let Err(why) = subdomain_part(part, offset) {
            return Err(format!("name {}: {why}: {SUBDOMAIN_RULE}", quoted(name)));
        }
        offset += part.chars().count() + 1;
    }
    Ok(())
}

/// One DNS-1123 label, whole.
fn label(value: &str) -> Result<(), String> {
    if value.len() > LABEL_MAX {
        return Err(format!(
            "must be no more than {LABEL_MAX} characters (it has {})",
            value.chars().count()
        ));
    }
    subdomain_part(value, 0)
}

/// One dot-separated part, starting at character `offset` of the whole name.
fn subdomain_part(part: &str, offset: usize) -> Result<(), String> {
    if part.is_empty() {
        return Err(if offset == 0 {
            "must not be empty or start with '.'".into()
        } else {
            format!("empty part after character {offset} ('..' or a trailing '.')")
        });
    }
    if let Some((i, c)) = part
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "character {} is {c:?}, which is not allowed",
            offset + i + 1
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(part.chars().next()) {
        return Err(format!("character {} must be alphanumeric", offset + 1));
    }
    if !alnum(part.chars().last()) {
        return Err(format!(
            "character {} must be alphanumeric",
            offset + part.chars().count()
        ));
    }
    Ok(())
}

/// The value quoted for a message, cut after 80 characters so a megabyte of
/// path does not come back in the answer.
fn quoted(value: &str) -> String {
    const SHOWN: usize = 80;
    if value.chars().count() <= SHOWN {
        format!("{value:?}")
    } else {
        let head: String = value.chars().take(SHOWN).collect();
        format!("{head:?}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names_pass() {
        for ns in ["default", "kube-system", "a", "0", &"n".repeat(63)] {
            assert_eq!(validate_namespace(ns), Ok(()), "{ns}");
        }
        for name in ["web-0", "a.b.c", "x", &"p".repeat(253)] {
            assert_eq!(validate_pod_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn bad_namespaces_name_the_part_and_the_character() {
        let e = validate_namespace("Prod").unwrap_err();
        assert!(
            e.starts_with(r#"namespace "Prod": character 1 is 'P'"#),
            "{e}"
        );
        let e = validate_namespace("a.b").unwrap_err();
        assert!(e.contains("character 2 is '.'"), "{e}");
        let e = validate_namespace("-a").unwrap_err();
        assert!(e.contains("character 1 must be alphanumeric"), "{e}");
        let e = validate_namespace(&"n".repeat(64)).unwrap_err();
        assert!(e.contains("no more than 63 characters (it has 64)"), "{e}");
        assert!(validate_namespace("").is_err());
    }

    #[test]
    fn bad_pod_names_name_the_part() {
        let e = validate_pod_name("web_0").unwrap_err();
        assert!(e.starts_with(r#"name "web_0": character 4 is '_'"#), "{e}");
        let e = validate_pod_name("a..b").unwrap_err();
        assert!(e.contains("empty part after character 2"), "{e}");
        let e = validate_pod_name("a.b-").unwrap_err();
        assert!(e.contains("character 4 must be alphanumeric"), "{e}");
        let long = "p".repeat(254);
        let e = validate_pod_name(&long).unwrap_err();
        assert!(
            e.contains("no more than 253 characters (it has 254)"),
            "{e}"
        );
        assert!(e.len() < 300, "the name is cut in the message: {e}");
    }
}
