//! The seeded devices of a case (Dynamic Resource Allocation): ResourceSlices publishing 0–3
//! devices per node (attributes `numa` 0/1 and `memory` 16/40/80), some of them already held by
//! an allocated claim, and what the pod asks for. Drawn from a stream of its own (`STREAM`), so
//! a seed's nodes, pod and storage are what they were before devices came.
//!
//! The pod's ask is `KINDS[(index + seed) % KINDS.len()]`, so any `KINDS.len()` consecutive cases
//! of a seed (the CI run's included) have every kind:
//!
//! - nothing;
//! - a claim for one device of the class `gpu` (every device of the test driver);
//! - a claim for two devices on the same NUMA node (`matchAttribute`);
//! - a claim for one device of the class `big` (a CEL selector: `memory >= 40`);
//! - a claim for every `big` device of the node (`allocationMode: All`);
//! - a claim whose request lists alternatives (`firstAvailable`: two `big`, else one `gpu`);
//! - a claim for one device with a request-level CEL selector (`numa == 1`);
//! - `example.com/fpga` in the container's resources, which the class `fpga` serves
//!   (DRAExtendedResource); some nodes also list it in their allocatable, as a device plugin
//!   would, and there NodeResourcesFit counts it instead;
//! - bandwidth of a shared device (DRAConsumableCapacity): in these cases every device allows
//!   multiple allocations and has `memory` gigabits of `bandwidth`, rounded up to steps of 4G on
//!   NUMA node 0 and to a quarter, half or all of it (default a quarter) on NUMA node 1; a taken
//!   device holds a share of 20G, and the pod asks for 4G, 10G, 30G or the default.
//!
//! The claims are the copy's own (`<tag>-dev`, `<tag>-taken-<i>`), the classes shared. Half the
//! cases with a device ask are focused on devices ([`Devices::focused`]), as storage's are.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::harness::node_allocation;

/// Salt of the device draws' stream.
const STREAM: u64 = 0xd1a5_0de7_1ce5_0000;
/// The test driver.
const DRIVER: &str = "dra.placer.test";
/// The extended resource the class `fpga` serves.
pub(super) const FPGA: &str = "example.com/fpga";

/// What the pod asks for, in rotation.
const KINDS: [Kind; 9] = [
    Kind::None,
    Kind::One,
    Kind::SameNuma,
    Kind::Big,
    Kind::AllBig,
    Kind::FirstAvailable,
    Kind::Selector,
    Kind::Extended,
    Kind::Bandwidth,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    None,
    One,
    SameNuma,
    Big,
    AllBig,
    FirstAvailable,
    Selector,
    Extended,
    Bandwidth,
}

/// The DeviceClasses every case shares, created once per run.
pub(super) struct DeviceClasses {
    gpu: String,
    big: String,
}

impl DeviceClasses {
    pub(super) async fn create(env: &TestEnv) -> anyhow::Result<Self> {
        let classes = Self {
            gpu: env.name("gpu"),
            big: env.name("big"),
        };
        let driver = json!({ "cel": { "expression": format!("device.driver == '{DRIVER}'") } });
        let big = json!({ "cel": {
            "expression": format!("device.attributes['{DRIVER}'].memory >= 40") } });
        let objects = [
            json!({ "metadata": { "name": classes.gpu }, "spec": { "selectors": [driver] } }),
            json!({ "metadata": { "name": classes.big },
                    "spec": { "selectors": [driver, big] } }),
            json!({ "metadata": { "name": env.name("fpga") },
                    "spec": { "selectors": [driver], "extendedResourceName": FPGA } }),
        ]
        .into_iter()
        .map(|c| serde_json::from_value::<DeviceClass>(c).context("class JSON"))
        .collect::<anyhow::Result<Vec<_>>>()?;
        create_all(Api::all(env.client().clone()), objects).await?;
        Ok(classes)
    }
}

/// One published device: `(numa, memory)`.
type Device = (u8, u32);

/// A case's devices (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct Devices {
    kind: Kind,
    /// Per node: its devices (`dev-<j>`); none: no slice.
    per_node: Vec<Vec<Device>>,
    /// Per node: its first device is held by an allocated claim.
    taken: Vec<bool>,
    /// Per node: `example.com/fpga` in its allocatable (a device plugin's).
    plugin_fpgas: Vec<Option<u32>>,
    /// How many `example.com/fpga` the pod asks for (kind `Extended`).
    fpgas: u32,
    /// The gigabits of bandwidth the pod asks for (kind `Bandwidth`); none: the default.
    bandwidth: Option<u32>,
    /// The case is about devices: the generator drops the pod's node selection, ports, restart
    /// rules and all but a small request, and the nodes' cordons and hard taints, so that nodes
    /// reach DynamicResources and its reasons show.
    pub(super) focused: bool,
}

