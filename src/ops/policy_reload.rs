//! Hot reload of the policy file (design §4): a valid new policy replaces the
//! old one atomically between requests; an invalid one is rejected, logged
//! with its position, counted, and the old policy stays in force.
//! The file is watched, and SIGHUP re-reads it on demand.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::{info, warn};

use crate::ops::Trigger;
use crate::ops::file_watch::FileWatch;
use crate::policy::{self, CompiledPolicy, PolicyError};
use crate::state::AppState;

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
    // Slots are only added, so requests under the old policy keep theirs.
    let keys = new.node_label_keys();
    state
        .cache
        .write()
        .watch_labels(keys.iter().map(String::as_str));
    state.policy.store(Arc::new(new));
    state.cache.write().set_dimensions(&new_dims);
    // Pods that fit nowhere under the old policy may fit under the new one:
    // standalone's queue retries them, and the extender re-checks its parked
    // pods against every node and prompts kube-scheduler for those now freed.
    state
        .cache
        .events()
        .push(crate::cache::events::Observed::wildcard());
    state.cache.changes().everything();
    Ok(())
}

/// Reloads the policy from its file, on a file change or on SIGHUP.
pub struct PolicyReloader {
    path: PathBuf,
    state: AppState,
    /// The text last tried, valid or not: each version is applied (or
    /// rejected and logged) once.
    last: Mutex<Option<String>>,
}

impl PolicyReloader {
    /// A reloader for `path`, whose current text is already in force.
    pub fn new(path: PathBuf, state: AppState) -> Arc<Self> {
        let last = Mutex::new(std::fs::read_to_string(&path).ok());
        Arc::new(PolicyReloader { path, state, last })
    }

    /// Reads the file and applies it. On a file change, a text identical to
    /// the last one tried is skipped; SIGHUP always applies.
    pub fn reload(&self, trigger: Trigger) {
        let file = self.path.display();
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) => {
                // Mid-swap or removed: the next event brings the new file.
                warn!(error = %e, %file, trigger = trigger.as_str(), "cannot read the policy; keeping the current one");
                return;
            }
        };
        let mut last = self.last.lock();
        if trigger == Trigger::FileChange && last.as_deref() == Some(text.as_str()) {
            return;
        }
        match apply(&self.state, &text, &file.to_string()) {
            Ok(()) => info!(%file, trigger = trigger.as_str(), "policy reloaded"),
            Err(e) => {
                warn!(error = %e, trigger = trigger.as_str(), "new policy rejected; the previous policy stays in force")
            }
        }
        *last = Some(text);
    }

    /// Reloads on every change of the file until the process ends.
    pub async fn watch(self: Arc<Self>) {
        let mut watch = match FileWatch::new(&[&self.path]) {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, file = %self.path.display(), "cannot watch the policy; reload on change disabled (SIGHUP still reloads)");
                return;
            }
        };
        while watch.changed().await.is_some() {
            self.reload(Trigger::FileChange);
        }
    }
}
