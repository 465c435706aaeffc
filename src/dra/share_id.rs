//! The `shareID` of each share of a device that allows multiple
//! allocations: a random (version 4) UUID, as Go's allocator gives one.
//!
//! Shares are given out in Filter, for every node that fits, so a share ID
//! must not cost a system call: the process draws 16 random bytes once and
//! mixes a counter into them, which keeps every ID of the process distinct
//! and the IDs of different processes apart with 66 random bits.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use uuid::{Builder, Uuid};

static SEED: OnceLock<[u8; 16]> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new share ID.
pub(super) fn next() -> String {
    let seed = SEED.get_or_init(|| *Uuid::new_v4().as_bytes());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes();
    // Bytes 9 to 15: untouched by the version (byte 6) and variant (byte 8)
    // bits, so 56 bits of counter stay distinct.
    let mut bytes = *seed;
    for (b, x) in bytes[9..].iter_mut().zip(n) {
        *b ^= x;
    }
    Builder::from_random_bytes(bytes).into_uuid().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_ids_are_distinct_version_4_uuids() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| next()).collect();
        assert_eq!(ids.len(), 1000);
        for id in ids.iter().take(5) {
            let uuid = Uuid::parse_str(id).expect("a UUID");
            assert_eq!(uuid.get_version_num(), 4, "{id}");
        }
    }
}
