//! Who is calling: the client certificate the TLS handshake verified, a
//! bearer token, and the user either one stands for.
//!
//! A certificate verified against `--client-ca-file` names its user the way
//! kube-apiserver's x509 authenticator does
//! (`k8s.io/apiserver/pkg/authentication/request/x509`,
//! `CommonNameUserConversion`): the subject's CommonName is the user name,
//! its Organizations are the groups, and the extra
//! `authentication.kubernetes.io/credential-id` is `X509SHA256=<hex of the
//! DER>`. A certificate without a CommonName names no user. Like the
//! delegating authenticator (`group.NewAuthenticatedGroupAdder`), every
//! authenticated user also belongs to `system:authenticated`.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The extra key naming the credential, as kube-apiserver sets it.
const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// A client certificate the TLS handshake verified against
/// `--client-ca-file` (rustls refuses any other, so holding one means it
/// chains to that CA).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The subject's CommonName ("" when it has none).
    pub common_name: String,
    /// The subject's Organizations, in order.
    pub organizations: Vec<String>,
    /// SHA-256 of the DER encoding, lower-case hex.
    pub fingerprint: String,
}

impl ClientCert {
    /// Reads the subject of a DER certificate. rustls has parsed and
    /// verified it already; a subject this parser cannot read still stands
    /// for a verified certificate, only one that names no user.
    pub fn from_der(der: &[u8]) -> ClientCert {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let fingerprint = hex(digest.as_ref());
        let Ok((_, cert)) = X509Certificate::from_der(der) else {
            return ClientCert {
                common_name: String::new(),
                organizations: Vec::new(),
                fingerprint,
            };
        };
        let subject = cert.subject();
        let text =
            |a: &x509_parser::x509::AttributeTypeAndValue<'_>| a.as_str().ok().map(str::to_owned);
        ClientCert {
            common_name: subject
                .iter_common_name()
                .find_map(text)
                .unwrap_or_default(),
            organizations: subject.iter_organization().filter_map(text).collect(),
            fingerprint,
        }
    }

    /// The user it stands for; `None` without a CommonName.
    pub fn user(&self) -> Option<User> {
        if self.common_name.is_empty() {
            return None;
        }
        let mut extra = BTreeMap::new();
        extra.insert(
            CREDENTIAL_ID.to_owned(),
            vec![format!("X509SHA256={}", self.fingerprint)],
        );
        Some(User::authenticated(
            self.common_name.clone(),
            String::new(),
            self.organizations.clone(),
            extra,
        ))
    }
}

/// An authenticated user, as a SubjectAccessReview names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The uid ("" when the authenticator gives none).
    pub uid: String,
    /// Groups, `system:authenticated` included.
    pub groups: Vec<String>,
    /// Extra attributes, passed on to the authorizer.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// A user with `system:authenticated` added to its groups when missing.
    pub fn authenticated(
        name: String,
        uid: String,
        mut groups: Vec<String>,
        extra: BTreeMap<String, Vec<String>>,
    ) -> User {
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        User {
            name,
            uid,
            groups,
            extra,
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// What the `Authorization` header holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Bearer<'a> {
    /// No `Authorization` header.
    Absent,
    /// `Bearer <token>`.
    Token(&'a str),
    /// Something else: another scheme, an empty token, bytes that are not text.
    Malformed,
}

/// The bearer token of a request, read as kube-apiserver's bearer-token
/// authenticator does: the scheme is case-insensitive, the token is the
/// next space-separated word and must not be empty.
pub fn bearer(headers: &HeaderMap) -> Bearer<'_> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Bearer::Absent;
    };
    let Ok(text) = value.to_str() else {
        return Bearer::Malformed;
    };
    let text = text.trim();
    if text.is_empty() {
        return Bearer::Absent;
    }
    let mut parts = text.splitn(3, ' ');
    match (parts.next(), parts.next()) {
        (Some(scheme), Some(token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() =>
        {
            Bearer::Token(token)
        }
        _ => Bearer::Malformed,
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn cert(cn: Option<&str>, orgs: &[&str]) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        // rcgen keeps one value per attribute type; the second and later
        // Organizations go in under the same OID spelled as a custom type.
        for (i, o) in orgs.iter().enumerate() {
            let kind = if i == 0 {
                rcgen::DnType::OrganizationName
            } else {
                rcgen::DnType::CustomDnType(vec![2, 5, 4, 10])
            };
            params.distinguished_name.push(kind, *o);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_certificate_names_its_user_as_kube_apiserver_does() {
        let der = cert(Some("alice"), &["readers", "ops"]);
        let c = ClientCert::from_der(&der);
        assert_eq!(c.common_name, "alice");
        assert_eq!(c.organizations, ["readers", "ops"]);
        assert_eq!(c.fingerprint.len(), 64);
        let user = c.user().unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["readers", "ops", AUTHENTICATED]);
        assert_eq!(
            user.extra[CREDENTIAL_ID],
            [format!("X509SHA256={}", c.fingerprint)]
        );
    }

    #[test]
    fn a_certificate_without_a_common_name_names_no_user() {
        let c = ClientCert::from_der(&cert(None, &["readers"]));
        assert_eq!(c.common_name, "");
        assert_eq!(c.user(), None);
        let garbage = ClientCert::from_der(b"not a certificate");
        assert_eq!(garbage.user(), None);
    }

    #[test]
    fn bearer_tokens_are_read_as_kube_apiserver_reads_them() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), Bearer::Absent);
        for (value, expected) in [
            ("Bearer abc", Bearer::Token("abc")),
            ("bearer abc", Bearer::Token("abc")),
            ("BEARER abc extra", Bearer::Token("abc")),
            ("Bearer ", Bearer::Malformed),
            ("Bearer", Bearer::Malformed),
            ("Basic dXNlcjpwYXNz", Bearer::Malformed),
        ] {
            headers.insert(AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(bearer(&headers), expected, "{value}");
        }
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_bytes(b"Bearer \xff").unwrap(),
        );
        assert_eq!(bearer(&headers), Bearer::Malformed);
    }

    #[test]
    fn authenticated_users_are_in_system_authenticated_once() {
        let u = User::authenticated(
            "u".into(),
            "".into(),
            vec![AUTHENTICATED.into()],
            BTreeMap::new(),
        );
        assert_eq!(u.groups, [AUTHENTICATED]);
        assert!(u.in_group(AUTHENTICATED));
    }
}
