//! Who may call which path (design §3.4). One listener serves everything;
//! each route group gets one check, as a tower layer around its routes:
//!
//! | group | routes | check |
//! | --- | --- | --- |
//! | [`Group::Verbs`] | `/filter`, `/prioritize`, `/bind`, `/preempt` | with `--client-ca-file`: a client certificate from that CA (kube-scheduler's `tlsConfig`), with `--verbs-allowed-names` one of those CommonNames; else open. 403 otherwise. Never an API call. |
//! | [`Group::Reads`] | `/healthz`, `/readyz`, `/livez`, `/metrics`, `/policy`, `/debug/*`, `POST /explain` | a path in `--authorization-always-allow-paths` (default the health paths) is allowed; else by the [`Scheme`] |
//! | [`Group::PodExplanations`] | `/explain/pods/{namespace}/{name}` | as the reads, but delegated access is `get` on `pods/explain` in the pod's namespace |
//!
//! The [`Scheme`] of the reads: delegated (TokenReview and
//! SubjectAccessReview through the API server, a verified client
//! certificate standing for its CN/O user), else a client certificate from
//! `--client-ca-file`, else closed when placer serves a live cluster, and
//! open only for `--snapshot` (a file, no cluster behind it). A refusal is
//! a JSON `{"Error": ...}` naming why and, where a flag would open the
//! path, which (401 without usable credentials, 403 when they are not
//! allowed, 503 when a review could not be done), counted in
//! `placer_http_refusals_total{route, reason}` and logged at most once per
//! 10 s.

pub mod identity;
pub mod paths;
pub mod review;
pub mod ttl_cache;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{FromRequestParts, MatchedPath, Path, Request};
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use tracing::warn;

use crate::metrics::Metrics;
use crate::ops::rate_limit::LogLimiter;
use crate::protocol::ErrorBody;

pub use identity::{ClientCert, User};
pub use paths::AlwaysAllow;
pub use review::{
    Decision, EXPLAIN_SUBRESOURCE, ReviewError, ReviewSettings, Reviewer, Target, TokenVerdict,
};

/// Users in this group are allowed without a review, as
/// `DelegatingAuthorizationOptions.AlwaysAllowGroups` does.
const PRIVILEGED_GROUP: &str = "system:masters";
/// At most one refusal log line per this.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Which check a group of routes gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// kube-scheduler's verbs.
    Verbs,
    /// Everything else but a pod's explanation: health, metrics, debug,
    /// policy, `POST /explain`.
    Reads,
    /// `/explain/pods/{namespace}/{name}`: a read whose delegated check is
    /// the pod's namespace, so a Role can let a team explain its own pods.
    PodExplanations,
}

/// How the reads are protected.
pub enum Scheme {
    /// Anyone may read: `--snapshot` without a client CA or delegated
    /// authentication (a file, no cluster behind it).
    Open,
    /// A live cluster without a client CA or delegated authentication: only
    /// the always-allowed paths, as kube-scheduler's authorizer without its
    /// kubeconfig allows only `--authorization-always-allow-paths`.
    Closed,
    /// A client certificate from `--client-ca-file`.
    ClientCertificate,
    /// TokenReview and SubjectAccessReview through the API server.
    Delegated(Arc<Reviewer>),
}

/// What the checks are configured with.
pub struct AccessSettings {
    /// TLS verifies client certificates against `--client-ca-file`.
    pub client_ca: bool,
    /// `--verbs-allowed-names`: CommonNames allowed to call the verbs
    /// (empty: any certificate from the client CA).
    pub verbs_allowed_names: Vec<String>,
    /// `--authorization-always-allow-paths`.
    pub always_allow: AlwaysAllow,
    /// How the reads are protected.
    pub reads: Scheme,
}

/// The checks, shared by every route group's layer.
pub struct Access {
    settings: AccessSettings,
    metrics: Arc<Metrics>,
    log: LogLimiter,
}

