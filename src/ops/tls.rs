//! HTTPS: server certificates from PEM files, reloaded when they change or on
//! SIGHUP, and
//! optional client-certificate verification (mutual TLS with kube-scheduler's
//! `tlsConfig.certFile/keyFile`).
//!
//! With a client CA the server asks for a certificate and verifies one when
//! given, but accepts clients without one (Go's `VerifyClientCertIfGiven`,
//! as kube-scheduler's own port does): the kubelet's probes and Prometheus
//! send none. A certificate that does not chain to the CA still fails the
//! handshake. Which paths need a certificate is decided per route
//! ([`crate::ops::access`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::ops::Trigger;
use crate::ops::file_watch::FileWatch;

/// How long to wait before re-reading TLS files that did not fit together.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// The files TLS is configured from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Server certificate chain (PEM).
    pub cert: PathBuf,
    /// Server private key (PEM).
    pub key: PathBuf,
    /// CA that client certificates, when given, must chain to; `None` = none asked for.
    pub client_ca: Option<PathBuf>,
}

/// TLS files that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or parsed.
    #[error("{file}: {message}")]
    File {
        /// The file.
        file: String,
        /// Why.
        message: String,
    },
    /// rustls rejected the combination.
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn file_error(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        file: path.display().to_string(),
        message: e.to_string(),
    }
}

impl TlsFiles {
    /// Builds a rustls server configuration from the files.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| file_error(&self.cert, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| file_error(&self.cert, e))?;
        if certs.is_empty() {
            return Err(file_error(&self.cert, "no PEM certificate found"));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| file_error(&self.key, e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(ca).map_err(|e| file_error(ca, e))? {
                    roots
                        .add(cert.map_err(|e| file_error(ca, e))?)
                        .map_err(|e| file_error(ca, e))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .allow_unauthenticated()
                        .build()
                        .map_err(|e| file_error(ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    fn paths(&self) -> Vec<&Path> {
        let mut v = vec![self.cert.as_path(), self.key.as_path()];
        v.extend(self.client_ca.as_deref());
        v
    }

    fn contents(&self) -> Contents {
        self.paths()
            .into_iter()
            .map(|p| std::fs::read(p).ok())
            .collect()
    }
}

/// The server configuration in force. Every new handshake uses the current
/// one; a reload replaces it without touching the listener or the
/// connections already open.
#[derive(Clone)]
pub struct Reloadable(Arc<ArcSwap<rustls::ServerConfig>>);

impl Reloadable {
    /// The configuration for the next handshake.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        self.0.load_full()
    }
}

/// Contents of the TLS files as last tried (`None` = unreadable).
type Contents = Vec<Option<Vec<u8>>>;

/// Reloads the TLS configuration from its files, on a file change or on
/// SIGHUP. A broken new set is rejected (logged once per change of the
/// files, counted); the listener keeps serving the previous one.
pub struct TlsReloader {
    files: TlsFiles,
    config: Reloadable,
    metrics: Arc<Metrics>,
    /// What the last attempt read, successful or not: the watch skips
    /// events that changed nothing (the log file may share the directory).
    last: tokio::sync::Mutex<Contents>,
}

impl TlsReloader {
    /// Builds the first configuration from `files`.
    pub fn new(files: TlsFiles, metrics: Arc<Metrics>) -> Result<Arc<Self>, TlsError> {
        let config = Reloadable(Arc::new(ArcSwap::from_pointee(files.server_config()?)));
        let last = tokio::sync::Mutex::new(files.contents());
        Ok(Arc::new(TlsReloader {
            files,
            config,
            metrics,
            last,
        }))
    }

    /// The configuration the listener hands to each handshake.
    pub fn config(&self) -> Reloadable {
        self.config.clone()
    }

    /// Re-reads the files and puts a valid set in force. On a file change,
    /// contents identical to the last attempt are skipped; SIGHUP always
    /// reloads.
    pub async fn reload(&self, trigger: Trigger) {
        let mut last = self.last.lock().await;
        let mut now = self.files.contents();
        if trigger == Trigger::FileChange && now == *last {
            return;
        }
        let mut built = self.files.server_config();
        if built.is_err() && trigger == Trigger::FileChange {
            // Key and certificate are often replaced one after the other; a
            // mismatch seen between the two writes settles within moments.
            tokio::time::sleep(SETTLE).await;
            now = self.files.contents();
            built = self.files.server_config();
        }
        *last = now;
        match built {
            Ok(c) => {
                self.config.0.store(Arc::new(c));
                self.metrics.tls_reloaded(true);
                info!(trigger = trigger.as_str(), "TLS certificate reloaded");
            }
            Err(e) => {
                self.metrics.tls_reloaded(false);
                warn!(error = %e, trigger = trigger.as_str(), "new TLS files rejected; serving the previous certificate");
            }
        }
    }

    /// Reloads whenever one of the files changes, until the process ends.
    pub async fn watch(self: Arc<Self>) {
        let mut watch = match FileWatch::new(&self.files.paths()) {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, "cannot watch the TLS files; reload on change disabled (SIGHUP still reloads)");
                return;
            }
        };
        while watch.changed().await.is_some() {
            self.reload(Trigger::FileChange).await;
        }
    }
}
