//! Shared helpers: the `placer` binary as a child process ([`server`]), plain
//! and TLS HTTP/1.1 clients ([`client`]), certificates made with `rcgen`
//! ([`certs`]), file swaps the way editors and kubelet do them ([`files`]),
//! bounded polling, and metric samples and request bodies ([`bodies`]).

mod bodies;
mod certs;
mod client;
mod files;
mod server;

pub use bodies::*;
pub use certs::*;
pub use client::*;
pub use files::*;
pub use server::*;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_placer");

/// How long file-watch driven changes may take to show (bounded polling).
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(15);

/// A file of the repository.
pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port")
        .port()
}

/// Polls `f` every 50 ms until it returns `Some`, at most `timeout`.
#[track_caller]
pub fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The commit the binary under test reports (`build.rs`): what git says HEAD
/// is, or "unknown" outside a git work tree; `PLACER_GIT_COMMIT` wins, as in
/// the image build.
pub fn built_commit() -> String {
    if let Ok(commit) = std::env::var("PLACER_GIT_COMMIT")
        && !commit.trim().is_empty()
    {
        return commit.trim().to_owned();
    }
    std::process::Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