/// Why a request was refused: the reason label is the variant's.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// A verb without a client certificate from the client CA.
    #[error(
        "{path} is kube-scheduler's: present a client certificate signed by placer's --client-ca-file (the extender's tlsConfig.certFile)"
    )]
    NoClientCertificate {
        /// The request path.
        path: String,
    },
    /// A verb with a certificate whose CommonName is not allowed.
    #[error("{path}: client certificate CN {common_name:?} is not in --verbs-allowed-names")]
    NameNotAllowed {
        /// The request path.
        path: String,
        /// The certificate's CommonName.
        common_name: String,
    },
    /// A read without credentials placer accepts.
    #[error("{path} needs {needs}")]
    NoCredentials {
        /// The request path.
        path: String,
        /// What would do.
        needs: &'static str,
    },
    /// A read of a live cluster with no way to check the caller.
    #[error(
        "{path} is closed: placer serves a live cluster and has no way to check who calls. Open it with --client-ca-file (callers present a client certificate from that CA), with --authentication-kubeconfig and --authorization-kubeconfig (the API server checks tokens and RBAC), or to anyone with --authorization-always-allow-paths"
    )]
    Closed {
        /// The request path.
        path: String,
    },
    /// A pod explanation whose path names no pod placer can review access to.
    #[error("{path} does not name a pod: namespace and name must be UTF-8")]
    NoPod {
        /// The request path.
        path: String,
    },
    /// An `Authorization` header that is not `Bearer <token>`.
    #[error("the Authorization header is not \"Bearer <token>\"")]
    MalformedAuthorization,
    /// The API server did not authenticate the token.
    #[error("the bearer token was not accepted by the API server's TokenReview{}", detail(.0))]
    InvalidToken(String),
    /// The user may not do this.
    #[error("user {user:?} cannot {target}{}", detail(.reason))]
    Forbidden {
        /// The user.
        user: String,
        /// What was reviewed.
        target: Target,
        /// The authorizer's reason.
        reason: String,
    },
    /// A review could not be done.
    #[error("could not check access to {path} ({error}); try again")]
    ReviewFailed {
        /// The request path.
        path: String,
        /// What failed.
        error: ReviewError,
    },
}

fn detail(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

impl Refusal {
    /// The metric's `reason` label.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::NoClientCertificate { .. } => "no_client_certificate",
            Refusal::NameNotAllowed { .. } => "name_not_allowed",
            Refusal::NoCredentials { .. } => "no_credentials",
            Refusal::Closed { .. } => "closed",
            Refusal::NoPod { .. } => "no_pod",
            Refusal::MalformedAuthorization => "malformed_authorization",
            Refusal::InvalidToken(_) => "invalid_token",
            Refusal::Forbidden { .. } => "forbidden",
            Refusal::ReviewFailed { .. } => "review_failed",
        }
    }

    /// The status: 401 without usable credentials, 403 when not allowed
    /// (or nothing could allow it), 503 when access could not be checked,
    /// 400 for a pod path that names no pod.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::NoClientCertificate { .. }
            | Refusal::NameNotAllowed { .. }
            | Refusal::Closed { .. }
            | Refusal::Forbidden { .. } => StatusCode::FORBIDDEN,
            Refusal::NoPod { .. } => StatusCode::BAD_REQUEST,
            Refusal::NoCredentials { .. }
            | Refusal::MalformedAuthorization
            | Refusal::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            Refusal::ReviewFailed { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = self.to_string();
        let mut response = (
            status,
            Json(ErrorBody {
                error: message.as_str(),
            }),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"placer\""),
            );
        }
        response
    }
}

impl Access {
    /// The checks configured by `settings`.
    pub fn new(settings: AccessSettings, metrics: Arc<Metrics>) -> Arc<Access> {
        Arc::new(Access {
            settings,
            metrics,
            log: LogLimiter::new(LOG_EVERY),
        })
    }

    /// No checks at all: no client CA, no delegated authentication, no
    /// cluster behind it (`--snapshot`, and tests).
    pub fn open(metrics: Arc<Metrics>) -> Arc<Access> {
        Access::new(
            AccessSettings {
                client_ca: false,
                verbs_allowed_names: Vec::new(),
                always_allow: AlwaysAllow::default(),
                reads: Scheme::Open,
            },
            metrics,
        )
    }

