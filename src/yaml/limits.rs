//! Bounds on what a YAML text may cost to load, checked on the event stream
//! before anything is deserialized.
//!
//! Why a separate pass: serde_yaml_ng parses a whole document before its own
//! depth check runs (libyaml's cost grows with the square of the flow nesting
//! depth), and it copies an anchored node again for every alias, without a
//! bound on the bytes that adds. Here the first event past a limit stops the
//! read, with its position.
//!
//! Why not serde-saphyr's budgets (the crate kube already brings, whose
//! parser this walk reads): they give the same depth bound, but not the
//! same bounds or positions otherwise. Its alias budget caps the total of
//! scalar bytes, nodes and events, the file's own included, with no weight
//! per node, so it cannot say "aliases may add the file's size"; its
//! standalone check (`check_yaml_budget`) counts alias events without
//! expanding them and reports no position, so positions come only from a
//! full deserialize with serde-saphyr, whose syntax errors and positions
//! differ from serde_yaml_ng's (`a: [1, 2` is 1:4 "unclosed bracket" there,
//! 2:1 here); and with its default scanner limits a deep flow nest fails in
//! the scanner at level 255 (`a: [[[…` at column 259) rather than at the
//! 65th level. Its messages name the counters (`budget breached: Depth
//! { depth: 65 }`) rather than the limit.

use std::collections::HashMap;

use super::events::{Event, Events};
use super::{LimitError, MAX_DEPTH, MIN_ALIAS_BUDGET, Mark};

/// Checks `text` against the nesting and alias limits (see the module docs).
///
/// A syntax error ends the check without an error: the deserializer reports it.
pub fn check(text: &str) -> Result<(), LimitError> {
    let mut walk = Walk {
        anchors: HashMap::new(),
        open: Vec::new(),
        added: 0,
        budget: (text.len() as u64).max(MIN_ALIAS_BUDGET),
    };
    for (event, mark) in Events::new(text) {
        walk.event(event, mark)?;
    }
    Ok(())
}

/// What an anchored node costs each time an alias repeats it.
#[derive(Clone, Copy)]
struct Size {
    /// Scalar bytes plus one per node, aliases inside it expanded.
    weight: u64,
    /// Levels of mappings and sequences, itself included (0 for a scalar).
    height: usize,
}

struct Open {
    /// The parser's id of the anchor on this collection.
    anchor: Option<usize>,
    size: Size,
}

struct Walk {
    /// Every anchor definition by the parser's id (a later `&name` is a new
    /// definition, which the aliases after it resolve to, as in
    /// serde_yaml_ng). `None` while the node is still open: an alias to it
    /// would repeat a node inside itself.
    anchors: HashMap<usize, Option<Size>>,
    open: Vec<Open>,
    /// Weight added by aliases so far, over every document.
    added: u64,
    budget: u64,
}

impl Walk {
    fn event(&mut self, event: Event, mark: Mark) -> Result<(), LimitError> {
        match event {
            // Anchors are local to their document.
            Event::DocumentStart => self.anchors.clear(),
            Event::DocumentEnd => {}
            Event::Scalar { anchor, value } => {
                let size = Size {
                    weight: value.len() as u64 + 1,
                    height: 0,
                };
                if let Some(id) = anchor {
                    self.anchors.insert(id, Some(size));
                }
                self.add_to_parent(size);
            }
            Event::CollectionStart { anchor, .. } => {
                if self.open.len() >= MAX_DEPTH {
                    return Err(LimitError {
                        mark,
                        message: format!(
                            "mappings and sequences nest deeper than {MAX_DEPTH} levels"
                        ),
                    });
                }
                if let Some(id) = anchor {
                    self.anchors.insert(id, None);
                }
                self.open.push(Open {
                    anchor,
                    size: Size {
                        weight: 1,
                        height: 1,
                    },
                });
            }
            Event::CollectionEnd => {
                if let Some(done) = self.open.pop() {
                    if let Some(id) = done.anchor {
                        self.anchors.insert(id, Some(done.size));
                    }
                    self.add_to_parent(done.size);
                }
            }
            Event::Alias { anchor, name } => {
                let shown = name;
                // An unknown anchor is left to the deserializer's own error.
                let Some(definition) = self.anchors.get(&anchor) else {
                    return Ok(());
                };
                let Some(size) = *definition else {
                    return Err(LimitError {
                        mark,
                        message: format!("alias *{shown} repeats a node inside itself"),
                    });
                };
                if self.open.len() + size.height > MAX_DEPTH {
                    return Err(LimitError {
                        mark,
                        message: format!(
                            "alias *{shown} nests mappings and sequences deeper than {MAX_DEPTH} levels"
                        ),
                    });
                }
                self.added = self.added.saturating_add(size.weight);
                if self.added > self.budget {
                    return Err(LimitError {
                        mark,
                        message: format!(
                            "aliases expand to more than {} bytes (the limit is the file's size, at least {MIN_ALIAS_BUDGET})",
                            self.budget
                        ),
                    });
                }
                self.add_to_parent(size);
            }
        }
        Ok(())
    }

