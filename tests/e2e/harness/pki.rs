//! Certificates and keys for the test control plane, generated in-process with `rcgen`.
//!
//! One ECDSA P-256 CA signs the API server's serving certificate (SANs `IP:127.0.0.1`, `IP:::1`,
//! `localhost`, so rustls in kube-rs and Go clients both verify it); a separate key signs
//! service-account tokens. Clients authenticate with static tokens, so no client certificates.

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

/// Generates the CA, the serving pair and the service-account key into `dir`.
pub fn generate(dir: &Path) -> anyhow::Result<Pki> {
    fs::create_dir_all(dir)?;

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "placer-e2e-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca = Issuer::new(ca_params, ca_key);

    let mut serving_params =
        CertificateParams::new(vec!["127.0.0.1".into(), "::1".into(), "localhost".into()])?;
    serving_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate()?;
    let serving_cert = serving_params.signed_by(&serving_key, &ca)?;

    let sa_key = KeyPair::generate()?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
    };
    write(&pki.ca_cert, &ca_cert.pem())?;
    write(&pki.serving_cert, &serving_cert.pem())?;
    write(&pki.serving_key, &serving_key.serialize_pem())?;
    write(&pki.sa_key, &sa_key.serialize_pem())?;
    write(&pki.sa_pub, &sa_key.public_key_pem())?;
    Ok(pki)
}

fn write(path: &Path, pem: &str) -> anyhow::Result<()> {
    fs::write(path, pem).with_context(|| format!("write {}", path.display()))
}
