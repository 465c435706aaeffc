//! What [`super::Allocator::new`] makes of a pod's claims once per pod: each
//! request (or subrequest) with its class, compiled selectors, mode and
//! tolerations, and each claim's constraints. The checks here are the ones
//! Go's allocator makes per `Allocate` call on request data alone
//! (`validateDeviceRequest`); they do not depend on the node, so they run once.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    CapacityRequirements, DeviceClass, DeviceRequest, DeviceSelector, DeviceSubRequest,
    DeviceToleration, ExactDeviceRequest, ResourceClaim,
};

use super::capacity::CapacityRequests;
use super::cel::Selector;
use super::types::AllocatorError;

/// `resourceapi.AllocationResultsMaxSize`: the most devices one claim's
/// allocation may hold.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// How many devices a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// `ExactCount`: this many.
    Exact(usize),
    /// `All`: every matching device on the node.
    All,
}

/// One way to satisfy a request: the request itself (`exactly`), or one of
/// its `firstAvailable` subrequests.
pub(super) struct Choice {
    /// The name the result carries: `req`, or `req/sub` for a subrequest.
    pub full_name: String,
    /// The subrequest's own name (constraints may name `req/sub`).
    pub sub_name: Option<String>,
    pub class: Arc<DeviceClass>,
    pub class_selectors: Vec<Selector>,
    pub selectors: Vec<Selector>,
    pub mode: Mode,
    pub admin_access: bool,
    pub tolerations: Vec<DeviceToleration>,
    /// What the request asks of device capacities (consumable capacity).
    pub capacity: CapacityRequests,
}

/// One request of a claim and its choices (one unless it has subrequests).
pub(super) struct RequestPlan {
    pub name: String,
    /// `firstAvailable`: exactly one of the choices is allocated, the
    /// first that works.
    pub has_subrequests: bool,
    pub choices: Vec<Choice>,
}

/// `matchAttribute` or `distinctAttribute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConstraintKind {
    Match,
    Distinct,
}

/// One of a claim's `spec.devices.constraints`.
pub(super) struct ConstraintSpec {
    pub kind: ConstraintKind,
    /// The fully qualified attribute name (`domain/id`).
    pub attribute: String,
    /// The requests it applies to (`req` or `req/sub`); empty: all.
    pub requests: Vec<String>,
}

impl ConstraintSpec {
    /// True when the constraint covers a device picked for `request`
    /// (`matches` in Go: a subrequest is covered by its parent's name too).
    pub fn covers(&self, request: &str, full_name: &str) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| r == request || r == full_name)
    }
}

/// One claim to allocate.
pub(super) struct ClaimPlan {
    /// `namespace/name`, as `klog.KObj` prints it in messages.
    pub key: String,
    pub claim: ResourceClaim,
    pub requests: Vec<RequestPlan>,
    pub constraints: Vec<ConstraintSpec>,
}

