//! The result of running one plugin at one extension point.
//!
//! Mirrors kube-scheduler's `fwk.Status`: a code, the reasons a user reads, and
//! the plugin that produced it (that is how "0/N nodes are available: ..."
//! messages and `/explain` rows are built).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::Serialize;

/// What a plugin decided. The order matters: a larger code is "more final".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Code {
    /// The plugin ran and found nothing against the node.
    Success,
    /// The plugin chose not to take part for this pod (e.g. NetQoS for a pod
    /// without its label). A skipped score plugin contributes nothing, not even
    /// its weight.
    Skip,
    /// The node does not fit now, but evicting pods (preemption) could help.
    Unschedulable,
    /// The node does not fit and no eviction can change that (labels, rules).
    UnschedulableAndUnresolvable,
    /// Something went wrong inside the plugin; the attempt fails.
    Error,
}

impl Code {
    /// The name used in JSON and tables, as kube-scheduler spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Skip => "Skip",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Error => "Error",
        }
    }
}

/// One reason a user reads. Filter runs once per node and most rejections
/// carry a fixed text, so a reason is a `&'static str` or a shared string
/// (a policy's configured reason): making or cloning one never copies text,
/// and the filter path allocates nothing per rejected node.
#[derive(Debug, Clone)]
pub enum Reason {
    /// A text fixed at compile time.
    Static(&'static str),
    /// A text built at run time or read from the policy, shared on clone.
    Shared(Arc<str>),
}

impl Reason {
    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Static(s) => s,
            Reason::Shared(s) => s,
        }
    }
}

impl Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Reason {}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Reason {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<&'static str> for Reason {
    fn from(s: &'static str) -> Self {
        Reason::Static(s)
    }
}

impl From<String> for Reason {
    fn from(s: String) -> Self {
        Reason::Shared(s.into())
    }
}

impl From<Arc<str>> for Reason {
    fn from(s: Arc<str>) -> Self {
        Reason::Shared(s)
    }
}

impl From<&Arc<str>> for Reason {
    fn from(s: &Arc<str>) -> Self {
        Reason::Shared(Arc::clone(s))
    }
}

/// A status's reasons: almost always none or one, kept inline so a status
/// with a single reason is built without a heap allocation.
#[derive(Debug, Clone)]
enum Reasons {
    One(Reason),
    Many(Vec<Reason>),
}

/// A plugin's verdict with its reasons.
#[derive(Debug, Clone)]
pub struct Status {
    code: Code,
    reasons: Reasons,
    plugin: &'static str,
}

impl Status {
    /// A success without reasons.
    pub const fn success() -> Self {
        Status {
            code: Code::Success,
            reasons: Reasons::Many(Vec::new()),
            plugin: "",
        }
    }

    /// A status with one reason.
    pub fn new(code: Code, reason: impl Into<Reason>) -> Self {
        Status {
            code,
            reasons: Reasons::One(reason.into()),
            plugin: "",
        }
    }

    /// A status with any number of reasons.
    pub fn from_reasons(code: Code, reasons: Vec<Reason>) -> Self {
        Status {
            code,
            reasons: Reasons::Many(reasons),
            plugin: "",
        }
    }

    /// Shorthand for a skip: the plugin does not apply to this pod.
    pub fn skip(reason: impl Into<Reason>) -> Self {
        Status::new(Code::Skip, reason)
    }

    /// Shorthand for an unschedulable node that eviction could fix.
    pub fn unschedulable(reason: impl Into<Reason>) -> Self {
        Status::new(Code::Unschedulable, reason)
    }

    /// Shorthand for an unschedulable node that eviction cannot fix.
    pub fn unresolvable(reason: impl Into<Reason>) -> Self {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// Shorthand for an internal error.
    pub fn error(reason: impl Into<Reason>) -> Self {
        Status::new(Code::Error, reason)
    }

    /// Records which plugin produced the status (the runner does this).
    #[must_use]
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = plugin;
        self
    }

    /// Adds another reason.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<Reason>) -> Self {
        let reason = reason.into();
        self.reasons = match self.reasons {
            Reasons::One(first) => Reasons::Many(vec![first, reason]),
            Reasons::Many(mut all) => {
                all.push(reason);
                Reasons::Many(all)
            }
        };
        self
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, in the order they were added.
    pub fn reasons(&self) -> &[Reason] {
        match &self.reasons {
            Reasons::One(r) => std::slice::from_ref(r),
            Reasons::Many(all) => all,
        }
    }

    /// The plugin that produced the status ("" when unknown).
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// True for `Success` (and `Skip`, which never rejects a node).
    pub fn is_success(&self) -> bool {
        matches!(self.code, Code::Success | Code::Skip)
    }

    /// True when the node is rejected (`Unschedulable*`) or the plugin failed.
    pub fn is_rejection(&self) -> bool {
        !self.is_success()
    }

    /// The reasons joined for a one-line message (kube-scheduler joins with ", ").
    pub fn message(&self) -> String {
        match self.reasons() {
            [one] => one.to_string(),
            all => all
                .iter()
                .map(Reason::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The message with the plugin that produced it in front (`Plugin: message`),
    /// for errors shown outside a per-plugin row. Plugins never name themselves
    /// in their messages, so the name appears exactly once.
    pub fn attributed_message(&self) -> String {
        if self.plugin.is_empty() {
            self.message()
        } else {
            format!("{}: {}", self.plugin, self.message())
        }
    }
}

/// Equal when code, reasons (as text, in order) and plugin are, however the
/// reasons are stored.
impl PartialEq for Status {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.plugin == other.plugin && self.reasons() == other.reasons()
    }
}

impl Eq for Status {}

impl Default for Status {
    fn default() -> Self {
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_skip_never_reject() {
        assert!(Status::success().is_success());
        assert!(Status::skip("not labelled").is_success());
        assert!(Status::unschedulable("x").is_rejection());
        assert!(Status::unresolvable("x").is_rejection());
        assert!(Status::error("x").is_rejection());
    }

    #[test]
    fn message_joins_reasons_and_keeps_plugin() {
        let s = Status::unresolvable("a").with_plugin("P").with_reason("b");
        assert_eq!(s.message(), "a, b");
        assert_eq!(s.plugin(), "P");
        assert_eq!(s.attributed_message(), "P: a, b");
        assert_eq!(Status::error("x").attributed_message(), "x");
        assert_eq!(s.code().as_str(), "UnschedulableAndUnresolvable");
        assert_eq!(s.reasons(), ["a", "b"]);
        assert!(Status::success().reasons().is_empty());
    }

    #[test]
    fn reasons_compare_by_text_whatever_their_storage() {
        let shared = Status::unresolvable(String::from("no x"));
        assert_eq!(shared, Status::unresolvable("no x"));
        assert_ne!(shared, Status::unresolvable("no y"));
        assert_eq!(
            Status::from_reasons(Code::Unschedulable, vec!["a".into()]),
            Status::unschedulable("a")
        );
    }
}