impl Devices {
    pub(super) fn generate(seed: u64, index: usize, nodes: usize) -> Self {
        let mut rng = Rng::new(seed ^ STREAM, index);
        let kind = KINDS[(index + (seed % KINDS.len() as u64) as usize) % KINDS.len()];
        let per_node: Vec<Vec<Device>> = (0..nodes)
            .map(|_| {
                (0..rng.below(4))
                    .map(|_| (rng.pick(&[0, 1]), rng.pick(&[16, 40, 80])))
                    .collect()
            })
            .collect();
        let taken = per_node
            .iter()
            .map(|d| !d.is_empty() && rng.chance(30))
            .collect();
        let plugin_fpgas = (0..nodes)
            .map(|_| rng.chance(30).then(|| rng.pick(&[1, 2])))
            .collect();
        Self {
            kind,
            per_node,
            taken,
            plugin_fpgas,
            fpgas: rng.pick(&[1, 1, 2]),
            focused: kind != Kind::None && rng.chance(50),
            bandwidth: rng.pick(&[Some(4), Some(10), Some(30), None]),
        }
    }

    /// The pod's claim, `<tag>-dev`.
    fn pod_claim(side: &Side) -> String {
        format!("{}-dev", side.tag)
    }

    /// `example.com/fpga` in node `i`'s allocatable, if a device plugin provides it there.
    pub(super) fn plugin_fpgas(&self, i: usize) -> Option<u32> {
        self.plugin_fpgas[i].filter(|_| self.kind == Kind::Extended)
    }

    /// Adds the pod's ask to its `spec`: a `resourceClaims` entry, or the extended resource in
    /// its first container's requests and limits.
    pub(super) fn ask(&self, side: &Side, spec: &mut Value) {
        match self.kind {
            Kind::None => {}
            Kind::Extended => {
                let fpgas = self.fpgas.to_string();
                let resources = &mut spec["containers"][0]["resources"];
                resources["requests"][FPGA] = json!(fpgas);
                resources["limits"][FPGA] = json!(fpgas);
            }
            _ => {
                spec["resourceClaims"] =
                    json!([{ "name": "dev", "resourceClaimName": Self::pod_claim(side) }]);
            }
        }
    }

    /// The copy's slices, one per node with devices, named `<node>-devices` (pool = node).
    pub(super) fn slices(&self, side: &Side) -> anyhow::Result<Vec<ResourceSlice>> {
        self.per_node
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.is_empty())
            .map(|(i, devices)| {
                let node = format!("{}-{i}", side.node_stem);
                let devices: Vec<Value> = devices
                    .iter()
                    .enumerate()
                    .map(|(j, (numa, memory))| {
                        let mut device = json!({ "name": format!("dev-{j}"), "attributes": {
                            "numa": { "int": numa }, "memory": { "int": memory } } });
                        if self.kind == Kind::Bandwidth {
                            device["allowMultipleAllocations"] = json!(true);
                            device["capacity"] = json!({ "bandwidth": {
                                "value": format!("{memory}G"),
                                "requestPolicy": bandwidth_policy(*numa, *memory) } });
                        }
                        device
                    })
                    .collect();
                serde_json::from_value(json!({
                    "metadata": { "name": format!("{node}-devices") },
                    "spec": { "driver": DRIVER, "nodeName": node, "devices": devices,
                              "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 } },
                }))
                .context("slice JSON")
            })
            .collect()
    }

