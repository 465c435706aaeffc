//! The seeded pod relations of a case: PodTopologySpread constraints and inter-pod affinity and
//! anti-affinity, against pods already bound to the case's nodes that carry labels and
//! sometimes (anti-)affinity terms of their own. Drawn from a stream of its own (`STREAM`), so
//! a seed's nodes, pod, storage and devices are what they were before relations came.
//!
//! The pod's relation is `KINDS[(index + seed) % KINDS.len()]`, so any `KINDS.len()` consecutive
//! cases of a seed (the CI run's included) have every kind:
//!
//! - none;
//! - a hard spread constraint (`DoNotSchedule`, `maxSkew` 1–2, sometimes `minDomains`);
//! - soft spread constraints (`ScheduleAnyway`), which only score;
//! - a spread constraint with random `nodeAffinityPolicy`, `nodeTaintsPolicy` and
//!   `matchLabelKeys`, hard or soft;
//! - required pod affinity;
//! - required pod anti-affinity;
//! - preferred pod affinity and anti-affinity (scores only);
//! - bound pods with required anti-affinity (and preferred terms) of their own that select the
//!   pod: the symmetry kube-scheduler checks from the existing pods' side.
//!
//! Topology keys: `kubernetes.io/hostname` and [`ZONE`], which most case nodes carry with one
//! of three values shared by every copy. Every selector selects [`COPY_LABEL`]`=<tag>` besides
//! the app labels, so a copy counts only its own pods: domains of other copies' nodes (seen
//! under `nodeAffinityPolicy: Ignore`) hold none of them, for both schedulers alike.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::generator::{Rng, pod_object};
use super::{POD_IMAGE, Side};

/// Salt of the relation draws' stream.
const STREAM: u64 = 0x5e1a_7105_0000_0001;
/// The zone-like topology key of the case nodes.
pub(super) const ZONE: &str = "e2e.placer.io/spread-zone";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// Pod label naming the copy, in every relation selector.
const COPY_LABEL: &str = "e2e.placer.io/diff-copy";
const APP: &str = "e2e.placer.io/app";
const VERSION: &str = "e2e.placer.io/version";

/// The pod's relation, in rotation.
const KINDS: [Kind; 8] = [
    Kind::None,
    Kind::SpreadHard,
    Kind::SpreadSoft,
    Kind::SpreadPolicies,
    Kind::Affinity,
    Kind::AntiAffinity,
    Kind::Preferred,
    Kind::ExistingAntiAffinity,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    None,
    SpreadHard,
    SpreadSoft,
    SpreadPolicies,
    Affinity,
    AntiAffinity,
    Preferred,
    ExistingAntiAffinity,
}

/// A pod bound beforehand: its node, labels (app, version) and (anti-)affinity of its own.
#[derive(Clone, Debug)]
struct Peer {
    node: usize,
    app: &'static str,
    version: &'static str,
    affinity: Option<Value>,
}

/// A case's relations: node zones, bound peers and the pod's labels and terms (selectors are
/// completed with the copy's label in [`Relations::apply`]).
#[derive(Clone, Debug)]
pub(super) struct Relations {
    kind: Kind,
    /// Per node: its [`ZONE`] value, if any.
    pub(super) zones: Vec<Option<&'static str>>,
    peers: Vec<Peer>,
    app: &'static str,
    version: &'static str,
    spread: Vec<Value>,
    affinity: Option<Value>,
}

/// A label selector on the app label (and sometimes the version), without the copy's label.
fn selector(rng: &mut Rng) -> Value {
    let mut s = json!({ "matchLabels": { APP: rng.pick(&["web", "db"]) } });
    if rng.chance(30) {
        s["matchExpressions"] =
            json!([{ "key": VERSION, "operator": rng.pick(&["In", "NotIn"]), "values": ["v1"] }]);
    }
    s
}

/// An inter-pod affinity term on a random topology key.
fn term(rng: &mut Rng) -> Value {
    json!({ "labelSelector": selector(rng), "topologyKey": rng.pick(&[HOSTNAME, ZONE]) })
}

