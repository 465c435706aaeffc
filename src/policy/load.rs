//! Reading and validating a policy file.
//!
//! Decoding is strict, like `KubeSchedulerConfiguration`: unknown keys,
//! unknown plugins and bad values fail with `file:line:column: field: message`.
//! Plugin arguments are decoded by the plugin's own type straight from the
//! YAML stream, so their errors keep their positions too. The text is first
//! checked against the nesting and alias limits of [`crate::yaml`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{API_VERSION, ExtenderSettings, KIND, PluginConfig, Policy, ProfileConfig};
use crate::k8s::fields::{NonEmpty, Weight};
use crate::plugins::{PLUGIN_NAMES, PluginArgs};

/// A policy that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    ///
    /// The OS error is part of the message and deliberately not the
    /// `source()`: printers of error chains would show its text twice.
    #[error("{file}: {error}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        error: std::io::Error,
    },
    /// The content is invalid.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// What is wrong, naming the field.
        message: String,
    },
}

/// Reads and validates the policy at `path`.
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| PolicyError::Read {
        file: file.clone(),
        error,
    })?;
    parse(&text, &file)
}

/// Validates policy `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Policy, PolicyError> {
    crate::yaml::check_limits(text).map_err(|e| PolicyError::Invalid {
        file: file.to_string(),
        line: e.mark.line,
        column: e.mark.column,
        message: e.message,
    })?;
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let raw: RawPolicy = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let (mark, mut message) = crate::yaml::split_error(e.inner());
        let (line, column) = mark.map_or((0, 0), |m| (m.line, m.column));
        // serde_yaml_ng prefixes the path of the enclosing mapping; the
        // tracked path is at least as deep, so keep only that one.
        if let Some((prefix, rest)) = message.split_once(": ")
            && !prefix.contains(' ')
            && path.starts_with(prefix)
        {
            message = rest.to_string();
        }
        if path != "." && !path.is_empty() {
            message = format!("{path}: {message}");
        }
        PolicyError::Invalid {
            file: file.to_string(),
            line,
            column,
            message,
        }
    })?;
    raw.validate(text)
        .map_err(|(message, (line, column))| PolicyError::Invalid {
            file: file.to_string(),
            line,
            column,
            message,
        })
}

