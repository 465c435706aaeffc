//! The YAML event stream with positions, from granit-parser: the parser
//! serde-saphyr is built on (already in the dependency tree through kube),
//! written in safe Rust (`forbid(unsafe_code)`) and fuzzed upstream.
//!
//! Limits and position lookups need the events one at a time, so they can
//! stop at the first offending one; serde_yaml_ng keeps its own parser
//! private and reads a whole document before deserializing it.

use std::borrow::Cow;
use std::collections::HashMap;

use granit_parser::{Event as Raw, Marker, Parser, ScanError, Span, StrInput};

use super::Mark;

/// How far the scanner may read ahead while it decides whether a flow
/// collection is a mapping key. YAML limits simple keys to 1024 characters;
/// past that the scanner hands out the events it holds, so a nest deeper
/// than [`super::MAX_DEPTH`] is stopped by the limit walk at its first level
/// too many, long before the scanner's own nesting limit below.
const SIMPLE_KEY_LOOKAHEAD: usize = 1024;

/// The scanner's own bound on open flow collections. Higher than the
/// lookahead can open, so the first level past [`super::MAX_DEPTH`] is
/// reported by the limit walk with its position, not by the scanner farther
/// on; it still bounds the scanner's memory whatever the input.
const FLOW_NESTING_LIMIT: usize = 4 * SIMPLE_KEY_LOOKAHEAD;

/// One parse event, with the parts limits and position lookups need.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// `---` or the implicit start of a document.
    DocumentStart,
    /// The end of a document.
    DocumentEnd,
    /// A scalar, with its anchor.
    Scalar {
        /// `&name` on the scalar: the parser's id of this definition.
        anchor: Option<usize>,
        /// The scalar's text after unquoting.
        value: Box<[u8]>,
    },
    /// The start of a sequence or a mapping, with its anchor.
    CollectionStart {
        /// `&name` on the collection: the parser's id of this definition.
        anchor: Option<usize>,
        /// A mapping (else a sequence).
        mapping: bool,
    },
    /// The end of the innermost open sequence or mapping.
    CollectionEnd,
    /// `*name`: the definition the parser resolved it to, and the name.
    Alias {
        /// The id of the definition (the latest `&name` before it).
        anchor: usize,
        /// The name, for messages.
        name: Box<str>,
    },
}

/// The events of one text, in order, each with the position it starts at.
///
/// Ends at the end of the stream or at the first syntax error (an alias
/// naming no anchor included): the deserializer reads the same text and
/// reports that error in its own words.
pub(super) struct Events<'text> {
    /// `None` once the stream ended or failed.
    parser: Option<Parser<'text, StrInput<'text>>>,
    /// An event read ahead while looking for a node's anchor.
    peeked: Option<Result<(Raw<'text>, Span), ScanError>>,
    /// Anchor names by the parser's id, for the aliases' messages.
    names: HashMap<usize, Box<str>>,
}

impl<'text> Events<'text> {
    /// Starts parsing `text`.
    pub(super) fn new(text: &'text str) -> Self {
        let mut options = granit_parser::options! {
            simple_key_max_lookahead: SIMPLE_KEY_LOOKAHEAD,
            flow_nesting_limit: FLOW_NESTING_LIMIT,
            block_nesting_limit: FLOW_NESTING_LIMIT,
        };
        options.set_emit_comments(false);
        // Where an anchored node's `&name` starts: libyaml (and so
        // serde_yaml_ng) puts a node's position on its first property.
        options.emit_anchor_events = true;
        Events {
            parser: Some(Parser::with_options(StrInput::new(text), options)),
            peeked: None,
            names: HashMap::new(),
        }
    }

    fn raw(&mut self) -> Option<Result<(Raw<'text>, Span), ScanError>> {
        match self.peeked.take() {
            Some(event) => Some(event),
            None => self.parser.as_mut()?.next(),
        }
    }

    /// Where the node of `span` starts: at its tag or its anchor (the
    /// parser reports the anchor right after the node `id`) if they come
    /// before its content.
    fn node_start(&mut self, id: usize, span: &Span) -> Marker {
        let mut start = span.start;
        if let Some(tag) = span.tag_start
            && tag.index() < start.index()
        {
            start = tag;
        }
        if id != 0 {
            match self.raw() {
                Some(Ok((Raw::Anchor(anchor, name), at))) if anchor == id => {
                    self.names.insert(id, name.into());
                    if at.start.index() < start.index() {
                        start = at.start;
                    }
                }
                other => self.peeked = other,
            }
        }
        start
    }
}

