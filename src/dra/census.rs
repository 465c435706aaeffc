//! For `/explain`: how many devices of the cluster each request of a pod's
//! claims could ever get, to name a request that no node can satisfy. Not
//! the search: it counts, per request choice, the devices the class's and
//! the request's selectors match, those nobody uses (untainted for the
//! request, DeviceTaintRules included; a shared device while its capacity
//! left holds the request), and the most of those on one node
//! (a node's own slices plus the slices every node may use). A request that wants more than that
//! fits no node, whatever the rest of the pod.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceSlice;

use super::capacity;
use super::checks::taint_prevents;
use super::plan::{Choice, Mode};
use super::{AllocatedDevices, Allocator};
use crate::cache::dra_taints::TaintRules;

/// What the cluster holds for one choice of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceCensus {
    /// `request` or `request/subrequest`.
    pub request: String,
    /// The DeviceClass it names.
    pub class: String,
    /// How many devices it wants (`None`: `All`, at least one).
    pub wanted: Option<usize>,
    /// Devices its selectors match.
    pub matching: usize,
    /// Of those, free (not allocated, not tainted against it; admin access
    /// may use devices in use).
    pub free: usize,
    /// The most free matching devices one node can use.
    pub most_on_one_node: usize,
}

impl ChoiceCensus {
    /// Whether some node might satisfy the choice on its own.
    pub fn satisfiable(&self) -> bool {
        self.most_on_one_node >= self.wanted.unwrap_or(1)
    }
}

impl fmt::Display for ChoiceCensus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request {} (class {}): {} device(s) match, {} free, at most {} on one node; it asks for ",
            self.request, self.class, self.matching, self.free, self.most_on_one_node
        )?;
        match self.wanted {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("all on its node (at least 1)"),
        }
    }
}

/// One request no node can satisfy: every choice of it falls short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsatisfiable {
    /// The claim, `namespace/name`.
    pub claim: String,
    /// Its choices (one unless the request has `firstAvailable`).
    pub choices: Vec<ChoiceCensus>,
}

impl fmt::Display for Unsatisfiable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no node can satisfy claim {}: ", self.claim)?;
        for (i, c) in self.choices.iter().enumerate() {
            if i > 0 {
                f.write_str("; nor ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl Allocator {
    /// The requests of the allocator's claims that no node can satisfy,
    /// counting over every slice in `slices` with `allocated` in use.
    /// A selector that fails to evaluate counts as not matching (the
    /// search reports such errors itself).
    pub fn unsatisfiable(
        &self,
        slices: &[Arc<ResourceSlice>],
        allocated: &AllocatedDevices,
        rules: &TaintRules,
    ) -> Vec<Unsatisfiable> {
        let mut out = Vec::new();
        for claim in &self.claims {
            for request in &claim.requests {
                let choices: Vec<ChoiceCensus> = request
                    .choices
                    .iter()
                    .map(|c| count(c, slices, allocated, rules))
                    .collect();
                if !choices.iter().any(ChoiceCensus::satisfiable) {
                    out.push(Unsatisfiable {
                        claim: claim.key.clone(),
                        choices,
                    });
                }
            }
        }
        out
    }
}

/// Counts the devices of `slices` for `choice`.
fn count(
    choice: &Choice,
    slices: &[Arc<ResourceSlice>],
    allocated: &AllocatedDevices,
    rules: &TaintRules,
) -> ChoiceCensus {
    let (mut matching, mut free, mut everywhere) = (0, 0, 0);
    let mut by_node: HashMap<&str, usize> = HashMap::new();
    for slice in slices {
        let spec = &slice.spec;
        let driver = spec.driver.as_str();
        let rule_taints = rules.for_pool(driver, &spec.pool.name);
        for device in spec.devices.iter().flatten() {
            let selected = choice
                .class_selectors
                .iter()
                .chain(&choice.selectors)
                .all(|s| s.matches(driver, device) == Ok(true));
            if !selected {
                continue;
            }
            matching += 1;
            let pool = spec.pool.name.as_str();
            let in_use = allocated.contains_parts(driver, pool, &device.name);
            let taints = device
                .taints
                .iter()
                .flatten()
                .chain(rule_taints.of(&device.name));
            if (in_use && !choice.admin_access) || taint_prevents(taints, &choice.tolerations) {
                continue;
            }
            // A shared device is free while what its shares leave fits.
            let held = allocated.shares_of(driver, pool, &device.name);
            if capacity::device_fits(&choice.capacity, device, held, None) != Ok(true) {
                continue;
            }
            free += 1;
            match spec.node_name.as_deref().or(device.node_name.as_deref()) {
                Some(node) => *by_node.entry(node).or_default() += 1,
                // allNodes or a node selector: a node may use it, count it for all.
                None => everywhere += 1,
            }
        }
    }
    ChoiceCensus {
        request: choice.full_name.clone(),
        class: choice.class.metadata.name.clone().unwrap_or_default(),
        wanted: match choice.mode {
            Mode::Exact(n) => Some(n),
            Mode::All => None,
        },
        matching,
        free,
        most_on_one_node: by_node.values().max().copied().unwrap_or(0) + everywhere,
    }
}
