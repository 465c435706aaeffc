//! The listener's smaller contracts: the bound address is logged for
//! `--listen :0`, bad `--path-prefix` values are usage errors, unknown
//! paths and methods answer JSON, refused TLS handshakes are logged with the
//! peer and counted.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    BIN, Ca, Client, Server, copy_policy, eventually, policy_args, repo_file, tls_args,
};

#[test]
fn listen_on_port_zero_logs_the_bound_port() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_on_port_zero(
        dir.path(),
        &policy_args(&copy_policy(dir.path())),
        Client::Plain,
    );
    assert_ne!(server.addr.port(), 0, "{}", server.log_text());
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn bad_path_prefixes_are_usage_errors_naming_the_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = copy_policy(dir.path());
    for prefix in ["x", "/*rest", "/{x}", "/a//b", "/a b"] {
        let log = dir.path().join("stderr.log");
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--snapshot")
            .arg(repo_file("examples/cluster.yaml"))
            .arg("--policy")
            .arg(&policy)
            .args(["--listen", "127.0.0.1:0", "--path-prefix", prefix])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the log"))
            .spawn()
            .expect("placer starts");
        // A prefix that is accepted starts the server: stop waiting then.
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().expect("child status") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        let status = status.unwrap_or_else(|| panic!("{prefix:?} was accepted:\n{stderr}"));
        assert_eq!(status.code(), Some(2), "{prefix:?}: {status}\n{stderr}");
        assert!(stderr.contains("--path-prefix"), "{prefix:?}:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{prefix:?}:\n{stderr}");
    }
}

#[test]
fn unknown_paths_and_methods_answer_json_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(
        dir.path(),
        &policy_args(&copy_policy(dir.path())),
        Client::Plain,
    );
    let reply = server.get("/no/such/path");
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["Error"], "no route for GET /no/such/path");
    let reply = server.get("/filter");
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow").as_deref(), Some("POST"));
    assert_eq!(
        reply.json()["Error"],
        "GET is not allowed on /filter (see the Allow header)"
    );
}

#[test]
fn refused_tls_handshakes_are_logged_with_the_peer_and_counted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    let mut args: Vec<OsString> = policy_args(&copy_policy(dir.path()));
    args.extend(tls_args(&cert, &key, None));
    let server = Server::start(dir.path(), &args, Client::tls(&[&ca.cert_pem], None));
    let mut peers = Vec::new();
    for _ in 0..3 {
        let mut conn = Client::Plain.connect(server.addr).expect("connect");
        peers.push(conn.local_addr());
        let _ = conn.request("GET", "/healthz", "", false);
    }
    eventually(
        "three refused handshakes are counted",
        Duration::from_secs(10),
        || {
            (server.metric(r#"placer_tls_handshake_failures_total{reason="rejected"}"#) == 3.0)
                .then_some(())
        },
    );
    // The counter moves just before the line is written.
    let log = eventually("the refusal is logged", Duration::from_secs(10), || {
        let log = server.log_text();
        log.contains("TLS handshake failed").then_some(log)
    });
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("TLS handshake failed"))
        .collect();
    // Rate-limited: one line per 10 s, and the test is well within that.
    assert_eq!(lines.len(), 1, "{log}");
    // Handshakes run concurrently: the logged one is any of the three.
    assert!(
        peers
            .iter()
            .any(|p| lines[0].contains(&format!("peer={p}"))),
        "{peers:?}\n{log}"
    );
    assert!(lines[0].contains("WARN"), "{log}");
}
