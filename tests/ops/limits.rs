//! Connection limits and timeouts against hostile or careless clients: a
//! half-sent request head is cut after the header-read timeout (also a TLS
//! client that never finishes its handshake), idle keep-alive connections
//! live past the header-read timeout and close after the idle timeout, and
//! over the connection cap a client gets a prompt 503 instead of a hang.
//!
//! Timeouts are set small by flag; every wait is bounded by the clients'
//! 10 s read timeout or by [`eventually`], and nothing asserts speed.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::support::{Ca, Client, Server, copy_policy, eventually, policy_args, tls_args};

fn args(dir: &Path, flags: &[&str]) -> Vec<OsString> {
    let mut args = policy_args(&copy_policy(dir));
    args.extend(flags.iter().map(OsString::from));
    args
}

fn closed_by(server: &Server, reason: &str) -> f64 {
    server.metric(&format!(
        r#"placer_http_connections_closed_total{{reason="{reason}"}}"#
    ))
}

#[test]
fn a_half_sent_request_head_is_disconnected_after_the_header_read_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(
        dir.path(),
        &args(dir.path(), &["--header-read-timeout-seconds", "1"]),
        Client::Plain,
    );
    let mut slow = Client::Plain.connect(server.addr).expect("connect");
    slow.send_raw(b"POST /filter HTTP/1.1\r\nHost: placer\r\nContent-Ty")
        .expect("send half a head");
    // The client waits up to 10 s: far longer than the 1 s timeout.
    assert!(
        slow.is_closed(),
        "the half-sent head was kept open past the timeout"
    );
    assert_eq!(closed_by(&server, "header_timeout"), 1.0);
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn a_tls_handshake_that_never_starts_is_cut_at_the_header_read_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    let mut flags = args(dir.path(), &["--header-read-timeout-seconds", "1"]);
    flags.extend(tls_args(&cert, &key, None));
    let server = Server::start(dir.path(), &flags, Client::tls(&[&ca.cert_pem], None));
    // A TCP connection to the TLS port that never says hello.
    let mut silent = Client::Plain.connect(server.addr).expect("connect");
    assert!(silent.is_closed(), "the silent TLS client was kept open");
    eventually(
        "the handshake timeout is counted",
        Duration::from_secs(10),
        || {
            (server.metric(r#"placer_tls_handshake_failures_total{reason="timeout"}"#) == 1.0)
                .then_some(())
        },
    );
}

#[test]
fn an_idle_keep_alive_connection_outlives_the_header_read_timeout_then_closes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(
        dir.path(),
        &args(
            dir.path(),
            &[
                "--header-read-timeout-seconds",
                "1",
                "--idle-timeout-seconds",
                "4",
            ],
        ),
        Client::Plain,
    );
    let mut idle = Client::Plain.connect(server.addr).expect("connect");
    let reply = idle.request("GET", "/healthz", "", true).expect("healthz");
    assert_eq!(reply.status, 200);
    // Idle for longer than the header-read timeout: still open (hyper's own
    // header timer would have closed it by now).
    std::thread::sleep(Duration::from_millis(2500));
    let reply = idle
        .request("GET", "/healthz", "", true)
        .expect("the idle connection is reused");
    assert_eq!(reply.status, 200);
    // Idle past the idle timeout: closed (the client waits up to 10 s).
    assert!(idle.is_closed(), "the idle connection was kept open");
    assert_eq!(closed_by(&server, "idle_timeout"), 1.0);
    assert_eq!(closed_by(&server, "header_timeout"), 0.0);
}

#[test]
fn over_the_connection_cap_clients_get_a_503_and_healthz_answers_once_others_close() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Two serving threads: the cap holds across them, wherever the
    // connections land.
    let server = Server::start(
        dir.path(),
        &args(
            dir.path(),
            &[
                "--max-connections",
                "2",
                "--header-read-timeout-seconds",
                "60",
                "--http-threads",
                "2",
            ],
        ),
        Client::Plain,
    );
    // Two keep-alive connections, each proven to hold a slot by an answer.
    // (A probe connection may still be closing: retry until both hold one.)
    let held = eventually(
        "two connections hold the slots",
        Duration::from_secs(10),
        || {
            let mut conns = Vec::new();
            for _ in 0..2 {
                let mut c = Client::Plain.connect(server.addr).ok()?;
                let reply = c.request("GET", "/healthz", "", true).ok()?;
                (reply.status == 200).then_some(())?;
                conns.push(c);
            }
            Some(conns)
        },
    );
    let reply = Client::Plain
        .get(server.addr, "/healthz")
        .expect("the third connection gets an answer, not a hang");
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.header("connection").as_deref(), Some("close"));
    let error = reply.json()["Error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("--max-connections"), "{error}");

    drop(held);
    eventually("/healthz answers again", Duration::from_secs(10), || {
        Client::Plain
            .get(server.addr, "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
    assert!(closed_by(&server, "shed") >= 1.0);
}
