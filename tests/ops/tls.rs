//! HTTPS (design §9): the verbs over TLS, plain HTTP refused on the TLS port,
//! and certificate reload when the files change — by rename and by a
//! Secret-volume `..data` symlink swap — without the listener going down;
//! broken replacements are rejected and the old certificate stays.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{
    Ca, Client, ConfigMapDir, FILTER_ANSWER, FILTER_NODES, RELOAD_TIMEOUT, Server, api_pod_args,
    copy_policy, eventually, policy_args, replace_file, tls_args, wait_until_served,
};

const SUCCESS: &str = r#"placer_tls_reloads_total{result="success"}"#;
const FAILURE: &str = r#"placer_tls_reloads_total{result="failure"}"#;

fn start(dir: &Path, cert: &Path, key: &Path, probe: Client) -> Server {
    let mut args = policy_args(&copy_policy(dir));
    args.extend(tls_args(cert, key, None));
    Server::start(dir, &args, probe)
}

#[test]
fn https_answers_the_verbs_and_plain_http_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    let server = start(dir.path(), &cert, &key, Client::tls(&[&ca.cert_pem], None));

    let reply = server.post("/filter", &api_pod_args(FILTER_NODES));
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
    assert!(
        server.log_text().contains("placer serving HTTPS"),
        "{}",
        server.log_text()
    );

    // The certificate really is the one from the files: a client trusting
    // another CA rejects it.
    let stranger = Client::tls(&[&Ca::new("stranger-ca").cert_pem], None);
    let err = stranger
        .get(server.addr, "/healthz")
        .expect_err("a client trusting another CA must not connect");
    assert!(
        err.to_string().contains("certificate"),
        "expected a certificate error, got: {err}"
    );

    // Plain HTTP to the TLS port gets no HTTP answer.
    let plain = Client::Plain.get(server.addr, "/healthz");
    assert!(
        plain.is_err(),
        "plain HTTP on the TLS port answered: {plain:?}"
    );
    // ... and did not hurt the listener.
    assert_eq!(server.get("/healthz").status, 200);
}

/// Requests `/healthz` over fresh TLS connections until `stop`, counting
/// successes and recording failures: the listener must never go down.
struct Hammer {
    stop: AtomicBool,
    ok: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

impl Hammer {
    fn new() -> Self {
        Hammer {
            stop: AtomicBool::new(false),
            ok: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
        }
    }

    fn run(&self, client: &Client, addr: SocketAddr) {
        while !self.stop.load(Ordering::Relaxed) {
            match client.get(addr, "/healthz") {
                Ok(r) if r.status == 200 => {
                    self.ok.fetch_add(1, Ordering::Relaxed);
                }
                Ok(r) => self.errors.lock().expect("lock").push(format!("{r:?}")),
                Err(e) => self.errors.lock().expect("lock").push(e.to_string()),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the loop when dropped, also when an assertion unwinds.
    fn stopper(&self) -> Stopper<'_> {
        Stopper(self)
    }

    #[track_caller]
    fn assert_never_down(&self) {
        let errors = self.errors.lock().expect("lock");
        assert!(
            errors.is_empty(),
            "the listener failed during reloads: {errors:?}"
        );
        assert!(self.ok.load(Ordering::Relaxed) > 0, "no request was made");
    }
}

struct Stopper<'a>(&'a Hammer);

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn certificate_reload_by_rename_keeps_serving_and_rejects_broken_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (ca1, ca2, ca3) = (Ca::new("ca-1"), Ca::new("ca-2"), Ca::new("ca-3"));
    let (id1, id2, id3) = (ca1.server(), ca2.server(), ca3.server());
    let (cert, key) = id1.write_to(dir.path());
    let only1 = Client::tls(&[&ca1.cert_pem], None);
    let only2 = Client::tls(&[&ca2.cert_pem], None);
    let only3 = Client::tls(&[&ca3.cert_pem], None);
    let any = Client::tls(&[&ca1.cert_pem, &ca2.cert_pem, &ca3.cert_pem], None);
    // The probe client (readiness, metrics) trusts every CA of the test.
    let server = start(dir.path(), &cert, &key, any.clone());
    assert!(only2.get(server.addr, "/healthz").is_err(), "serving CA 1");
    assert_eq!(server.metric(SUCCESS), 0.0);

    let hammer = Hammer::new();
    std::thread::scope(|s| {
        let _stop = hammer.stopper();
        s.spawn(|| hammer.run(&any, server.addr));

        // New key and certificate from another CA, each renamed into place.
        replace_file(&key, &id2.key_pem);
        replace_file(&cert, &id2.cert_pem);
        wait_until_served(&only2, server.addr, "a client trusting only CA 2 connects");
        assert!(
            only1.get(server.addr, "/healthz").is_err(),
            "the CA 1 certificate is still served"
        );
        eventually("the success counter reaches 1", RELOAD_TIMEOUT, || {
            (server.metric(SUCCESS) == 1.0).then_some(())
        });
        // The verbs work over the new certificate too.
        let reply = only2
            .post(server.addr, "/filter", &api_pod_args(FILTER_NODES))
            .expect("filter over the new certificate");
        assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));

