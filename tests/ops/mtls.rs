//! Mutual TLS (`--client-ca-file`, kube-scheduler's `tlsConfig.certFile`):
//! only clients with a certificate from the client CA get in, and a rotated
//! client CA file is picked up.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{
    Ca, Client, FILTER_ANSWER, FILTER_NODES, RELOAD_TIMEOUT, Server, api_pod_args, copy_policy,
    eventually, policy_args, replace_file, sample, tls_args,
};

/// Writes a serving certificate from `server_ca` and the client CA bundle
/// `client_ca_pem` into `dir`; returns placer's arguments (shipped policy,
/// HTTPS, mTLS) and the client CA file.
fn mtls_args(dir: &Path, server_ca: &Ca, client_ca_pem: &str) -> (Vec<OsString>, PathBuf) {
    let (cert, key) = server_ca.server().write_to(dir);
    let ca_file = dir.join("client-ca.crt");
    fs::write(&ca_file, client_ca_pem).expect("write client CA");
    let mut args = policy_args(&copy_policy(dir));
    args.extend(tls_args(&cert, &key, Some(&ca_file)));
    (args, ca_file)
}

#[test]
fn only_clients_with_a_certificate_from_the_client_ca_are_served() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server_ca, client_ca, other_ca) = (
        Ca::new("serving-ca"),
        Ca::new("client-ca"),
        Ca::new("other-ca"),
    );
    let (args, _) = mtls_args(dir.path(), &server_ca, &client_ca.cert_pem);
    let scheduler = Client::tls(
        &[&server_ca.cert_pem],
        Some(&client_ca.client("kube-scheduler")),
    );
    let server = Server::start(dir.path(), &args, scheduler.clone());
    assert!(
        server.log_text().contains("mtls=true"),
        "{}",
        server.log_text()
    );

    let reply = server.post("/filter", &api_pod_args(FILTER_NODES));
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));

    // No client certificate: the handshake is refused.
    let anonymous = Client::tls(&[&server_ca.cert_pem], None);
    let result = anonymous.post(server.addr, "/filter", &api_pod_args(FILTER_NODES));
    assert!(
        result.is_err(),
        "a client without a certificate was answered: {result:?}"
    );

    // A certificate from another CA: refused.
    let intruder = Client::tls(&[&server_ca.cert_pem], Some(&other_ca.client("intruder")));
    let result = intruder.post(server.addr, "/filter", &api_pod_args(FILTER_NODES));
    assert!(
        result.is_err(),
        "a client with a foreign certificate was answered: {result:?}"
    );

    // A certificate the serving CA signed is not a client certificate of the client CA either.
    let confused = Client::tls(&[&server_ca.cert_pem], Some(&server_ca.client("confused")));
    assert!(confused.get(server.addr, "/healthz").is_err());

    // The refusals did not disturb the listener.
    let reply = server.post("/filter", &api_pod_args(FILTER_NODES));
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
}

/// `/explain/pods` reveals pod and node details: it is behind the same mutual TLS as the verbs.
#[test]
fn explaining_a_pod_needs_a_client_certificate_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server_ca, client_ca) = (Ca::new("serving-ca"), Ca::new("client-ca"));
    let (args, _) = mtls_args(dir.path(), &server_ca, &client_ca.cert_pem);
    let operator = Client::tls(&[&server_ca.cert_pem], Some(&client_ca.client("operator")));
    let server = Server::start(dir.path(), &args, operator.clone());
    let path = "/explain/pods/default/web-1?format=table";
    let reply = server.get(path);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("pod default/web-1"), "{}", reply.body);
    let anonymous = Client::tls(&[&server_ca.cert_pem], None);
    let result = anonymous.get(server.addr, path);
    assert!(
        result.is_err(),
        "a client without a certificate was answered: {result:?}"
    );
}

#[test]
fn a_rotated_client_ca_file_is_reloaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server_ca, old_ca, new_ca) = (
        Ca::new("serving-ca"),
        Ca::new("client-ca-old"),
        Ca::new("client-ca-new"),
    );
    let (args, ca_file) = mtls_args(dir.path(), &server_ca, &old_ca.cert_pem);
    let old_client = Client::tls(&[&server_ca.cert_pem], Some(&old_ca.client("old")));
    let new_client = Client::tls(&[&server_ca.cert_pem], Some(&new_ca.client("new")));
    let server = Server::start(dir.path(), &args, old_client.clone());
    assert!(new_client.get(server.addr, "/healthz").is_err());

    // Rotation, step 1: a bundle trusting both.
    replace_file(&ca_file, &format!("{}{}", old_ca.cert_pem, new_ca.cert_pem));
    eventually("the new client CA is trusted", RELOAD_TIMEOUT, || {
        new_client
            .get(server.addr, "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
    assert_eq!(
        old_client
            .get(server.addr, "/healthz")
            .expect("old client")
            .status,
        200
    );

    // Step 2: the old CA is dropped.
    replace_file(&ca_file, &new_ca.cert_pem);
    eventually(
        "the old client CA is no longer trusted",
        RELOAD_TIMEOUT,
        || {
            old_client
                .get(server.addr, "/healthz")
                .is_err()
                .then_some(())
        },
    );
    let reply = new_client
        .get(server.addr, "/healthz")
        .expect("the new client still gets in");
    assert_eq!(reply.status, 200);
    // The probe client is refused by now: read the metrics with the new one.
    let metrics = new_client
        .get(server.addr, "/metrics")
        .expect("metrics over mTLS")
        .body;
    assert_eq!(
        sample(&metrics, r#"placer_tls_reloads_total{result="success"}"#),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, r#"placer_tls_reloads_total{result="failure"}"#),
        None,
        "{metrics}"
    );
}
