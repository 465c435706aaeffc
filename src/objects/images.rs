//! Container images: the ones a node reports holding (`status.images`) and
//! the names a pod's containers ask for, normalized as kube-scheduler's
//! ImageLocality compares them.

use std::sync::Arc;

/// The images a node holds: every name of every `status.images` entry with
/// that entry's `sizeBytes`, sorted by name, the first entry winning for a
/// name listed twice. Names are `Arc<str>` so that the cache can make every
/// node holding an image point at one copy of its name
/// ([`NodeImages::intern`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeImages(Box<[(Arc<str>, i64)]>);

impl NodeImages {
    /// From `(names, sizeBytes)` entries in `status.images` order.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a [String], i64)>) -> Self {
        let mut all: Vec<(Arc<str>, i64)> = entries
            .into_iter()
            .flat_map(|(names, size)| names.iter().map(move |n| (Arc::from(n.as_str()), size)))
            .collect();
        // A stable sort keeps the first entry of a name first; dedup keeps it.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|later, first| later.0 == first.0);
        NodeImages(all.into_boxed_slice())
    }

    /// True if the node holds an image called `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.0.binary_search_by(|(n, _)| (**n).cmp(name)).is_ok()
    }

    /// Every `(name, size)`, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, i64)> {
        self.0.iter().map(|(n, s)| (n, *s))
    }

    /// True without images.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replaces each name by the copy `shared` returns for it (the cache's),
    /// so that equal names on many nodes are one allocation.
    pub fn intern(&mut self, mut shared: impl FnMut(&Arc<str>) -> Arc<str>) {
        for (name, _) in &mut self.0 {
            *name = shared(name);
        }
    }
}

/// kube-scheduler's `normalizedImageName`: a name without a tag (no `:`
/// after the last `/`) gets `:latest`. A digest (`name@sha256:...`) has a
/// `:` after the last `/` and is kept as it is.
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':').map_or(-1, |i| i as isize);
    let slash = name.rfind('/').map_or(-1, |i| i as isize);
    if colon <= slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_as_kube_scheduler_does() {
        assert_eq!(normalized_image_name("nginx"), "nginx:latest");
        assert_eq!(normalized_image_name("nginx:1.27"), "nginx:1.27");
        assert_eq!(
            normalized_image_name("registry:5000/app"),
            "registry:5000/app:latest"
        );
        assert_eq!(
            normalized_image_name("registry:5000/app:v1"),
            "registry:5000/app:v1"
        );
        assert_eq!(
            normalized_image_name("app@sha256:abc"),
            "app@sha256:abc",
            "a digest counts as a tag"
        );
        assert_eq!(normalized_image_name(""), ":latest");
    }

    #[test]
    fn node_images_are_sorted_and_the_first_entry_of_a_name_wins() {
        let a = vec!["b:1".to_string(), "a:1".to_string()];
        let b = vec!["a:1".to_string(), "c:1".to_string()];
        let images = NodeImages::from_entries([(a.as_slice(), 10), (b.as_slice(), 20)]);
        let got: Vec<(&str, i64)> = images.iter().map(|(n, s)| (&**n, s)).collect();
        assert_eq!(got, [("a:1", 10), ("b:1", 10), ("c:1", 20)]);
        assert!(images.contains("c:1"));
        assert!(!images.contains("d:1"));
    }
}