        // Garbage instead of a certificate: rejected, counted, CA 2 still served.
        let failures = server.metric(FAILURE);
        replace_file(&cert, "this is not a PEM certificate\n");
        eventually("the failure counter increments", RELOAD_TIMEOUT, || {
            (server.metric(FAILURE) > failures).then_some(())
        });
        let reply = only2
            .get(server.addr, "/healthz")
            .expect("the previous certificate is still served");
        assert_eq!(reply.status, 200);
        assert_eq!(server.metric(SUCCESS), 1.0, "garbage was not a success");
        assert!(
            server.log_text().contains("new TLS files rejected"),
            "the rejection is logged:\n{}",
            server.log_text()
        );

        // A valid certificate whose key is not the key file's: rejected too.
        let failures = server.metric(FAILURE);
        replace_file(&cert, &id3.cert_pem);
        eventually(
            "the failure counter increments again",
            RELOAD_TIMEOUT,
            || (server.metric(FAILURE) > failures).then_some(()),
        );
        assert!(
            only2.get(server.addr, "/healthz").is_ok(),
            "a mismatched pair must not replace the served certificate"
        );
        assert!(only3.get(server.addr, "/healthz").is_err());

        // The matching key arrives: now the CA 3 pair is served.
        replace_file(&key, &id3.key_pem);
        wait_until_served(&only3, server.addr, "a client trusting only CA 3 connects");
        eventually("the success counter reaches 2", RELOAD_TIMEOUT, || {
            (server.metric(SUCCESS) == 2.0).then_some(())
        });
    });
    hammer.assert_never_down();
}

#[test]
fn certificate_reload_through_a_secret_volume_symlink_swap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (ca1, ca2, ca3) = (Ca::new("ca-1"), Ca::new("ca-2"), Ca::new("ca-3"));
    let (id1, id2, id3) = (ca1.server(), ca2.server(), ca3.server());
    let mut volume = ConfigMapDir::new(
        &dir.path().join("secret"),
        &[("tls.crt", &id1.cert_pem), ("tls.key", &id1.key_pem)],
    );
    let only2 = Client::tls(&[&ca2.cert_pem], None);
    let only3 = Client::tls(&[&ca3.cert_pem], None);
    let any = Client::tls(&[&ca1.cert_pem, &ca2.cert_pem, &ca3.cert_pem], None);
    let server = start(
        dir.path(),
        &volume.path("tls.crt"),
        &volume.path("tls.key"),
        any.clone(),
    );
    assert!(only2.get(server.addr, "/healthz").is_err(), "serving CA 1");

    let hammer = Hammer::new();
    std::thread::scope(|s| {
        let _stop = hammer.stopper();
        s.spawn(|| hammer.run(&any, server.addr));
        volume.swap(&[("tls.crt", &id2.cert_pem), ("tls.key", &id2.key_pem)]);
        wait_until_served(&only2, server.addr, "a client trusting only CA 2 connects");
        // A second swap: the watch survives the first (its old target is gone).
        volume.swap(&[("tls.crt", &id3.cert_pem), ("tls.key", &id3.key_pem)]);
        wait_until_served(&only3, server.addr, "a client trusting only CA 3 connects");
        eventually("the success counter reaches 2", RELOAD_TIMEOUT, || {
            (server.metric(SUCCESS) == 2.0).then_some(())
        });
    });
    hammer.assert_never_down();
    // The swap replaces both files at once: never a mismatched pair.
    assert_eq!(server.metric(FAILURE), 0.0, "{}", server.metrics());
}

#[test]
fn rejected_tls_files_are_logged_once_per_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("placer-test-ca");
    let (cert, key) = ca.server().write_to(dir.path());
    // The log file is in the watched directory: every line it writes is a
    // file event there, which used to bring the same rejection back.
    let server = start(dir.path(), &cert, &key, Client::tls(&[&ca.cert_pem], None));
    replace_file(&cert, "this is not a PEM certificate\n");
    eventually("the failure is counted", RELOAD_TIMEOUT, || {
        (server.metric(FAILURE) == 1.0).then_some(())
    });
    // Several watch rounds (debounce and settle take 0.7 s each).
    std::thread::sleep(Duration::from_secs(3));
    let log = server.log_text();
    let rejections = log.matches("new TLS files rejected").count();
    assert_eq!(rejections, 1, "{log}");
    assert_eq!(server.metric(FAILURE), 1.0);
    assert_eq!(
        server.get("/healthz").status,
        200,
        "the old certificate serves"
    );
}
