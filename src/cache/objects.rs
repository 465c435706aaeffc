//! Objects of one kind that plugins look up by key (PodDisruptionBudgets,
//! PersistentVolumeClaims, PersistentVolumes, StorageClasses): no index
//! beyond the key, updated one watch event at a time.

use std::collections::HashMap;

use crate::objects::Keyed;

/// The objects of one kind by key.
#[derive(Debug, Clone)]
pub struct Objects<T> {
    items: HashMap<String, T>,
    synced: bool,
}

impl<T> Default for Objects<T> {
    fn default() -> Self {
        Objects {
            items: HashMap::new(),
            synced: false,
        }
    }
}

impl<T: Keyed> Objects<T> {
    /// The object with `key`.
    pub fn get(&self, key: &str) -> Option<&T> {
        self.items.get(key)
    }

    /// Every object, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.values()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds or replaces an object.
    pub fn apply(&mut self, item: T) {
        self.items.insert(item.key(), item);
    }

    /// Forgets the object with `key`.
    pub fn delete(&mut self, key: &str) {
        self.items.remove(key);
    }

    /// Replaces every object (after a full relist); from then on the store
    /// is complete: an object it lacks does not exist.
    pub fn replace(&mut self, items: Vec<T>) {
        self.items = items.into_iter().map(|i| (i.key(), i)).collect();
        self.synced = true;
    }

    /// True once a full list was applied (a watch feeds this kind).
    pub fn is_synced(&self) -> bool {
        self.synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Named(&'static str, u32);

    impl Keyed for Named {
        fn key(&self) -> String {
            self.0.to_string()
        }
    }

    #[test]
    fn apply_replaces_by_key_and_relist_replaces_all() {
        let mut o = Objects::default();
        o.apply(Named("a", 1));
        o.apply(Named("a", 2));
        o.apply(Named("b", 1));
        assert_eq!(o.len(), 2);
        assert!(!o.is_synced(), "single events do not make a complete list");
        assert_eq!(o.get("a"), Some(&Named("a", 2)));
        o.delete("a");
        assert!(o.get("a").is_none());
        o.replace(vec![Named("c", 3)]);
        assert!(o.is_synced());
        assert_eq!(o.iter().collect::<Vec<_>>(), [&Named("c", 3)]);
    }
}
