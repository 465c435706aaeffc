//! Delegated authentication and authorization: a bearer token is checked
//! with a TokenReview (`authentication.k8s.io/v1`), a user's access with a
//! SubjectAccessReview (`authorization.k8s.io/v1`), both through the API
//! server, as kube-scheduler and the other components built on
//! `k8s.io/apiserver` do. A SubjectAccessReview asks about a non-resource
//! URL, as kube-scheduler's own paths, except for a pod's explanation,
//! which asks about `get` on the subresource `pods/explain` in the pod's
//! namespace ([`Target`]), so a namespaced Role can grant it.
//!
//! The defaults are those of `k8s.io/apiserver/pkg/server/options`
//! (`NewDelegatingAuthenticationOptions`, `NewDelegatingAuthorizationOptions`):
//! token answers kept 10 s, whether they authenticated or not (the
//! delegating authenticator passes `CacheTTL` as both); allowed and denied
//! decisions kept 10 s each; each review call bounded by 10 s
//! (`TokenRequestTimeout`, `ClientTimeout`). Errors are never cached and
//! never allow: they become a 503 the client may retry. (kube-scheduler
//! retries a failed review up to 5 times within those 10 s; placer makes one
//! attempt and leaves the retry to the client, whose next scrape or request
//! comes anyway.) The caches hold at most 8,192 entries each, the size of
//! the webhook authorizer's LRU cache; tokens are keyed by an HMAC under a
//! key drawn at start-up, never kept in the clear.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::Semaphore;

use super::identity::User;
use super::ttl_cache::TtlCache;
use crate::metrics::Metrics;

/// Entries per cache (kube's webhook authorizer: `NewLRUExpireCache(8192)`).
const CACHE_ENTRIES: usize = 8192;
/// Reviews in flight at once; more wait (within the review timeout), so a
/// burst of new tokens cannot turn into a burst of API calls.
const IN_FLIGHT: usize = 16;
/// Paths this long or longer are reviewed but not cached (kube's
/// `maxControlledAttrCacheSize`, against cache-filling requests).
const MAX_CACHED_PATH: usize = 10_000;

/// How long answers are kept, and how long a review may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewSettings {
    /// `--authentication-token-webhook-cache-ttl` (default 10 s).
    pub token_ttl: Duration,
    /// `--authorization-webhook-cache-authorized-ttl` (default 10 s).
    pub allowed_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (default 10 s).
    pub denied_ttl: Duration,
    /// Bound on one review, waiting for a slot included (10 s).
    pub timeout: Duration,
}

impl Default for ReviewSettings {
    fn default() -> Self {
        ReviewSettings {
            token_ttl: Duration::from_secs(10),
            allowed_ttl: Duration::from_secs(10),
            denied_ttl: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
        }
    }
}

/// A review that could not be done: the API server refused placer's call,
/// was unreachable, or did not answer in time.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{review} failed: {message}")]
pub struct ReviewError {
    /// "TokenReview" or "SubjectAccessReview".
    pub review: &'static str,
    /// What went wrong.
    pub message: String,
}

/// What a TokenReview said of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenVerdict {
    /// The token stands for this user.
    User(User),
    /// Not authenticated, with the API server's error text when it gave one.
    Rejected(String),
}

/// The subresource of `pods` a pod's explanation is authorized as: a Role
/// grants it with `resources: ["pods/explain"]`, `verbs: ["get"]`.
pub const EXPLAIN_SUBRESOURCE: &str = "explain";

/// What a SubjectAccessReview asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A non-resource URL with a verb (the HTTP method, lower case).
    Path {
        /// The verb.
        verb: String,
        /// The request path.
        path: String,
    },
    /// One pod's explanation: `get` on `pods/explain` of that pod, in its
    /// namespace (core API group).
    PodExplanation {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
    },
}

impl Target {
    /// The attributes of the review's spec.
    fn attributes(&self) -> (Option<NonResourceAttributes>, Option<ResourceAttributes>) {
        match self {
            Target::Path { verb, path } => (
                Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some(verb.clone()),
                }),
                None,
            ),
            Target::PodExplanation { namespace, name } => (
                None,
                Some(ResourceAttributes {
                    group: Some(String::new()),
                    resource: Some("pods".into()),
                    subresource: Some(EXPLAIN_SUBRESOURCE.into()),
                    namespace: Some(namespace.clone()),
                    name: Some(name.clone()),
                    verb: Some("get".into()),
                    ..Default::default()
                }),
            ),
        }
    }

    /// Bytes of the client's choosing in the review (for the cache bound).
    fn len(&self) -> usize {
        match self {
            Target::Path { verb, path } => verb.len() + path.len(),
            Target::PodExplanation { namespace, name } => namespace.len() + name.len(),
        }
    }
}

impl std::fmt::Display for Target {
    /// What the user asked to do, as a refusal names it: `get path
    /// "/metrics"`, `get pods/explain in namespace "team-a"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Path { verb, path } => write!(f, "{verb} path {path:?}"),
            Target::PodExplanation { namespace, .. } => {
                write!(
                    f,
                    "get pods/{EXPLAIN_SUBRESOURCE} in namespace {namespace:?}"
                )
            }
        }
    }
}

