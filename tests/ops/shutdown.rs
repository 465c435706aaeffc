//! Graceful shutdown (design §9): on SIGTERM placer drops readiness at once and
//! keeps answering for `--shutdown-delay-seconds` (HTTP/1 answers then say
//! `Connection: close`), then stops accepting, finishes the request in
//! flight, closes idle keep-alive connections (kube-scheduler keeps one
//! open), exits 0 within a few seconds and logs "placer stopped".

use std::path::Path;
use std::time::Duration;

use crate::support::{
    Ca, Client, FILTER_ANSWER, FILTER_NODES, Server, api_pod_args, copy_policy, eventually,
    policy_args, tls_args,
};

/// Well below the 20 s drain limit: nothing should wait for it.
const EXIT_WITHIN: Duration = Duration::from_secs(8);

fn shuts_down_gracefully(mut server: Server) {
    let addr = server.addr;
    let client = server.client.clone();

    // An idle keep-alive connection, as kube-scheduler's HTTP client keeps.
    let mut idle = client.connect(addr).expect("connect");
    let reply = idle
        .request("GET", "/healthz", "", true)
        .expect("healthz on a keep-alive connection");
    assert_eq!(reply.status, 200);

    // A request in flight: its head is read (the server asked for the body
    // with 100 Continue) but the body is not sent yet.
    let body = api_pod_args(FILTER_NODES);
    let mut inflight = client.connect(addr).expect("connect");
    let head = inflight.head("POST", "/filter", body.len(), "Expect: 100-continue\r\n");
    inflight.send_raw(head.as_bytes()).expect("send the head");
    let interim = inflight.read_reply().expect("100 Continue");
    assert_eq!(interim.status, 100, "{interim:?}");

    server.terminate();
    eventually("the shutdown signal is logged", EXIT_WITHIN, || {
        server
            .log_text()
            .contains("shutdown signal received")
            .then_some(())
    });
    // No new connections are accepted meanwhile...
    eventually("new connections are refused", EXIT_WITHIN, || {
        client.get(addr, "/healthz").is_err().then_some(())
    });
    // ... but the request in flight is answered in full.
    inflight.send_raw(body.as_bytes()).expect("send the body");
    let reply = inflight.read_reply().expect("the in-flight answer");
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));

    let status = server
        .wait_exit(EXIT_WITHIN)
        .unwrap_or_else(|| panic!("placer still running {EXIT_WITHIN:?} after SIGTERM"));
    assert!(status.success(), "exit status {status}");
    let log = server.log_text();
    assert!(log.contains("placer stopped"), "{log}");
    assert!(idle.is_closed(), "the idle connection was left open");
}

/// The drain tests start it right away: no shutdown delay.
fn policy(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut args = policy_args(&copy_policy(dir));
    args.extend(["--shutdown-delay-seconds".into(), "0".into()]);
    args
}

