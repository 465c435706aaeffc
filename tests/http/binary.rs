//! The real `placer` binary: `serve --snapshot` answering over TCP,
//! `check-policy` on a bad file, `--version`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{PodJson, names_args};

const BIN: &str = env!("CARGO_BIN_EXE_placer");

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A child process killed (and reaped) when dropped, so a failing test
/// leaves no server behind.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port")
        .port()
}

/// One HTTP/1.1 exchange over a fresh connection: (status, body).
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: Go-http-client/1.1\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nAccept-Encoding: gzip\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("no header end: {raw}"),
        )
    })?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, head.to_string()))?;
    let lower = head.to_ascii_lowercase();
    assert!(
        !lower.contains("transfer-encoding: chunked"),
        "answers carry a Content-Length: {head}"
    );
    Ok((status, body.to_string()))
}

#[test]
fn serve_with_a_snapshot_answers_filter_over_tcp() {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let child = Command::new(BIN)
        .args(["serve", "--policy"])
        .arg(repo_file("policy.yaml"))
        .arg("--snapshot")
        .arg(repo_file("examples/cluster.yaml"))
        .args(["--listen", &addr.to_string()])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("placer starts");
    let mut server = KillOnDrop(child);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((200, body)) = http(addr, "GET", "/readyz", "") {
            assert_eq!(body, r#"{"status":"ready"}"#);
            break;
        }
        if let Some(status) = server.0.try_wait().expect("child status") {
            panic!("placer exited early: {status}");
        }
        assert!(Instant::now() < deadline, "placer not ready within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }

    // examples/cluster.yaml: only node-a1 and node-c1 carry hw-encrypt.
    let pod = PodJson::new("api-1").latency_sensitive().needs_hw_encrypt();
    let body = names_args(&pod, &["node-a1", "node-a2", "node-c1", "node-x", "ghost"]);
    let (status, answer) = http(addr, "POST", "/filter", &body).expect("filter over TCP");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        r#"{"Nodes":null,"NodeNames":["node-a1","node-c1"],"FailedNodes":{"ghost":"node not found in placer cache"},"FailedAndUnresolvableNodes":{"node-a2":"node(s) lack hardware encryption","node-x":"node(s) lack hardware encryption"},"Error":""}"#
    );
    let (status, answer) =
        http(addr, "POST", "/filter", r#"{"NodeNames":5}"#).expect("bad filter over TCP");
    assert_eq!(
        (status, answer.as_str()),
        (
            400,
            r#"{"Error":"invalid JSON at line 1 column 14, field NodeNames: invalid type: integer `5`, expected a sequence"}"#
        )
    );
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("placer runs")
}

#[test]
fn check_policy_reports_file_line_column_and_fails() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(repo_file("policy.yaml")).expect("policy.yaml");
    let (line, column) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("SamePriority").map(|c| (i + 1, c + 1)))
        .expect("policy.yaml sets countPods: SamePriority");
    std::fs::write(
        &path,
        text.replace("countPods: SamePriority", "countPods: Same"),
    )
    .expect("write bad policy");
    let path = path.to_str().expect("UTF-8 path");

    let out = run(&["check-policy", path]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: {path}:{line}:{column}: profiles[0].plugins[1].args.countPods: unknown variant `Same`, expected one of `SamePriority`, `All`, `MatchLabelKeys`\n"
        )
    );
}

#[test]
fn check_policy_prints_the_effective_policy() {
    let out = run(&[
        "check-policy",
        repo_file("policy.yaml").to_str().expect("UTF-8"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("unknownTierScore: 10"), "{printed}");
}

#[test]
fn version_prints_name_and_version() {
    let out = run(&["--version"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("placer {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_missing_file_names_its_os_error_once() {
    let missing = "/nonexistent/placer-missing.yaml";
    let not_found = "No such file or directory (os error 2)";
    let out = run(&["check-policy", missing]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: {missing}: {not_found}\n")
    );

    let policy = repo_file("policy.yaml");
    let policy = policy.to_str().expect("UTF-8 path");
    for source in ["--snapshot", "--kubeconfig"] {
        let out = run(&[
            "serve",
            "--policy",
            policy,
            source,
            missing,
            "--listen",
            "127.0.0.1:0",
        ]);
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.matches(not_found).count(), 1, "{source}: {stderr}");
        assert!(
            stderr.ends_with(&format!("{not_found}\n")),
            "{source}: {stderr}"
        );
    }
}