    /// The copy's claims: the pod's (if it asks for one), and one per taken device, each with
    /// the status [`Devices::allocate_taken`] writes once they exist.
    pub(super) fn claims(
        &self,
        side: &Side,
        classes: &DeviceClasses,
    ) -> anyhow::Result<Vec<ResourceClaim>> {
        let request = |name: &str, class: &str| {
            json!({ "name": name, "exactly": {
            "deviceClassName": class, "allocationMode": "ExactCount", "count": 1 } })
        };
        let pod_claim = match self.kind {
            Kind::None | Kind::Extended => None,
            Kind::One => Some(json!({ "requests": [request("dev", &classes.gpu)] })),
            Kind::SameNuma => {
                let mut two = request("dev", &classes.gpu);
                two["exactly"]["count"] = json!(2);
                Some(json!({ "requests": [two], "constraints": [
                    { "requests": ["dev"], "matchAttribute": format!("{DRIVER}/numa") }] }))
            }
            Kind::Big => Some(json!({ "requests": [request("dev", &classes.big)] })),
            Kind::AllBig => Some(json!({ "requests": [{ "name": "dev", "exactly": {
                "deviceClassName": classes.big, "allocationMode": "All" } }] })),
            Kind::FirstAvailable => Some(json!({ "requests": [{ "name": "dev", "firstAvailable": [
                { "name": "big2", "deviceClassName": classes.big,
                  "allocationMode": "ExactCount", "count": 2 },
                { "name": "one", "deviceClassName": classes.gpu,
                  "allocationMode": "ExactCount", "count": 1 },
            ] }] })),
            Kind::Selector => {
                let mut one = request("dev", &classes.gpu);
                one["exactly"]["selectors"] = json!([{ "cel": {
                    "expression": format!("device.attributes['{DRIVER}'].numa == 1") } }]);
                Some(json!({ "requests": [one] }))
            }
            Kind::Bandwidth => {
                let mut one = request("dev", &classes.gpu);
                if let Some(bw) = self.bandwidth {
                    one["exactly"]["capacity"] =
                        json!({ "requests": { "bandwidth": format!("{bw}G") } });
                }
                Some(json!({ "requests": [one] }))
            }
        };
        let taken = self
            .taken
            .iter()
            .enumerate()
            .filter(|(_, t)| **t)
            .map(|(i, _)| {
                (
                    format!("{}-taken-{i}", side.tag),
                    json!({ "requests": [request("dev", &classes.gpu)] }),
                )
            });
        pod_claim
            .map(|d| (Self::pod_claim(side), d))
            .into_iter()
            .chain(taken)
            .map(|(name, devices)| {
                serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": { ATTEMPT_LABEL: side.attempt } },
                    "spec": { "devices": devices },
                }))
                .context("claim JSON")
            })
            .collect()
    }

    /// Allocates each taken device to its claim (as a scheduler before would have), through the
    /// status subresource: the claims must exist.
    pub(super) async fn allocate_taken(&self, env: &TestEnv, side: &Side) -> anyhow::Result<()> {
        for (i, _) in self.taken.iter().enumerate().filter(|(_, t)| **t) {
            let name = format!("{}-taken-{i}", side.tag);
            let node = format!("{}-{i}", side.node_stem);
            let share = self.kind == Kind::Bandwidth;
            env.edit_claim_status(&name, &format!("allocate {name} on {node}"), |status| {
                let mut allocation = node_allocation("dev", DRIVER, &node, "dev-0")?;
                if share {
                    let results = allocation.devices.as_mut().and_then(|d| d.results.as_mut());
                    for r in results.into_iter().flatten() {
                        r.share_id = Some(format!("00000000-0000-4000-8000-{i:012}"));
                        r.consumed_capacity =
                            Some([("bandwidth".to_owned(), Quantity("20G".to_owned()))].into());
                    }
                }
                status.allocation = Some(allocation);
                Ok(())
            })
            .await?;
        }
        Ok(())
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "ask {:?} (fpgas {}, bandwidth {:?}), devices (numa, memory) per node {:?}, \
             first taken {:?}, plugin fpgas {:?}, focused {}",
            self.kind,
            self.fpgas,
            self.bandwidth,
            self.per_node,
            self.taken,
            self.plugin_fpgas,
            self.focused
        )
    }
}

/// The request policy of a device's bandwidth of `memory` gigabits: steps of 4G on NUMA node 0;
/// the valid values a quarter, half and all of it (default a quarter) on NUMA node 1 (the API
/// server refuses a valid value above the capacity).
fn bandwidth_policy(numa: u8, memory: u32) -> Value {
    if numa == 0 {
        json!({ "default": "4G", "validRange": { "min": "4G", "step": "4G" } })
    } else {
        let values: Vec<String> = [memory / 4, memory / 2, memory]
            .iter()
            .map(|v| format!("{v}G"))
            .collect();
        json!({ "default": values[0], "validValues": values })
    }
}
