//! DeviceTaintRules (`resource.k8s.io/v1`, GA and on by default in v1.37):
//! each adds its one `spec.taint` to every device its `spec.deviceSelector`
//! names, as if the driver had published the taint in the ResourceSlice.
//! The selector's `driver`, `pool` and `device` must all match (an unset
//! field matches any); an empty selector matches every device, a rule
//! without one matches none (`resourceslice/tracker` in
//! `k8s.io/dynamic-resource-allocation`).
//!
//! kube-scheduler's tracker keeps a copy of every slice a rule matches with
//! the taint appended. placer keeps the rules apart instead, each reduced to
//! its selector and taint (metadata and status, the eviction controller's
//! progress report, play no part in allocation), indexed by driver, pool and
//! device so that the allocator finds a device's extra taints with a few
//! hash lookups per pool and device, and slices are never copied. Without
//! rules the allocator pays one emptiness check per pool.

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceTaintRule};

/// What a rule keeps: whom it selects and the taint it adds.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTaint {
    /// `spec.deviceSelector`; `None` selects no device.
    selector: Option<Selector>,
    taint: DeviceTaint,
}

/// `spec.deviceSelector`: each set field must match.
#[derive(Debug, Clone, PartialEq)]
struct Selector {
    driver: Option<String>,
    pool: Option<String>,
    device: Option<String>,
}

impl RuleTaint {
    /// The compact form of `rule`.
    pub fn of(rule: &DeviceTaintRule) -> Self {
        RuleTaint {
            selector: rule.spec.device_selector.as_ref().map(|s| Selector {
                driver: s.driver.clone(),
                pool: s.pool.clone(),
                device: s.device.clone(),
            }),
            taint: rule.spec.taint.clone(),
        }
    }

    /// The taint this rule adds to device `device` of `pool` of `driver`,
    /// if it selects that device.
    pub fn taint_for(&self, driver: &str, pool: &str, device: &str) -> Option<&DeviceTaint> {
        let s = self.selector.as_ref()?;
        let fits = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        (fits(&s.driver, driver) && fits(&s.pool, pool) && fits(&s.device, device))
            .then_some(&self.taint)
    }
}

/// One level of the index: entries for a named driver (pool, device), and
/// the entry of rules that leave that field unset.
#[derive(Debug, Clone)]
struct Level<T> {
    any: Option<T>,
    named: HashMap<String, T>,
}

impl<T> Default for Level<T> {
    fn default() -> Self {
        Level {
            any: None,
            named: HashMap::new(),
        }
    }
}

impl<T: Default> Level<T> {
    fn entry(&mut self, key: Option<&str>) -> &mut T {
        match key {
            None => self.any.get_or_insert_with(T::default),
            Some(k) => self.named.entry(k.to_owned()).or_default(),
        }
    }
}

impl<T> Level<T> {
    /// The entries that apply to `key`: its own and the unset field's.
    fn matching(&self, key: &str) -> impl Iterator<Item = &T> {
        self.named.get(key).into_iter().chain(self.any.as_ref())
    }
}

/// Taints by device name (or for every device of a pool).
type DeviceLevel = Level<Vec<DeviceTaint>>;

/// Every DeviceTaintRule, by name, and their taints indexed by driver, pool
/// and device.
#[derive(Debug, Default, Clone)]
pub struct TaintRules {
    by_name: HashMap<String, RuleTaint>,
    index: Level<Level<DeviceLevel>>,
}

impl TaintRules {
    /// Whether the rule `name` is known.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The rule `name`.
    pub fn get(&self, name: &str) -> Option<&RuleTaint> {
        self.by_name.get(name)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True without rules.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds or replaces the rule `name`; returns what it was before.
    pub fn apply(&mut self, name: String, rule: RuleTaint) -> Option<RuleTaint> {
        let old = self.by_name.insert(name, rule);
        self.reindex();
        old
    }

    /// Forgets the rule `name`; returns what it was.
    pub fn delete(&mut self, name: &str) -> Option<RuleTaint> {
        let old = self.by_name.remove(name);
        if old.is_some() {
            self.reindex();
        }
        old
    }

    /// Replaces every rule (a relist).
    pub fn replace(&mut self, rules: impl IntoIterator<Item = (String, RuleTaint)>) {
        self.by_name = rules.into_iter().collect();
        self.reindex();
    }

    /// Rebuilds the index: rules change seldom (an admin's or a health
    /// controller's action), and a rebuild costs one pass over them.
    fn reindex(&mut self) {
        let mut index: Level<Level<DeviceLevel>> = Level::default();
        // By name, so that a device's taints come in one order every time.
        let mut names: Vec<&String> = self.by_name.keys().collect();
        names.sort();
        for name in names {
            let rule = &self.by_name[name];
            let Some(s) = &rule.selector else {
                continue;
            };
            index
                .entry(s.driver.as_deref())
                .entry(s.pool.as_deref())
                .entry(s.device.as_deref())
                .push(rule.taint.clone());
        }
        self.index = index;
    }

    /// The rules' taints for the devices of `pool` of `driver`, resolved
    /// once per pool.
    pub fn for_pool(&self, driver: &str, pool: &str) -> PoolTaints<'_> {
        PoolTaints {
            devices: self
                .index
                .matching(driver)
                .flat_map(|pools| pools.matching(pool))
                .collect(),
        }
    }
}

