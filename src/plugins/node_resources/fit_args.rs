//! NodeResourcesFit's arguments and their validation, as kube-scheduler's
//! `ValidateNodeResourcesFitArgs` checks them.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

pub use crate::framework::scoring::UtilizationShapePoint;
use crate::framework::scoring::validate_shape;
use crate::k8s::fields::NonEmpty;
use crate::k8s::validation::is_qualified_name;

/// Highest weight of one scored resource (kube-scheduler's validation).
pub(super) const MAX_RESOURCE_WEIGHT: i64 = 100;

/// How nodes are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum ScoringStrategyType {
    /// Prefer nodes with the most free capacity (spreading).
    #[default]
    LeastAllocated,
    /// Prefer nodes with the least free capacity (bin packing).
    MostAllocated,
    /// Score utilization through a piecewise-linear shape.
    RequestedToCapacityRatio,
}

/// `requestedToCapacityRatio`: the shape.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    /// Points sorted by increasing utilization.
    pub shape: Vec<UtilizationShapePoint>,
}

/// One resource that takes part in scoring, with its weight.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "RawResourceSpec")]
pub struct ResourceSpec {
    /// Resource name (`cpu`, `memory`, `ephemeral-storage`, `example.com/gpu`, ...).
    pub name: NonEmpty,
    /// Weight in 1..=100 (0 or absent means 1, as kube-scheduler defaults it).
    pub weight: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResourceSpec {
    name: NonEmpty,
    #[serde(default)]
    weight: i64,
}

impl TryFrom<RawResourceSpec> for ResourceSpec {
    type Error = String;
    fn try_from(r: RawResourceSpec) -> Result<Self, String> {
        let weight = if r.weight == 0 { 1 } else { r.weight };
        if !(1..=MAX_RESOURCE_WEIGHT).contains(&weight) {
            return Err(format!(
                "weight: resource weight of {} not in valid range (0, {MAX_RESOURCE_WEIGHT}]",
                r.name
            ));
        }
        Ok(ResourceSpec {
            name: r.name,
            weight,
        })
    }
}

impl ResourceSpec {
    pub(super) fn new(name: &'static str, weight: i64) -> Self {
        ResourceSpec {
            name: NonEmpty::from_static(name),
            weight,
        }
    }
}

/// `scoringStrategy`: the strategy and the resources it looks at.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawStrategy")]
pub struct ScoringStrategy {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: ScoringStrategyType,
    /// `resources`; defaults to `cpu` and `memory` with weight 1.
    pub resources: Vec<ResourceSpec>,
    /// The shape, with `RequestedToCapacityRatio` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: ScoringStrategyType::LeastAllocated,
            resources: default_resources(),
            requested_to_capacity_ratio: None,
        }
    }
}

pub(super) fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawStrategy {
    #[serde(rename = "type")]
    kind: ScoringStrategyType,
    #[serde(default)]
    resources: Vec<ResourceSpec>,
    requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

impl TryFrom<RawStrategy> for ScoringStrategy {
    type Error = String;
    fn try_from(r: RawStrategy) -> Result<Self, String> {
        let kind = r.kind;
        match (&r.requested_to_capacity_ratio, kind) {
            (None, ScoringStrategyType::RequestedToCapacityRatio) => {
                return Err("requestedToCapacityRatio: must be specified when type is \
                            RequestedToCapacityRatio"
                    .into());
            }
            (Some(p), ScoringStrategyType::RequestedToCapacityRatio) => {
                validate_shape("requestedToCapacityRatio.shape", &p.shape)?
            }
            (Some(_), _) => {
                return Err("requestedToCapacityRatio: must be nil when type is not \
                            RequestedToCapacityRatio"
                    .into());
            }
            (None, _) => {}
        }
        let mut seen = HashSet::new();
        for (i, res) in r.resources.iter().enumerate() {
            if !seen.insert(res.name.as_str()) {
                return Err(format!(
                    "resources[{i}].name: duplicate value {:?}",
                    res.name.as_str()
                ));
            }
        }
        Ok(ScoringStrategy {
            kind,
            resources: if r.resources.is_empty() {
                default_resources()
            } else {
                r.resources
            },
            requested_to_capacity_ratio: r.requested_to_capacity_ratio,
        })
    }
}

/// Arguments of NodeResourcesFit, with kube-scheduler's defaults filled.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter does not check.
    pub ignored_resources: Vec<String>,
    /// Groups (the part before `/`) of extended resources the filter does not check.
    pub ignored_resource_groups: Vec<String>,
    /// How nodes are scored.
    pub scoring_strategy: ScoringStrategy,
}

impl crate::framework::CacheNeeds for NodeResourcesFitArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawArgs {
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    scoring_strategy: Option<ScoringStrategy>,
}

impl TryFrom<RawArgs> for NodeResourcesFitArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        for (i, name) in r.ignored_resources.iter().enumerate() {
            if !is_qualified_name(name) {
                return Err(format!("ignoredResources[{i}]: {name:?} {NOT_QUALIFIED}"));
            }
        }
        for (i, group) in r.ignored_resource_groups.iter().enumerate() {
            if group.contains('/') {
                return Err(format!(
                    "ignoredResourceGroups[{i}]: {group:?}: resource group name can't contain '/'"
                ));
            }
            if !is_qualified_name(group) {
                return Err(format!(
                    "ignoredResourceGroups[{i}]: {group:?} {NOT_QUALIFIED}"
                ));
            }
        }
        Ok(NodeResourcesFitArgs {
            ignored_resources: r.ignored_resources,
            ignored_resource_groups: r.ignored_resource_groups,
            scoring_strategy: r.scoring_strategy.unwrap_or_default(),
        })
    }
}

pub(super) const NOT_QUALIFIED: &str = "is not a qualified name (an optional DNS subdomain and '/', then \
                             at most 63 letters, digits, '-', '_' or '.', starting and ending \
                             with a letter or digit)";