    fn add_to_parent(&mut self, child: Size) {
        if let Some(parent) = self.open.last_mut() {
            parent.size.weight = parent.size.weight.saturating_add(child.weight);
            parent.size.height = parent.size.height.max(child.height + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> (usize, usize, String) {
        let e = check(text).unwrap_err();
        (e.mark.line, e.mark.column, e.message)
    }

    #[test]
    fn ordinary_documents_pass() {
        check("a: &x {b: [1, 2]}\nc: *x\n---\nd: [*x]\n").unwrap_or_else(|e| panic!("{e:?}"));
        check("").unwrap();
        check(&format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        ))
        .unwrap();
    }

    #[test]
    fn deep_flow_nesting_stops_at_the_first_level_too_many() {
        let depth = 100_000;
        let text = format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        // The top mapping is level 1, so the 64th `[` (column 3 + 64) is one too many.
        assert_eq!(
            err(&text),
            (
                1,
                3 + MAX_DEPTH,
                "mappings and sequences nest deeper than 64 levels".into()
            )
        );
    }

    #[test]
    fn deep_block_nesting_is_refused_too() {
        let text: String = (0..MAX_DEPTH + 1)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        let (line, column, message) = err(&text);
        assert_eq!((line, column), (MAX_DEPTH + 1, 2 * MAX_DEPTH + 1));
        assert!(message.contains("deeper than 64"), "{message}");
    }

    #[test]
    fn an_alias_may_not_nest_past_the_limit() {
        let half = MAX_DEPTH / 2 + 1;
        let text = format!(
            "a: &deep {}1{}\nb: {}*deep{}\n",
            "[".repeat(half),
            "]".repeat(half),
            "[".repeat(half),
            "]".repeat(half)
        );
        let (line, column, message) = err(&text);
        assert_eq!((line, column), (2, 4 + half));
        assert_eq!(
            message,
            "alias *deep nests mappings and sequences deeper than 64 levels"
        );
    }

    #[test]
    fn aliases_may_add_at_most_the_file_size() {
        let big = "x".repeat(MIN_ALIAS_BUDGET as usize / 2);
        let aliases = "  - *big\n".repeat(3);
        let text = format!("a: &big {big}\nb:\n{aliases}");
        let (line, column, message) = err(&text);
        assert_eq!((line, column), (4, 5), "the second alias is one too many");
        assert_eq!(
            message,
            "aliases expand to more than 1048576 bytes (the limit is the file's size, at least 1048576)"
        );
        check(&format!("a: &big {big}\nb: *big\n")).unwrap();
    }

    #[test]
    fn nested_aliases_count_what_they_expand_to() {
        // "Billion laughs": every level doubles the previous one.
        let mut text = String::from("l0: &l0 [xxxxxxxxxxxxxxxx]\n");
        for i in 1..40 {
            text.push_str(&format!("l{i}: &l{i} [*l{p}, *l{p}]\n", p = i - 1));
        }
        let (line, _, message) = err(&text);
        assert!(line < 20, "stopped early, at line {line}");
        assert!(
            message.starts_with("aliases expand to more than"),
            "{message}"
        );
    }

    #[test]
    fn an_alias_inside_its_own_anchor_is_refused() {
        assert_eq!(
            err("a: &x [1, *x]\n"),
            (1, 11, "alias *x repeats a node inside itself".into())
        );
        // A later anchor of the same name is the one an alias means.
        check("a: &x [&x 1, *x]\n").unwrap();
    }

    #[test]
    fn syntax_errors_are_left_to_the_deserializer() {
        check("a: [1, 2\n").unwrap();
        check("a: *nowhere\n").unwrap();
    }
}
