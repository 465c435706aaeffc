//! A pod's effective request, as `k8s.io/component-helpers/resource`'s
//! `PodRequests` computes it with the options kube-scheduler v1.37 passes:
//! pod-level `spec.resources` (PodLevelResources, on), the in-place-resize
//! status (`status.allocatedResources`, container `status.resources`;
//! InPlacePodVerticalScaling and InPlacePodLevelResourcesVerticalScaling,
//! on) for pods already counted on a node, and the scoring defaults for a
//! missing cpu or memory request.
//!
//! Four numbers come out of one pod, because kube-scheduler asks four
//! questions with different options (see [`Requests`]); for a pod without
//! pod-level resources and without resize status they are the familiar
//! container sum, and the same sum with 100m/200Mi for what is missing.

use crate::objects::resources::{
    DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, RequestList, Resources,
};

/// One container's resource lists, with its status's (matched by name, as
/// `findContainerStatus` does: container statuses first, then init ones).
#[derive(Debug, Clone, Default)]
pub(super) struct ContainerResources {
    /// `resources.requests`.
    pub requests: RequestList,
    /// The status's `allocatedResources`, when the status has the map.
    pub allocated: Option<RequestList>,
    /// The status's `resources.requests`, when the status has them.
    pub actuated: Option<RequestList>,
    /// An init container with `restartPolicy: Always`.
    pub sidecar: bool,
}

/// What of a pod its request is computed from.
#[derive(Debug, Clone, Default)]
pub(super) struct PodResources {
    pub containers: Vec<ContainerResources>,
    pub init_containers: Vec<ContainerResources>,
    /// `spec.overhead`.
    pub overhead: Resources,
    /// `spec.resources.requests`.
    pub pod_requests: Option<RequestList>,
    /// `status.allocatedResources`.
    pub pod_allocated: Option<RequestList>,
    /// `status.resources` is set.
    pub pod_status_resources: bool,
    /// `status.resources.requests`.
    pub pod_actuated: Option<RequestList>,
    /// The `PodResizePending` condition says `Infeasible`.
    pub resize_infeasible: bool,
}

/// The four requests kube-scheduler computes for a pod.
#[derive(Debug, Clone, Default)]
pub(super) struct Requests {
    /// The spec alone: what NodeResourcesFit's filter asks of a node for an
    /// incoming pod (`computePodResourceRequest`).
    pub spec: Resources,
    /// With the resize status: what the pod holds on its node
    /// (`PodInfo.CalculateResource`), and what BalancedAllocation scores.
    pub counted: Resources,
    /// `counted` with cpu and memory at their non-zero values
    /// (`CalculateResource`'s `Non0CPU`/`Non0Mem`, summed per node).
    pub non_zero: Resources,
    /// What NodeResourcesFit scores the incoming pod with
    /// (`calculatePodResourceRequest` with the options Fit's scorer is
    /// built with: every container's missing cpu and memory at the defaults,
    /// neither the pod-level requests nor the status; kube-scheduler v1.37's
    /// `NewFit` sets those feature flags on the plugin, not on its scorer).
    pub scoring: Resources,
}

/// The missing-request defaults to apply per container (`NonMissingContainerRequests`).
#[derive(Clone, Copy, Default)]
struct NonMissing {
    cpu: bool,
    memory: bool,
}

impl NonMissing {
    const BOTH: NonMissing = NonMissing {
        cpu: true,
        memory: true,
    };

    /// `applyNonMissing`: a copy of `list` with the absent defaults added.
    fn apply(self, list: Option<&RequestList>) -> RequestList {
        let mut r = list.cloned().unwrap_or_default();
        if self.cpu && !r.has_cpu {
            r.values.milli_cpu += DEFAULT_MILLI_CPU_REQUEST;
            r.has_cpu = true;
        }
        if self.memory && !r.has_memory {
            r.values.memory += DEFAULT_MEMORY_REQUEST;
            r.has_memory = true;
        }
        r
    }
}

/// Which of a container's lists a sum reads.
#[derive(Clone, Copy)]
enum Source {
    Spec,
    /// `containerAllocatedRequests`.
    Allocated,
    /// `containerActuatedRequests`.
    Actuated,
}

/// The `PodResourcesOptions` kube-scheduler varies.
#[derive(Clone, Copy)]
struct Options {
    use_status: bool,
    non_missing: NonMissing,
    /// `!SkipPodLevelResources`.
    pod_level: bool,
}

