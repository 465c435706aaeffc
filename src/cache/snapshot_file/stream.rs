//! Reading one snapshot document without holding it whole: a List's `items`
//! are taken one object at a time, each decoded, checked and reduced to the
//! cache's view before the next is read.
//!
//! Building the document's YAML value tree first (what the loader did)
//! held the whole cluster as a generic tree on top of the cache: a
//! 150,000-pod List in a 60 MB file peaked above 2 GB. Only one item's
//! tree is alive at a time now. Everything but the items of a List is read
//! into a value as before, and a List whose `kind` comes after its `items`
//! (rare: every encoder writes `kind` first) is buffered as before, so
//! the checks and messages are the same for every input.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_yaml_ng::{Mapping, Value};

use super::{FieldPath, Place, Reader};

/// Reads one document into `reader`. A problem found in an object is kept in
/// `reader.failure` (the parse then stops with a placeholder error).
pub(super) struct Document<'r, 'a> {
    pub reader: &'r mut Reader<'a>,
    pub document: usize,
}

/// Stops the parse; the real failure is in `reader.failure`.
fn stop<E: de::Error>() -> E {
    E::custom("snapshot object rejected")
}

impl Document<'_, '_> {
    fn place(&self, within: FieldPath) -> Place {
        Place {
            document: self.document,
            within,
        }
    }

    fn add<E: de::Error>(&mut self, value: Value, within: FieldPath) -> Result<(), E> {
        let at = self.place(within);
        self.reader.add(value, &at).map_err(|f| {
            self.reader.failure = Some(f);
            stop()
        })
    }
}

impl<'de> DeserializeSeed<'de> for Document<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! scalar {
    ($($visit:ident: $ty:ty),*) => {$(
        fn $visit<E: de::Error>(mut self, v: $ty) -> Result<(), E> {
            self.add(Value::from(v), FieldPath::default())
        }
    )*};
}

impl<'de> Visitor<'de> for Document<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a snapshot document")
    }
    scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut j = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            self.add(item, FieldPath::default().index(j))?;
            j += 1;
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut rest = Mapping::new();
        let mut kind: Option<String> = None;
        let mut streamed = false;
        while let Some(key) = map.next_key::<Value>()? {
            let is_list = kind
                .as_deref()
                .is_some_and(|k| k == "List" || k.ends_with("List"));
            if key.as_str() == Some("items") && is_list && !streamed {
                map.next_value_seed(Items {
                    document: Document {
                        reader: &mut *self.reader,
                        document: self.document,
                    },
                    kind: kind.clone().unwrap_or_default(),
                })?;
                streamed = true;
                continue;
            }
            let value: Value = map.next_value()?;
            if key.as_str() == Some("kind") && kind.is_none() {
                kind = Some(value.as_str().unwrap_or("").to_string());
            }
            rest.insert(key, value);
        }
        if !streamed {
            return self.add(Value::Mapping(rest), FieldPath::default());
        }
        Ok(())
    }
}

/// A List's `items`, read one object at a time.
struct Items<'r, 'a> {
    document: Document<'r, 'a>,
    kind: String,
}

impl Items<'_, '_> {
    fn not_a_list<E: de::Error>(self) -> Result<(), E> {
        let at = self.document.place(FieldPath::default());
        let reader = self.document.reader;
        let failure = reader.fail(
            &at,
            &self.kind,
            &FieldPath::default().key("items"),
            "must be a list",
        );
        reader.failure = Some(failure);
        Err(stop())
    }
}

impl<'de> DeserializeSeed<'de> for Items<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! not_a_list {
    ($($visit:ident: $ty:ty),*) => {$(
        fn $visit<E: de::Error>(self, _: $ty) -> Result<(), E> {
            self.not_a_list()
        }
    )*};
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }
    not_a_list!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.not_a_list()
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut j = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            self.document
                .add(item, FieldPath::default().key("items").index(j))?;
            j += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    const NODE: &str = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}"#;
    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"nodeName":"a","containers":[]}}"#;

    #[test]
    fn a_list_reads_the_same_whether_kind_comes_before_or_after_items() {
        let streamed = parse(&format!(r#"{{"kind":"List","items":[{NODE},{POD}]}}"#), "s")
            .expect("kind first");
        let buffered =
            parse(&format!(r#"{{"items":[{NODE},{POD}],"kind":"List"}}"#), "s").expect("kind last");
        for s in [&streamed, &buffered] {
            assert_eq!(s.nodes.len(), 1);
            assert_eq!(s.pods[0].node_name.as_deref(), Some("a"));
        }
    }

    #[test]
    fn a_streamed_item_that_fails_is_reported_at_its_place() {
        let text = format!(
            "{{\"kind\":\"List\",\"items\":[{NODE},\n{{\"kind\":\"Node\",\"metadata\":{{}}}}]}}"
        );
        let e = parse(&text, "s").unwrap_err().to_string();
        assert!(e.starts_with("s:2:"), "{e}");
        assert!(e.contains("document 1, items[1]"), "{e}");
        let e = parse(r#"{"kind":"List","items":{"a":1}}"#, "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("items: must be a list"), "{e}");
        let e = parse(r#"{"kind":"List","items":[1, 2]}"#, "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("items[0]"), "{e}");
    }
}
