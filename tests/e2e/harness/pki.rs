//! Certificates and keys for the test control plane, generated in-process with `rcgen`.
//!
//! One ECDSA P-256 CA signs the API server's serving certificate (SANs `IP:127.0.0.1`, `IP:::1`,
//! `localhost`, so rustls in kube-rs and Go clients both verify it); a separate key signs
//! service-account tokens. Clients of the API server authenticate with static tokens, so no
//! client certificates there.
//!
//! [`Ca`] is the same kind of CA kept for issuing more: placer's serving certificate and the
//! client certificates of its mutual-TLS tests (kube-scheduler's `tlsConfig`, users whose CN/O
//! placer turns into a SubjectAccessReview's user and groups).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Paths of the PEM files written by [`generate`].
#[derive(Clone, Debug)]
pub struct Pki {
    /// CA certificate: trust anchor for clients, and `--client-ca-file`.
    pub ca_cert: PathBuf,
    /// API server serving certificate.
    pub serving_cert: PathBuf,
    /// API server serving key.
    pub serving_key: PathBuf,
    /// Service-account token signing key (PKCS#8).
    pub sa_key: PathBuf,
    /// Its public key (PKIX), which verifies the tokens.
    pub sa_pub: PathBuf,
}

/// A certificate authority that goes on issuing certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub cert_pem: String,
}

/// A certificate and its key, written out.
#[derive(Clone, Debug)]
pub struct CertFiles {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its PKCS#8 key (PEM).
    pub key: PathBuf,
}

impl Ca {
    /// A new ECDSA P-256 CA whose certificate names `name`.
    pub fn new(name: &str) -> anyhow::Result<Ca> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca {
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
        })
    }

    /// Writes the CA certificate to `path`.
    pub fn write_cert(&self, path: &Path) -> anyhow::Result<PathBuf> {
        write(path, &self.cert_pem)?;
        Ok(path.to_owned())
    }

    /// A serving certificate for the loopback addresses and `localhost`, named `cn`.
    pub fn server(&self, cn: &str) -> anyhow::Result<(String, String)> {
        let sans = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
        self.issue(sans, cn, &[], ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate with CommonName `cn` and Organizations `orgs`, written as
    /// `<dir>/<file>.crt` and `.key`.
    pub fn client(
        &self,
        dir: &Path,
        file: &str,
        cn: &str,
        orgs: &[&str],
    ) -> anyhow::Result<CertFiles> {
        let (cert, key) = self.issue(Vec::new(), cn, orgs, ExtendedKeyUsagePurpose::ClientAuth)?;
        let files = CertFiles {
            cert: dir.join(format!("{file}.crt")),
            key: dir.join(format!("{file}.key")),
        };
        write(&files.cert, &cert)?;
        write(&files.key, &key)?;
        Ok(files)
    }

    /// A leaf certificate and key, PEM.
    fn issue(
        &self,
        sans: Vec<String>,
        cn: &str,
        orgs: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> anyhow::Result<(String, String)> {
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        // rcgen keeps one value per attribute type: a second Organization goes in under the
        // same OID spelled as a custom type.
        for (i, org) in orgs.iter().enumerate() {
            let kind = if i == 0 {
                DnType::OrganizationName
            } else {
                DnType::CustomDnType(vec![2, 5, 4, 10])
            };
            params.distinguished_name.push(kind, *org);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// Generates the CA, the serving pair and the service-account key into `dir`.
pub fn generate(dir: &Path) -> anyhow::Result<Pki> {
    fs::create_dir_all(dir)?;

    let ca = Ca::new("placer-e2e-ca")?;
    let (serving_cert, serving_key) = ca.server("kube-apiserver")?;
    let sa_key = KeyPair::generate()?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
    };
    write(&pki.ca_cert, &ca.cert_pem)?;
    write(&pki.serving_cert, &serving_cert)?;
    write(&pki.serving_key, &serving_key)?;
    write(&pki.sa_key, &sa_key.serialize_pem())?;
    write(&pki.sa_pub, &sa_key.public_key_pem())?;
    Ok(pki)
}

fn write(path: &Path, pem: &str) -> anyhow::Result<()> {
    fs::write(path, pem).with_context(|| format!("write {}", path.display()))
}