impl Iterator for Events<'_> {
    type Item = (Event, Mark);

    fn next(&mut self) -> Option<(Event, Mark)> {
        loop {
            let Some(Ok((raw, span))) = self.raw() else {
                // The end of the stream, or a syntax error.
                self.parser = None;
                return None;
            };
            let start = match &raw {
                Raw::Scalar(_, _, id, _)
                | Raw::SequenceStart(_, id, _)
                | Raw::MappingStart(_, id, _) => self.node_start(*id, &span),
                _ => span.start,
            };
            let mark = Mark {
                line: start.line(),
                column: start.col().saturating_add(1),
            };
            let anchor = |id: usize| (id != 0).then_some(id);
            let event = match raw {
                Raw::DocumentStart(..) => Event::DocumentStart,
                Raw::DocumentEnd => Event::DocumentEnd,
                Raw::Scalar(value, _, id, _) => Event::Scalar {
                    anchor: anchor(id),
                    value: bytes(value),
                },
                Raw::SequenceStart(_, id, _) => Event::CollectionStart {
                    anchor: anchor(id),
                    mapping: false,
                },
                Raw::MappingStart(_, id, _) => Event::CollectionStart {
                    anchor: anchor(id),
                    mapping: true,
                },
                Raw::SequenceEnd | Raw::MappingEnd => Event::CollectionEnd,
                Raw::Alias(id) => Event::Alias {
                    anchor: id,
                    name: self.names.get(&id).cloned().unwrap_or_default(),
                },
                Raw::StreamEnd => {
                    self.parser = None;
                    return None;
                }
                // The stream's start, comments, anchor and unresolved-alias
                // events (not asked for): nothing to report.
                _ => continue,
            };
            return Some((event, mark));
        }
    }
}

fn bytes(value: Cow<'_, str>) -> Box<[u8]> {
    match value {
        Cow::Borrowed(s) => Box::from(s.as_bytes()),
        Cow::Owned(s) => s.into_bytes().into_boxed_slice(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> Vec<(Event, (usize, usize))> {
        Events::new(text)
            .map(|(e, m)| (e, (m.line, m.column)))
            .collect()
    }

    #[test]
    fn reports_events_with_one_based_positions() {
        let got = events("a: &x [1]\nb: *x\n");
        let scalar = |v: &str| Event::Scalar {
            anchor: None,
            value: v.as_bytes().into(),
        };
        let starts: Vec<_> = got
            .iter()
            .filter(|(e, _)| !matches!(e, Event::CollectionEnd | Event::DocumentEnd))
            .collect();
        let Some((
            Event::CollectionStart {
                anchor: Some(x), ..
            },
            _,
        )) = starts.get(3)
        else {
            panic!("no anchored sequence: {got:?}");
        };
        assert_eq!(
            starts,
            vec![
                &(Event::DocumentStart, (1, 1)),
                &(
                    Event::CollectionStart {
                        anchor: None,
                        mapping: true
                    },
                    (1, 1)
                ),
                &(scalar("a"), (1, 1)),
                &(
                    Event::CollectionStart {
                        anchor: Some(*x),
                        mapping: false
                    },
                    (1, 4)
                ),
                &(scalar("1"), (1, 8)),
                &(scalar("b"), (2, 1)),
                &(
                    Event::Alias {
                        anchor: *x,
                        name: "x".into()
                    },
                    (2, 4)
                ),
            ]
        );
        let ends = got
            .iter()
            .filter(|(e, _)| *e == Event::CollectionEnd)
            .count();
        assert_eq!(ends, 2);
        assert_eq!(got.last().map(|(e, _)| e), Some(&Event::DocumentEnd));
    }

    #[test]
    fn stops_at_a_syntax_error() {
        let got = events("a: b: c\n");
        assert!(
            got.len() <= 4 && !got.iter().any(|(e, _)| *e == Event::DocumentEnd),
            "{got:?}"
        );
        assert_eq!(events("").len(), 0);
        assert!(
            events("a: *nowhere\n")
                .iter()
                .all(|(e, _)| !matches!(e, Event::Alias { .. })),
            "an alias naming no anchor ends the stream"
        );
    }

    #[test]
    fn a_deep_flow_nest_hands_out_events_before_the_scanner_gives_up() {
        let depth = 100_000;
        let text = format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        let opened = Events::new(&text)
            .take_while(|(e, _)| {
                matches!(
                    e,
                    Event::DocumentStart | Event::CollectionStart { .. } | Event::Scalar { .. }
                )
            })
            .take(100)
            .count();
        assert_eq!(opened, 100, "events come before the whole nest is scanned");
    }

    #[test]
    fn names_of_aliases_with_multibyte_text_before_them() {
        let got = events("ä: &ñame 1\nb: *ñame\n");
        assert!(
            got.iter().any(
                |(e, m)| matches!(e, Event::Alias { name, .. } if &**name == "ñame")
                    && *m == (2, 4)
            ),
            "{got:?}"
        );
    }
}
