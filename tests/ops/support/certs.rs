//! Certificates made with `rcgen`: a CA and the identities it signs.

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

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