    /// Whether `group` is checked at all (an open group gets no layer).
    pub fn checks(&self, group: Group) -> bool {
        match group {
            Group::Verbs => self.settings.client_ca,
            Group::Reads | Group::PodExplanations => !matches!(self.settings.reads, Scheme::Open),
        }
    }

    /// How the reads are checked, in words, for the start-up line.
    pub fn reads_described(&self) -> &'static str {
        match self.settings.reads {
            Scheme::Open => {
                "open to anyone who reaches the port (--snapshot: a file, no cluster behind it)"
            }
            Scheme::Closed => {
                "closed but for --authorization-always-allow-paths (a live cluster without --client-ca-file or delegated authentication)"
            }
            Scheme::ClientCertificate => "client certificate from --client-ca-file",
            Scheme::Delegated(_) => "delegated (TokenReview, SubjectAccessReview)",
        }
    }

    /// `router` with `group`'s check around each of its routes (404 and
    /// 405 stay as they are), or unchanged when the group is open.
    pub fn guard<S: Clone + Send + Sync + 'static>(
        self: &Arc<Self>,
        router: Router<S>,
        group: Group,
    ) -> Router<S> {
        if self.checks(group) {
            router.route_layer(AccessLayer {
                access: self.clone(),
                group,
            })
        } else {
            router
        }
    }

    /// Decides on a request (its head) for `group` without waiting, or
    /// says what must be reviewed first (delegated reads).
    fn decide(&self, group: Group, req: &mut Parts) -> Step {
        let path = req.uri.path();
        let cert = req.extensions.get::<Arc<ClientCert>>();
        if group == Group::Verbs {
            return Step::Now(self.check_verb(path, cert.map(Arc::as_ref)));
        }
        if self.settings.always_allow.matches(path) {
            return Step::Now(Ok(()));
        }
        match &self.settings.reads {
            Scheme::Open => Step::Now(Ok(())),
            Scheme::Closed => Step::Now(Err(Refusal::Closed {
                path: path.to_owned(),
            })),
            Scheme::ClientCertificate => Step::Now(match cert {
                Some(_) => Ok(()),
                None => Err(Refusal::NoCredentials {
                    path: path.to_owned(),
                    needs: "a client certificate signed by placer's --client-ca-file (--authentication-kubeconfig and --authorization-kubeconfig would accept bearer tokens checked by RBAC; --authorization-always-allow-paths opens a path to anyone)",
                }),
            }),
            Scheme::Delegated(reviewer) => {
                let credential = match cert.and_then(|c| c.user()) {
                    Some(user) => Credential::User(user),
                    None => match identity::bearer(&req.headers) {
                        identity::Bearer::Token(token) => Credential::Token(token.to_owned()),
                        identity::Bearer::Malformed => {
                            return Step::Now(Err(Refusal::MalformedAuthorization));
                        }
                        identity::Bearer::Absent => {
                            let needs = if self.settings.client_ca {
                                "credentials: a bearer token (Authorization: Bearer ...) or a client certificate with a CommonName, signed by placer's --client-ca-file"
                            } else {
                                "credentials: a bearer token (Authorization: Bearer ...)"
                            };
                            return Step::Now(Err(Refusal::NoCredentials {
                                path: path.to_owned(),
                                needs,
                            }));
                        }
                    },
                };
                let target = match group {
                    Group::PodExplanations => match pod_of(req) {
                        Some((namespace, name)) => Target::PodExplanation { namespace, name },
                        None => {
                            return Step::Now(Err(Refusal::NoPod {
                                path: req.uri.path().to_owned(),
                            }));
                        }
                    },
                    _ => Target::Path {
                        verb: req.method.as_str().to_ascii_lowercase(),
                        path: path.to_owned(),
                    },
                };
                Step::Review(Review {
                    reviewer: reviewer.clone(),
                    credential,
                    path: req.uri.path().to_owned(),
                    target,
                })
            }
        }
    }

    fn check_verb(&self, path: &str, cert: Option<&ClientCert>) -> Result<(), Refusal> {
        if !self.settings.client_ca {
            return Ok(());
        }
        let Some(cert) = cert else {
            return Err(Refusal::NoClientCertificate {
                path: path.to_owned(),
            });
        };
        let names = &self.settings.verbs_allowed_names;
        if names.is_empty() || names.contains(&cert.common_name) {
            Ok(())
        } else {
            Err(Refusal::NameNotAllowed {
                path: path.to_owned(),
                common_name: cert.common_name.clone(),
            })
        }
    }

    /// Counts and logs a refusal and turns it into the answer.
    fn refuse(&self, refusal: Refusal, route: &str) -> Response {
        let reason = refusal.reason();
        self.metrics.refused(route, reason);
        if let Some(suppressed) = self.log.admit(Instant::now()) {
            warn!(route, reason, error = %refusal, suppressed, "request refused");
        }
        refusal.into_response()
    }
}

