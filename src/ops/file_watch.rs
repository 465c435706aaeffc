//! Notices when files change, the way Kubernetes changes them.
//!
//! ConfigMap and Secret volumes never write the file itself: they swap a
//! `..data` symlink in the directory. So the *directories* are watched, and
//! an event naming a watched file or one of kubelet's `..` entries is a
//! signal; callers compare contents to decide whether anything really
//! changed. Events about other files in the directory are dropped in the
//! watcher's own thread: a log written beside the policy (the scale
//! harness's kwok log, a thousand writes a second) would otherwise wake the
//! reload task and reread the file five times a second. Events are
//! debounced: editors and kubelet write in several steps.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// How long to wait for a burst of events to settle.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// A running watch; dropping it stops the notifications.
pub struct FileWatch {
    _watcher: RecommendedWatcher,
    events: mpsc::Receiver<()>,
}

impl FileWatch {
    /// Watches the directories holding `files`.
    pub fn new(files: &[&Path]) -> notify::Result<Self> {
        let (tx, events) = mpsc::channel(16);
        let names: Vec<OsString> = files
            .iter()
            .filter_map(|f| f.file_name().map(OsString::from))
            .collect();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if res.is_ok_and(|event| concerns(&event, &names)) {
                    // A full channel already holds a pending signal: dropping is right.
                    let _ = tx.try_send(());
                }
            })?;
        let mut dirs: Vec<PathBuf> = files.iter().map(|f| directory_of(f)).collect();
        dirs.sort();
        dirs.dedup();
        for dir in &dirs {
            watcher.watch(dir, RecursiveMode::NonRecursive)?;
        }
        Ok(FileWatch {
            _watcher: watcher,
            events,
        })
    }

    /// Waits for the next settled burst of changes; `None` if the watch died.
    pub async fn changed(&mut self) -> Option<()> {
        self.events.recv().await?;
        tokio::time::sleep(DEBOUNCE).await;
        while self.events.try_recv().is_ok() {}
        Some(())
    }
}

/// Whether `event` may have changed one of the files called `names`: it
/// names one of them or a kubelet `..` entry (`..data`, `..data_tmp`, a
/// `..2026_12_05_…` directory), or it names no file at all (the watcher lost
/// events and asks for a rescan).
fn concerns(event: &notify::Event, names: &[OsString]) -> bool {
    event.need_rescan()
        || event.paths.is_empty()
        || event.paths.iter().any(|path| {
            path.file_name().is_some_and(|name| {
                names.iter().any(|n| n == name) || name.as_encoded_bytes().starts_with(b"..")
            })
        })
}

fn directory_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Whether a signal arrives within `wait` (the debounce included).
    async fn signalled(watch: &mut FileWatch, wait: Duration) -> bool {
        tokio::time::timeout(wait, watch.changed()).await.is_ok()
    }

    #[tokio::test]
    async fn only_the_watched_file_and_kubelet_entries_signal() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, "a").unwrap();
        let mut watch = FileWatch::new(&[&policy]).unwrap();

        // A log beside the policy, written and rewritten: no signal.
        let log = dir.path().join("kwok.log");
        for i in 0..20 {
            std::fs::write(&log, format!("line {i}")).unwrap();
        }
        assert!(
            !signalled(&mut watch, Duration::from_millis(800)).await,
            "writes to another file of the directory must not signal"
        );

        std::fs::write(&policy, "b").unwrap();
        assert!(signalled(&mut watch, Duration::from_secs(5)).await);

        // kubelet's atomic writer: a new `..data` link swapped in by rename.
        std::os::unix::fs::symlink("elsewhere", dir.path().join("..data_tmp")).unwrap();
        std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
        assert!(signalled(&mut watch, Duration::from_secs(5)).await);
    }
}