/// `IsSupportedPodLevelResource`.
fn pod_level_supported(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

impl PodResources {
    /// All four requests.
    pub(super) fn requests(&self) -> Requests {
        let spec = self.pod_requests(Options {
            use_status: false,
            non_missing: NonMissing::default(),
            pod_level: true,
        });
        let status = |non_missing| {
            self.pod_requests(Options {
                use_status: true,
                non_missing,
                pod_level: true,
            })
        };
        let counted = status(NonMissing::default());
        // `getNonMissingContainerRequests`: with pod-level requests only what
        // neither level names gets a default.
        let non_missing = if self.pod_level_requests_set() {
            NonMissing {
                cpu: !counted.has_cpu,
                memory: !counted.has_memory,
            }
        } else {
            NonMissing::BOTH
        };
        let mut non_zero = counted.values.clone();
        if non_missing.cpu || non_missing.memory {
            let d = status(non_missing).values;
            (non_zero.milli_cpu, non_zero.memory) = (d.milli_cpu, d.memory);
        }
        let fit_scored = self.pod_requests(Options {
            use_status: false,
            non_missing: NonMissing::BOTH,
            pod_level: false,
        });
        Requests {
            spec: spec.values,
            non_zero,
            scoring: fit_scored.values,
            counted: counted.values,
        }
    }

    /// `IsPodLevelRequestsSet`.
    fn pod_level_requests_set(&self) -> bool {
        self.pod_requests.as_ref().is_some_and(|r| {
            r.has_cpu || r.has_memory || r.values.scalar.keys().any(|k| pod_level_supported(k))
        })
    }

    /// `PodRequests`.
    fn pod_requests(&self, opts: Options) -> RequestList {
        let mut r = self.aggregate_container_requests(opts);
        let pod_level = opts.pod_level && self.pod_level_requests_set();
        if let Some(spec) = self.pod_requests.as_ref().filter(|_| pod_level) {
            let effective = if opts.use_status && self.pod_status_resources {
                // `effectivePodLevelResources`: the largest of spec (unless
                // the resize is infeasible), actuated and allocated.
                let mut e = if self.resize_infeasible {
                    RequestList::default()
                } else {
                    spec.clone()
                };
                for s in [&self.pod_actuated, &self.pod_allocated]
                    .into_iter()
                    .flatten()
                {
                    e.max_with(s);
                }
                e
            } else {
                spec.clone()
            };
            apply_pod_level(&mut r, &effective);
        }
        r.values.add(&self.overhead);
        r
    }

    /// `AggregateContainerRequests`.
    fn aggregate_container_requests(&self, opts: Options) -> RequestList {
        let spec = self.aggregate(opts, Source::Spec);
        if !opts.use_status {
            return spec;
        }
        let (allocated, actuated) = match (&self.pod_allocated, &self.pod_actuated) {
            // Pod-level status maps already hold the sum over containers.
            (Some(allocated), Some(actuated)) if self.pod_status_resources => {
                (allocated.clone(), actuated.clone())
            }
            _ => (
                self.aggregate(opts, Source::Allocated),
                self.aggregate(opts, Source::Actuated),
            ),
        };
        let mut r = if self.resize_infeasible {
            RequestList::default()
        } else {
            spec
        };
        r.max_with(&actuated);
        r.max_with(&allocated);
        r
    }

    /// `aggregateContainerResourcesByFn`: regular containers and sidecars
    /// run together; each classic init container runs next to the sidecars
    /// started before it; the larger of the two wins.
    fn aggregate(&self, opts: Options, source: Source) -> RequestList {
        let infeasible = opts.use_status && self.resize_infeasible;
        let list = |c: &ContainerResources| {
            let chosen = match source {
                Source::Spec => Some(&c.requests),
                Source::Allocated => c
                    .allocated
                    .as_ref()
                    .or((!infeasible).then_some(&c.requests)),
                Source::Actuated => c
                    .actuated
                    .as_ref()
                    .or(c.allocated.as_ref())
                    .or((!infeasible).then_some(&c.requests)),
            };
            opts.non_missing.apply(chosen)
        };
        let mut result = RequestList::default();
        for c in &self.containers {
            result.add(&list(c));
        }
        let mut sidecars = RequestList::default();
        let mut init_peak = RequestList::default();
        for c in &self.init_containers {
            let own = list(c);
            if c.sidecar {
                result.add(&own);
                sidecars.add(&own);
                init_peak.max_with(&sidecars);
            } else {
                let mut combined = own;
                combined.add(&sidecars);
                init_peak.max_with(&combined);
            }
        }
        result.max_with(&init_peak);
        result
    }
}

/// `applyPodLevelResources`: the supported pod-level values replace the
/// containers' sum.
fn apply_pod_level(result: &mut RequestList, pod_level: &RequestList) {
    if pod_level.has_cpu {
        result.values.milli_cpu = pod_level.values.milli_cpu;
        result.has_cpu = true;
    }
    if pod_level.has_memory {
        result.values.memory = pod_level.values.memory;
        result.has_memory = true;
    }
    for (name, &v) in &pod_level.values.scalar {
        if pod_level_supported(name) {
            result.values.scalar.insert(name.clone(), v);
        }
    }
}

#[cfg(test)]
mod tests;