/// The `{namespace}` and `{name}` of a pod explanation's route, decoded as
/// the handler's `Path` extractor decodes them, so the namespace reviewed
/// is the namespace served. `None` when they cannot be decoded (the
/// handler would refuse the request too).
fn pod_of(req: &mut Parts) -> Option<(String, String)> {
    // The extractor only reads the route's captures: it is ready at once.
    let extracted = Path::<(String, String)>::from_request_parts(req, &()).now_or_never()?;
    extracted.ok().map(|Path(pod)| pod)
}

/// What [`Access::decide`] concluded.
enum Step {
    /// Decided.
    Now(Result<(), Refusal>),
    /// The API server decides.
    Review(Review),
}

/// Who the caller says it is.
enum Credential {
    /// A verified client certificate's user (no review needed).
    User(User),
    /// A bearer token, for a TokenReview.
    Token(String),
}

/// A delegated decision still to make: authenticate, then authorize.
struct Review {
    reviewer: Arc<Reviewer>,
    credential: Credential,
    /// The request path (for a failed review's message).
    path: String,
    target: Target,
}

impl Review {
    async fn run(self) -> Result<(), Refusal> {
        let failed = |error| Refusal::ReviewFailed {
            path: self.path.clone(),
            error,
        };
        let user = match self.credential {
            Credential::User(user) => user,
            Credential::Token(ref token) => match self.reviewer.authenticate(token).await {
                Ok(TokenVerdict::User(user)) => user,
                Ok(TokenVerdict::Rejected(reason)) => return Err(Refusal::InvalidToken(reason)),
                Err(error) => return Err(failed(error)),
            },
        };
        if user.in_group(PRIVILEGED_GROUP) {
            return Ok(());
        }
        let decision = self
            .reviewer
            .authorize(&user, &self.target)
            .await
            .map_err(failed)?;
        if decision.allowed {
            Ok(())
        } else {
            Err(Refusal::Forbidden {
                user: user.name,
                target: self.target,
                reason: decision.reason,
            })
        }
    }
}

/// The layer [`Access::guard`] puts around a group's routes.
#[derive(Clone)]
pub struct AccessLayer {
    access: Arc<Access>,
    group: Group,
}

impl<S> tower::Layer<S> for AccessLayer {
    type Service = AccessService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AccessService {
            inner,
            access: self.access.clone(),
            group: self.group,
        }
    }
}

/// A route behind its group's check.
#[derive(Clone)]
pub struct AccessService<S> {
    inner: S,
    access: Arc<Access>,
    group: Group,
}

impl<S> tower::Service<Request> for AccessService<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The clone that was driven to readiness serves this request.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let access = self.access.clone();
        let route = req.extensions().get::<MatchedPath>().cloned();
        let route = move || {
            route
                .as_ref()
                .map_or("other", MatchedPath::as_str)
                .to_owned()
        };
        let (mut head, body) = req.into_parts();
        let step = access.decide(self.group, &mut head);
        let req = Request::from_parts(head, body);
        match step {
            Step::Now(Ok(())) => Box::pin(inner.call(req)),
            Step::Now(Err(refusal)) => {
                let response = access.refuse(refusal, &route());
                Box::pin(std::future::ready(Ok(response)))
            }
            Step::Review(review) => Box::pin(async move {
                match review.run().await {
                    Ok(()) => inner.call(req).await,
                    Err(refusal) => Ok(access.refuse(refusal, &route())),
                }
            }),
        }
    }
}