/// What a kube-scheduler behind a Service sees during a rollout: after
/// SIGTERM, `/readyz` turns 503 at once (the endpoint goes away), while
/// requests on the open keep-alive connection and on new connections (the
/// Service may still route some here) are answered for the delay, each
/// HTTP/1 answer telling the client to close; only after the delay are new
/// connections refused. Without the delay, the first connection after
/// SIGTERM is refused and kube-scheduler's call fails.
#[test]
fn sigterm_drops_readiness_and_keeps_answering_for_the_shutdown_delay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = policy_args(&copy_policy(dir.path()));
    args.extend(["--shutdown-delay-seconds".into(), "6".into()]);
    let mut server = Server::start(dir.path(), &args, Client::Plain);
    let (addr, client) = (server.addr, server.client.clone());
    let body = api_pod_args(FILTER_NODES);

    let mut kept = client.connect(addr).expect("connect");
    let reply = kept
        .request("POST", "/filter", &body, true)
        .expect("filter");
    assert_eq!((reply.status, reply.header("connection")), (200, None));

    let signalled = std::time::Instant::now();
    server.terminate();
    eventually("/readyz turns 503", EXIT_WITHIN, || {
        let reply = client.get(addr, "/readyz").ok()?;
        (reply.status == 503).then_some(reply)
    });
    // The open connection is answered, and told to close.
    let reply = kept
        .request("POST", "/filter", &body, true)
        .expect("filter");
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
    assert_eq!(reply.header("connection").as_deref(), Some("close"));
    assert!(
        kept.is_closed(),
        "the connection stayed open after Connection: close"
    );
    // So is a new one, while the delay lasts.
    let reply = client
        .post(addr, "/filter", &body)
        .expect("a new connection during the delay");
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
    assert!(
        signalled.elapsed() < Duration::from_secs(6),
        "the checks above took longer than the delay; the machine is too slow for this test"
    );
    assert_eq!(client.get(addr, "/healthz").expect("healthz").status, 200);

    eventually("new connections are refused", EXIT_WITHIN, || {
        client.get(addr, "/healthz").is_err().then_some(())
    });
    assert!(
        signalled.elapsed() >= Duration::from_secs(6),
        "refused before the delay was over"
    );
    let status = server
        .wait_exit(EXIT_WITHIN)
        .unwrap_or_else(|| panic!("placer still running {EXIT_WITHIN:?} after the delay"));
    assert!(status.success(), "exit status {status}");
    let log = server.log_text();
    assert!(
        log.contains("still answering requests until the delay"),
        "{log}"
    );
}

#[test]
fn sigterm_stops_an_http_server_gracefully() {
    let dir = tempfile::tempdir().expect("temp dir");
    shuts_down_gracefully(Server::start(
        dir.path(),
        &policy(dir.path()),
        Client::Plain,
    ));
}

#[test]
fn sigterm_stops_an_https_server_gracefully() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    let mut args = policy(dir.path());
    args.extend(tls_args(&cert, &key, None));
    shuts_down_gracefully(Server::start(
        dir.path(),
        &args,
        Client::tls(&[&ca.cert_pem], None),
    ));
}

/// A client that sent half a request head and then stays: shutdown closes
/// it at the drain deadline instead of waiting for it forever.
fn exits_at_the_drain_deadline(mut server: Server) {
    let mut half_open = server.client.connect(server.addr).expect("connect");
    half_open
        .send_raw(b"POST /filter HTTP/1.1\r\nHost: placer\r\nContent-Le")
        .expect("send half a head");
    // Let the server accept it and read what came.
    std::thread::sleep(Duration::from_millis(300));

    server.terminate();
    // Generous for a 2 s drain deadline, and shorter than the fixed 20 s
    // that HTTPS used to wait (plain HTTP used to wait forever).
    let status = server
        .wait_exit(Duration::from_secs(15))
        .unwrap_or_else(|| panic!("placer still running 15 s after SIGTERM"));
    assert!(status.success(), "exit status {status}");
    let log = server.log_text();
    assert!(
        log.contains("connections still open at the drain deadline"),
        "{log}"
    );
    assert!(log.contains("placer stopped"), "{log}");
}

fn drain_args(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut args = policy(dir);
    // Long timeouts: only the drain deadline may end the connection.
    for a in [
        "--shutdown-drain-seconds",
        "2",
        "--header-read-timeout-seconds",
        "600",
    ] {
        args.push(a.into());
    }
    args
}

#[test]
fn sigterm_with_a_half_open_http_connection_exits_at_the_drain_deadline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), &drain_args(dir.path()), Client::Plain);
    exits_at_the_drain_deadline(server);
}

#[test]
fn sigterm_with_a_half_open_https_connection_exits_at_the_drain_deadline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    let mut args = drain_args(dir.path());
    args.extend(tls_args(&cert, &key, None));
    let server = Server::start(dir.path(), &args, Client::tls(&[&ca.cert_pem], None));
    exits_at_the_drain_deadline(server);
}