/// The rules' taints that may apply to one pool's devices.
#[derive(Debug, Default, Clone)]
pub struct PoolTaints<'a> {
    /// At most four: the driver named or any, times the pool named or any.
    devices: Vec<&'a DeviceLevel>,
}

impl<'a> PoolTaints<'a> {
    /// The taints rules add to the pool's device `device`.
    pub fn of<'b>(&'b self, device: &'b str) -> impl Iterator<Item = &'a DeviceTaint> + 'b {
        self.devices
            .iter()
            .flat_map(move |level| level.matching(device))
            .flatten()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{DeviceTaintRuleSpec, DeviceTaintSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A rule with taint key `key` for `(driver, pool, device)`; `None` as
    /// the selector leaves it out.
    pub(crate) fn rule(
        key: &str,
        selector: Option<(Option<&str>, Option<&str>, Option<&str>)>,
    ) -> DeviceTaintRule {
        DeviceTaintRule {
            metadata: ObjectMeta {
                name: Some(key.to_owned()),
                ..ObjectMeta::default()
            },
            spec: DeviceTaintRuleSpec {
                device_selector: selector.map(|(driver, pool, device)| DeviceTaintSelector {
                    driver: driver.map(Into::into),
                    pool: pool.map(Into::into),
                    device: device.map(Into::into),
                }),
                taint: DeviceTaint {
                    key: key.to_owned(),
                    effect: "NoSchedule".to_owned(),
                    ..DeviceTaint::default()
                },
            },
            status: None,
        }
    }

    fn rules(all: &[DeviceTaintRule]) -> TaintRules {
        let mut r = TaintRules::default();
        r.replace(all.iter().map(|x| {
            (
                x.metadata.name.clone().unwrap_or_default(),
                RuleTaint::of(x),
            )
        }));
        r
    }

    fn keys(rules: &TaintRules, driver: &str, pool: &str, device: &str) -> Vec<String> {
        let mut k: Vec<String> = rules
            .for_pool(driver, pool)
            .of(device)
            .map(|t| t.key.clone())
            .collect();
        k.sort();
        k
    }

    // TestListPatchedResourceSlices: "add-taint-for-driver",
    // "add-taint-for-pool", "add-taint-for-device", "filter-all-criteria",
    // "patch-all-slices" (the empty selector), "nil-selector-matches-none".
    #[test]
    fn selectors_match_by_driver_pool_and_device() {
        let r = rules(&[
            rule("driver", Some((Some("d1"), None, None))),
            rule("pool", Some((None, Some("p1"), None))),
            rule("device", Some((None, None, Some("dev1")))),
            rule("all-three", Some((Some("d1"), Some("p1"), Some("dev1")))),
            rule("everything", Some((None, None, None))),
            rule("nothing", None),
        ]);
        assert_eq!(
            keys(&r, "d1", "p1", "dev1"),
            ["all-three", "device", "driver", "everything", "pool"]
        );
        assert_eq!(
            keys(&r, "d1", "p2", "dev1"),
            ["device", "driver", "everything"]
        );
        assert_eq!(keys(&r, "d2", "p1", "dev2"), ["everything", "pool"]);
        assert_eq!(keys(&r, "d2", "p2", "dev2"), ["everything"]);
        assert_eq!(r.len(), 6, "a rule without a selector is still known");
    }

    // TestListPatchedResourceSlices: "update-patch",
    // "remove-patch-known-deleted-rule".
    #[test]
    fn updates_and_deletes_move_the_taints() {
        let mut r = rules(&[rule("t", Some((None, Some("p1"), None)))]);
        assert_eq!(keys(&r, "d", "p1", "x"), ["t"]);
        let old = r.apply(
            "t".into(),
            RuleTaint::of(&rule("t", Some((None, Some("p2"), None)))),
        );
        assert!(old.is_some_and(|o| o.taint_for("d", "p1", "x").is_some()));
        assert!(keys(&r, "d", "p1", "x").is_empty());
        assert_eq!(keys(&r, "d", "p2", "x"), ["t"]);
        assert!(r.delete("t").is_some());
        assert!(keys(&r, "d", "p2", "x").is_empty());
        assert!(r.is_empty() && r.delete("t").is_none());
    }

    #[test]
    fn a_rule_taints_only_what_it_selects() {
        let t = RuleTaint::of(&rule("t", Some((Some("d1"), None, Some("dev1")))));
        assert!(t.taint_for("d1", "any", "dev1").is_some());
        assert!(t.taint_for("d2", "any", "dev1").is_none());
        assert!(t.taint_for("d1", "any", "dev2").is_none());
        assert!(
            RuleTaint::of(&rule("n", None))
                .taint_for("d1", "p", "dev1")
                .is_none()
        );
    }
}
