//! A bounded map whose entries expire: review results are kept for seconds
//! (kube-apiserver's delegating authenticator and authorizer keep theirs
//! 10 s by default), and never more than a fixed number of them, so a
//! client sending a new token with every request cannot grow placer's
//! memory. When full, expired entries go first, then the oldest inserted.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The cache.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    capacity: usize,
    inner: Mutex<Inner<K, V>>,
}

#[derive(Debug)]
struct Inner<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Keys in insertion order, with the insertion's number: a key
    /// re-inserted later appears twice, and only its newest number counts.
    order: VecDeque<(K, u64)>,
    next: u64,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    expires: Instant,
    inserted: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    /// A cache of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: VecDeque::new(),
                next: 0,
            }),
        }
    }

    /// The value of `key` unless it expired by `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let inner = self.inner.lock();
        inner
            .entries
            .get(key)
            .filter(|e| e.expires > now)
            .map(|e| e.value.clone())
    }

    /// Keeps `value` for `ttl` from `now`; a zero `ttl` keeps nothing.
    pub fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut inner = self.inner.lock();
        if !inner.entries.contains_key(&key) && inner.entries.len() >= self.capacity {
            inner.entries.retain(|_, e| e.expires > now);
            while inner.entries.len() >= self.capacity {
                let Some((oldest, n)) = inner.order.pop_front() else {
                    break;
                };
                if inner.entries.get(&oldest).is_some_and(|e| e.inserted == n) {
                    inner.entries.remove(&oldest);
                }
            }
        }
        let inserted = inner.next;
        inner.next += 1;
        inner.order.push_back((key.clone(), inserted));
        inner.entries.insert(
            key,
            Entry {
                value,
                expires: now + ttl,
                inserted,
            },
        );
        // Stale order records (keys replaced or expired) stay bounded too.
        if inner.order.len() > 2 * self.capacity {
            let Inner { entries, order, .. } = &mut *inner;
            order.retain(|(k, n)| entries.get(k).is_some_and(|e| e.inserted == *n));
        }
    }

    /// Entries held, expired ones included until they are pushed out.
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    #[test]
    fn entries_expire_after_their_ttl() {
        let cache = TtlCache::new(4);
        let t0 = Instant::now();
        cache.insert("a", 1, TTL, t0);
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(9)), Some(1));
        assert_eq!(cache.get(&"a", t0 + TTL), None);
        cache.insert("z", 0, Duration::ZERO, t0);
        assert_eq!(cache.get(&"z", t0), None, "a zero ttl keeps nothing");
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_oldest() {
        let cache = TtlCache::new(2);
        let t0 = Instant::now();
        cache.insert("short", 1, Duration::from_secs(1), t0);
        cache.insert("long", 2, TTL, t0);
        let t1 = t0 + Duration::from_secs(2);
        cache.insert("new", 3, TTL, t1);
        assert_eq!(cache.get(&"long", t1), Some(2), "the expired one went");
        assert_eq!(cache.get(&"new", t1), Some(3));
        cache.insert("newer", 4, TTL, t1);
        assert_eq!(cache.get(&"long", t1), None, "then the oldest");
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn replacing_a_key_renews_it_and_never_grows_past_capacity() {
        let cache = TtlCache::new(2);
        let t0 = Instant::now();
        cache.insert("a", 1, TTL, t0);
        cache.insert("b", 2, TTL, t0);
        cache.insert("a", 3, TTL, t0);
        cache.insert("c", 4, TTL, t0);
        assert_eq!(cache.get(&"a", t0), Some(3), "re-inserted: newer than b");
        assert_eq!(cache.get(&"b", t0), None);
        for i in 0..10_000 {
            cache.insert("x", i, TTL, t0);
        }
        assert!(cache.len() <= 2);
        assert!(cache.inner.lock().order.len() <= 4);
    }
}
