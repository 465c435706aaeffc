//! The `placer` binary as a child process: killed on drop, its stderr kept in
//! a file that is printed when a test fails.

use super::{BIN, Client, Reply, eventually, free_port, repo_file, sample};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `placer serve --snapshot examples/cluster.yaml` on a free port, killed
/// (and reaped) when dropped; its stderr is printed if the test panics.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its stderr.
    pub log: PathBuf,
    /// The client it was probed with.
    pub client: Client,
}

impl Server {
    /// Starts `placer serve --snapshot examples/cluster.yaml --listen
    /// 127.0.0.1:<free port> <args>` with its log in `dir`, and waits until
    /// `client` gets 200 from `/readyz`. Retries on a port taken meanwhile.
    pub fn start(dir: &Path, args: &[OsString], client: Client) -> Server {
        for attempt in 0.. {
            let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let log = dir.join(format!("placer-{}.log", addr.port()));
            let child = spawn(&log, addr, args);
            let mut server = Server {
                child,
                addr,
                log,
                client: client.clone(),
            };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(text) if text.contains("Address already in use") && attempt < 5 => continue,
                Err(text) => panic!("placer did not become ready:\n{text}"),
            }
        }
        unreachable!()
    }

    /// Starts placer with `--listen 127.0.0.1:0` and finds the port it
    /// bound in its "placer serving" log line.
    pub fn start_on_port_zero(dir: &Path, args: &[OsString], client: Client) -> Server {
        let log = dir.join("placer-port-0.log");
        let child = spawn(&log, ([127, 0, 0, 1], 0).into(), args);
        let mut server = Server {
            child,
            addr: ([127, 0, 0, 1], 0).into(),
            log,
            client,
        };
        server.addr = eventually(
            "the listen address is logged",
            Duration::from_secs(30),
            || {
                let text = server.log_text();
                let line = text.lines().find(|l| l.contains("placer serving"))?;
                let addr = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("listen="))?;
                Some(addr.parse().expect("listen=<socket address>"))
            },
        );
        if let Err(text) = server.wait_ready() {
            panic!("placer did not become ready:\n{text}");
        }
        server
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.client.get(self.addr, "/readyz")
                && r.status == 200
            {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait().expect("child status") {
                return Err(format!(
                    "exited early ({status}); log:\n{}",
                    self.log_text()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("not ready within 30 s; log:\n{}", self.log_text()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything it logged so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` with the probe client; panics on a transport error.
    #[track_caller]
    pub fn get(&self, path: &str) -> Reply {
        self.client
            .get(self.addr, path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `POST path` with the probe client; panics on a transport error.
    #[track_caller]
    pub fn post(&self, path: &str, body: &str) -> Reply {
        self.client
            .post(self.addr, path, body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// The current `/metrics` text.
    #[track_caller]
    pub fn metrics(&self) -> String {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// The value of one metric series (0 when the series is absent yet).
    #[track_caller]
    pub fn metric(&self, series: &str) -> f64 {
        sample(&self.metrics(), series).unwrap_or(0.0)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `signal` (a `libc::SIG*` number).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits");
        // SAFETY: kill(2) on our own child's pid, with a valid signal number.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({signal}): {}", io::Error::last_os_error());
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("child status").is_none()
    }

    /// Waits for the process to exit, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "---- placer log ({}) ----\n{}---- end of placer log ----",
                self.log.display(),
                self.log_text()
            );
        }
    }
}

/// `placer serve --snapshot examples/cluster.yaml --listen <addr> <args>`,
/// its stderr into `log`.
fn spawn(log: &Path, addr: SocketAddr, args: &[OsString]) -> Child {
    let stderr = fs::File::create(log).expect("create the log file");
    Command::new(BIN)
        .arg("serve")
        .arg("--snapshot")
        .arg(repo_file("examples/cluster.yaml"))
        .args(["--listen", &addr.to_string()])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("PLACER_POLICY")
        .env_remove("PLACER_LISTEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("placer starts")
}

/// `--tls-cert-file`, `--tls-key-file` (and `--client-ca-file`) arguments.
pub fn tls_args(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--tls-cert-file".into(),
        cert.into(),
        "--tls-key-file".into(),
        key.into(),
    ];
    if let Some(ca) = client_ca {
        args.push("--client-ca-file".into());
        args.push(ca.into());
    }
    args
}

/// A copy of the repository's `policy.yaml` in `dir` (the watch covers its
/// directory, so never point the server at the work tree's own file).
pub fn copy_policy(dir: &Path) -> PathBuf {
    let path = dir.join("policy.yaml");
    fs::copy(repo_file("policy.yaml"), &path).expect("copy policy.yaml");
    path
}

/// `--policy <path>`.
pub fn policy_args(policy: &Path) -> Vec<OsString> {
    vec!["--policy".into(), policy.into()]
}
