//! Notices when files change, the way Kubernetes changes them.
//!
//! ConfigMap and Secret volumes never write the file itself: they swap a
//! `..data` symlink in the directory. So the *directories* are watched, any
//! event there is a signal, and callers compare contents to decide whether
//! anything really changed. Events are debounced: editors and kubelet write
//! in several steps.

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
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if res.is_ok() {
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

fn directory_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
