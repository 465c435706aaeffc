//! The claim hint (kube-scheduler's `isSchedulableAfterClaimChange`): which
//! claim events move a pod DynamicResources rejected.

use crate::cache::events::{ActionType, Change, ClusterEvent, EventResource, Observed, kinds};
use crate::framework::QueueingHint;
use crate::plugins::test_support::hint;

use super::*;

/// Claim `ns/name` going from `old` to `new`.
fn claim_event(name: &str, old: Option<ResourceClaim>, new: Option<ResourceClaim>) -> Observed {
    let action = match (&old, &new) {
        (_, None) => ActionType::DELETE,
        (None, _) => ActionType::ADD,
        _ => ActionType::UPDATE_OTHER,
    };
    Observed {
        event: ClusterEvent::new(EventResource::Kind(kinds::RESOURCE_CLAIM), action),
        change: Change::object(&format!("ns/{name}"), old.map(Arc::new), new.map(Arc::new)),
    }
}

#[test]
fn claim_events_move_a_pod_only_when_they_may_free_or_bring_its_devices() {
    let p = pod(vec![named("mine")]);
    let moves = |event| hint(&DynamicResources::default(), &p, event) == QueueingHint::Queue;
    let other = claim("other");
    let other_allocated = allocated(claim("other"), "gpu-0", Some("n1"));
    // Someone else's claim: allocated, or changed otherwise, frees nothing.
    assert!(!moves(claim_event("other", None, Some(other.clone()))));
    assert!(!moves(claim_event(
        "other",
        Some(other.clone()),
        Some(other_allocated.clone())
    )));
    assert!(
        !moves(claim_event("other", Some(other.clone()), None)),
        "deleted unallocated"
    );
    // ... deallocated or deleted with its allocation, it may free a device.
    assert!(moves(claim_event(
        "other",
        Some(other_allocated.clone()),
        Some(other)
    )));
    assert!(moves(claim_event("other", Some(other_allocated), None)));
    assert!(
        moves(claim_event("other", None, None)),
        "deleted, final state unknown"
    );
    // The pod's own claim: created, or its status changed.
    let mine = claim("mine");
    assert!(moves(claim_event("mine", None, Some(mine.clone()))));
    assert!(
        !moves(claim_event("mine", Some(mine.clone()), Some(mine.clone()))),
        "same status"
    );
    let mut finalized = mine.clone();
    finalized.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
    assert!(
        !moves(claim_event("mine", Some(mine.clone()), Some(finalized))),
        "metadata only"
    );
    let mine_allocated = allocated(mine.clone(), "gpu-1", Some("n1"));
    assert!(moves(claim_event("mine", Some(mine), Some(mine_allocated))));
}
