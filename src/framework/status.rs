//! The result of running one plugin at one extension point.
//!
//! Mirrors kube-scheduler's `fwk.Status`: a code, the reasons a user reads, and
//! the plugin that produced it (that is how "0/N nodes are available: ..."
//! messages and `/explain` rows are built).

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

/// A plugin's verdict with its reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    reasons: Vec<String>,
    plugin: &'static str,
}

impl Status {
    /// A success without reasons.
    pub const fn success() -> Self {
        Status {
            code: Code::Success,
            reasons: Vec::new(),
            plugin: "",
        }
    }

    /// A status with one reason.
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Status {
            code,
            reasons: vec![reason.into()],
            plugin: "",
        }
    }

    /// A status with any number of reasons.
    pub fn from_reasons(code: Code, reasons: Vec<String>) -> Self {
        Status {
            code,
            reasons,
            plugin: "",
        }
    }

    /// Shorthand for a skip: the plugin does not apply to this pod.
    pub fn skip(reason: impl Into<String>) -> Self {
        Status::new(Code::Skip, reason)
    }

    /// Shorthand for an unschedulable node that eviction could fix.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Status::new(Code::Unschedulable, reason)
    }

    /// Shorthand for an unschedulable node that eviction cannot fix.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// Shorthand for an internal error.
    pub fn error(reason: impl Into<String>) -> Self {
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
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reasons.push(reason.into());
        self
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, in the order they were added.
    pub fn reasons(&self) -> &[String] {
        &self.reasons
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
        self.reasons.join(", ")
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
    }
}
