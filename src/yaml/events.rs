//! The YAML event stream with positions, straight from libyaml (the parser
//! serde_yaml_ng uses, so events and positions are the ones it sees).
//!
//! serde_yaml_ng keeps its parser private and reads a whole document before
//! deserializing it; limits and position lookups need the events one at a
//! time, so they can stop at the first offending one.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::Mark;

/// One parse event, with the parts limits and position lookups need.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// `---` or the implicit start of a document.
    DocumentStart,
    /// The end of a document.
    DocumentEnd,
    /// A scalar, with its anchor.
    Scalar {
        /// `&name` on the scalar.
        anchor: Option<Box<[u8]>>,
        /// The scalar's text after unquoting.
        value: Box<[u8]>,
    },
    /// The start of a sequence or a mapping, with its anchor.
    CollectionStart {
        /// `&name` on the collection.
        anchor: Option<Box<[u8]>>,
        /// A mapping (else a sequence).
        mapping: bool,
    },
    /// The end of the innermost open sequence or mapping.
    CollectionEnd,
    /// `*name`.
    Alias(Box<[u8]>),
}

/// The events of one text, in order, each with the position it starts at.
///
/// Ends at the end of the stream or at the first syntax error: the
/// deserializer reads the same text and reports that error in its own words.
pub(super) struct Events<'text> {
    /// Boxed because libyaml keeps a pointer to the parser inside it (its
    /// read handler's data), so the parser must not move once initialized.
    /// `None` once the stream ended or failed.
    parser: Option<Box<unsafe_libyaml::yaml_parser_t>>,
    /// libyaml reads the text through a raw pointer.
    text: PhantomData<&'text str>,
}

impl<'text> Events<'text> {
    /// Starts parsing `text`.
    pub(super) fn new(text: &'text str) -> Self {
        let mut slot = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        // SAFETY: `yaml_parser_initialize` fully initializes the parser it is
        // given; the text outlives the parser (`'text`) and is not moved.
        let parser = unsafe {
            if unsafe_libyaml::yaml_parser_initialize(slot.as_mut_ptr()).fail {
                // Only fails when it cannot allocate; treated as an empty stream.
                None
            } else {
                unsafe_libyaml::yaml_parser_set_encoding(
                    slot.as_mut_ptr(),
                    unsafe_libyaml::YAML_UTF8_ENCODING,
                );
                unsafe_libyaml::yaml_parser_set_input_string(
                    slot.as_mut_ptr(),
                    text.as_ptr(),
                    text.len() as u64,
                );
                Some(Box::from_raw(
                    Box::into_raw(slot).cast::<unsafe_libyaml::yaml_parser_t>(),
                ))
            }
        };
        Events {
            parser,
            text: PhantomData,
        }
    }

    /// Drops the parser: libyaml must not be called again after the end of
    /// the stream or an error.
    fn finish(&mut self) {
        if let Some(mut parser) = self.parser.take() {
            // SAFETY: the parser was initialized in `new` and is deleted once.
            unsafe { unsafe_libyaml::yaml_parser_delete(&mut *parser) };
        }
    }
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Iterator for Events<'_> {
    type Item = (Event, Mark);

    fn next(&mut self) -> Option<(Event, Mark)> {
        loop {
            let parser = self.parser.as_mut()?;
            let mut raw = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
            // SAFETY: the parser is initialized and alive; on success the event
            // is initialized, read once here and then deleted.
            let parsed = unsafe {
                if unsafe_libyaml::yaml_parser_parse(&mut **parser, raw.as_mut_ptr()).fail {
                    None
                } else {
                    let event = raw.as_mut_ptr();
                    let converted = convert(&*event);
                    let start = (*event).start_mark;
                    unsafe_libyaml::yaml_event_delete(event);
                    Some((converted, start))
                }
            };
            let Some((converted, start)) = parsed else {
                self.finish();
                return None;
            };
            let mark = Mark {
                line: usize::try_from(start.line).map_or(usize::MAX, |l| l.saturating_add(1)),
                column: usize::try_from(start.column).map_or(usize::MAX, |c| c.saturating_add(1)),
            };
            match converted {
                Converted::Event(event) => return Some((event, mark)),
                Converted::Skip => {}
                Converted::End => {
                    self.finish();
                    return None;
                }
            }
        }
    }
}

enum Converted {
    Event(Event),
    /// The start of the stream: nothing to report.
    Skip,
    /// The end of the stream.
    End,
}

/// Copies what we need out of a libyaml event.
///
/// # Safety
/// `event` must be an initialized event from `yaml_parser_parse`.
unsafe fn convert(event: &unsafe_libyaml::yaml_event_t) -> Converted {
    // SAFETY (for every union read below): `type_` says which member is set;
    // anchors are NUL-terminated or null, scalar values are `length` bytes.
    unsafe {
        let event = match event.type_ {
            unsafe_libyaml::YAML_STREAM_START_EVENT => return Converted::Skip,
            unsafe_libyaml::YAML_STREAM_END_EVENT => return Converted::End,
            unsafe_libyaml::YAML_DOCUMENT_START_EVENT => Event::DocumentStart,
            unsafe_libyaml::YAML_DOCUMENT_END_EVENT => Event::DocumentEnd,
            unsafe_libyaml::YAML_ALIAS_EVENT => {
                Event::Alias(c_string(event.data.alias.anchor).unwrap_or_default())
            }
            unsafe_libyaml::YAML_SCALAR_EVENT => {
                let scalar = event.data.scalar;
                let value = if scalar.value.is_null() {
                    Box::default()
                } else {
                    let len = usize::try_from(scalar.length).unwrap_or(0);
                    Box::from(std::slice::from_raw_parts(scalar.value, len))
                };
                Event::Scalar {
                    anchor: c_string(scalar.anchor),
                    value,
                }
            }
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT => Event::CollectionStart {
                anchor: c_string(event.data.sequence_start.anchor),
                mapping: false,
            },
            unsafe_libyaml::YAML_MAPPING_START_EVENT => Event::CollectionStart {
                anchor: c_string(event.data.mapping_start.anchor),
                mapping: true,
            },
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                Event::CollectionEnd
            }
            // YAML_NO_EVENT is never returned on success.
            _ => return Converted::Skip,
        };
        Converted::Event(event)
    }
}

/// # Safety
/// `ptr` must be null or point to a NUL-terminated string.
unsafe fn c_string(ptr: *const u8) -> Option<Box<[u8]>> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated, per the contract.
    let s = unsafe { CStr::from_ptr(ptr.cast()) };
    Some(Box::from(s.to_bytes()))
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
        assert_eq!(
            got,
            vec![
                (Event::DocumentStart, (1, 1)),
                (
                    Event::CollectionStart {
                        anchor: None,
                        mapping: true
                    },
                    (1, 1)
                ),
                (scalar("a"), (1, 1)),
                (
                    Event::CollectionStart {
                        anchor: Some(b"x".as_slice().into()),
                        mapping: false
                    },
                    (1, 4)
                ),
                (scalar("1"), (1, 8)),
                (Event::CollectionEnd, (1, 9)),
                (scalar("b"), (2, 1)),
                (Event::Alias(b"x".as_slice().into()), (2, 4)),
                (Event::CollectionEnd, (3, 1)),
                (Event::DocumentEnd, (3, 1)),
            ]
        );
    }

    #[test]
    fn stops_at_a_syntax_error() {
        let got = events("a: b: c\n");
        // Document, mapping, `a`, `b`; the second `:` is the error and ends the stream.
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(events("").len(), 0);
    }
}
