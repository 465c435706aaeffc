//! Value types of plugin arguments and policy fields that validate themselves
//! while the policy is decoded, so an
//! out-of-range value is reported at its own line and column.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, de};

/// A string that must not be empty (label keys, annotation names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct NonEmpty(String);

impl NonEmpty {
    /// Wraps a known non-empty literal (defaults).
    pub fn from_static(s: &'static str) -> Self {
        debug_assert!(!s.is_empty());
        NonEmpty(s.to_string())
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for NonEmpty {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NonEmpty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(de::Error::invalid_value(
                de::Unexpected::Str(""),
                &"a non-empty string",
            ));
        }
        Ok(NonEmpty(s))
    }
}

/// A plugin score, 0..=100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Score(i64);

impl Score {
    /// A known-valid score (defaults).
    pub const fn new_const(v: i64) -> Self {
        assert!(v >= 0 && v <= 100);
        Score(v)
    }

    /// The value.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Score {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        if !(0..=100).contains(&v) {
            return Err(de::Error::invalid_value(
                de::Unexpected::Signed(v),
                &"a score between 0 and 100",
            ));
        }
        Ok(Score(v))
    }
}

/// A plugin weight, > 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Weight(i64);

impl Weight {
    /// The value.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight(1)
    }
}

/// Weights above this could overflow `weight × 100 × plugins` sums.
const MAX_WEIGHT: i64 = 1_000_000;

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        if !(1..=MAX_WEIGHT).contains(&v) {
            return Err(de::Error::invalid_value(
                de::Unexpected::Signed(v),
                &"a weight between 1 and 1000000",
            ));
        }
        Ok(Weight(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_out_of_range_and_empty() {
        assert!(serde_json::from_str::<Score>("101").is_err());
        assert!(serde_json::from_str::<Score>("-1").is_err());
        assert_eq!(serde_json::from_str::<Score>("100").unwrap().get(), 100);
        assert!(serde_json::from_str::<Weight>("0").is_err());
        assert_eq!(serde_json::from_str::<Weight>("3").unwrap().get(), 3);
        let e = serde_json::from_str::<NonEmpty>("\"\"").unwrap_err();
        assert!(e.to_string().contains("non-empty"), "{e}");
    }
}

/// A `metav1.Duration` in plugin args ("600s", "10m", "1m30s"), parsed as
/// kube-scheduler parses it; written back in Go's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(std::time::Duration);

impl GoDuration {
    /// `d` as an argument.
    pub const fn new(d: std::time::Duration) -> Self {
        GoDuration(d)
    }

    /// A known duration (defaults).
    pub const fn from_secs(secs: u64) -> Self {
        GoDuration(std::time::Duration::from_secs(secs))
    }

    /// The duration.
    pub fn get(self) -> std::time::Duration {
        self.0
    }
}

impl Serialize for GoDuration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::framework::go_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        crate::framework::parse_go_duration(&s)
            .map(GoDuration)
            .map_err(de::Error::custom)
    }
}
