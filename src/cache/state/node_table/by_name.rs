//! The node table's name lookup: an open-addressing table of 8-byte slots
//! over one 64-byte row per node index holding the node's name and record.
//!
//! Why not a `HashMap<name, index>`: an extender request looks up every name
//! it was sent, and between two requests kube-scheduler and the API server
//! run on the same cores, so the lookup usually starts from cold memory. A
//! map costs three dependent misses per name (control bytes, a 56-byte
//! bucket holding the name, then the record pointer beside it) that no
//! caller can overlap. Here a lookup reads one slot and one row, and
//! [`ByName::get_each`] prefetches both for the names a few places ahead, so
//! the misses of consecutive names overlap instead of queueing.
//!
//! Slots hold the low 32 bits of the name's hash (where the slot sits and a
//! tag compared before any name) and the row's index plus one (0: empty).
//! Probing is linear with at most half the slots used, and a removal shifts
//! the entries after it back, so there are no tombstones to clean up.

use std::hash::BuildHasher;
use std::sync::Arc;

use crate::objects::NodeInfo;

/// Names up to this many bytes sit in the row: cloud node names run to
/// 30–45 bytes (`ip-10-0-1-36.us-east-1.compute.internal`), past what 23-byte
/// inline-string crates hold; the key is 48 bytes, its row 64.
pub(super) const INLINE_NAME: usize = 46;

/// A node's name as stored in its row, compared as bytes.
#[derive(Debug, Clone)]
enum NameKey {
    /// Short enough to sit in the row.
    Inline { len: u8, bytes: [u8; INLINE_NAME] },
    /// Longer names.
    Heap(Box<[u8]>),
}