/// What a SubjectAccessReview decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed (and not also denied).
    pub allowed: bool,
    /// The authorizer's reason ("" when it gave none).
    pub reason: String,
}

/// Sends and caches the reviews.
pub struct Reviewer {
    authentication: Client,
    authorization: Client,
    settings: ReviewSettings,
    tokens: TtlCache<[u8; 32], TokenVerdict>,
    decisions: TtlCache<String, Decision>,
    token_key: ring::hmac::Key,
    slots: Semaphore,
    metrics: Arc<Metrics>,
}

impl Reviewer {
    /// Reviews tokens through `authentication` (needs `tokenreviews`
    /// `create`) and access through `authorization` (needs
    /// `subjectaccessreviews` `create`).
    pub fn new(
        authentication: Client,
        authorization: Client,
        settings: ReviewSettings,
        metrics: Arc<Metrics>,
    ) -> Result<Reviewer, ring::error::Unspecified> {
        let token_key =
            ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &ring::rand::SystemRandom::new())?;
        Ok(Reviewer {
            authentication,
            authorization,
            settings,
            tokens: TtlCache::new(CACHE_ENTRIES),
            decisions: TtlCache::new(CACHE_ENTRIES),
            token_key,
            slots: Semaphore::new(IN_FLIGHT),
            metrics,
        })
    }

    /// Who `token` stands for.
    pub async fn authenticate(&self, token: &str) -> Result<TokenVerdict, ReviewError> {
        let mut key = [0u8; 32];
        key.copy_from_slice(ring::hmac::sign(&self.token_key, token.as_bytes()).as_ref());
        if let Some(verdict) = self.tokens.get(&key, Instant::now()) {
            return Ok(verdict);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.authentication.clone());
        let answered = self
            .call("TokenReview", api.create(&PostParams::default(), &review))
            .await;
        let status = match answered {
            Ok(review) => review.status.unwrap_or_default(),
            Err(e) => {
                self.metrics.access_review("token", "error");
                return Err(e);
            }
        };
        let verdict = match (status.authenticated, status.user) {
            (Some(true), Some(info)) if info.username.as_deref().is_some_and(|n| !n.is_empty()) => {
                TokenVerdict::User(User::authenticated(
                    info.username.unwrap_or_default(),
                    info.uid.unwrap_or_default(),
                    info.groups.unwrap_or_default(),
                    info.extra.unwrap_or_default(),
                ))
            }
            _ => TokenVerdict::Rejected(status.error.unwrap_or_default()),
        };
        let result = match verdict {
            TokenVerdict::User(_) => "authenticated",
            TokenVerdict::Rejected(_) => "unauthenticated",
        };
        self.metrics.access_review("token", result);
        self.tokens.insert(
            key,
            verdict.clone(),
            self.settings.token_ttl,
            Instant::now(),
        );
        Ok(verdict)
    }

    /// Whether `user` may do `target`.
    pub async fn authorize(&self, user: &User, target: &Target) -> Result<Decision, ReviewError> {
        let (non_resource_attributes, resource_attributes) = target.attributes();
        let spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            non_resource_attributes,
            resource_attributes,
        };
        // The spec itself is the key, as in kube's webhook authorizer.
        let key = serde_json::to_string(&spec).unwrap_or_default();
        let cacheable = !key.is_empty() && target.len() < MAX_CACHED_PATH;
        if cacheable && let Some(decision) = self.decisions.get(&key, Instant::now()) {
            return Ok(decision);
        }
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.authorization.clone());
        let answered = self
            .call(
                "SubjectAccessReview",
                api.create(&PostParams::default(), &review),
            )
            .await;
        let status = match answered {
            Ok(review) => review.status.unwrap_or_default(),
            Err(e) => {
                self.metrics.access_review("subject_access", "error");
                return Err(e);
            }
        };
        // Denied wins, also over a (contradictory) allowed; no opinion is a
        // denial, as the union of kube's authorizers ends in one.
        let allowed = status.allowed && status.denied != Some(true);
        let mut reason = status.reason.unwrap_or_default();
        if let Some(e) = status.evaluation_error.filter(|e| !e.is_empty()) {
            if !reason.is_empty() {
                reason.push_str("; ");
            }
            reason.push_str(&e);
        }
        let decision = Decision { allowed, reason };
        self.metrics
            .access_review("subject_access", if allowed { "allowed" } else { "denied" });
        if cacheable {
            let ttl = if allowed {
                self.settings.allowed_ttl
            } else {
                self.settings.denied_ttl
            };
            self.decisions
                .insert(key, decision.clone(), ttl, Instant::now());
        }
        Ok(decision)
    }

    /// Runs one review call within the timeout and a slot.
    async fn call<T>(
        &self,
        review: &'static str,
        call: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, ReviewError> {
        let bounded = async {
            let _slot = self.slots.acquire().await;
            call.await
        };
        match tokio::time::timeout(self.settings.timeout, bounded).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(ReviewError {
                review,
                message: match e {
                    // The API server's own message: RBAC names the missing permission.
                    kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
                    other => other.to_string(),
                },
            }),
            Err(_) => Err(ReviewError {
                review,
                message: format!("no answer within {:?}", self.settings.timeout),
            }),
        }
    }
}
