//! Per-pod scratch space shared by the plugins of one scheduling cycle.
//!
//! Like kube-scheduler's `CycleState`: a plugin writes what it computed once in
//! PreFilter/PreScore and reads it back per node in Filter/Score. Entries are
//! keyed by type, so each plugin owns its own state type and cannot read
//! another plugin's by accident.
//!
//! Entries are shared (`Arc`), so a clone costs one pointer per plugin: the
//! preemption dry run clones the cycle's state per candidate node and
//! updates only the entries a PreFilter extension changes, copying them on
//! first write ([`CycleState::modify`]).

use std::any::{Any, TypeId};
use std::sync::Arc;

use crate::framework::Status;

/// Typed storage for one cycle. Written in the `Pre*` phases (`&mut`),
/// read concurrently per node (`&`).
#[derive(Default, Clone)]
pub struct CycleState {
    entries: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
}

impl std::fmt::Debug for CycleState {
    /// The entries are type-erased: only their number says anything.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("entries", &self.entries.len())
            .finish()
    }
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
            Some((_, v)) => *v = Arc::new(value),
            None => self.entries.push((id, Arc::new(value))),
        }
    }

    /// The value of type `T` for updating in place (PreFilter extensions),
    /// copied first if a clone of this state still shares it.
    pub fn modify<T: Any + Send + Sync + Clone>(&mut self) -> Option<&mut T> {
        let id = TypeId::of::<T>();
        let slot = &mut self.entries.iter_mut().find(|(k, _)| *k == id)?.1;
        if Arc::get_mut(slot).is_none() {
            let copy: T = slot.downcast_ref::<T>()?.clone();
            *slot = Arc::new(copy);
        }
        Arc::get_mut(slot)?.downcast_mut::<T>()
    }

    /// Reads the value of type `T`, if a plugin wrote one.
    pub fn read<T: Any + Send + Sync>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.entries
            .iter()
            .find(|(k, _)| *k == id)
            .and_then(|(_, b)| b.downcast_ref::<T>())
    }

    /// What the plugin's PreFilter wrote, for its Filter. Missing means
    /// Filter ran without PreFilter, a bug: an `Error` status that says so.
    pub fn from_pre_filter<T: Any + Send + Sync>(&self) -> Result<&T, Status> {
        self.written_at("PreFilter")
    }

    /// What the plugin's PreScore wrote, for its Score (missing: as
    /// [`CycleState::from_pre_filter`]).
    pub fn from_pre_score<T: Any + Send + Sync>(&self) -> Result<&T, Status> {
        self.written_at("PreScore")
    }

    fn written_at<T: Any + Send + Sync>(&self, point: &str) -> Result<&T, Status> {
        self.read()
            .ok_or_else(|| Status::error(format!("{point} state missing")))
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

    #[test]
    fn missing_state_is_an_error_naming_the_point() {
        let mut s = CycleState::new();
        let e = s.from_pre_filter::<A>().unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (
                crate::framework::Code::Error,
                "PreFilter state missing".into()
            )
        );
        assert_eq!(
            s.from_pre_score::<A>().unwrap_err().message(),
            "PreScore state missing"
        );
        s.write(A(3));
        assert_eq!(s.from_pre_score::<A>(), Ok(&A(3)));
    }

    #[derive(Debug, PartialEq, Clone)]
    struct C(Vec<u32>);

    #[test]
    fn modify_copies_on_write_and_leaves_clones_alone() {
        let mut s = CycleState::new();
        assert_eq!(s.modify::<C>(), None);
        s.write(C(vec![1]));
        let before = s.clone();
        if let Some(c) = s.modify::<C>() {
            c.0.push(2);
        }
        assert_eq!(s.read::<C>(), Some(&C(vec![1, 2])));
        assert_eq!(
            before.read::<C>(),
            Some(&C(vec![1])),
            "the clone is unchanged"
        );
        // Unshared now: updated in place.
        if let Some(c) = s.modify::<C>() {
            c.0.push(3);
        }
        assert_eq!(s.read::<C>(), Some(&C(vec![1, 2, 3])));
    }
}
