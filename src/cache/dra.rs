//! What Dynamic Resource Allocation reads (kube-scheduler's `DRAManager`):
//! ResourceClaims by `namespace/name`, DeviceClasses by name, ResourceSlices
//! indexed by the node they publish for, the devices claims'
//! `status.allocation` hold, and the taints DeviceTaintRules add to devices
//! ([`TaintRules`]).
//!
//! Kept only when a profile runs DynamicResources (its watches feed it).
//! The API objects are kept whole (the allocator reads them as they are),
//! shared by `Arc`; each part sits behind its own `Arc` so that a replica's
//! copy after a change costs pointers, and a claim update re-copies the
//! claims, not the slices.
//!
//! The scheduler's own allocations that are not in the cache yet (after
//! Reserve, until the watch shows PreBind's write) are the plugin's: it
//! adds them to [`DraState::allocated`] per attempt.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequestAllocationResult, DeviceTaint, ResourceClaim, ResourceSlice,
    ResourceSliceSpec,
};

use crate::cache::dra_taints::{RuleTaint, TaintRules};
use crate::objects::object_key;
use crate::objects::pod::DEVICE_CLASS_PREFIX;

/// A device's identity: `(driver, pool, device)`.
pub type DeviceKey = (String, String, String);

/// The DRA objects placer keeps.
#[derive(Debug, Default, Clone)]
pub struct DraState {
    claims: Arc<HashMap<String, Arc<ResourceClaim>>>,
    classes: Arc<HashMap<String, Arc<DeviceClass>>>,
    /// The DeviceClass behind each extended resource name a class serves
    /// (kube-scheduler's `ExtendedResourceCache`), rebuilt when classes change.
    extended_resources: Arc<HashMap<String, Arc<DeviceClass>>>,
    slices: Arc<SliceIndex>,
    /// DeviceTaintRules, compact and indexed for the allocator.
    taint_rules: Arc<TaintRules>,
    /// Devices allocated whole by claims' `status.allocation` (admin access
    /// excluded: it does not take the device), with how many claims hold each.
    allocated: Arc<HashMap<DeviceKey, u32>>,
    /// The claims whose allocation holds shares of devices (consumable
    /// capacity), so that their shares are found without a scan.
    sharing_claims: Arc<BTreeSet<String>>,
    /// Bumped whenever `allocated` changes, so a plugin may keep what it
    /// derives from it until then.
    allocated_generation: u64,
    /// Set when the watches start: without them (extender mode, a
    /// snapshot) DynamicResources leaves claims to kube-scheduler.
    watched: bool,
}

/// ResourceSlices by name and by the nodes they apply to.
#[derive(Debug, Default, Clone)]
struct SliceIndex {
    by_name: HashMap<String, Arc<ResourceSlice>>,
    /// Slices with `spec.nodeName`, per node.
    by_node: HashMap<String, Vec<Arc<ResourceSlice>>>,
    /// Slices for `allNodes`, a `nodeSelector` or per-device node selection:
    /// every node must look at them.
    shared: Vec<Arc<ResourceSlice>>,
    /// Every slice (the allocator reads it for pools split across nodes).
    all: Vec<Arc<ResourceSlice>>,
}

impl SliceIndex {
    fn from_names(by_name: HashMap<String, Arc<ResourceSlice>>) -> Self {
        let mut index = SliceIndex {
            by_name,
            ..SliceIndex::default()
        };
        // Sorted by name, so every node sees its slices in one order.
        let mut names: Vec<&String> = index.by_name.keys().collect();
        names.sort();
        for name in names {
            let slice = index.by_name[name].clone();
            match slice.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                Some(node) => index
                    .by_node
                    .entry(node.to_owned())
                    .or_default()
                    .push(slice.clone()),
                None => index.shared.push(slice.clone()),
            }
            index.all.push(slice);
        }
        index
    }
}

/// The results of `claim`'s allocation that hold a device: admin access
/// holds none.
fn holding_results(claim: &ResourceClaim) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .into_iter()
        .flat_map(|d| d.results.iter().flatten())
        .filter(|r| r.admin_access != Some(true))
}

