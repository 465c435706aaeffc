//! `kubernetes.Semver` in CEL and the Kubernetes semver library at version
//! 1: `semver(s)`, `semver(s, normalize)`, `isSemver(s)`,
//! `isSemver(s, normalize)`, `major()`, `minor()`, `patch()`, `compareTo`,
//! `isGreaterThan` and `isLessThan`. Parsing is strict semver 2.0 (as
//! blang/semver's `Parse`); `normalize` first drops a `v` prefix, leading
//! zeros and fills in a missing minor or patch number.

use std::cmp::Ordering;

use cel::common::types::{BOOL_TYPE, CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::{Env, ExecutionError};

use super::{arg, function_error, owned, static_val};

/// `kubernetes.Semver`'s CEL type.
pub(super) static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// A semantic version (`semver("1.2.3")`, version attributes). Ordered and
/// compared by semver precedence, which ignores build metadata, as the
/// Kubernetes `Semver` type (blang/semver's `Compare`) does.
#[derive(Debug, Clone)]
pub(crate) struct Semver(pub semver::Version);

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_precedence(&other.0)
    }
}

static_val!(Semver, SEMVER_TYPE);

impl Semver {
    /// Parses `s`, normalized first when `normalize` is set.
    pub fn parse(s: &str, normalize: bool) -> Result<Semver, String> {
        let text = if normalize {
            normalized(s)?
        } else {
            s.to_owned()
        };
        semver::Version::parse(&text)
            .map(Semver)
            .map_err(|e| e.to_string())
    }
}

/// Kubernetes' `normalizeAndParse` before the parse: no `v` prefix, no
/// leading zeros in the first three dot-separated parts, `.0` added up to
/// three parts (a short version may not carry a pre-release or build).
fn normalized(s: &str) -> Result<String, String> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s
        .splitn(3, '.')
        .map(|p| {
            if p.len() <= 1 {
                return p.to_owned();
            }
            let trimmed = p.trim_start_matches('0');
            if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                trimmed.to_owned()
            } else {
                format!("0{trimmed}")
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".to_owned());
        }
        parts.resize(3, "0".to_owned());
    }
    Ok(parts.join("."))
}

fn semver_arg<'a>(
    args: &'a [cel::common::value::CowVal<'_, '_>],
    i: usize,
    f: &str,
) -> Result<&'a Semver, ExecutionError> {
    arg::<Semver>(args, i, f)
}

fn parse_args(
    args: &[cel::common::value::CowVal<'_, '_>],
    f: &str,
) -> Result<Result<Semver, String>, ExecutionError> {
    let text = arg::<CelString>(args, 0, f)?.inner();
    let normalize = match args.get(1) {
        Some(_) => *arg::<CelBool>(args, 1, f)?.inner(),
        None => false,
    };
    Ok(Semver::parse(text, normalize))
}

fn component(v: u64) -> CelInt {
    CelInt::from(i64::try_from(v).unwrap_or(i64::MAX))
}

/// Registers the Kubernetes semver library (version 1).
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let s = || SEMVER_TYPE.to_owned();
    let semver_fn: cel::common::functions::Function = |a| {
        let v = parse_args(&a, "semver")?.map_err(|e| function_error("semver", e))?;
        owned(v)
    };
    let is_semver: cel::common::functions::Function =
        |a| owned(CelBool::from(parse_args(&a, "isSemver")?.is_ok()));
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], semver_fn)?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        semver_fn,
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        is_semver,
    )?;
    env.add_member_overload("compareTo", "semver_compare_to", s(), vec![s()], |a| {
        let ord = semver_arg(&a, 0, "compareTo")?.cmp(semver_arg(&a, 1, "compareTo")?);
        owned(CelInt::from(ord as i64))
    })?;
    env.add_member_overload(
        "isGreaterThan",
        "semver_is_greater_than",
        s(),
        vec![s()],
        |a| {
            owned(CelBool::from(
                semver_arg(&a, 0, "isGreaterThan")? > semver_arg(&a, 1, "isGreaterThan")?,
            ))
        },
    )?;
    env.add_member_overload("isLessThan", "semver_is_less_than", s(), vec![s()], |a| {
        owned(CelBool::from(
            semver_arg(&a, 0, "isLessThan")? < semver_arg(&a, 1, "isLessThan")?,
        ))
    })?;
    env.add_member_overload("major", "semver_major", s(), vec![], |a| {
        owned(component(semver_arg(&a, 0, "major")?.0.major))
    })?;
    env.add_member_overload("minor", "semver_minor", s(), vec![], |a| {
        owned(component(semver_arg(&a, 0, "minor")?.0.minor))
    })?;
    env.add_member_overload("patch", "semver_patch", s(), vec![], |a| {
        owned(component(semver_arg(&a, 0, "patch")?.0.patch))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Semver;

    #[test]
    fn normalize_fills_in_and_trims() {
        let v = |s| Semver::parse(s, true).map(|v| v.0.to_string());
        assert_eq!(v("v1"), Ok("1.0.0".to_owned()));
        assert_eq!(v("v01.02"), Ok("1.2.0".to_owned()));
        assert_eq!(v("1.2.03-rc.1"), Ok("1.2.3-rc.1".to_owned()));
        assert!(v("1.2-rc").is_err());
        assert!(Semver::parse("v1.0.0", false).is_err());
        assert!(Semver::parse("1.0", false).is_err());
    }
}
