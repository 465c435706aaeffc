//! Child processes that cannot outlive the test binary, with their output in a log file.
//!
//! Two independent layers make sure no process is left behind:
//! 1. Every child is spawned with `PR_SET_PDEATHSIG(SIGKILL)`. The kernel sends that signal when
//!    the *thread* that forked the child exits, not when the process does; libtest runs each test
//!    on its own thread, and the shared control plane must outlive the test that happened to start
//!    it. So every spawn goes through one dedicated spawner thread that lives until the process
//!    ends: when the test binary ends in any way (normal exit, abort, SIGKILL from a CI timeout),
//!    the kernel kills every child.
//! 2. [`ChildProcess`] stops (SIGTERM, SIGKILL after a grace period) and reaps its child on drop,
//!    which also runs while a failing test unwinds, so per-test processes end with their test.
//!
//! Handles are plain `std::process` children behind a mutex: they do not belong to any tokio
//! runtime, which matters because every `#[tokio::test]` has its own runtime.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// Grace period between SIGTERM and SIGKILL when a process is stopped.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// A spawn request for the spawner thread and the channel its result goes back on.
type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Sends `cmd` to the long-lived spawner thread (see the module docs) and returns the child.
fn spawn_on_spawner_thread(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("e2e-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the e2e spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("e2e spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("e2e spawner thread dropped the request"))?
}

/// A running (or stopped) child process whose stdout and stderr go to a log file.
pub struct ChildProcess {
    name: String,
    pid: u32,
    log: PathBuf,
    child: Mutex<Option<Child>>,
}

impl ChildProcess {
    /// Spawns `cmd` with stdin closed and stdout/stderr appended to `log`, dying with the test
    /// binary. `name` is used in messages.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<Self> {
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("open log {}", log.display()))?;
        writeln!(out, "==> starting {name}: {cmd:?}")?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let parent = libc::pid_t::try_from(std::process::id()).expect("pid fits pid_t");
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = spawn_on_spawner_thread(cmd).with_context(|| format!("spawn {name}"))?;
        Ok(Self {
            name: name.to_owned(),
            pid: child.id(),
            log: log.to_owned(),
            child: Mutex::new(Some(child)),
        })
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The log file receiving stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The exit status if the process has exited (or was stopped), `None` while it runs.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        let mut guard = self.lock();
        match guard.as_mut() {
            Some(child) => child.try_wait().ok().flatten(),
            None => Some(std::os::unix::process::ExitStatusExt::from_raw(0)),
        }
    }

    /// Sends SIGTERM, waits up to `grace`, then SIGKILLs; always reaps. Idempotent.
    pub fn stop(&self, grace: Duration) {
        let Some(mut child) = self.lock().take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            // SAFETY: signalling our own, not yet reaped child (its pid cannot have been reused).
            unsafe { libc::kill(self.pid_t(), libc::SIGTERM) };
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = child.kill();
        let status = child.wait();
        let _ = append_line(&self.log, &format!("==> {} stopped: {status:?}", self.name));
    }

    /// Sends `signal` (a `libc::SIG*` number) if the process still runs; returns at once.
    pub fn signal(&self, signal: libc::c_int) {
        let mut guard = self.lock();
        if let Some(child) = guard.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            // SAFETY: signalling our own, not yet reaped child (its pid cannot have been reused).
            unsafe { libc::kill(self.pid_t(), signal) };
        }
    }

    /// SIGKILLs immediately (a crash, as seen from outside) and reaps. Idempotent.
    pub fn kill(&self) {
        self.stop(Duration::ZERO);
    }

    fn pid_t(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.pid).expect("pid fits pid_t")
    }

    /// The last `lines` lines of the log, framed with the process name and log path.
    pub fn log_tail(&self, lines: usize) -> String {
        format_log_tail(&self.name, &self.log, lines)
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.stop(STOP_GRACE);
    }
}

fn append_line(path: &Path, line: &str) -> io::Result<()> {
    let mut f = OpenOptions::new().append(true).open(path)?;
    writeln!(f, "{line}")
}

/// The last `lines` lines of the file at `path`, framed with `name` and the path.
pub fn format_log_tail(name: &str, path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "----- last {lines} lines of {name} ({}) -----",
        path.display()
    );
    match text {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            for line in &all[all.len().saturating_sub(lines)..] {
                let _ = writeln!(out, "{line}");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "<cannot read: {e}>");
        }
    }
    let _ = writeln!(out, "----- end of {name} -----");
    out
}
