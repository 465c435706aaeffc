//! The Kubernetes format library: `format.named(name)` and
//! `format.<name>()` give a format, `<format>.validate(s)` the errors of
//! `s` (`optional.none()` when it is valid), with the messages of the
//! apimachinery validators: `dns1123Label`, `dns1123Subdomain`,
//! `dns1035Label`, `qualifiedName`, their `...Prefix` forms (a trailing
//! `-` allowed, for generated names), `labelValue`, `uri`, `uuid`, `byte`
//! (base64), `date` and `datetime`.

use std::sync::LazyLock;

use cel::Env;
use cel::common::types::{CelList, CelOptional, CelString, STRING_TYPE, Type};
use cel::common::value::Val;
use regex::Regex;

use super::url::Url;
use super::{arg, owned, static_val};
use crate::k8s::validation::{label_key_errors, label_value_errors};

/// `kubernetes.NamedFormat`'s CEL type.
pub(super) static FORMAT_TYPE: Type = Type::new_unspecified_type("kubernetes.NamedFormat");

/// A named format.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Format(&'static str);

static_val!(Format, FORMAT_TYPE);

/// The named formats, written once: the list `format.named` looks names up in, and one
/// `format.<name>()` overload each (overloads are plain `fn`s, which cannot capture a name, so
/// each is written out from its literal).
macro_rules! formats {
    ($($name:literal),* $(,)?) => {
        const NAMES: &[&str] = &[$($name),*];

        fn register_each(env: &mut Env) -> Result<(), cel::DeclarationError> {
            $(env.add_overload(concat!("format.", $name), concat!("format-", $name), vec![], |_| owned(Format($name)))?;)*
            Ok(())
        }
    };
}

formats!(
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
);

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

fn whole(pattern: &str) -> Regex {
    #[allow(clippy::expect_used)] // constant patterns, covered by the tests
    Regex::new(&format!("^(?:{pattern})$")).expect("valid constant pattern")
}

static LABEL: LazyLock<Regex> = LazyLock::new(|| whole(LABEL_FMT));
static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| whole(SUBDOMAIN_FMT));
static DNS1035: LazyLock<Regex> = LazyLock::new(|| whole(DNS1035_FMT));
static UUID: LazyLock<Regex> =
    LazyLock::new(|| whole("(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}"));
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    whole("(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
});
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    whole("([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")
});

/// `validation.RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        examples.join(" or ")
    )
}

fn max_len(value: &str, max: usize) -> Option<String> {
    (value.len() > max).then(|| format!("must be no more than {max} characters"))
}

fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs: Vec<String> = max_len(value, 63).into_iter().collect();
    if !LABEL.is_match(value) {
        errs.push(if SUBDOMAIN.is_match(value) {
            "must not contain dots".to_owned()
        } else {
            regex_error(LABEL_ERR, LABEL_FMT, &["my-name", "123-abc"])
        });
    }
    errs
}

fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs: Vec<String> = max_len(value, 253).into_iter().collect();
    if !SUBDOMAIN.is_match(value) {
        errs.push(regex_error(SUBDOMAIN_ERR, SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs: Vec<String> = max_len(value, 63).into_iter().collect();
    if !DNS1035.is_match(value) {
        errs.push(regex_error(
            DNS1035_ERR,
            DNS1035_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `maskTrailingDash`: a generated-name prefix may end in `-`.
fn masked(value: &str) -> String {
    match value.strip_suffix('-') {
        Some(_) if value.len() > 1 => format!("{}a", &value[..value.len() - 2]),
        _ => value.to_owned(),
    }
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| {
        s.get(r)
            .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
    };
    let (Some(year), Some(month), Some(day)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`.
fn is_date_time(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if s.len() < 4 || parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    TIME.captures(parts[1]).is_some_and(|c| {
        let field = |i| c.get(i).map_or("", |m| m.as_str());
        field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
    })
}

fn validate(format: &str, value: &str) -> Vec<String> {
    let one = |ok: bool, why: &str| if ok { Vec::new() } else { vec![why.to_owned()] };
    match format {
        "dns1123Label" => dns1123_label(value),
        "dns1123LabelPrefix" => dns1123_label(&masked(value)),
        "dns1123Subdomain" => dns1123_subdomain(value),
        "dns1123SubdomainPrefix" => dns1123_subdomain(&masked(value)),
        "dns1035Label" => dns1035_label(value),
        "dns1035LabelPrefix" => dns1035_label(&masked(value)),
        "qualifiedName" => label_key_errors(value),
        "labelValue" => label_value_errors(value),
        "uri" => Url::parse(value).err().into_iter().collect(),
        "uuid" => one(UUID.is_match(value), "does not match the UUID format"),
        "byte" => one(BASE64.is_match(value), "invalid base64"),
        "date" => one(is_date(value), "invalid date"),
        "datetime" => one(is_date_time(value), "invalid datetime"),
        _ => vec![format!("unknown format {format}")],
    }
}

fn format_by_name(name: &str) -> Option<Format> {
    NAMES.iter().find(|n| **n == name).map(|n| Format(n))
}

/// Registers the format library.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    register_each(env)?;
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], |a| {
        let name = arg::<CelString>(&a, 0, "format.named")?.inner();
        owned(match format_by_name(name) {
            Some(f) => CelOptional::of(Box::new(f)),
            None => CelOptional::none(),
        })
    })?;
    env.add_member_overload(
        "validate",
        "format-validate",
        FORMAT_TYPE.to_owned(),
        vec![STRING_TYPE],
        |a| {
            let format = arg::<Format>(&a, 0, "validate")?.0;
            let value = arg::<CelString>(&a, 1, "validate")?.inner();
            let errors = validate(format, value);
            if errors.is_empty() {
                return owned(CelOptional::none());
            }
            let list: Vec<Box<dyn Val>> = errors
                .into_iter()
                .map(|e| Box::new(CelString::from(e)) as Box<dyn Val>)
                .collect();
            owned(CelOptional::of(Box::new(CelList::from(list))))
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn messages_follow_apimachinery() {
        assert!(validate("dns1123Label", "my-name").is_empty());
        assert_eq!(
            validate("dns1123Label", "a.b"),
            vec!["must not contain dots".to_owned()]
        );
        assert!(validate("dns1123LabelPrefix", "my-name-").is_empty());
        assert!(!validate("dns1035Label", "1abc").is_empty());
        assert!(validate("date", "2024-02-29").is_empty());
        assert!(!validate("date", "2023-02-29").is_empty());
        assert!(validate("datetime", "2024-01-01T10:00:00Z").is_empty());
        assert!(validate("uuid", "123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert_eq!(
            validate("byte", "ZWxpemFiZXRocG9zZXk"),
            vec!["invalid base64".to_owned()]
        );
        assert!(validate("uri", "https://example.com/x").is_empty());
    }
}
