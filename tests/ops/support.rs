//! Shared helpers: the `placer` binary as a child process (killed on drop,
//! its stderr kept in a file that is printed when a test fails), plain and
//! TLS HTTP/1.1 clients, certificates made with `rcgen`, file swaps the way
//! editors and kubelet do them, bounded polling, and metric samples.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

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

// ---------------------------------------------------------------------------
// Files

/// Replaces `path` atomically: writes a sibling temporary file, then renames
/// it over (what editors, `kubectl cp` and kubelet's atomic writer end with).
pub fn replace_file(path: &Path, content: &str) {
    let name = path.file_name().expect("a file name").to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&tmp, content).expect("write the temporary file");
    fs::rename(&tmp, path).expect("rename over the file");
}

/// A directory laid out the way kubelet mounts a ConfigMap or Secret:
///
/// ```text
/// dir/..2026_11_29_v1/<file>       the data, one directory per version
/// dir/..data -> ..2026_11_29_v1    swapped atomically on every update
/// dir/<file> -> ..data/<file>      stable names for the consumer
/// ```
pub struct ConfigMapDir {
    dir: PathBuf,
    version: u32,
}

impl ConfigMapDir {
    /// Lays out version 1 with `files` (name, content).
    pub fn new(dir: &Path, files: &[(&str, &str)]) -> Self {
        fs::create_dir_all(dir).expect("create the volume directory");
        let mut me = ConfigMapDir {
            dir: dir.to_path_buf(),
            version: 0,
        };
        me.swap(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(Path::new("..data").join(name), dir.join(name))
                .expect("symlink the file to ..data");
        }
        me
    }

    /// The stable path of `name` (a symlink through `..data`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a new version directory and swaps `..data` to it with one
    /// rename, then removes the old version, as kubelet's atomic writer does.
    pub fn swap(&mut self, files: &[(&str, &str)]) {
        let old = self.version;
        self.version += 1;
        let version = format!("..2026_11_29_v{}", self.version);
        let data = self.dir.join(&version);
        fs::create_dir(&data).expect("create the version directory");
        for (name, content) in files {
            fs::write(data.join(name), content).expect("write a data file");
        }
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).expect("symlink ..data_tmp");
        fs::rename(&tmp, self.dir.join("..data")).expect("rename ..data_tmp over ..data");
        if old > 0 {
            fs::remove_dir_all(self.dir.join(format!("..2026_11_29_v{old}")))
                .expect("remove the old version");
        }
    }
}

// ---------------------------------------------------------------------------
// Certificates

/// A certificate chain and its key, PEM.
#[derive(Clone)]
pub struct Identity {
    /// Certificate (PEM).
    pub cert_pem: String,
    /// PKCS#8 private key (PEM).
    pub key_pem: String,
}

impl Identity {
    /// Writes the certificate and key as `tls.crt` and `tls.key` into `dir`;
    /// returns their paths.
    pub fn write_to(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        fs::write(&cert, &self.cert_pem).expect("write cert");
        fs::write(&key, &self.key_pem).expect("write key");
        (cert, key)
    }
}

/// A test certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (PEM): trust anchor for clients, or `--client-ca-file`.
    pub cert_pem: String,
}

