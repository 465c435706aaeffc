//! Decoding helpers that reproduce Go's `encoding/json` leniency: field names
//! match case-insensitively, unknown fields are ignored, and `null` means the
//! same as an absent field. Errors name the JSON path and position.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// `T` decoded from a value that may be `null` (→ `T::default()`).
pub(crate) struct Nullable<T>(pub T);

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for Nullable<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Nullable(Option::<T>::deserialize(d)?.unwrap_or_default()))
    }
}

/// A request body that is not the JSON the verb expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// JSON path of the failing field ("" when it is the document itself).
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub what: String,
    /// The embedded JSON text the position counts from, until
    /// [`DecodeError::relocate`] maps it into the whole body.
    within: Option<String>,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid JSON at line {} column {}",
            self.line, self.column
        )?;
        if !self.path.is_empty() {
            write!(f, ", field {}", self.path)?;
        }
        write!(f, ": {}", self.what)
    }
}

impl std::error::Error for DecodeError {}

impl DecodeError {
    /// Maps a position inside an embedded value (see [`from_raw`]) to a
    /// position in `body`, the request the value came from.
    #[must_use]
    pub fn relocate(mut self, body: &[u8]) -> Self {
        let Some(within) = self.within.take() else {
            return self;
        };
        let needle = within.as_bytes();
        let Some(offset) = (!needle.is_empty())
            .then(|| body.windows(needle.len()).position(|w| w == needle))
            .flatten()
        else {
            return self;
        };
        let before = &body[..offset];
        let base_line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let base_column = offset
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        // No position inside the value (an error raised after it was read):
        // point at the value itself.
        if self.line == 0 {
            (self.line, self.column) = (1, 1);
        }
        if self.line <= 1 {
            self.column += base_column - 1;
        }
        self.line += base_line - 1;
        self
    }
}

/// Decodes `bytes` as `T`, reporting the failing field's path and position.
///
/// The body is checked as UTF-8 once, whole, and decoded as text: reading
/// from a `&str`, serde does not check each string again (5,000 node names
/// cost 5 % of a `/filter` that way). A body that is not UTF-8 is decoded as
/// bytes, whose error names where.
pub fn from_slice<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => from_text(text),
        Err(_) => naming_the_field(serde_json::Deserializer::from_slice(bytes)),
    }
}

/// [`from_slice`] for text already known to be UTF-8.
fn from_text<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, DecodeError> {
    // Fast path: valid text skips serde_path_to_error's per-value tracking;
    // failing text is decoded again to name the failing field.
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    naming_the_field(serde_json::Deserializer::from_str(text))
}

/// Decodes with the path of every value tracked, so that an error names the
/// failing field.
fn naming_the_field<'de, R: serde_json::de::Read<'de>, T: Deserialize<'de>>(
    mut de: serde_json::Deserializer<R>,
) -> Result<T, DecodeError> {
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| describe(e.path().to_string(), e.inner()))?;
    de.end().map_err(|e| describe(String::new(), &e))?;
    Ok(value)
}

/// Decodes an embedded raw value (the `Pod` of a request, one of its
/// `Nodes.items`) whose JSON path in the request is `field`.
pub fn from_raw<T: DeserializeOwned>(
    raw: &serde_json::value::RawValue,
    field: &str,
) -> Result<T, DecodeError> {
    from_text(raw.get()).map_err(|mut e| {
        e.path = match e.path.as_str() {
            "" => field.to_string(),
            p if p.starts_with('[') => format!("{field}{p}"),
            p => format!("{field}.{p}"),
        };
        e.within = Some(raw.get().to_string());
        e
    })
}

/// [`from_raw`] with the field's path built only when decoding fails (a
/// full-node request decodes thousands of embedded nodes).
pub fn from_raw_lazy<T: DeserializeOwned>(
    raw: &serde_json::value::RawValue,
    field: impl FnOnce() -> String,
) -> Result<T, DecodeError> {
    if let Ok(value) = serde_json::from_str(raw.get()) {
        return Ok(value);
    }
    from_raw(raw, &field())
}

fn describe(path: String, e: &serde_json::Error) -> DecodeError {
    // serde_path_to_error renders an unknown position as "?" and the root as ".".
    let path = if path == "." || path == "?" {
        String::new()
    } else {
        path
    };
    DecodeError {
        path,
        line: e.line(),
        column: e.column(),
        what: strip_position(&e.to_string()),
        within: None,
    }
}

/// serde_json appends " at line L column C"; the message states it up front.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Defines a wire struct whose JSON keys are Go field names: serialized in
/// declaration order with every field present, decoded case-insensitively
/// with `null`/absent fields left at their default.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $key:literal => $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, serde::Serialize)]
        pub struct $name {
            $( $(#[$fmeta])* #[serde(rename = $key)] pub $field: $ty, )*
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct FieldsVisitor;
                impl<'de> serde::de::Visitor<'de> for FieldsVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a JSON object (", stringify!($name), ")"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                        let mut out = $name::default();
                        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                            $(
                                if key.eq_ignore_ascii_case($key) {
                                    out.$field = map.next_value::<$crate::protocol::decode::Nullable<$ty>>()?.0;
                                    continue;
                                }
                            )*
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                        Ok(out)
                    }
                }
                struct NullableVisitor;
                impl<'de> serde::de::Visitor<'de> for NullableVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a JSON object (", stringify!($name), ") or null"))
                    }
                    fn visit_none<E: serde::de::Error>(self) -> Result<$name, E> {
                        Ok($name::default())
                    }
                    fn visit_unit<E: serde::de::Error>(self) -> Result<$name, E> {
                        Ok($name::default())
                    }
                    fn visit_some<D2: serde::Deserializer<'de>>(self, d: D2) -> Result<$name, D2::Error> {
                        d.deserialize_map(FieldsVisitor)
                    }
                }
                d.deserialize_option(NullableVisitor)
            }
        }
    };
}

pub(crate) use wire_struct;
