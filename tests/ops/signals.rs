//! Signals: SIGHUP re-reads the policy and the TLS files (the process stays
//! up), SIGUSR1 and SIGUSR2 are ignored, SIGQUIT shuts down like SIGTERM.
//! Without handlers each of them used to end the process silently.

use std::time::Duration;

use crate::support::{
    Ca, Client, RELOAD_TIMEOUT, Server, copy_policy, eventually, policy_args, tls_args,
};

#[test]
fn sighup_reloads_the_policy_and_the_process_stays_up() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = copy_policy(dir.path());
    let mut args = policy_args(&policy);
    // No file watch: only SIGHUP can bring the change in.
    args.push("--no-policy-reload".into());
    let mut server = Server::start(dir.path(), &args, Client::Plain);
    const OLD: &str = "node(s) lack hardware encryption";
    const NEW: &str = "node(s) lack hardware encryption (reloaded on SIGHUP)";
    let before = server.get("/policy").body;
    assert!(before.contains(OLD) && !before.contains(NEW), "{before}");

    let text = std::fs::read_to_string(&policy).expect("read the policy");
    std::fs::write(&policy, text.replace(OLD, NEW)).expect("edit the policy");
    server.signal(libc::SIGHUP);
    eventually("GET /policy shows the new reason", RELOAD_TIMEOUT, || {
        let body = server.client.get(server.addr, "/policy").ok()?.body;
        body.contains(NEW).then_some(())
    });
    assert!(server.is_running(), "SIGHUP ended the process");
    assert_eq!(
        server.metric(r#"placer_policy_reloads_total{result="success"}"#),
        1.0
    );
    assert!(server.log_text().contains("policy reloaded"));
}

#[test]
fn sighup_reloads_the_tls_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    let mut args = policy_args(&copy_policy(dir.path()));
    args.extend(tls_args(&cert, &key, None));
    let mut server = Server::start(dir.path(), &args, Client::tls(&[&ca.cert_pem], None));
    let success = r#"placer_tls_reloads_total{result="success"}"#;
    assert_eq!(server.metric(success), 0.0);
    // The files are unchanged, so the watch does nothing; SIGHUP reloads anyway.
    server.signal(libc::SIGHUP);
    eventually("the TLS reload is counted", RELOAD_TIMEOUT, || {
        (server.metric(success) == 1.0).then_some(())
    });
    assert!(server.is_running(), "SIGHUP ended the process");
    assert_eq!(server.get("/healthz").status, 200);
    let log = server.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("TLS certificate reloaded") && l.contains("SIGHUP")),
        "{log}"
    );
}

#[test]
fn sigusr1_and_sigusr2_are_logged_and_ignored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(
        dir.path(),
        &policy_args(&copy_policy(dir.path())),
        Client::Plain,
    );
    for (signal, name) in [(libc::SIGUSR1, "SIGUSR1"), (libc::SIGUSR2, "SIGUSR2")] {
        server.signal(signal);
        eventually("the signal is logged", Duration::from_secs(10), || {
            server.log_text().contains(name).then_some(())
        });
        assert!(server.is_running(), "{name} ended the process");
        assert_eq!(server.get("/healthz").status, 200);
    }
}

#[test]
fn sigquit_shuts_down_gracefully() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(
        dir.path(),
        &policy_args(&copy_policy(dir.path())),
        Client::Plain,
    );
    server.signal(libc::SIGQUIT);
    let status = server
        .wait_exit(Duration::from_secs(15))
        .unwrap_or_else(|| panic!("placer still running 15 s after SIGQUIT"));
    assert!(status.success(), "exit status {status}");
    let log = server.log_text();
    assert!(
        log.contains("SIGQUIT") && log.contains("placer stopped"),
        "{log}"
    );
}
