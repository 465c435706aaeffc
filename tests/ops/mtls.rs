//! Mutual TLS (`--client-ca-file`, kube-scheduler's `tlsConfig.certFile`):
//! a certificate is verified when given (one from another CA fails the
//! handshake), the verbs and the reads need one, the health paths do not
//! (the kubelet's probes send none), and a rotated client CA file is
//! picked up.

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
fn the_verbs_need_a_certificate_from_the_client_ca_and_probes_need_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server_ca, client_ca, other_ca) = (
        Ca::new("serving-ca"),
        Ca::new("client-ca"),
        Ca::new("other-ca"),
    );
    let (args, _) = mtls_args(dir.path(), &server_ca, &client_ca.cert_pem);
    // The readiness probe of the harness sends no certificate, as the kubelet's.
    let probe = Client::tls(&[&server_ca.cert_pem], None);
    let server = Server::start(dir.path(), &args, probe.clone());
    assert!(
        server.log_text().contains("mtls=true"),
        "{}",
        server.log_text()
    );
    let scheduler = Client::tls(
        &[&server_ca.cert_pem],
        Some(&client_ca.client("kube-scheduler")),
    );
    let reply = scheduler
        .post(server.addr, "/filter", &api_pod_args(FILTER_NODES))
        .expect("kube-scheduler is answered");
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));

    // No client certificate: connected, but the verbs answer 403 with the reason.
    for verb in ["/filter", "/prioritize", "/bind", "/preempt"] {
        let reply = probe
            .post(server.addr, verb, &api_pod_args(FILTER_NODES))
            .expect("a client without a certificate connects");
        assert_eq!(reply.status, 403, "{verb}: {}", reply.body);
        assert_eq!(
            reply.json()["Error"],
            format!(
                "{verb} is kube-scheduler's: present a client certificate signed by placer's --client-ca-file (the extender's tlsConfig.certFile)"
            )
        );
    }
    // ...while the health paths answer it.
    for path in ["/healthz", "/readyz", "/livez"] {
        let reply = probe.get(server.addr, path).expect("probe");
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    }
    // The other paths need a certificate from the client CA (no delegated
    // authentication outside a cluster without its flags).
    let reply = probe.get(server.addr, "/metrics").expect("metrics");
    assert_eq!(reply.status, 401, "{}", reply.body);

    // A certificate from another CA: the handshake is refused, whatever the path.
    let intruder = Client::tls(&[&server_ca.cert_pem], Some(&other_ca.client("intruder")));
    let result = intruder.post(server.addr, "/filter", &api_pod_args(FILTER_NODES));
    assert!(
        result.is_err(),
        "a client with a foreign certificate was answered: {result:?}"
    );
    assert!(intruder.get(server.addr, "/healthz").is_err());

    // A certificate the serving CA signed is not a client certificate of the client CA either.
    let confused = Client::tls(&[&server_ca.cert_pem], Some(&server_ca.client("confused")));
    assert!(confused.get(server.addr, "/healthz").is_err());

    // The refusals did not disturb the listener, and were counted.
    let reply = scheduler
        .post(server.addr, "/filter", &api_pod_args(FILTER_NODES))
        .expect("kube-scheduler is answered");
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
    let metrics = scheduler
        .get(server.addr, "/metrics")
        .expect("metrics")
        .body;
    assert_eq!(
        sample(
            &metrics,
            r#"placer_http_refusals_total{route="/filter",reason="no_client_certificate"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert!(
        server.log_text().contains("request refused"),
        "{}",
        server.log_text()
    );
}

/// `/explain/pods` reveals pod and node details: with a client CA and no
/// delegated authentication, only holders of a certificate from it may ask.
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
    let reply = anonymous.get(server.addr, path).expect("connects");
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(
        reply.json()["Error"],
        "/explain/pods/default/web-1 needs a client certificate signed by placer's --client-ca-file (--authentication-kubeconfig and --authorization-kubeconfig would accept bearer tokens checked by RBAC; --authorization-always-allow-paths opens a path to anyone)"
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
    // A certificate the CA file does not trust fails the handshake.
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
    // The old client's handshake is refused by now: read the metrics with the new one.
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