/// The devices `claim`'s allocation takes whole.
fn devices_of(claim: &ResourceClaim) -> impl Iterator<Item = DeviceKey> + '_ {
    holding_results(claim)
        .filter(|r| r.share_id.is_none())
        .map(|r| (r.driver.clone(), r.pool.clone(), r.device.clone()))
}

/// Whether `claim`'s allocation holds a share of some device.
fn shares_devices(claim: &ResourceClaim) -> bool {
    holding_results(claim).any(|r| r.share_id.is_some())
}

impl DraState {
    /// Marks the DRA kinds as watched.
    pub fn set_watched(&mut self) {
        self.watched = true;
    }

    /// Whether the DRA kinds are watched.
    pub fn is_watched(&self) -> bool {
        self.watched
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    /// The claims of `namespace` (a scan: for the rare pod that needs it).
    pub fn claims_in<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a Arc<ResourceClaim>> + 'a {
        self.claims
            .values()
            .filter(move |c| c.metadata.namespace.as_deref() == Some(namespace))
    }

    /// Number of claims.
    pub fn claim_count(&self) -> usize {
        self.claims.len()
    }

    /// The DeviceClass `name`.
    pub fn class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.classes.get(name).cloned()
    }

    /// The DeviceClass that serves the extended resource `name`
    /// (DRAExtendedResource): its `spec.extendedResourceName`, or the
    /// implicit `deviceclass.resource.kubernetes.io/<class>`.
    pub fn class_for_extended_resource(&self, name: &str) -> Option<&Arc<DeviceClass>> {
        self.extended_resources.get(name)
    }

    /// The slices published for `node` by name, and the ones every node
    /// must consider (node selectors, `allNodes`): an index lookup, not a
    /// scan.
    pub fn slices_for(&self, node: &str) -> (&[Arc<ResourceSlice>], &[Arc<ResourceSlice>]) {
        (
            self.slices.by_node.get(node).map_or(&[][..], Vec::as_slice),
            &self.slices.shared,
        )
    }

    /// Whether the slice `name` is known.
    pub fn has_slice(&self, name: &str) -> bool {
        self.slices.by_name.contains_key(name)
    }

    /// Every slice, by name.
    pub fn all_slices(&self) -> &[Arc<ResourceSlice>] {
        &self.slices.all
    }

    /// The taints DeviceTaintRules add to devices.
    pub fn taint_rules(&self) -> &TaintRules {
        &self.taint_rules
    }

    /// Devices claims' allocations hold whole.
    pub fn allocated(&self) -> impl Iterator<Item = &DeviceKey> {
        self.allocated.keys()
    }

    /// The results of claims' allocations that hold a share of a device
    /// (they carry a `shareID` and what they consume).
    pub fn shares(&self) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
        self.sharing_claims
            .iter()
            .filter_map(|key| self.claims.get(key))
            .flat_map(|c| holding_results(c))
            .filter(|r| r.share_id.is_some())
    }

    /// Changes whenever [`DraState::allocated`] does.
    pub fn allocated_generation(&self) -> u64 {
        self.allocated_generation
    }

    /// Adds or replaces a claim.
    pub fn apply_claim(&mut self, claim: Arc<ResourceClaim>) {
        let key = object_key(&claim.metadata);
        let old = Arc::make_mut(&mut self.claims).insert(key.clone(), claim.clone());
        self.reallocate(old.as_deref(), Some(&claim));
        self.reshare(&key, old.as_deref(), Some(&claim));
    }

    /// Forgets the claim `key`.
    pub fn delete_claim(&mut self, key: &str) {
        let old = Arc::make_mut(&mut self.claims).remove(key);
        self.reallocate(old.as_deref(), None);
        self.reshare(key, old.as_deref(), None);
    }

    /// Keeps [`DraState::shares`] up to date with claim `key` going from
    /// `old` to `new`.
    fn reshare(&mut self, key: &str, old: Option<&ResourceClaim>, new: Option<&ResourceClaim>) {
        let before = old.is_some_and(shares_devices);
        let after = new.is_some_and(shares_devices);
        if after {
            Arc::make_mut(&mut self.sharing_claims).insert(key.to_owned());
        } else if before {
            Arc::make_mut(&mut self.sharing_claims).remove(key);
        }
        if before || after {
            self.allocated_generation += 1;
        }
    }

    /// Replaces every claim (a relist).
    pub fn replace_claims(&mut self, claims: Vec<Arc<ResourceClaim>>) {
        let mut allocated: HashMap<DeviceKey, u32> = HashMap::new();
        for device in claims.iter().flat_map(|c| devices_of(c)) {
            *allocated.entry(device).or_default() += 1;
        }
        self.sharing_claims = Arc::new(
            claims
                .iter()
                .filter(|c| shares_devices(c))
                .map(|c| object_key(&c.metadata))
                .collect(),
        );
        self.claims = Arc::new(
            claims
                .into_iter()
                .map(|c| (object_key(&c.metadata), c))
                .collect(),
        );
        self.allocated = Arc::new(allocated);
        self.allocated_generation += 1;
    }

    /// Moves the counts of allocated devices from `old`'s allocation to `new`'s.
    fn reallocate(&mut self, old: Option<&ResourceClaim>, new: Option<&ResourceClaim>) {
        let before: Vec<DeviceKey> = old.into_iter().flat_map(devices_of).collect();
        let after: Vec<DeviceKey> = new.into_iter().flat_map(devices_of).collect();
        if before == after {
            return;
        }
        let allocated = Arc::make_mut(&mut self.allocated);
        for device in before {
            if let Some(n) = allocated.get_mut(&device) {
                *n -= 1;
                if *n == 0 {
                    allocated.remove(&device);
                }
            }
        }
        for device in after {
            *allocated.entry(device).or_default() += 1;
        }
        self.allocated_generation += 1;
    }

    /// Adds or replaces a DeviceClass.
    pub fn apply_class(&mut self, class: Arc<DeviceClass>) {
        let name = class.metadata.name.clone().unwrap_or_default();
        Arc::make_mut(&mut self.classes).insert(name, class);
        self.map_extended_resources();
    }

    /// Forgets the DeviceClass `name`.
    pub fn delete_class(&mut self, name: &str) {
        if Arc::make_mut(&mut self.classes).remove(name).is_some() {
            self.map_extended_resources();
        }
    }

    /// Maps each extended resource name to the class that serves it. Two
    /// classes may name the same resource while one replaces the other:
    /// as kube-scheduler, the newer class wins, and the lower name between
    /// two of the same age. The implicit names are unique.
    fn map_extended_resources(&mut self) {
        let mut map: HashMap<String, Arc<DeviceClass>> = HashMap::new();
        for (name, class) in self.classes.iter() {
            map.insert(format!("{DEVICE_CLASS_PREFIX}{name}"), class.clone());
        }
        let newer = |a: &DeviceClass, b: &DeviceClass| {
            let created = |c: &DeviceClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (created(a), std::cmp::Reverse(&a.metadata.name))
                > (created(b), std::cmp::Reverse(&b.metadata.name))
        };
        for class in self.classes.values() {
            let explicit = class
                .spec
                .as_ref()
                .and_then(|s| s.extended_resource_name.as_ref());
            let Some(resource) = explicit else {
                continue;
            };
            match map.get(resource) {
                Some(current) if !newer(class, current) => {}
                _ => {
                    map.insert(resource.clone(), class.clone());
                }
            }
        }
        self.extended_resources = Arc::new(map);
    }

    /// Replaces every DeviceClass.
    pub fn replace_classes(&mut self, classes: Vec<Arc<DeviceClass>>) {
        self.classes = Arc::new(
            classes
                .into_iter()
                .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
                .collect(),
        );
        self.map_extended_resources();
    }

    /// Adds or replaces a ResourceSlice. Rebuilds the per-node index
    /// (slices change when drivers publish, rarely next to pods).
    pub fn apply_slice(&mut self, slice: Arc<ResourceSlice>) {
        let mut by_name = self.slices.by_name.clone();
        by_name.insert(slice.metadata.name.clone().unwrap_or_default(), slice);
        self.slices = Arc::new(SliceIndex::from_names(by_name));
    }

    /// Forgets the ResourceSlice `name`.
    pub fn delete_slice(&mut self, name: &str) {
        let mut by_name = self.slices.by_name.clone();
        if by_name.remove(name).is_some() {
            self.slices = Arc::new(SliceIndex::from_names(by_name));
        }
    }

    /// Replaces every ResourceSlice.
    pub fn replace_slices(&mut self, slices: Vec<Arc<ResourceSlice>>) {
        self.slices = Arc::new(SliceIndex::from_names(
            slices
                .into_iter()
                .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
                .collect(),
        ));
    }

    /// Adds or replaces the DeviceTaintRule `name`. Returns the slices
    /// whose devices' taints this changed, by name: kube-scheduler's slice tracker
    /// reports exactly those as updated ResourceSlices, which is how a rule
    /// reaches its queue.
    pub fn apply_taint_rule(&mut self, name: String, rule: RuleTaint) -> Vec<Arc<ResourceSlice>> {
        if self.taint_rules.get(&name) == Some(&rule) {
            // A status update (the eviction controller reports progress
            // periodically): nothing to copy or reindex.
            return Vec::new();
        }
        let new = rule.clone();
        let old = Arc::make_mut(&mut self.taint_rules).apply(name, rule);
        self.retainted(old.as_ref(), Some(&new))
    }

    /// Forgets the DeviceTaintRule `name`; returns the slices whose devices'
    /// taints this changed, by name.
    pub fn delete_taint_rule(&mut self, name: &str) -> Vec<Arc<ResourceSlice>> {
        if !self.taint_rules.contains(name) {
            return Vec::new();
        }
        let old = Arc::make_mut(&mut self.taint_rules).delete(name);
        self.retainted(old.as_ref(), None)
    }

    /// Replaces every DeviceTaintRule.
    pub fn replace_taint_rules(&mut self, rules: Vec<(String, RuleTaint)>) {
        Arc::make_mut(&mut self.taint_rules).replace(rules);
    }

    /// The slices with a device that `old` and `new` (a rule before and
    /// after) taint differently, by name. A pass over every device, on a
    /// rule change only.
    fn retainted(
        &self,
        old: Option<&RuleTaint>,
        new: Option<&RuleTaint>,
    ) -> Vec<Arc<ResourceSlice>> {
        if old == new {
            return Vec::new();
        }
        fn taint<'r>(
            rule: Option<&'r RuleTaint>,
            spec: &ResourceSliceSpec,
            device: &str,
        ) -> Option<&'r DeviceTaint> {
            rule.and_then(|r| r.taint_for(&spec.driver, &spec.pool.name, device))
        }
        self.slices
            .all
            .iter()
            .filter(|slice| {
                slice
                    .spec
                    .devices
                    .iter()
                    .flatten()
                    .any(|d| taint(old, &slice.spec, &d.name) != taint(new, &slice.spec, &d.name))
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::dra_taints::tests::rule;
    use k8s_openapi::api::resource::v1::{
        AllocationResult, Device, DeviceAllocationResult, DeviceRequestAllocationResult,
        DeviceTaintRule, ResourceClaimStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn slice(name: &str, node: Option<&str>) -> Arc<ResourceSlice> {
        Arc::new(ResourceSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                node_name: node.map(Into::into),
                all_nodes: node.is_none().then_some(true),
                driver: "gpu.example.com".into(),
                ..ResourceSliceSpec::default()
            },
        })
    }

    fn claim(name: &str, devices: &[&str]) -> Arc<ResourceClaim> {
        Arc::new(ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            status: (!devices.is_empty()).then(|| ResourceClaimStatus {
                allocation: Some(AllocationResult {
                    devices: Some(DeviceAllocationResult {
                        results: Some(
                            devices
                                .iter()
                                .map(|d| DeviceRequestAllocationResult {
                                    driver: "gpu.example.com".into(),
                                    pool: "p".into(),
                                    device: (*d).into(),
                                    request: "r".into(),
                                    ..DeviceRequestAllocationResult::default()
                                })
                                .collect(),
                        ),
                        ..DeviceAllocationResult::default()
                    }),
                    ..AllocationResult::default()
                }),
                ..ResourceClaimStatus::default()
            }),
            ..ResourceClaim::default()
        })
    }

    fn allocated(s: &DraState) -> Vec<String> {
        let mut v: Vec<String> = s.allocated().map(|(_, _, d)| d.clone()).collect();
        v.sort();
        v
    }

    #[test]
    fn slices_are_found_by_node_and_shared_ones_by_every_node() {
        let mut s = DraState::default();
        s.replace_slices(vec![slice("a", Some("n1")), slice("all", None)]);
        s.apply_slice(slice("b", Some("n1")));
        s.apply_slice(slice("c", Some("n2")));
        let (own, shared) = s.slices_for("n1");
        let names = |v: &[Arc<ResourceSlice>]| -> Vec<String> {
            v.iter().map(|s| s.metadata.name.clone().unwrap()).collect()
        };
        assert_eq!(names(own), ["a", "b"]);
        assert_eq!(names(shared), ["all"]);
        assert!(s.slices_for("n3").0.is_empty());
        s.delete_slice("a");
        assert_eq!(names(s.slices_for("n1").0), ["b"]);
        assert_eq!(s.all_slices().len(), 3);
    }

    /// Slice `name` of pool `pool` with the devices `devices`.
    fn slice_with(name: &str, pool: &str, devices: &[&str]) -> Arc<ResourceSlice> {
        let mut s = (*slice(name, Some("n1"))).clone();
        s.spec.pool.name = pool.into();
        s.spec.devices = Some(
            devices
                .iter()
                .map(|d| Device {
                    name: (*d).into(),
                    ..Device::default()
                })
                .collect(),
        );
        Arc::new(s)
    }

    fn names(v: Vec<Arc<ResourceSlice>>) -> Vec<String> {
        v.iter().filter_map(|s| s.metadata.name.clone()).collect()
    }

    fn compact(r: &DeviceTaintRule) -> (String, RuleTaint) {
        (
            r.metadata.name.clone().unwrap_or_default(),
            RuleTaint::of(r),
        )
    }

    // TestListPatchedResourceSlices ("patch-all-slices", "update-patch",
    // "remove-patch-known-deleted-rule"): the tracker reports an update of
    // the slices whose devices a rule change taints or untaints, and only
    // those.
    #[test]
    fn a_rule_change_names_the_slices_it_retaints() {
        let mut s = DraState::default();
        s.replace_slices(vec![
            slice_with("a", "p1", &["gpu-0", "gpu-1"]),
            slice_with("b", "p2", &["gpu-0"]),
            slice_with("empty", "p1", &[]),
        ]);
        let (name, pool1) = compact(&rule("t", Some((None, Some("p1"), None))));
        assert_eq!(
            names(s.apply_taint_rule(name.clone(), pool1.clone())),
            ["a"]
        );
        assert_eq!(s.taint_rules().len(), 1);
        // The same spec again (a status update): nothing changes.
        assert!(s.apply_taint_rule(name.clone(), pool1).is_empty());
        // Moving the rule to the other pool changes both slices.
        let (_, pool2) = compact(&rule("t", Some((None, Some("p2"), None))));
        assert_eq!(names(s.apply_taint_rule(name.clone(), pool2)), ["a", "b"]);
        // Back to p1, one device only: `a` gains a taint on gpu-1, `b`
        // loses its taint.
        let (_, one) = compact(&rule("t", Some((None, Some("p1"), Some("gpu-1")))));
        assert_eq!(names(s.apply_taint_rule(name.clone(), one)), ["a", "b"]);
        assert_eq!(names(s.delete_taint_rule(&name)), ["a"]);
        assert!(s.delete_taint_rule(&name).is_empty());
        assert!(s.taint_rules().is_empty());
        // A rule without a selector taints nothing.
        let (none, r) = compact(&rule("none", None));
        assert!(s.apply_taint_rule(none, r).is_empty());
    }

    #[test]
    fn allocated_devices_follow_the_claims_allocations() {
        let mut s = DraState::default();
        s.replace_claims(vec![claim("a", &["gpu-0"]), claim("b", &[])]);
        assert_eq!(allocated(&s), ["gpu-0"]);
        let g = s.allocated_generation();
        s.apply_claim(claim("b", &["gpu-1"]));
        assert_eq!(allocated(&s), ["gpu-0", "gpu-1"]);
        assert!(s.allocated_generation() > g);
        // A status update that keeps the allocation changes nothing.
        let g = s.allocated_generation();
        s.apply_claim(claim("b", &["gpu-1"]));
        assert_eq!(s.allocated_generation(), g);
        s.apply_claim(claim("a", &[]));
        s.delete_claim("ns/b");
        assert!(allocated(&s).is_empty());
        assert!(s.claim("ns", "a").is_some());
    }

    /// `claim` with its results holding shares (device `shared-*`).
    fn sharing(name: &str, devices: &[&str]) -> Arc<ResourceClaim> {
        let mut c = (*claim(name, devices)).clone();
        for r in c
            .status
            .iter_mut()
            .flat_map(|s| s.allocation.iter_mut())
            .flat_map(|a| a.devices.iter_mut())
            .flat_map(|d| d.results.iter_mut().flatten())
        {
            if r.device.starts_with("shared") {
                r.share_id = Some(format!("share-of-{name}"));
            }
        }
        Arc::new(c)
    }

    #[test]
    fn shares_are_kept_apart_from_whole_devices() {
        let shares = |s: &DraState| -> Vec<String> {
            let mut v: Vec<String> = s.shares().filter_map(|r| r.share_id.clone()).collect();
            v.sort();
            v
        };
        let mut s = DraState::default();
        s.replace_claims(vec![sharing("a", &["gpu-0", "shared-0"]), claim("b", &[])]);
        assert_eq!(allocated(&s), ["gpu-0"], "a share is not a whole device");
        assert_eq!(shares(&s), ["share-of-a"]);
        s.apply_claim(sharing("b", &["shared-0"]));
        assert_eq!(shares(&s), ["share-of-a", "share-of-b"]);
        s.apply_claim(sharing("a", &["gpu-0"]));
        assert_eq!(
            shares(&s),
            ["share-of-b"],
            "a's allocation no longer shares"
        );
        s.delete_claim("ns/b");
        assert!(shares(&s).is_empty());
        assert_eq!(allocated(&s), ["gpu-0"]);
    }

    fn class(name: &str, resource: Option<&str>, created: i64) -> Arc<DeviceClass> {
        let mut c: DeviceClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"extendedResourceName": resource},
        }))
        .unwrap();
        c.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        Arc::new(c)
    }

    fn served_by(s: &DraState, resource: &str) -> Option<String> {
        s.class_for_extended_resource(resource)
            .and_then(|c| c.metadata.name.clone())
    }

    /// kube-scheduler's `ExtendedResourceCache`: explicit and implicit
    /// names; of two classes naming one resource the newer wins, then the
    /// lower name; a deleted class stops serving.
    #[test]
    fn extended_resources_map_to_the_class_that_serves_them() {
        let mut s = DraState::default();
        s.replace_classes(vec![
            class("old", Some("example.com/gpu"), 100),
            class("new", Some("example.com/gpu"), 200),
            class("plain", None, 50),
        ]);
        assert_eq!(served_by(&s, "example.com/gpu").as_deref(), Some("new"));
        assert_eq!(
            served_by(&s, "deviceclass.resource.kubernetes.io/plain").as_deref(),
            Some("plain")
        );
        assert_eq!(
            served_by(&s, "deviceclass.resource.kubernetes.io/old").as_deref(),
            Some("old")
        );
        s.apply_class(class("b-twin", Some("example.com/gpu"), 200));
        s.apply_class(class("a-twin", Some("example.com/gpu"), 200));
        assert_eq!(served_by(&s, "example.com/gpu").as_deref(), Some("a-twin"));
        s.delete_class("a-twin");
        s.delete_class("b-twin");
        s.delete_class("new");
        assert_eq!(served_by(&s, "example.com/gpu").as_deref(), Some("old"));
        s.delete_class("old");
        assert_eq!(served_by(&s, "example.com/gpu"), None);
        assert_eq!(served_by(&s, "example.com/other"), None);
    }
}