impl Relations {
    pub(super) fn generate(seed: u64, index: usize, nodes: usize) -> Self {
        let kind = KINDS[(index + seed as usize) % KINDS.len()];
        let mut rng = Rng::new(seed ^ STREAM, index);
        let zones = (0..nodes)
            .map(|_| (!rng.chance(15)).then(|| rng.pick(&["z1", "z2", "z3"])))
            .collect();
        let peers = if kind == Kind::None {
            Vec::new()
        } else {
            (0..rng.below(6))
                .map(|_| Peer {
                    node: rng.below(nodes),
                    app: rng.pick(&["web", "db"]),
                    version: rng.pick(&["v1", "v2"]),
                    affinity: (kind == Kind::ExistingAntiAffinity && rng.chance(60)).then(|| {
                        let mut a = json!({ "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [term(&mut rng)],
                        } });
                        if rng.chance(50) {
                            a["podAffinity"] = json!({
                                "preferredDuringSchedulingIgnoredDuringExecution": [{
                                    "weight": 1 + rng.below(100), "podAffinityTerm": term(&mut rng),
                                }],
                            });
                        }
                        a
                    }),
                })
                .collect()
        };
        let constraint = |rng: &mut Rng, hard: bool| {
            let mut c = json!({
                "maxSkew": 1 + rng.below(2),
                "topologyKey": rng.pick(&[HOSTNAME, ZONE, ZONE]),
                "whenUnsatisfiable": if hard { "DoNotSchedule" } else { "ScheduleAnyway" },
                "labelSelector": selector(rng),
            });
            if hard && rng.chance(35) {
                c["minDomains"] = json!(1 + rng.below(4));
            }
            c
        };
        let (mut spread, mut affinity) = (Vec::new(), None);
        match kind {
            Kind::None | Kind::ExistingAntiAffinity => {}
            Kind::SpreadHard => spread.push(constraint(&mut rng, true)),
            Kind::SpreadSoft => {
                // One or two, on distinct keys (the API refuses two on one key and action).
                let mut keys = vec![HOSTNAME, ZONE];
                keys.truncate(1 + rng.below(2));
                spread = (keys.into_iter())
                    .map(|key| {
                        let mut c = constraint(&mut rng, false);
                        c["topologyKey"] = json!(key);
                        c
                    })
                    .collect();
            }
            Kind::SpreadPolicies => {
                let hard = rng.chance(60);
                let mut c = constraint(&mut rng, hard);
                c["nodeAffinityPolicy"] = json!(rng.pick(&["Honor", "Ignore"]));
                c["nodeTaintsPolicy"] = json!(rng.pick(&["Honor", "Ignore"]));
                if rng.chance(60) {
                    // The API refuses a key both in matchLabelKeys and the selector.
                    c["matchLabelKeys"] = json!([VERSION]);
                    if let Some(s) = c["labelSelector"].as_object_mut() {
                        s.remove("matchExpressions");
                    }
                }
                spread.push(c);
            }
            Kind::Affinity | Kind::AntiAffinity => {
                let field = match kind {
                    Kind::Affinity => "podAffinity",
                    _ => "podAntiAffinity",
                };
                affinity = Some(json!({ field: {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term(&mut rng)],
                } }));
            }
            Kind::Preferred => {
                let mut a = serde_json::Map::new();
                for field in ["podAffinity", "podAntiAffinity"] {
                    if rng.chance(70) {
                        a.insert(
                            field.into(),
                            json!({ "preferredDuringSchedulingIgnoredDuringExecution": [{
                                "weight": 1 + rng.below(100), "podAffinityTerm": term(&mut rng),
                            }] }),
                        );
                    }
                }
                affinity = Some(Value::Object(a));
            }
        }
        Self {
            kind,
            zones,
            peers,
            app: rng.pick(&["web", "db"]),
            version: rng.pick(&["v1", "v2"]),
            spread,
            affinity,
        }
    }

    /// The pod's labels on the copy `side`, to add to its metadata.
    pub(super) fn pod_labels(&self, side: &Side) -> Vec<(String, String)> {
        string_pairs(&labels(side, self.app, self.version))
    }

    /// Adds the pod's spread constraints and pod (anti-)affinity to the copy's pod spec.
    pub(super) fn apply(&self, side: &Side, spec: &mut Value) {
        if !self.spread.is_empty() {
            let mut spread = self.spread.clone();
            for c in &mut spread {
                confine(&mut c["labelSelector"], side);
            }
            spec["topologySpreadConstraints"] = json!(spread);
        }
        if let Some(affinity) = &self.affinity {
            let mut affinity = affinity.clone();
            confine_terms(&mut affinity, side);
            if let Some(a) = affinity.as_object() {
                for (k, v) in a {
                    spec["affinity"][k] = v.clone();
                }
            }
        }
    }

    /// The copy's peers, bound to its nodes.
    pub(super) fn peers(&self, side: &Side) -> Vec<Pod> {
        (self.peers.iter().enumerate())
            .map(|(j, p)| {
                let mut spec = json!({
                    "nodeName": format!("{}-{}", side.node_stem, p.node),
                    "containers": [{ "name": "main", "image": POD_IMAGE }],
                    "terminationGracePeriodSeconds": 0,
                });
                if let Some(affinity) = &p.affinity {
                    let mut affinity = affinity.clone();
                    confine_terms(&mut affinity, side);
                    spec["affinity"] = affinity;
                }
                let mut pod = pod_object(&format!("{}-r{j}", side.tag), side, "bound", spec);
                (pod.metadata.labels.get_or_insert_default())
                    .extend(string_pairs(&labels(side, p.app, p.version)));
                pod
            })
            .collect()
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "{:?}: zones {:?}, pod app {} version {}, spread {}, affinity {}, peers {}",
            self.kind,
            self.zones,
            self.app,
            self.version,
            json!(self.spread),
            self.affinity.clone().unwrap_or_default(),
            json!(
                self.peers
                    .iter()
                    .map(|p| json!([p.node, p.app, p.version, p.affinity]))
                    .collect::<Vec<_>>()
            ),
        )
    }
}

