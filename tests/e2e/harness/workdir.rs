//! Where the harness keeps files, and how they disappear again.
//!
//! Layout: `$TMPDIR/placer-e2e/run-<pid>-<nanos>/` per test-binary run, holding `cluster/` (the
//! shared control plane: PKI, etcd data, kubeconfig, logs) and one [`TestDir`] per test (scheduler
//! config, policy file, process logs).
//!
//! Removal happens on three paths, so no failure mode leaks directories for long:
//! - a [`TestDir`] is removed when it is dropped, which also happens while a failing test unwinds;
//! - the run directory cannot be dropped (statics never are), so an `atexit` hook removes it after
//!   the hooks registered with [`at_exit`] have stopped the shared processes; libtest returns from
//!   `main` or calls `process::exit`, and both run `atexit` hooks;
//! - a run killed by a signal (CI timeout, Ctrl-C) runs no hooks, so every run holds an exclusive
//!   `flock` on `run-*/.lock` for its lifetime and each new run deletes the run directories whose
//!   lock it can take (their owner is gone; the kernel drops the lock with the process).
//!
//! Set `PLACER_E2E_KEEP=1` to keep everything (the path is printed at exit) for post-mortems; such
//! a run directory is marked with `.keep` and left alone by later runs until you delete it.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// A hook run once at process exit, see [`at_exit`].
type ExitHook = Box<dyn FnOnce() + Send>;

static RUN_DIR: OnceLock<RunDir> = OnceLock::new();
static EXIT_HOOKS: Mutex<Vec<ExitHook>> = Mutex::new(Vec::new());

/// The per-run directory and the open lock file that marks it as in use.
struct RunDir {
    path: PathBuf,
    _lock: File,
}

/// True when `PLACER_E2E_KEEP` asks to keep temp dirs and logs after the run.
pub fn keep_files() -> bool {
    std::env::var_os("PLACER_E2E_KEEP").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The root shared by all runs: `$TMPDIR/placer-e2e`.
fn root() -> PathBuf {
    std::env::temp_dir().join("placer-e2e")
}

/// This run's directory, created (after removing stale ones) on first use.
pub fn run_dir() -> &'static Path {
    &RUN_DIR
        .get_or_init(|| {
            let root = root();
            fs::create_dir_all(&root).expect("create e2e temp root");
            remove_stale_runs(&root);
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let path = root.join(format!("run-{}-{nanos}", std::process::id()));
            fs::create_dir_all(&path).expect("create e2e run dir");
            let lock = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path.join(".lock"))
                .expect("create run lock file");
            assert!(try_lock(&lock), "fresh run lock is already held");
            // SAFETY: registering a plain `extern "C"` function without captured state.
            unsafe { libc::atexit(run_exit_hooks) };
            let remove = path.clone();
            at_exit(move || {
                if keep_files() {
                    let _ = File::create(remove.join(".keep"));
                    eprintln!("placer-e2e: kept {}", remove.display());
                } else {
                    let _ = fs::remove_dir_all(&remove);
                }
            });
            RunDir { path, _lock: lock }
        })
        .path
}

/// Registers `hook` to run at process exit. Hooks run last-registered first, so things created
/// later (processes) are torn down before things created earlier (the directory they write to).
pub fn at_exit(hook: impl FnOnce() + Send + 'static) {
    EXIT_HOOKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Box::new(hook));
}

extern "C" fn run_exit_hooks() {
    // `try_lock`: never block process exit on a lock some dying thread might hold.
    let Ok(mut hooks) = EXIT_HOOKS.try_lock() else {
        return;
    };
    while let Some(hook) = hooks.pop() {
        hook();
    }
}

/// Takes an exclusive, non-blocking `flock` on `file`; false when another process holds it.
fn try_lock(file: &File) -> bool {
    // SAFETY: flock on a file descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Deletes `run-*` directories of earlier runs that died without running their exit hooks.
fn remove_stale_runs(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_name().to_string_lossy().starts_with("run-") || path.join(".keep").exists() {
            continue;
        }
        let stale = match File::open(path.join(".lock")) {
            Ok(lock) => try_lock(&lock),
            // No lock file: a run that died while creating its directory, or a foreign
            // directory; only remove it once it is clearly not being set up right now.
            Err(_) => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > Duration::from_mins(10)),
        };
        if stale {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// A per-test directory under the run directory, removed on drop unless [`keep_files`].
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    /// Creates `<run dir>/<name>`; `name` must be unique within the run (use the test's run id).
    pub fn new(name: &str) -> std::io::Result<Self> {
        let path = run_dir().join(name);
        fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !keep_files() {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}
