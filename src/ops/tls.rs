//! HTTPS: server certificates from PEM files, reloaded when they change, and
//! optional client-certificate verification (mutual TLS with kube-scheduler's
//! `tlsConfig.certFile/keyFile`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum_server::tls_rustls::RustlsConfig;
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tracing::{info, warn};

use crate::ops::file_watch::FileWatch;
use crate::ops::metrics::Metrics;

/// How long to wait before re-reading TLS files that did not fit together.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// The files TLS is configured from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Server certificate chain (PEM).
    pub cert: PathBuf,
    /// Server private key (PEM).
    pub key: PathBuf,
    /// CA that client certificates must chain to; `None` = no client auth.
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
}

/// Reloads `config` whenever one of the files changes. A broken new set is
/// rejected (and counted); the listener keeps serving the previous one.
pub async fn reload_on_change(files: TlsFiles, config: RustlsConfig, metrics: Arc<Metrics>) {
    let mut watch = match FileWatch::new(&files.paths()) {
        Ok(w) => w,
        Err(e) => {
            warn!(error = %e, "cannot watch the TLS files; certificate reload disabled");
            return;
        }
    };
    let read_all = |f: &TlsFiles| -> Vec<Option<Vec<u8>>> {
        f.paths()
            .into_iter()
            .map(|p| std::fs::read(p).ok())
            .collect()
    };
    let mut last = read_all(&files);
    while watch.changed().await.is_some() {
        let now = read_all(&files);
        if now == last {
            continue;
        }
        // Key and certificate are often replaced one after the other; a
        // mismatch seen between the two writes settles within moments.
        let built = match files.server_config() {
            Ok(c) => Ok(c),
            Err(_) => {
                tokio::time::sleep(SETTLE).await;
                files.server_config()
            }
        };
        match built {
            Ok(c) => {
                config.reload_from_config(Arc::new(c));
                metrics.tls_reloaded(true);
                info!("TLS certificate reloaded");
                last = now;
            }
            Err(e) => {
                metrics.tls_reloaded(false);
                warn!(error = %e, "new TLS files rejected; serving the previous certificate");
            }
        }
    }
}
