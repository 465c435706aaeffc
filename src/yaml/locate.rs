//! Where a field sits in a YAML text, for errors found after the text was
//! turned into values (which carry no positions).

use super::events::{Event, Events};
use super::{Mark, Segment};

/// The position of the node at `path` in the `document`-th (0-based)
/// document of `text`; when the path does not exist (a missing field, a node
/// behind an alias), the position of its deepest ancestor that does.
/// `None` when there is no such document.
pub fn locate(text: &str, document: usize, path: &[Segment]) -> Option<Mark> {
    let mut documents_seen = 0;
    let mut in_target = false;
    let mut open: Vec<Frame> = Vec::new();
    let mut found = None;
    for (event, mark) in Events::new(text) {
        match event {
            Event::DocumentStart => {
                in_target = documents_seen == document;
                documents_seen += 1;
            }
            Event::DocumentEnd if in_target => return found,
            _ if !in_target => {}
            Event::DocumentEnd => {}
            Event::CollectionEnd => {
                if open.pop().is_some_and(|f| f.on_path) {
                    // Left the deepest node on the path: the rest is not in it.
                    return found;
                }
            }
            Event::Scalar { .. } | Event::Alias { .. } | Event::CollectionStart { .. } => {
                let depth = open.len();
                let on_path = match open.last_mut() {
                    None => true,
                    Some(parent) => parent.child(&event, path.get(depth - 1)),
                };
                if on_path {
                    found = Some(mark);
                    if depth == path.len() {
                        return found;
                    }
                }
                if let Event::CollectionStart { mapping, .. } = event {
                    open.push(Frame {
                        on_path,
                        kind: if mapping {
                            Kind::Mapping { key: None }
                        } else {
                            Kind::Sequence { next: 0 }
                        },
                    });
                }
            }
        }
    }
    found
}

struct Frame {
    /// This collection is the node at the path's prefix of its depth.
    on_path: bool,
    kind: Kind,
}

enum Kind {
    Sequence {
        next: usize,
    },
    /// `key` is `Some` between a key and its value: the key's text, or
    /// `None` inside it for a key that is not a scalar.
    Mapping {
        key: Option<Option<Box<[u8]>>>,
    },
}

impl Frame {
    /// Takes the next child node: whether it is the node `segment` names.
    fn child(&mut self, event: &Event, segment: Option<&Segment>) -> bool {
        match &mut self.kind {
            Kind::Sequence { next } => {
                let index = *next;
                *next += 1;
                self.on_path && segment == Some(&Segment::Index(index))
            }
            Kind::Mapping { key } => match key.take() {
                Some(key) => {
                    self.on_path
                        && matches!((key, segment), (Some(k), Some(Segment::Key(want))) if *k == *want.as_bytes())
                }
                None => {
                    *key = Some(match event {
                        Event::Scalar { value, .. } => Some(value.clone()),
                        _ => None,
                    });
                    false
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, document: usize, path: &[Segment]) -> Option<(usize, usize)> {
        locate(text, document, path).map(|m| (m.line, m.column))
    }

    fn key(k: &str) -> Segment {
        Segment::Key(k.into())
    }

    const TEXT: &str = "\
kind: Node
metadata: {name: a}
status:
  capacity:
    cpu: abc
---
items:
  - {kind: Pod}
  - kind: Pod
    spec:
      containers: [{name: c}, {name: d, resources: {requests: {cpu: '-1'}}}]
";

    #[test]
    fn finds_block_and_flow_values() {
        assert_eq!(
            at(TEXT, 0, &[key("status"), key("capacity"), key("cpu")]),
            Some((5, 10))
        );
        assert_eq!(at(TEXT, 0, &[key("metadata"), key("name")]), Some((2, 18)));
        let path = [
            key("items"),
            Segment::Index(1),
            key("spec"),
            key("containers"),
            Segment::Index(1),
            key("resources"),
            key("requests"),
            key("cpu"),
        ];
        assert_eq!(at(TEXT, 1, &path), Some((11, 69)));
        assert_eq!(at(TEXT, 1, &[]), Some((7, 1)));
    }

    #[test]
    fn a_missing_field_points_at_its_deepest_ancestor() {
        assert_eq!(
            at(TEXT, 1, &[key("items"), Segment::Index(0), key("metadata")]),
            Some((8, 5))
        );
        assert_eq!(
            at(TEXT, 0, &[key("status"), key("allocatable"), key("cpu")]),
            Some((4, 3))
        );
        assert_eq!(at(TEXT, 2, &[]), None);
    }

    #[test]
    fn keys_are_not_values() {
        // The key `cpu` inside `a` is not the value at path `cpu`.
        assert_eq!(at("a: {cpu: 1}\ncpu: 2\n", 0, &[key("cpu")]), Some((2, 6)));
    }
}