/// 1-based line and column of the `nth` (1-based) occurrence of `needle`,
/// for checks that span fields and so have no decoder position; (0, 0) if absent.
fn locate(text: &str, needle: &str, nth: usize) -> (usize, usize) {
    text.match_indices(needle)
        .nth(nth.saturating_sub(1))
        .map_or((0, 0), |(offset, _)| {
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let column = offset - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            (line, column)
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPolicy {
    api_version: String,
    kind: String,
    #[serde(default)]
    extender: RawExtender,
    percentage_of_nodes_to_score: Option<i64>,
    profiles: Vec<RawProfile>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawExtender {
    default_profile: Option<NonEmpty>,
    scheduler_names: Option<Vec<NonEmpty>>,
    #[serde(default)]
    bind_any_scheduler: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawProfile {
    scheduler_name: NonEmpty,
    percentage_of_nodes_to_score: Option<i64>,
    #[serde(default)]
    plugins: Vec<PluginConfig>,
}

/// kube-scheduler's range check for `percentageOfNodesToScore` (0 = adaptive).
fn percentage(
    value: Option<i64>,
    field: &str,
    text: &str,
    nth: usize,
) -> Result<Option<u8>, (String, (usize, usize))> {
    match value {
        None => Ok(None),
        Some(v) => u8::try_from(v)
            .ok()
            .filter(|v| *v <= 100)
            .map(Some)
            .ok_or_else(|| {
                (
                    format!("{field}: {v} is not in the range [0, 100]"),
                    locate(text, "percentageOfNodesToScore:", nth),
                )
            }),
    }
}

impl RawPolicy {
    /// Checks that span fields (the decoder already checked each value).
    fn validate(self, text: &str) -> Result<Policy, (String, (usize, usize))> {
        if self.api_version != API_VERSION {
            return Err((
                format!(
                    "apiVersion: unsupported {:?}, expected {API_VERSION:?}",
                    self.api_version
                ),
                locate(text, "apiVersion:", 1),
            ));
        }
        if self.kind != KIND {
            return Err((
                format!("kind: unsupported {:?}, expected {KIND:?}", self.kind),
                locate(text, "kind:", 1),
            ));
        }
        if self.profiles.is_empty() {
            return Err((
                "profiles: at least one profile is required".into(),
                locate(text, "profiles:", 1),
            ));
        }
        let global = percentage(
            self.percentage_of_nodes_to_score,
            "percentageOfNodesToScore",
            text,
            1,
        )?;
        // The global field, when present, is the first occurrence in the text.
        let mut percentages_seen = usize::from(self.percentage_of_nodes_to_score.is_some());
        let mut profile_percentages = Vec::with_capacity(self.profiles.len());
        for (i, p) in self.profiles.iter().enumerate() {
            percentages_seen += usize::from(p.percentage_of_nodes_to_score.is_some());
            profile_percentages.push(percentage(
                p.percentage_of_nodes_to_score,
                &format!("profiles[{i}].percentageOfNodesToScore"),
                text,
                percentages_seen,
            )?);
        }
        let mut names = HashSet::new();
        // Occurrences of each plugin name so far, to point at the duplicate.
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, p) in self.profiles.iter().enumerate() {
            if !names.insert(p.scheduler_name.as_str()) {
                let needle = format!("schedulerName: {}", p.scheduler_name.as_str());
                return Err((
                    format!(
                        "profiles[{i}].schedulerName: duplicate profile {:?}",
                        p.scheduler_name.as_str()
                    ),
                    locate(text, &needle, 2),
                ));
            }
            let mut plugins = HashSet::new();
            for (j, c) in p.plugins.iter().enumerate() {
                let nth = seen.entry(c.name.as_str()).or_default();
                *nth += 1;
                if !plugins.insert(c.name.as_str()) {
                    return Err((
                        format!(
                            "profiles[{i}].plugins[{j}].name: plugin {:?} is enabled twice",
                            c.name
                        ),
                        locate(text, &format!("name: {}", c.name), *nth),
                    ));
                }
            }
        }
        if let Some(d) = &self.extender.default_profile
            && !names.contains(d.as_str())
        {
            return Err((
                format!(
                    "extender.defaultProfile: no profile has schedulerName {:?}",
                    d.as_str()
                ),
                locate(text, "defaultProfile:", 1),
            ));
        }
        if let Some(names) = &self.extender.scheduler_names {
            if names.is_empty() {
                return Err((
                    "extender.schedulerNames: an empty list would refuse every /bind; list kube-scheduler's profiles, or leave it out and set extender.bindAnyScheduler: true to bind any scheduler's pods".into(),
                    locate(text, "schedulerNames:", 1),
                ));
            }
            let mut listed = HashSet::new();
            for (i, n) in names.iter().enumerate() {
                if !listed.insert(n.as_str()) {
                    return Err((
                        format!("extender.schedulerNames[{i}]: duplicate {:?}", n.as_str()),
                        locate(text, "schedulerNames:", 1),
                    ));
                }
            }
            if self.extender.bind_any_scheduler {
                return Err((
                    "extender.bindAnyScheduler: true contradicts extender.schedulerNames, which limits /bind to the schedulers it lists; keep one".into(),
                    locate(text, "bindAnyScheduler:", 1),
                ));
            }
        }
        Ok(Policy {
            api_version: self.api_version,
            kind: self.kind,
            extender: ExtenderSettings {
                default_profile: self.extender.default_profile.map(|d| d.to_string()),
                scheduler_names: self
                    .extender
                    .scheduler_names
                    .map(|names| names.iter().map(ToString::to_string).collect()),
                bind_any_scheduler: self.extender.bind_any_scheduler,
            },
            percentage_of_nodes_to_score: global,
            profiles: self
                .profiles
                .into_iter()
                .zip(profile_percentages)
                .map(|(p, percentage_of_nodes_to_score)| ProfileConfig {
                    scheduler_name: p.scheduler_name,
                    percentage_of_nodes_to_score,
                    plugins: p.plugins,
                })
                .collect(),
        })
    }
}

/// `{name, weight, args}`: `args` is decoded by the named plugin's own type.
impl<'de> Deserialize<'de> for PluginConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PluginConfigVisitor)
    }
}

struct PluginConfigVisitor;

fn unknown_plugin<E: de::Error>(name: &str) -> E {
    E::custom(format!(
        "unknown plugin {name:?}, expected one of {}",
        PLUGIN_NAMES.join(", ")
    ))
}

impl<'de> Visitor<'de> for PluginConfigVisitor {
    type Value = PluginConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a plugin entry {name, weight, args}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PluginConfig, A::Error> {
        let mut name: Option<String> = None;
        let mut weight: Option<Weight> = None;
        let mut args: Option<PluginArgs> = None;
        // `args` written before `name`: decoded once the name is known.
        let mut early_args: Option<serde_yaml_ng::Value> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "name" => {
                    let n: String = map.next_value()?;
                    if PluginArgs::default_for(&n).is_none() {
                        return Err(unknown_plugin(&n));
                    }
                    name = Some(n);
                }
                "weight" => weight = Some(map.next_value()?),
                "args" => match &name {
                    Some(n) => args = Some(map.next_value_seed(ArgsSeed(n))?),
                    None => early_args = Some(map.next_value()?),
                },
                other => {
                    let _: IgnoredAny = map.next_value()?;
                    return Err(de::Error::unknown_field(other, &["name", "weight", "args"]));
                }
            }
        }
        let name = name.ok_or_else(|| de::Error::missing_field("name"))?;
        if let Some(v) = early_args {
            let decoded = PluginArgs::deserialize_for(&name, v)
                .ok_or_else(|| unknown_plugin::<A::Error>(&name))?;
            args = Some(decoded.map_err(|e| de::Error::custom(format!("args: {e}")))?);
        }
        let args = match args {
            Some(a) => a,
            None => {
                PluginArgs::default_for(&name).ok_or_else(|| unknown_plugin::<A::Error>(&name))?
            }
        };
        Ok(PluginConfig {
            name,
            weight: weight.unwrap_or_default(),
            args,
        })
    }
}

