//! What `/bind` checks before it sends a Binding (design §3.1, "Bind"):
//! the policy says whose pods this extender binds (`extender.schedulerNames`,
//! or any scheduler's by `extender.bindAnyScheduler` / `--bind-any-scheduler`:
//! otherwise none, so a placer that reaches the API server with
//! `pods/binding create` is not a way around another scheduler's rules);
//! the node is one placer knows; and the pod exists, is not bound (or is
//! bound to that very node already: kube-scheduler's retry after a lost
//! reply), is not being deleted or finished, has the UID kube-scheduler
//! named (the handler has refused a request without one), and belongs to a
//! scheduler this extender serves. Anything else is refused with the reason
//! and never reaches the API server.
//!
//! Where the pod is looked up, in order:
//!
//! 1. the cache of assigned pods (a bound pod, no API call);
//! 2. the store of unscheduled pods, when a watch feeds it
//!    (`--explain-pods`, on by default in `--mode both`), no API call;
//! 3. otherwise one GET of the pod by name. The default extender does not
//!    watch unscheduled pods (about 30 MiB per 2,000 pending pods, README
//!    "Why is my pod pending?"), and kube-scheduler calls `/bind` once per
//!    pod, right before the Binding that is an API call anyway; a GET also
//!    answers from the API server's own state, so a pod kube-scheduler
//!    saw before placer's watch did is not refused. The other verbs never
//!    make an API call.

use std::sync::Arc;

use crate::modes::binder::Binder;
use crate::objects::PodInfo;
use crate::protocol::ExtenderBindingArgs;

use super::ExtenderState;

/// Why `/bind` refused a pod (the text goes into `Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindRefusal {
    /// The policy names no scheduler whose pods this extender binds, and
    /// nothing says any scheduler's will do.
    #[error(
        "/bind binds only pods of the schedulers listed in the policy's extender.schedulerNames, and it lists none: list kube-scheduler's profiles there, or bind any scheduler's pods with --bind-any-scheduler (extender.bindAnyScheduler: true); pod {pod} not bound"
    )]
    NoSchedulerNames {
        /// `namespace/name`.
        pod: String,
    },
    /// The node is not in placer's cache.
    #[error("node {node} is not in placer's cache; pod {pod} not bound")]
    NodeUnknown {
        /// The node asked for.
        node: String,
        /// `namespace/name`.
        pod: String,
    },
    /// No such pod.
    #[error("pod {pod} does not exist; not bound")]
    PodNotFound {
        /// `namespace/name`.
        pod: String,
    },
    /// The pod by that name has another UID (deleted and re-created).
    #[error("pod {pod} has uid {actual}, not {asked}; not bound")]
    UidMismatch {
        /// `namespace/name`.
        pod: String,
        /// The UID kube-scheduler named.
        asked: String,
        /// The pod's UID.
        actual: String,
    },
    /// Bound to another node already.
    #[error("pod {pod} is already bound to node {bound}, not {node}")]
    AlreadyBound {
        /// `namespace/name`.
        pod: String,
        /// Where it is bound.
        bound: String,
        /// The node asked for.
        node: String,
    },
    /// `deletionTimestamp` is set.
    #[error("pod {pod} is being deleted; not bound")]
    Terminating {
        /// `namespace/name`.
        pod: String,
    },
    /// Succeeded or Failed.
    #[error("pod {pod} has finished ({phase}); not bound")]
    Finished {
        /// `namespace/name`.
        pod: String,
        /// Its phase.
        phase: String,
    },
    /// A pod placer's own standalone scheduling binds itself.
    #[error(
        "pod {pod} has schedulerName {scheduler:?}, a profile placer schedules itself (--mode {mode}); /bind does not bind it"
    )]
    OwnScheduler {
        /// `namespace/name`.
        pod: String,
        /// Its `schedulerName`.
        scheduler: String,
        /// standalone or both.
        mode: &'static str,
    },
    /// A pod of a scheduler this extender does not serve.
    #[error(
        "pod {pod} has schedulerName {scheduler:?}, not one of the policy's extender.schedulerNames {allowed:?}; not bound"
    )]
    OtherScheduler {
        /// `namespace/name`.
        pod: String,
        /// Its `schedulerName`.
        scheduler: String,
        /// The policy's list.
        allowed: Vec<String>,
    },
    /// The pod could not be looked up.
    #[error("looking up pod {pod} failed: {reason}; not bound")]
    LookupFailed {
        /// `namespace/name`.
        pod: String,
        /// The API server's message, or the transport error.
        reason: String,
    },
}