impl NameKey {
    fn new(name: &str) -> Self {
        let mut bytes = [0; INLINE_NAME];
        match (bytes.get_mut(..name.len()), u8::try_from(name.len())) {
            (Some(prefix), Ok(len)) => {
                prefix.copy_from_slice(name.as_bytes());
                NameKey::Inline { len, bytes }
            }
            _ => NameKey::Heap(name.as_bytes().into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            NameKey::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            NameKey::Heap(bytes) => bytes,
        }
    }
}

impl Default for NameKey {
    fn default() -> Self {
        NameKey::Inline {
            len: 0,
            bytes: [0; INLINE_NAME],
        }
    }
}

/// What the table keeps at one node index: the name a lookup compares and
/// the record it returns, in one cache line.
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
pub(super) struct Row {
    name: NameKey,
    /// `None`: a free index.
    pub(super) record: Option<Arc<NodeInfo>>,
}

/// Names to indexes (see the module docs). The rows are the node table's;
/// every slot points at a row holding a record.
#[derive(Debug, Clone, Default)]
pub(super) struct ByName {
    /// Empty, or a power of two long.
    slots: Vec<u64>,
    len: usize,
    hasher: foldhash::fast::RandomState,
}

/// How far ahead of the name it answers [`ByName::get_each`] prefetches the
/// slot, and the row: far enough for a miss to land, near enough that the
/// lines are still in L1.
const SLOT_AHEAD: usize = 16;
const ROW_AHEAD: usize = 8;

/// Asks the CPU to start loading the lines `value` sits on (a hint: never
/// faults, and a no-op where it is not implemented).
#[inline(always)]
pub(super) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let first = std::ptr::from_ref(value).cast::<i8>();
        // Only an address: a value may straddle two lines.
        let last = first.wrapping_add(size_of::<T>().saturating_sub(1));
        // SAFETY: `sse` is part of x86_64's baseline, and a prefetch only
        // hints at a load; it reads nothing and cannot fault.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(first);
            _mm_prefetch::<_MM_HINT_T0>(last);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

impl ByName {
    fn hash(&self, name: &[u8]) -> u32 {
        // The low bits: a slot stores them, and they fix where it sits.
        self.hasher.hash_one(name) as u32
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// Where the probe for `hash` starts.
    fn home(&self, hash: u32) -> usize {
        hash as usize & self.mask()
    }

    /// The slot holding `name` and its index, probing from `hash`'s home.
    fn find(&self, rows: &[Row], name: &[u8], hash: u32) -> Option<(usize, u32)> {
        let mask = self.mask();
        let mut at = self.home(hash);
        loop {
            let slot = *self.slots.get(at)?;
            if slot == 0 {
                return None;
            }
            let index = (slot as u32).wrapping_sub(1);
            if (slot >> 32) as u32 == hash
                && rows
                    .get(index as usize)
                    .is_some_and(|r| r.name.as_bytes() == name)
            {
                return Some((at, index));
            }
            at = (at + 1) & mask;
        }
    }

    /// The index of `name`.
    pub(super) fn get(&self, rows: &[Row], name: &str) -> Option<u32> {
        let name = name.as_bytes();
        self.find(rows, name, self.hash(name)).map(|(_, i)| i)
    }

    /// Calls `each` with every name of `names` in order and its index (`None`
    /// when it has none), prefetching ahead.
    pub(super) fn get_each<'n, S: AsRef<str>>(
        &self,
        rows: &[Row],
        names: &'n [S],
        mut each: impl FnMut(&'n S, Option<u32>),
    ) {
        if self.slots.is_empty() {
            for name in names {
                each(name, None);
            }
            return;
        }
        let hash_of = |i: usize| names.get(i).map(|n| self.hash(n.as_ref().as_bytes()));
        // The hashes of the names from `i` to `i + SLOT_AHEAD`, by position
        // modulo the ring's length.
        let mut ring = [0u32; SLOT_AHEAD];
        for (i, r) in ring.iter_mut().enumerate() {
            if let Some(h) = hash_of(i) {
                *r = h;
                self.prefetch_slot(h);
            }
        }
        for (i, name) in names.iter().enumerate() {
            let hash = ring[i % SLOT_AHEAD];
            if let Some(h) = hash_of(i + SLOT_AHEAD) {
                ring[i % SLOT_AHEAD] = h;
                self.prefetch_slot(h);
            }
            if i + ROW_AHEAD < names.len() {
                self.prefetch_row(rows, ring[(i + ROW_AHEAD) % SLOT_AHEAD]);
            }
            let found = self.find(rows, name.as_ref().as_bytes(), hash);
            each(name, found.map(|(_, i)| i));
        }
    }

    fn prefetch_slot(&self, hash: u32) {
        if let Some(slot) = self.slots.get(self.home(hash)) {
            prefetch(slot);
        }
    }

    /// Prefetches the row of the first slot from `hash`'s home that has its
    /// tag (a slot that is only there for a while: the slot read is a hint).
    fn prefetch_row(&self, rows: &[Row], hash: u32) {
        let mask = self.mask();
        let mut at = self.home(hash);
        while let Some(&slot) = self.slots.get(at) {
            if slot == 0 {
                return;
            }
            if (slot >> 32) as u32 == hash {
                if let Some(row) = rows.get((slot as u32).wrapping_sub(1) as usize) {
                    prefetch(row);
                }
                return;
            }
            at = (at + 1) & mask;
        }
    }

    /// Records `node` under its name at `index` in `rows` (the row must be
    /// free, the name not in the table).
    pub(super) fn insert(&mut self, rows: &mut [Row], index: u32, node: Arc<NodeInfo>) {
        let hash = self.hash(node.name.as_bytes());
        if let Some(row) = rows.get_mut(index as usize) {
            row.name = NameKey::new(&node.name);
            row.record = Some(node);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        self.place(u64::from(hash) << 32 | u64::from(index + 1));
        self.len += 1;
    }

    /// Puts `slot` in the first free slot from its home.
    fn place(&mut self, slot: u64) {
        let mask = self.mask();
        let mut at = self.home((slot >> 32) as u32);
        while let Some(s) = self.slots.get_mut(at) {
            if *s == 0 {
                *s = slot;
                return;
            }
            at = (at + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let grown = vec![0; (self.slots.len() * 2).max(16)];
        let old = std::mem::replace(&mut self.slots, grown);
        for slot in old.into_iter().filter(|&s| s != 0) {
            self.place(slot);
        }
    }

    /// Forgets `name`; its index, whose row the caller frees.
    pub(super) fn remove(&mut self, rows: &[Row], name: &str) -> Option<u32> {
        let name = name.as_bytes();
        let (mut hole, index) = self.find(rows, name, self.hash(name))?;
        // Shift back each following slot of the run whose home is not
        // between the hole and it, so every probe still finds its entry.
        let mask = self.mask();
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let slot = self.slots.get(at).copied().unwrap_or_default();
            if slot == 0 {
                break;
            }
            let home = self.home((slot >> 32) as u32);
            if at.wrapping_sub(home) & mask >= at.wrapping_sub(hole) & mask {
                if let Some(h) = self.slots.get_mut(hole) {
                    *h = slot;
                }
                hole = at;
            }
        }
        if let Some(h) = self.slots.get_mut(hole) {
            *h = 0;
        }
        self.len -= 1;
        Some(index)
    }

    /// Forgets every name.
    pub(super) fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// Number of names.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}
