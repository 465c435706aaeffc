//! A write to the API server that a plugin asks for from an extension point
//! without a client: PostFilter (which only decides; the scheduling loop
//! acts, as it evicts preemption's victims) and Unreserve (which must not
//! fail and runs also in the scheduling cycle). kube-scheduler's plugins
//! call their clientset there directly; placer's loop and binding cycle
//! carry the write out for them, so the points stay free of I/O.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;

/// What the write does with a client: `Err` is the message kube-scheduler
/// would report (PostFilter) or log (Unreserve).
type WriteFn = dyn Fn(Client) -> BoxFuture<'static, Result<(), String>> + Send + Sync;

/// One API write, with a description for logs.
#[derive(Clone)]
pub struct ApiWrite {
    what: Arc<str>,
    run: Arc<WriteFn>,
}

impl ApiWrite {
    /// A write described as `what` ("deallocate ResourceClaim ns/name").
    pub fn new<F>(what: impl Into<Arc<str>>, run: F) -> Self
    where
        F: Fn(Client) -> BoxFuture<'static, Result<(), String>> + Send + Sync + 'static,
    {
        ApiWrite {
            what: what.into(),
            run: Arc::new(run),
        }
    }

    /// What the write does.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Sends the write.
    pub async fn send(&self, client: Client) -> Result<(), String> {
        (self.run)(client).await
    }
}

impl fmt::Debug for ApiWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ApiWrite").field(&self.what).finish()
    }
}

/// Two writes are the same when they say they do the same (tests compare
/// PostFilter results).
impl PartialEq for ApiWrite {
    fn eq(&self, other: &Self) -> bool {
        self.what == other.what
    }
}
