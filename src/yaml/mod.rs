//! Bounded YAML reading, shared by the policy and snapshot loaders.
//!
//! - [`check_limits`]: refuses, before deserializing, a text nested deeper
//!   than [`MAX_DEPTH`] levels or whose aliases would expand it by more than
//!   its own size (at least [`MIN_ALIAS_BUDGET`]), at the offending position.
//! - [`locate`]: the position of a field path, for errors found once the text
//!   is a value and positions are gone.

mod events;
mod limits;
mod locate;

use std::fmt;

pub use limits::check as check_limits;
pub use locate::locate;

/// Deepest nesting of mappings and sequences a file may have. Kubernetes
/// objects and policies need about 15; serde_yaml_ng stops at 128 anyway,
/// but only after parsing the whole document.
pub const MAX_DEPTH: usize = 64;

/// What aliases may add to a file at least, in bytes (see [`check_limits`]):
/// small files may repeat a node a few times, whatever their size.
pub const MIN_ALIAS_BUDGET: u64 = 1 << 20;

/// A position in a text: 1-based line and column, as serde_yaml_ng counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// A text past one of the limits of [`check_limits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    /// Where the limit was crossed.
    pub mark: Mark,
    /// Which limit, and by what.
    pub message: String,
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// A field path (`items[2].spec.containers[0].name`), as serde_path_to_error
/// prints it, that [`locate`] can find.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    /// This path followed by `key`.
    #[must_use]
    pub fn key(&self, key: &str) -> FieldPath {
        self.with(Segment::Key(key.to_string()))
    }

    /// This path followed by `index`.
    #[must_use]
    pub fn index(&self, index: usize) -> FieldPath {
        self.with(Segment::Index(index))
    }

    /// This path followed by `tail`.
    #[must_use]
    pub fn join(&self, tail: &FieldPath) -> FieldPath {
        let mut out = self.clone();
        out.0.extend(tail.0.iter().cloned());
        out
    }

    fn with(&self, segment: Segment) -> FieldPath {
        let mut out = self.clone();
        out.0.push(segment);
        out
    }

    /// The path serde_path_to_error tracked (up to a segment it could not name).
    pub fn from_tracked(path: &serde_path_to_error::Path) -> FieldPath {
        use serde_path_to_error::Segment as Tracked;
        FieldPath(
            path.iter()
                .map_while(|s| match s {
                    Tracked::Seq { index } => Some(Segment::Index(*index)),
                    Tracked::Map { key } | Tracked::Enum { variant: key } => {
                        Some(Segment::Key(key.clone()))
                    }
                    Tracked::Unknown => None,
                })
                .collect(),
        )
    }
}

/// A serde_yaml_ng error as its position and its message, without the
/// " at line L column C" it appends (callers print the position up front).
pub fn split_error(error: &serde_yaml_ng::Error) -> (Option<Mark>, String) {
    let mark = error.location().map(|l| Mark {
        line: l.line(),
        column: l.column(),
    });
    let message = error.to_string();
    let message = match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    };
    (mark, message)
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(k) if i == 0 => f.write_str(k)?,
                Segment::Key(k) => write!(f, ".{k}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_serde_path_to_error() {
        let p = FieldPath::default()
            .key("items")
            .index(2)
            .key("spec")
            .key("containers")
            .index(0);
        assert_eq!(p.to_string(), "items[2].spec.containers[0]");
        assert_eq!(FieldPath::default().index(1).to_string(), "[1]");
    }
}
