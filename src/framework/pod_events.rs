//! Events a plugin reports about the pod it is binding. kube-scheduler's plugins reach the
//! framework's event recorder (DynamicResources' PreBind reports `BindingConditionsPending`
//! before it waits for a driver); placer's binding cycle puts a [`PodEventSink`] in the cycle
//! state, so plugins need no client of their own for events and the scheduling cycle, which
//! must do no I/O, has none.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::objects::PodInfo;

/// Publishes events about pods (in standalone mode: as the profile's scheduler, with
/// kube-scheduler's series).
pub trait PodEvents: Send + Sync {
    /// A `Normal` event about `pod` with `reason`, `action` and `note`. Publishing is best
    /// effort: a failure is logged, never the plugin's.
    fn normal<'a>(
        &'a self,
        pod: &'a PodInfo,
        reason: &'a str,
        action: &'a str,
        note: String,
    ) -> BoxFuture<'a, ()>;
}

/// The binding cycle's event sink, in its cycle state from PreBind on.
#[derive(Clone)]
pub struct PodEventSink(pub Arc<dyn PodEvents>);
