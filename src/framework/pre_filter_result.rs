//! What PreFilter decided for a pod as a whole: a rejection of every node,
//! plugins whose Filter is skipped, and the nodes worth filtering at all.

use std::collections::HashSet;

use crate::framework::Status;

/// What PreFilter decided for the whole pod.
#[derive(Debug, Default)]
pub struct PreFilterResult {
    /// A rejection that applies to every node.
    pub rejection: Option<Status>,
    /// Plugins whose Filter does not run for this pod, with their reasons.
    pub skipped: Vec<Status>,
    /// The only nodes worth filtering (`None`: all), the intersection of
    /// what the plugins in `narrowed_by` allow.
    pub node_names: Option<HashSet<String>>,
    /// The plugins that narrowed the nodes, sorted by name.
    pub narrowed_by: Vec<&'static str>,
    /// The status of a node outside `node_names`, built once by `narrow`
    /// (it is the same for every such node and Filter asks per node).
    absent: Option<Status>,
}

impl PreFilterResult {
    /// The Skip status of `plugin`, if its PreFilter skipped it.
    pub fn skipped(&self, plugin: &str) -> Option<&Status> {
        self.skipped.iter().find(|s| s.plugin() == plugin)
    }

    /// The status of a node PreFilter ruled out, if it did (kube-scheduler's
    /// absent-node status: "node(s) didn't satisfy plugin(s) [A B]").
    pub fn ruled_out(&self, node: &str) -> Option<Status> {
        let names = self.node_names.as_ref()?;
        if names.contains(node) {
            return None;
        }
        self.absent.clone()
    }

    /// Keeps only `names` of the nodes left; a rejection when none is left
    /// (`RunPreFilterPlugins`' "didn't satisfy plugin ..." message).
    pub(crate) fn narrow(&mut self, plugin: &'static str, names: HashSet<String>) {
        if let Err(at) = self.narrowed_by.binary_search(&plugin) {
            self.narrowed_by.insert(at, plugin);
        }
        let left = match self.node_names.take() {
            None => names,
            Some(prev) => prev.intersection(&names).cloned().collect(),
        };
        if left.is_empty() {
            let message = match self.narrowed_by.as_slice() {
                [one] => format!("node(s) didn't satisfy plugin {one}"),
                many => format!(
                    "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                    many.join(" ")
                ),
            };
            self.rejection = Some(Status::unresolvable(message).with_plugin(plugin));
        }
        self.node_names = Some(left);
        let plugins = self.narrowed_by.join(" ");
        let first = self.narrowed_by.first().copied().unwrap_or("");
        self.absent = Some(
            Status::unresolvable(format!("node(s) didn't satisfy plugin(s) [{plugins}]"))
                .with_plugin(first),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;

    fn names(n: &[&str]) -> HashSet<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn narrowing_intersects_and_names_the_plugins() {
        let mut r = PreFilterResult::default();
        assert!(r.ruled_out("any").is_none(), "no narrowing: every node");
        r.narrow("NodeName", names(&["a", "b"]));
        r.narrow("NodeAffinity", names(&["b", "c"]));
        assert!(r.rejection.is_none());
        assert!(r.ruled_out("b").is_none());
        let out = r.ruled_out("a").expect("ruled out");
        assert_eq!(out.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            out.message(),
            "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName]"
        );
        r.narrow("NodeAffinity", names(&["c"]));
        assert_eq!(
            r.rejection.map(|s| s.message()).as_deref(),
            Some("node(s) didn't satisfy plugin(s) [NodeAffinity NodeName] simultaneously")
        );
        let mut one = PreFilterResult::default();
        one.narrow("NodeName", HashSet::new());
        assert_eq!(
            one.rejection.map(|s| s.message()).as_deref(),
            Some("node(s) didn't satisfy plugin NodeName")
        );
    }
}