/// A pod's relation labels on the copy `side`.
fn labels(side: &Side, app: &str, version: &str) -> Value {
    json!({ COPY_LABEL: side.tag, APP: app, VERSION: version })
}

/// Adds the copy's label to a label selector.
fn confine(selector: &mut Value, side: &Side) {
    selector["matchLabels"][COPY_LABEL] = json!(side.tag);
}

/// Confines every term of a pod's `affinity` (required and preferred, both kinds).
fn confine_terms(affinity: &mut Value, side: &Side) {
    for kind in ["podAffinity", "podAntiAffinity"] {
        for (list, selector) in [
            (
                "requiredDuringSchedulingIgnoredDuringExecution",
                "/labelSelector",
            ),
            (
                "preferredDuringSchedulingIgnoredDuringExecution",
                "/podAffinityTerm/labelSelector",
            ),
        ] {
            let terms = affinity.pointer_mut(&format!("/{kind}/{list}"));
            for t in terms.and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(s) = t.pointer_mut(selector) {
                    confine(s, side);
                }
            }
        }
    }
}

/// A JSON object of strings as pairs.
fn string_pairs(labels: &Value) -> Vec<(String, String)> {
    (labels.as_object().into_iter().flatten())
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

#[test]
fn every_24_consecutive_cases_have_every_relation_kind() {
    for seed in 0..17 {
        for start in 0..24 {
            let kinds: Vec<Kind> = (start..start + 24)
                .map(|i| Relations::generate(seed, i, 4).kind)
                .collect();
            for kind in KINDS {
                assert!(
                    kinds.contains(&kind),
                    "seed {seed}, cases {start}..+24 lack {kind:?}"
                );
            }
        }
    }
}

#[test]
fn every_selector_is_confined_to_the_copy() {
    let side = Side {
        tag: "c1p-a1".into(),
        node_stem: "n".into(),
        scheduler: "s".into(),
        attempt: "a1".into(),
    };
    for i in 0..64 {
        let r = Relations::generate(3, i, 4);
        let mut spec = json!({});
        r.apply(&side, &mut spec);
        let peers: Vec<Value> = r.peers(&side).iter().map(|p| json!(p.spec)).collect();
        for v in std::iter::once(&spec).chain(&peers) {
            let text = v.to_string();
            let selectors = text.matches("labelSelector").count();
            let confined = text
                .matches(&format!("\"{COPY_LABEL}\":\"c1p-a1\""))
                .count();
            assert_eq!(selectors, confined, "case {i}: {text}");
        }
    }
}