impl BindRefusal {
    /// The `reason` label of `placer_bind_refusals_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            BindRefusal::NoSchedulerNames { .. } => "no_scheduler_names",
            BindRefusal::NodeUnknown { .. } => "node_unknown",
            BindRefusal::PodNotFound { .. } => "pod_not_found",
            BindRefusal::UidMismatch { .. } => "uid_mismatch",
            BindRefusal::AlreadyBound { .. } => "already_bound",
            BindRefusal::Terminating { .. } => "terminating",
            BindRefusal::Finished { .. } => "finished",
            BindRefusal::OwnScheduler { .. } => "own_scheduler",
            BindRefusal::OtherScheduler { .. } => "other_scheduler",
            BindRefusal::LookupFailed { .. } => "lookup_failed",
        }
    }
}

/// The `reason` label of `placer_bind_refusals_total` for a request
/// without `PodUID`, which the handler answers with a 400 before any check.
pub const MISSING_UID: &str = "missing_uid";

/// What to do with a pod that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send the Binding with the pod's UID as its precondition.
    Bind,
    /// Bound to the asked node already (a retry): answer success, send nothing.
    AlreadyDone,
}

/// Checks `args` against what placer knows of the node and the pod.
pub async fn check(
    state: &ExtenderState,
    binder: &Binder,
    args: &ExtenderBindingArgs,
) -> Result<Verdict, BindRefusal> {
    let pod_key = format!("{}/{}", args.pod_namespace, args.pod_name);
    {
        let policy = state.policy.load();
        let extender = &policy.policy().extender;
        if extender.scheduler_names.is_none()
            && !extender.bind_any_scheduler
            && !state.settings.bind_any_scheduler
        {
            return Err(BindRefusal::NoSchedulerNames { pod: pod_key });
        }
    }
    if state.cache.read().node(&args.node).is_none() {
        return Err(BindRefusal::NodeUnknown {
            node: args.node.clone(),
            pod: pod_key,
        });
    }
    let pod = match known(state, args) {
        Some(pod) => pod,
        None => match binder.pod(&args.pod_namespace, &args.pod_name).await {
            Ok(Some(pod)) => Arc::new(PodInfo::from(&pod)),
            Ok(None) => return Err(BindRefusal::PodNotFound { pod: pod_key }),
            Err(reason) => {
                return Err(BindRefusal::LookupFailed {
                    pod: pod_key,
                    reason,
                });
            }
        },
    };
    judge(state, args, &pod, pod_key)
}

/// The pod from placer's own stores, when they hold it with the UID asked for.
fn known(state: &ExtenderState, args: &ExtenderBindingArgs) -> Option<Arc<PodInfo>> {
    let same = |p: &PodInfo| p.uid == args.pod_uid;
    let assigned = state
        .cache
        .read()
        .shared_pod(&args.pod_namespace, &args.pod_name)
        .filter(|p| same(p))
        .cloned();
    assigned.or_else(|| {
        let pending = state.pending.as_ref().filter(|p| p.is_synced())?;
        pending
            .get(&args.pod_namespace, &args.pod_name)
            .filter(|p| same(p))
    })
}

fn judge(
    state: &ExtenderState,
    args: &ExtenderBindingArgs,
    pod: &PodInfo,
    pod_key: String,
) -> Result<Verdict, BindRefusal> {
    if pod.uid != args.pod_uid {
        return Err(BindRefusal::UidMismatch {
            pod: pod_key,
            asked: args.pod_uid.clone(),
            actual: pod.uid.clone(),
        });
    }
    if let Some(bound) = &pod.node_name {
        if *bound == args.node {
            return Ok(Verdict::AlreadyDone);
        }
        return Err(BindRefusal::AlreadyBound {
            pod: pod_key,
            bound: bound.clone(),
            node: args.node.clone(),
        });
    }
    if pod.deleting {
        return Err(BindRefusal::Terminating { pod: pod_key });
    }
    if pod.is_terminal() {
        return Err(BindRefusal::Finished {
            pod: pod_key,
            phase: pod.phase.clone().unwrap_or_default(),
        });
    }
    let policy = state.policy.load();
    if let Some(mode) = state.settings.own_scheduling
        && policy.profile(&pod.scheduler_name).is_some()
    {
        return Err(BindRefusal::OwnScheduler {
            pod: pod_key,
            scheduler: pod.scheduler_name.clone(),
            mode,
        });
    }
    if let Some(allowed) = &policy.policy().extender.scheduler_names
        && !allowed.contains(&pod.scheduler_name)
    {
        return Err(BindRefusal::OtherScheduler {
            pod: pod_key,
            scheduler: pod.scheduler_name.clone(),
            allowed: allowed.clone(),
        });
    }
    Ok(Verdict::Bind)
}