impl Ca {
    /// A new ECDSA P-256 CA named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca {
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
        }
    }

    fn issue(&self, sans: Vec<String>, cn: &str, eku: ExtendedKeyUsagePurpose) -> Identity {
        let mut params = CertificateParams::new(sans).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![eku];
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A serving certificate for `127.0.0.1` and `localhost`.
    pub fn server(&self) -> Identity {
        self.issue(
            vec!["127.0.0.1".into(), "localhost".into()],
            "placer",
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate (kube-scheduler's `tlsConfig.certFile`).
    pub fn client(&self, cn: &str) -> Identity {
        self.issue(Vec::new(), cn, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

// ---------------------------------------------------------------------------
// HTTP clients

/// How to reach the server: plain TCP or TLS with a given configuration.
#[derive(Clone)]
pub enum Client {
    /// HTTP/1.1 over TCP.
    Plain,
    /// HTTP/1.1 over TLS.
    Tls(Arc<rustls::ClientConfig>),
}

/// A collected response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// The head (status line and headers), as received.
    pub head: String,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The body as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One open connection.
pub struct Conn {
    stream: Box<dyn Stream>,
    addr: SocketAddr,
    local: SocketAddr,
    buf: Vec<u8>,
}

impl Client {
    /// A TLS client trusting `roots`, presenting `identity` if given.
    pub fn tls(roots: &[&str], identity: Option<&Identity>) -> Client {
        let mut store = rustls::RootCertStore::empty();
        for pem in roots {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                store
                    .add(cert.expect("root PEM"))
                    .expect("root certificate");
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(store);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some(id) => {
                let chain = CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client certificate PEM");
                let key =
                    PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).expect("client key PEM");
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client identity")
            }
        };
        Client::Tls(Arc::new(config))
    }

    /// Opens a connection (the TLS handshake happens on first use).
    pub fn connect(&self, addr: SocketAddr) -> io::Result<Conn> {
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
        let local = tcp.local_addr()?;
        let stream: Box<dyn Stream> = match self {
            Client::Plain => Box::new(tcp),
            Client::Tls(config) => {
                let name = ServerName::IpAddress(addr.ip().into());
                let conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(io::Error::other)?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        Ok(Conn {
            stream,
            addr,
            local,
            buf: Vec::new(),
        })
    }

    /// One request over a fresh connection (`Connection: close`).
    pub fn request(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        body: &str,
    ) -> io::Result<Reply> {
        self.connect(addr)?.request(method, path, body, false)
    }

    /// `GET path`.
    pub fn get(&self, addr: SocketAddr, path: &str) -> io::Result<Reply> {
        self.request(addr, "GET", path, "")
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, addr: SocketAddr, path: &str, body: &str) -> io::Result<Reply> {
        self.request(addr, "POST", path, body)
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Conn {
    /// The client's end of the connection (the server's peer address).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The head of a request as kube-scheduler's Go client writes it, plus
    /// `extra` header lines (each ending in `\r\n`).
    pub fn head(&self, method: &str, path: &str, len: usize, extra: &str) -> String {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: Go-http-client/1.1\r\n\
             Content-Type: application/json\r\nContent-Length: {len}\r\n\
             Accept-Encoding: gzip\r\n{extra}\r\n",
            self.addr,
        )
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Sends a request and reads its response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
        keep_alive: bool,
    ) -> io::Result<Reply> {
        let extra = if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        };
        let head = self.head(method, path, body.len(), extra);
        self.send_raw(format!("{head}{body}").as_bytes())?;
        self.read_reply()
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads one response (`Content-Length` framed).
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a response head; got {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end - 4]).into_owned();
        let status = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(format!("not an HTTP/1.1 response: {head:?}")))?;
        let mut reply = Reply {
            status,
            head,
            body: String::new(),
        };
        if (100..200).contains(&status) {
            // An interim answer (100 Continue): no body; the final one follows.
            self.buf.drain(..head_end);
            return Ok(reply);
        }
        let len: usize = reply
            .header("content-length")
            .ok_or_else(|| invalid(format!("no Content-Length: {}", reply.head)))?
            .parse()
            .map_err(|e| invalid(format!("bad Content-Length: {e}")))?;
        while self.buf.len() < head_end + len {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside the body",
                ));
            }
        }
        let rest = self.buf.split_off(head_end + len);
        reply.body = String::from_utf8_lossy(&self.buf[head_end..]).into_owned();
        self.buf = rest;
        Ok(reply)
    }

    /// True when the server has closed the connection (EOF or reset);
    /// false when it sent something or the read timed out.
    pub fn is_closed(&mut self) -> bool {
        match self.fill() {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// The server

/// `placer serve --snapshot examples/cluster.yaml` on a free port, killed
/// (and reaped) when dropped; its stderr is printed if the test panics.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its stderr.
    pub log: PathBuf,
    /// The client it was probed with.
    pub client: Client,
}

impl Server {
    /// Starts `placer serve --snapshot examples/cluster.yaml --listen
    /// 127.0.0.1:<free port> <args>` with its log in `dir`, and waits until
    /// `client` gets 200 from `/readyz`. Retries on a port taken meanwhile.
    pub fn start(dir: &Path, args: &[OsString], client: Client) -> Server {
        for attempt in 0.. {
            let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let log = dir.join(format!("placer-{}.log", addr.port()));
            let child = spawn(&log, addr, args);
            let mut server = Server {
                child,
                addr,
                log,
                client: client.clone(),
            };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(text) if text.contains("Address already in use") && attempt < 5 => continue,
                Err(text) => panic!("placer did not become ready:\n{text}"),
            }
        }
        unreachable!()
    }

    /// Starts placer with `--listen 127.0.0.1:0` and finds the port it
    /// bound in its "placer serving" log line.
    pub fn start_on_port_zero(dir: &Path, args: &[OsString], client: Client) -> Server {
        let log = dir.join("placer-port-0.log");
        let child = spawn(&log, ([127, 0, 0, 1], 0).into(), args);
        let mut server = Server {
            child,
            addr: ([127, 0, 0, 1], 0).into(),
            log,
            client,
        };
        server.addr = eventually(
            "the listen address is logged",
            Duration::from_secs(30),
            || {
                let text = server.log_text();
                let line = text.lines().find(|l| l.contains("placer serving"))?;
                let addr = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("listen="))?;
                Some(addr.parse().expect("listen=<socket address>"))
            },
        );
        if let Err(text) = server.wait_ready() {
            panic!("placer did not become ready:\n{text}");
        }
        server
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.client.get(self.addr, "/readyz")
                && r.status == 200
            {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait().expect("child status") {
                return Err(format!(
                    "exited early ({status}); log:\n{}",
                    self.log_text()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("not ready within 30 s; log:\n{}", self.log_text()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything it logged so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` with the probe client; panics on a transport error.
    #[track_caller]
    pub fn get(&self, path: &str) -> Reply {
        self.client
            .get(self.addr, path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `POST path` with the probe client; panics on a transport error.
    #[track_caller]
    pub fn post(&self, path: &str, body: &str) -> Reply {
        self.client
            .post(self.addr, path, body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// The current `/metrics` text.
    #[track_caller]
    pub fn metrics(&self) -> String {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// The value of one metric series (0 when the series is absent yet).
    #[track_caller]
    pub fn metric(&self, series: &str) -> f64 {
        sample(&self.metrics(), series).unwrap_or(0.0)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `signal` (a `libc::SIG*` number).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits");
        // SAFETY: kill(2) on our own child's pid, with a valid signal number.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({signal}): {}", io::Error::last_os_error());
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("child status").is_none()
    }

    /// Waits for the process to exit, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "---- placer log ({}) ----\n{}---- end of placer log ----",
                self.log.display(),
                self.log_text()
            );
        }
    }
}

/// `placer serve --snapshot examples/cluster.yaml --listen <addr> <args>`,
/// its stderr into `log`.
fn spawn(log: &Path, addr: SocketAddr, args: &[OsString]) -> Child {
    let stderr = fs::File::create(log).expect("create the log file");
    Command::new(BIN)
        .arg("serve")
        .arg("--snapshot")
        .arg(repo_file("examples/cluster.yaml"))
        .args(["--listen", &addr.to_string()])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("PLACER_POLICY")
        .env_remove("PLACER_LISTEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("placer starts")
}

/// `--tls-cert-file`, `--tls-key-file` (and `--client-ca-file`) arguments.
pub fn tls_args(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--tls-cert-file".into(),
        cert.into(),
        "--tls-key-file".into(),
        key.into(),
    ];
    if let Some(ca) = client_ca {
        args.push("--client-ca-file".into());
        args.push(ca.into());
    }
    args
}

/// A copy of the repository's `policy.yaml` in `dir` (the watch covers its
/// directory, so never point the server at the work tree's own file).
pub fn copy_policy(dir: &Path) -> PathBuf {
    let path = dir.join("policy.yaml");
    fs::copy(repo_file("policy.yaml"), &path).expect("copy policy.yaml");
    path
}

/// `--policy <path>`.
pub fn policy_args(policy: &Path) -> Vec<OsString> {
    vec!["--policy".into(), policy.into()]
}

// ---------------------------------------------------------------------------
// Metrics and request bodies

/// The value of the series written exactly as `series` (name and labels in
/// the encoder's order) in an exposition, if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(
            value
                .parse()
                .unwrap_or_else(|e| panic!("bad sample value in {line:?}: {e}")),
        )
    })
}

/// `ExtenderArgs` (nodeCacheCapable: true) as kube-scheduler writes them for
/// a priority-0 pod with `labels` and `annotations` (JSON object texts).
pub fn args_json(pod: &str, labels: &str, annotations: &str, names: &[&str]) -> String {
    let names = serde_json::to_string(names).expect("names encode");
    format!(
        concat!(
            r#"{{"Pod":{{"metadata":{{"name":"{pod}","namespace":"default","uid":"uid-{pod}","#,
            r#""creationTimestamp":null,"labels":{labels},"annotations":{annotations}}},"#,
            r#""spec":{{"containers":[{{"name":"main","image":"registry.k8s.io/pause:3.10","resources":{{}}}}],"#,
            r#""restartPolicy":"Always","schedulerName":"default-scheduler","priority":0}},"status":{{}}}},"#,
            r#""Nodes":null,"NodeNames":{names}}}"#
        ),
        pod = pod,
        labels = labels,
        annotations = annotations,
        names = names,
    )
}

/// A plain pod (no placer label or annotation): only ZoneSpread scores it.
pub fn plain_pod_args(names: &[&str]) -> String {
    args_json("plain-1", r#"{"app":"web"}"#, "{}", names)
}

/// A latency-sensitive pod that needs hardware encryption (every plugin applies).
pub fn api_pod_args(names: &[&str]) -> String {
    args_json(
        "api-1",
        r#"{"qos":"latency-sensitive"}"#,
        r#"{"myorg.io/require-hw-encrypt":"true"}"#,
        names,
    )
}

/// The nodes of the filter example, one of them unknown to the cache.
pub const FILTER_NODES: &[&str] = &["node-a1", "node-a2", "node-c1", "node-x", "ghost"];

/// `/filter` of [`api_pod_args`]`(FILTER_NODES)` over examples/cluster.yaml:
/// only node-a1 and node-c1 carry hw-encrypt.
pub const FILTER_ANSWER: &str = r#"{"Nodes":null,"NodeNames":["node-a1","node-c1"],"FailedNodes":{"ghost":"node not found in placer cache"},"FailedAndUnresolvableNodes":{"node-a2":"node(s) lack hardware encryption","node-x":"node(s) lack hardware encryption"},"Error":""}"#;

/// `/prioritize` scores as (host, score) pairs.
#[track_caller]
pub fn scores(reply: &Reply) -> Vec<(String, i64)> {
    assert_eq!(reply.status, 200, "prioritize: {}", reply.body);
    reply
        .json()
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|e| {
            (
                e["Host"].as_str().expect("Host").to_string(),
                e["Score"].as_i64().expect("Score"),
            )
        })
        .collect()
}

/// (host, score) pairs from literals.
pub fn expect_scores(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(h, s)| (h.to_string(), *s)).collect()
}

/// Waits until `client` gets a 200 from `/healthz` at `addr`: the certificate
/// being served is now one `client` trusts (`what` names the step on failure).
pub fn wait_until_served(client: &Client, addr: SocketAddr, what: &str) {
    eventually(what, RELOAD_TIMEOUT, || {
        client
            .get(addr, "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
}
