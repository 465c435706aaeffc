//! Per-pod scratch space shared by the plugins of one scheduling cycle.
//!
//! Like kube-scheduler's `CycleState`: a plugin writes what it computed once in
//! PreFilter/PreScore and reads it back per node in Filter/Score. Entries are
//! keyed by type, so each plugin owns its own state type and cannot read
//! another plugin's by accident.

use std::any::{Any, TypeId};

/// Typed storage for one cycle. Written in the `Pre*` phases (`&mut`),
/// read concurrently per node (`&`).
#[derive(Default)]
pub struct CycleState {
    entries: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
}

impl CycleState {
    /// An empty state for a new cycle.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value`, replacing a previous value of the same type.
    pub fn write<T: Any + Send + Sync>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        match self.entries.iter_mut().find(|(k, _)| *k == id) {
            Some((_, v)) => *v = Box::new(value),
            None => self.entries.push((id, Box::new(value))),
        }
    }

    /// Reads the value of type `T`, if a plugin wrote one.
    pub fn read<T: Any + Send + Sync>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.entries
            .iter()
            .find(|(k, _)| *k == id)
            .and_then(|(_, b)| b.downcast_ref::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct A(u32);
    #[derive(Debug, PartialEq)]
    struct B(&'static str);

    #[test]
    fn entries_are_keyed_by_type() {
        let mut s = CycleState::new();
        assert_eq!(s.read::<A>(), None);
        s.write(A(1));
        s.write(B("x"));
        s.write(A(2));
        assert_eq!(s.read::<A>(), Some(&A(2)));
        assert_eq!(s.read::<B>(), Some(&B("x")));
    }
}
