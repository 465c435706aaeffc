//! Hot reload of the policy file (SPEC §4): a valid new policy replaces the
//! old one atomically between requests; an invalid one is rejected, logged
//! with its position, counted, and the old policy stays in force.

use std::path::PathBuf;
use std::sync::Arc;

use tracing::{info, warn};

use crate::modes::extender::AppState;
use crate::ops::file_watch::FileWatch;
use crate::policy::{self, CompiledPolicy, PolicyError};

/// Validates `text` and, if valid, puts it in force.
///
/// The zone index is first widened to the union of old and new dimensions so
/// requests running under either policy find their counts, then narrowed.
pub fn apply(state: &AppState, text: &str, file: &str) -> Result<(), PolicyError> {
    let result = policy::parse(text, file);
    state.metrics.policy_reloaded(result.is_ok());
    let new = CompiledPolicy::observed(result?, state.metrics.clone());
    let new_dims = new.count_dimensions();
    let mut union = state.policy.load().count_dimensions();
    union.extend(
        new_dims
            .iter()
            .filter(|d| !union.contains(d))
            .cloned()
            .collect::<Vec<_>>(),
    );
    state.cache.write().set_dimensions(&union);
    state.policy.store(Arc::new(new));
    state.cache.write().set_dimensions(&new_dims);
    // Pods that fit nowhere under the old policy may fit under the new one:
    // standalone's queue retries them, and the extender re-checks its parked
    // pods against every node and prompts kube-scheduler for those now freed.
    state.cache.note_event();
    state.cache.changes().everything();
    Ok(())
}

/// Watches `path` and applies every changed version until the process ends.
pub async fn run(path: PathBuf, state: AppState) {
    let mut watch = match FileWatch::new(&[&path]) {
        Ok(w) => w,
        Err(e) => {
            warn!(error = %e, file = %path.display(), "cannot watch the policy; reload disabled");
            return;
        }
    };
    let mut last = std::fs::read_to_string(&path).ok();
    while watch.changed().await.is_some() {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                // Mid-swap or removed: the next event brings the new file.
                warn!(error = %e, file = %path.display(), "cannot read the policy; keeping the current one");
                continue;
            }
        };
        if last.as_deref() == Some(text.as_str()) {
            continue;
        }
        match apply(&state, &text, &path.display().to_string()) {
            Ok(()) => info!(file = %path.display(), "policy reloaded"),
            Err(e) => warn!(error = %e, "new policy rejected; the previous policy stays in force"),
        }
        last = Some(text);
    }
}
