//! Finding free loopback ports and probing HTTP(S) endpoints until a process is ready.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::process::ChildProcess;

/// A loopback port that was free a moment ago and that this process has not handed out before.
///
/// The port is released before the caller's process binds it, so another program could take it in
/// between; on a test machine that race is rare enough, and the readiness wait would report it.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("local addr").port();
        if HANDED_OUT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(port)
        {
            return port;
        }
    }
}

/// `GET http://127.0.0.1:<port><path>` over plain HTTP/1.1; returns status code and body.
pub async fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        anyhow::Ok(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| anyhow!("GET :{port}{path} timed out"))??;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("malformed HTTP response from :{port}{path}: {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// `GET <base><path>` over HTTPS without verifying the server certificate (curl's `-k`);
/// errors unless 2xx.
///
/// Uses kube's client so no other TLS stack is needed: kube-scheduler serves `/readyz` with a
/// self-signed certificate and lets anonymous clients read it.
pub async fn https_get_insecure(base: &str, path: &str) -> anyhow::Result<String> {
    let mut config = kube::Config::new(base.parse().with_context(|| format!("parse {base}"))?);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    let client = kube::Client::try_from(config)?;
    let request = http::Request::get(path).body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

/// How a test client reaches placer over HTTP(S): the CA that signed placer's certificate, a
/// client certificate, a bearer token.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    /// CA file verifying placer's serving certificate (HTTPS).
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate presented in the handshake.
    pub cert: Option<super::pki::CertFiles>,
    /// `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The name placer's certificate is checked against (SNI), when it is not the URL's host:
    /// a certificate made for a Service's DNS names, called on 127.0.0.1.
    pub server_name: Option<String>,
}

impl Caller {
    /// Trusting `ca`, with nothing to show.
    pub fn anonymous(ca: Option<&std::path::Path>) -> Self {
        Self {
            ca: ca.map(std::path::Path::to_path_buf),
            ..Self::default()
        }
    }

    /// The same caller with a bearer token.
    #[must_use]
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    /// The same caller checking placer's certificate against `name` instead of the URL's host.
    #[must_use]
    pub fn with_server_name(mut self, name: &str) -> Self {
        self.server_name = Some(name.to_owned());
        self
    }

    /// The same caller with a client certificate.
    #[must_use]
    pub fn with_cert(mut self, cert: &super::pki::CertFiles) -> Self {
        self.cert = Some(cert.clone());
        self
    }

    /// `method <base><path>` with `body` (JSON); returns status and body whatever the status.
    /// Errors when no HTTP answer comes (a refused TLS handshake, for one).
    pub async fn request(
        &self,
        base: &str,
        method: &str,
        path: &str,
        body: &str,
    ) -> anyhow::Result<(u16, String)> {
        let mut config = kube::Config::new(base.parse().with_context(|| format!("parse {base}"))?);
        if let Some(ca) = &self.ca {
            let pem = std::fs::read(ca).with_context(|| format!("read {}", ca.display()))?;
            let ders: Vec<Vec<u8>> = rustls_pki_types::pem::PemObject::pem_slice_iter(&pem)
                .map(|c: Result<rustls_pki_types::CertificateDer<'static>, _>| {
                    c.map(|c| c.to_vec())
                })
                .collect::<Result<_, _>>()
                .with_context(|| format!("PEM in {}", ca.display()))?;
            config.root_cert = Some(ders);
        }
        if let Some(cert) = &self.cert {
            config.auth_info.client_certificate = Some(cert.cert.display().to_string());
            config.auth_info.client_key = Some(cert.key.display().to_string());
        }
        if let Some(token) = &self.token {
            config.auth_info.token = Some(token.clone().into());
        }
        config.tls_server_name.clone_from(&self.server_name);
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(10));
        let client = kube::Client::try_from(config)?;
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.as_bytes().to_vec()))?;
        let response = client
            .send(request)
            .await
            .with_context(|| format!("{method} {base}{path}"))?;
        let status = response.status().as_u16();
        let bytes = http_body_util::BodyExt::collect(response.into_body())
            .await?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// Polls `probe` every 200 ms until it returns `Ok(true)`, failing early if `process` exits and
/// after `timeout`; on failure the error carries the last probe error and the tails of `process`'s
/// log and of `extra_logs` (e.g. etcd's log when the API server does not come up).
pub async fn wait_ready<F, Fut>(
    process: &ChildProcess,
    extra_logs: &[&ChildProcess],
    timeout: Duration,
    probe: F,
) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    wait_ready_every(
        process,
        extra_logs,
        timeout,
        Duration::from_millis(200),
        probe,
    )
    .await
}

/// [`wait_ready`] probing every `interval` (short ones to time a restart).
pub async fn wait_ready_every<F, Fut>(
    process: &ChildProcess,
    extra_logs: &[&ChildProcess],
    timeout: Duration,
    interval: Duration,
    mut probe: F,
) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let start = Instant::now();
    loop {
        if let Some(status) = process.exit_status() {
            bail!(
                "{} exited ({status}) before becoming ready\n{}",
                process.name(),
                tails(process, extra_logs)
            );
        }
        let last = match probe().await {
            Ok(true) => return Ok(start.elapsed()),
            Ok(false) => "not ready yet".to_owned(),
            Err(e) => format!("{e:#}"),
        };
        if start.elapsed() > timeout {
            bail!(
                "{} not ready after {timeout:?} (last probe: {last})\n{}",
                process.name(),
                tails(process, extra_logs)
            );
        }
        tokio::time::sleep(interval).await;
    }
}

fn tails(process: &ChildProcess, extra: &[&ChildProcess]) -> String {
    std::iter::once(process)
        .chain(extra.iter().copied())
        .map(|p| p.log_tail(40))
        .collect()
}