/// Builds the plan of `claim`.
pub(super) fn plan_claim(
    claim: ResourceClaim,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
) -> Result<ClaimPlan, AllocatorError> {
    // `klog.KObj`: `namespace/name`, or the name alone without a namespace.
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let key = match claim.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    };
    let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
    let mut requests = Vec::new();
    for request in devices.iter().flat_map(|d| d.requests.iter().flatten()) {
        requests.push(plan_request(&key, request, class_of)?);
    }
    let mut constraints = Vec::new();
    for (i, c) in devices
        .iter()
        .flat_map(|d| d.constraints.iter().flatten())
        .enumerate()
    {
        let (kind, attribute) = match (&c.match_attribute, &c.distinct_attribute) {
            (Some(a), _) => (ConstraintKind::Match, a.clone()),
            (None, Some(a)) => (ConstraintKind::Distinct, a.clone()),
            (None, None) => {
                return Err(AllocatorError::fatal(format!(
                    "claim {key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )));
            }
        };
        constraints.push(ConstraintSpec {
            kind,
            attribute,
            requests: c.requests.clone().unwrap_or_default(),
        });
    }
    Ok(ClaimPlan {
        key,
        claim,
        requests,
        constraints,
    })
}

fn plan_request(
    key: &str,
    request: &DeviceRequest,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
) -> Result<RequestPlan, AllocatorError> {
    let name = &request.name;
    let choices = match (&request.exactly, request.first_available.as_deref()) {
        (_, Some(subs)) if !subs.is_empty() => {
            let mut choices = Vec::with_capacity(subs.len());
            for sub in subs {
                choices.push(plan_sub_request(key, name, sub, class_of)?);
            }
            choices
        }
        (Some(exact), _) => vec![plan_exact(key, name, exact, class_of)?],
        (None, _) => {
            return Err(AllocatorError::fatal(format!(
                "claim {key}, request {name}: unsupported request type"
            )));
        }
    };
    Ok(RequestPlan {
        name: name.clone(),
        has_subrequests: request
            .first_available
            .as_ref()
            .is_some_and(|s| !s.is_empty()),
        choices,
    })
}

/// The fields an exact request and a subrequest share, borrowed.
struct RequestFields<'a> {
    class_name: &'a str,
    mode: Option<&'a str>,
    count: Option<i64>,
    selectors: &'a [DeviceSelector],
    tolerations: &'a [DeviceToleration],
    capacity: Option<&'a CapacityRequirements>,
    has_derived: bool,
}

fn plan_exact(
    key: &str,
    name: &str,
    exact: &ExactDeviceRequest,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
) -> Result<Choice, AllocatorError> {
    let fields = RequestFields {
        class_name: &exact.device_class_name,
        mode: exact.allocation_mode.as_deref(),
        count: exact.count,
        selectors: exact.selectors.as_deref().unwrap_or_default(),
        tolerations: exact.tolerations.as_deref().unwrap_or_default(),
        capacity: exact.capacity.as_ref(),
        has_derived: exact
            .derived_attributes
            .as_ref()
            .is_some_and(|d| !d.is_empty()),
    };
    let mut choice = plan_choice(key, name, name.to_owned(), &fields, class_of)?;
    choice.admin_access = exact.admin_access == Some(true);
    Ok(choice)
}

fn plan_sub_request(
    key: &str,
    parent: &str,
    sub: &DeviceSubRequest,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
) -> Result<Choice, AllocatorError> {
    let fields = RequestFields {
        class_name: &sub.device_class_name,
        mode: sub.allocation_mode.as_deref(),
        count: sub.count,
        selectors: sub.selectors.as_deref().unwrap_or_default(),
        tolerations: sub.tolerations.as_deref().unwrap_or_default(),
        capacity: sub.capacity.as_ref(),
        has_derived: sub
            .derived_attributes
            .as_ref()
            .is_some_and(|d| !d.is_empty()),
    };
    let full_name = format!("{parent}/{}", sub.name);
    let mut choice = plan_choice(key, &sub.name, full_name, &fields, class_of)?;
    choice.sub_name = Some(sub.name.clone());
    Ok(choice)
}

/// The checks of Go's `validateDeviceRequest`, in its order, and the
/// request's capacity amounts parsed once.
fn plan_choice(
    key: &str,
    name: &str,
    full_name: String,
    f: &RequestFields<'_>,
    class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
) -> Result<Choice, AllocatorError> {
    if f.has_derived {
        return Err(AllocatorError::fatal(format!(
            "claim {key}, request {name}: cannot handle request with derived attributes, the feature is disabled"
        )));
    }
    for (i, s) in f.selectors.iter().enumerate() {
        if s.cel.is_none() {
            return Err(AllocatorError::fatal(format!(
                "claim {key}, request {name}, selector #{i}: CEL expression empty (unsupported selector type?)"
            )));
        }
    }
    if f.class_name.is_empty() {
        return Err(AllocatorError::fatal(format!(
            "claim {key}, request {name}: missing device class name (unsupported request type?)"
        )));
    }
    let class = class_of(f.class_name).ok_or_else(|| {
        AllocatorError::fatal(format!(
            "claim {key}, request {name}: could not retrieve device class {cls}: deviceclass.resource.k8s.io \"{cls}\" not found",
            cls = f.class_name
        ))
    })?;
    let mode = match f.mode.unwrap_or("ExactCount") {
        // The API server defaults a missing count to 1.
        "ExactCount" => {
            let count = f.count.unwrap_or(1);
            Mode::Exact(usize::try_from(count).map_err(|_| {
                AllocatorError::fatal(format!(
                    "claim {key}, request {name}: exact count {count} is too large"
                ))
            })?)
        }
        "All" => Mode::All,
        other => {
            return Err(AllocatorError::fatal(format!(
                "claim {key}, request {name}: unsupported count mode {other}"
            )));
        }
    };
    let class_selectors = compile_all(
        class.spec.as_ref().and_then(|s| s.selectors.as_deref()),
        |i, e| {
            let class_name = class.metadata.name.as_deref().unwrap_or_default();
            format!("class {class_name}: selector #{i}: CEL compile error: {e}")
        },
    )?;
    let selectors = compile_all(Some(f.selectors), |i, e| {
        format!("claim {key}: selector #{i}: CEL compile error: {e}")
    })?;
    let capacity = CapacityRequests::parse(f.capacity.and_then(|c| c.requests.as_ref()))
        .map_err(|e| AllocatorError::fatal(format!("claim {key}, request {name}: {e}")))?;
    Ok(Choice {
        full_name,
        sub_name: None,
        class,
        class_selectors,
        selectors,
        mode,
        admin_access: false,
        tolerations: f.tolerations.to_vec(),
        capacity,
    })
}

/// Compiles every selector, naming the failing one with `describe`.
fn compile_all(
    selectors: Option<&[DeviceSelector]>,
    describe: impl Fn(usize, &str) -> String,
) -> Result<Vec<Selector>, AllocatorError> {
    let mut compiled = Vec::new();
    for (i, s) in selectors.unwrap_or_default().iter().enumerate() {
        let Some(cel) = &s.cel else {
            // A class selector of an unknown kind: nothing to compile, and
            // nothing this allocator could check, so it refuses.
            return Err(AllocatorError::fatal(describe(
                i,
                "CEL expression empty (unsupported selector type?)",
            )));
        };
        compiled.push(
            Selector::compile(&cel.expression)
                .map_err(|e| AllocatorError::fatal(describe(i, &e)))?,
        );
    }
    Ok(compiled)
}