struct ArgsSeed<'a>(&'a str);

impl<'de> de::DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = PluginArgs;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<PluginArgs, D::Error> {
        PluginArgs::deserialize_for(self.0, d).unwrap_or_else(|| Err(unknown_plugin(self.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"apiVersion: placer/v1alpha1
kind: Policy
extender:
  defaultProfile: extender
profiles:
  - schedulerName: extender
    plugins:
      - name: CapabilityFilter
        args:
          rules:
            - podAnnotation: myorg.io/require-hw-encrypt
              nodeLabel: node.kubernetes.io/hw-encrypt
      - name: ZoneSpread
        weight: 2
      - args: { unlabeledScore: 5 }
        name: NetQoS
"#;

    fn err(text: &str) -> String {
        parse(text, "p.yaml").unwrap_err().to_string()
    }

    #[test]
    fn good_policy_gets_defaults() {
        let p = parse(GOOD, "p.yaml").unwrap();
        let plugins = &p.profiles[0].plugins;
        assert_eq!(plugins[0].weight.get(), 1);
        assert_eq!(plugins[1].weight.get(), 2);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json["profiles"][0]["plugins"][1]["args"]["zoneLabel"],
            "topology.kubernetes.io/zone"
        );
        assert_eq!(
            json["profiles"][0]["plugins"][1]["args"]["countPods"],
            "SamePriority"
        );
        assert_eq!(
            json["profiles"][0]["plugins"][2]["args"]["unknownTierScore"], 5,
            "defaults to unlabeledScore"
        );
        assert_eq!(
            json["profiles"][0]["plugins"][0]["args"]["rules"][0]["nodeValue"],
            "true"
        );
    }

    #[test]
    fn percentage_of_nodes_to_score_per_profile_over_the_global_one() {
        let text = "apiVersion: placer/v1alpha1\nkind: Policy\npercentageOfNodesToScore: 0\nprofiles:\n- schedulerName: a\n- schedulerName: b\n  percentageOfNodesToScore: 30\n";
        let c = crate::policy::CompiledPolicy::new(parse(text, "p.yaml").unwrap());
        assert_eq!(c.percentage_of_nodes_to_score("a"), Some(0));
        assert_eq!(c.percentage_of_nodes_to_score("b"), Some(30));
        let unset = "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: a\n";
        let c = crate::policy::CompiledPolicy::new(parse(unset, "p.yaml").unwrap());
        assert_eq!(c.percentage_of_nodes_to_score("a"), None, "every node");
        let bad = "apiVersion: placer/v1alpha1\nkind: Policy\npercentageOfNodesToScore: 5\nprofiles:\n- schedulerName: a\n  percentageOfNodesToScore: 101\n";
        let e = err(bad);
        assert!(
            e.contains("profiles[0].percentageOfNodesToScore: 101 is not in the range [0, 100]")
                && e.contains(":6:"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_reports_position_and_field() {
        let text = GOOD.replace("        weight: 2", "        weight: 2\n        wieght: 3");
        let e = err(&text);
        assert!(
            e.starts_with("p.yaml:13:9: profiles[0].plugins[1]: unknown field"),
            "{e}"
        );
        assert!(e.contains("unknown field `wieght`"), "{e}");
    }

    #[test]
    fn bad_plugin_arg_reports_its_own_line() {
        let text = GOOD.replace("podAnnotation: myorg", "podAnnotaton: myorg");
        let e = err(&text);
        assert!(e.starts_with("p.yaml:11:"), "{e}");
        assert!(e.contains("profiles[0].plugins[0].args.rules[0]"), "{e}");
        assert!(e.contains("podAnnotaton"), "{e}");
    }

    #[test]
    fn unknown_plugin_and_bad_values() {
        let e = err(&GOOD.replace("name: ZoneSpread", "name: ZoneSpreed"));
        assert!(e.starts_with("p.yaml:13:"), "{e}");
        assert!(e.contains("unknown plugin \"ZoneSpreed\", expected one of CapabilityFilter, ZoneSpread, NetQoS"), "{e}");
        let e = err(&GOOD.replace("weight: 2", "weight: 0"));
        assert!(e.starts_with("p.yaml:13:9: profiles[0].plugins[1].weight: invalid value: integer `0`, expected a weight"), "{e}");
        let e = err(&GOOD.replace("unlabeledScore: 5", "unlabeledScore: 500"));
        assert!(e.contains("args: invalid value: integer `500`"), "{e}");
        let e = err(&GOOD.replace("weight: 2", "weight: two"));
        assert!(
            e.contains("profiles[0].plugins[1].weight: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn extender_scheduler_names_are_optional_non_empty_and_unique() {
        assert_eq!(
            parse(GOOD, "p.yaml").unwrap().extender.scheduler_names,
            None
        );
        let listed = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  schedulerNames: [default-scheduler, placer-extender]\n",
        );
        assert_eq!(
            parse(&listed, "p.yaml").unwrap().extender.scheduler_names,
            Some(vec!["default-scheduler".into(), "placer-extender".into()])
        );
        let empty = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  schedulerNames: []\n",
        );
        assert!(
            err(&empty).starts_with("p.yaml:5:3: extender.schedulerNames: an empty list"),
            "{}",
            err(&empty)
        );
        let twice = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  schedulerNames: [a, b, a]\n",
        );
        assert!(
            err(&twice).contains("extender.schedulerNames[2]: duplicate \"a\""),
            "{}",
            err(&twice)
        );
        let blank = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  schedulerNames: [\"\"]\n",
        );
        assert!(err(&blank).contains("non-empty"), "{}", err(&blank));
    }

    #[test]
    fn bind_any_scheduler_is_off_by_default_and_excludes_scheduler_names() {
        assert!(!parse(GOOD, "p.yaml").unwrap().extender.bind_any_scheduler);
        let any = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  bindAnyScheduler: true\n",
        );
        assert!(parse(&any, "p.yaml").unwrap().extender.bind_any_scheduler);
        let both = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  schedulerNames: [a]\n  bindAnyScheduler: true\n",
        );
        assert_eq!(
            err(&both),
            "p.yaml:6:3: extender.bindAnyScheduler: true contradicts extender.schedulerNames, which limits /bind to the schedulers it lists; keep one"
        );
        let typo = GOOD.replace(
            "  defaultProfile: extender\n",
            "  defaultProfile: extender\n  bindAnyScheduler: yes please\n",
        );
        assert!(err(&typo).contains("bindAnyScheduler"), "{}", err(&typo));
    }

    #[test]
    fn cross_field_rules() {
        assert!(
            err(&GOOD.replace("defaultProfile: extender", "defaultProfile: nope"))
                .contains("extender.defaultProfile")
        );
        assert!(
            err(&GOOD.replace("placer/v1alpha1", "placer/v2")).contains("apiVersion: unsupported")
        );
        let dup = format!("{GOOD}      - name: ZoneSpread\n");
        assert_eq!(
            err(&dup),
            "p.yaml:17:9: profiles[0].plugins[3].name: plugin \"ZoneSpread\" is enabled twice"
        );
        assert!(
            err("apiVersion: placer/v1alpha1\nkind: Policy\nprofiles: []\n")
                .contains("at least one profile")
        );
        assert!(
            err("apiVersion: placer/v1alpha1\nkind: Policy\n").contains("missing field `profiles`")
        );
        assert!(err(": :\n  - [").starts_with("p.yaml:"));
    }

    #[test]
    fn deep_nesting_is_refused_at_the_first_level_too_many() {
        let depth = 100_000;
        let text = format!(
            "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n  - schedulerName: x\n    plugins: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        // Levels: the document 1, profiles 2, the profile 3, so the 62nd `[`
        // (column 13 + 62) is level 65.
        assert_eq!(
            err(&text),
            "p.yaml:5:75: mappings and sequences nest deeper than 64 levels"
        );
    }

    #[test]
    fn aliases_may_not_expand_the_policy_past_its_own_size() {
        let big = "x".repeat(1 << 20);
        let mut text = format!(
            "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n  - schedulerName: x\n    plugins:\n      - name: CapabilityFilter\n        args:\n          rules:\n            - {{podAnnotation: &big {big}, nodeLabel: a}}\n"
        );
        for i in 0..2000 {
            text.push_str(&format!(
                "            - {{podAnnotation: *big, nodeLabel: l{i}}}\n"
            ));
        }
        // The first alias doubles the file; the second would go past it.
        let e = err(&text);
        assert!(
            e.starts_with(&format!(
                "p.yaml:11:31: aliases expand to more than {} bytes",
                text.len()
            )),
            "{e}"
        );
    }
}
