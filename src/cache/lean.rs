//! Decoding watched objects without `metadata.managedFields`.
//!
//! Server-side apply records, per field manager, every field it set
//! (`managedFields[].fieldsV1`, a free-form tree). No plugin reads it, yet
//! k8s-openapi decodes it into `serde_json::Value` trees: for pods it was a
//! sixth of the decoding time of placer's watches. [`Lean<K>`] decodes `K`
//! as k8s-openapi does but skips that key while parsing, so the tree is never
//! built (the bytes are still checked to be valid JSON).
//!
//! The filter is a deserializer adapter: at the object's top level it only
//! wraps the value of `metadata`; inside `metadata` it drops
//! `managedFields`. Every other field goes to k8s-openapi's own decoder
//! untouched, so what comes out is exactly what it would give, minus that
//! field.
//!
//! Nodes go further ([`LeanNode`]): they are decoded straight into the
//! cache's record.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::objects::NodeInfo;

/// `K` decoded without `metadata.managedFields`; everything else as `K`
/// decodes it. Serializes as `K`.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct Lean<K>(pub K);

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Filtered {
            inner: deserializer,
            level: Level::Object,
        })
        .map(Lean)
    }
}

/// The type-level half of a [`Resource`] impl, taken from the API type `$k`
/// the lean type stands for (its kind, group, version, plural and scope).
macro_rules! resource_of {
    ($k:ty) => {
        type DynamicType = <$k as Resource>::DynamicType;
        type Scope = <$k as Resource>::Scope;

        fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
            <$k>::kind(dt)
        }
        fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
            <$k>::group(dt)
        }
        fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
            <$k>::version(dt)
        }
        fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
            <$k>::plural(dt)
        }
    };
}

impl<K: Resource> Resource for Lean<K> {
    resource_of!(K);

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// A watched Node decoded straight into the record the cache keeps
/// ([`NodeInfo::deserialize_watched`]): no k8s-openapi `Node`, no conditions,
/// addresses or images' digests beyond what plugins read. Heartbeats are most
/// of a cluster's watch traffic, and each one used to be decoded in full
/// only to be compared equal and dropped.
///
/// As a [`Resource`] it is a Node; its metadata holds only the resource
/// version, which is all the watch loop reads (the name is the record's).
#[derive(Debug, Clone)]
pub struct LeanNode {
    meta: ObjectMeta,
    /// The record.
    pub info: NodeInfo,
}

impl<'de> Deserialize<'de> for LeanNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (info, resource_version) = NodeInfo::deserialize_watched(d)?;
        Ok(LeanNode {
            meta: ObjectMeta {
                resource_version,
                ..ObjectMeta::default()
            },
            info,
        })
    }
}

impl Resource for LeanNode {
    resource_of!(Node);

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// Where the adapter is: what it does to the keys of the map it reads.
#[derive(Clone, Copy)]
enum Level {
    /// The object: the value of `metadata` is read at [`Level::Metadata`].
    Object,
    /// The object's metadata: `managedFields` is skipped.
    Metadata,
}

/// A deserializer that applies [`Level`]'s rule to the map it is asked for.
struct Filtered<D> {
    inner: D,
    level: Level,
}

/// Forwards a `deserialize_*` method to the inner deserializer unchanged:
/// only maps are filtered.
macro_rules! forward {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filtered<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(FilteredVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(FilteredVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            FilteredVisitor {
                inner: visitor,
                level: self.level,
            },
        )
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(FilteredVisitor {
            inner: visitor,
            level: self.level,
        })
    }

    forward! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f32
        deserialize_f64 deserialize_char deserialize_str deserialize_string deserialize_bytes
        deserialize_byte_buf deserialize_unit deserialize_seq deserialize_identifier
        deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// The caller's visitor, handed a filtered map (and an option's value
/// filtered at the same level: `metadata` may be written as an option).
struct FilteredVisitor<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilteredVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(FilteredMap {
            inner: map,
            level: self.level,
            value_level: None,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Filtered {
            inner: d,
            level: self.level,
        })
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.inner.visit_bool(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.inner.visit_i64(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.inner.visit_u64(v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.inner.visit_f64(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.inner.visit_string(v)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }
}

/// A map whose keys follow [`Level`]'s rule.
struct FilteredMap<A> {
    inner: A,
    level: Level,
    /// The level of the value about to be read (`Some` for `metadata`).
    value_level: Option<Level>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilteredMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key_seed(KeyName)? else {
                return Ok(None);
            };
            match (self.level, key.as_ref()) {
                (Level::Metadata, "managedFields") => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                (Level::Object, "metadata") => self.value_level = Some(Level::Metadata),
                _ => self.value_level = None,
            }
            return match key {
                Cow::Borrowed(k) => seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some),
                Cow::Owned(k) => seed.deserialize(StringDeserializer::new(k)).map(Some),
            };
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        match self.value_level.take() {
            Some(level) => self
                .inner
                .next_value_seed(FilteredSeed { inner: seed, level }),
            None => self.inner.next_value_seed(seed),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A value read through [`Filtered`] at `level`.
struct FilteredSeed<S> {
    inner: S,
    level: Level,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for FilteredSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Filtered {
            inner: d,
            level: self.level,
        })
    }
}

/// A map key, borrowed from the input when it can be (no allocation for
/// the usual unescaped keys).
struct KeyName;

impl<'de> DeserializeSeed<'de> for KeyName {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(KeyVisitor(PhantomData))
    }
}

struct KeyVisitor<'de>(PhantomData<&'de ()>);

impl<'de> Visitor<'de> for KeyVisitor<'de> {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::ResourceExt;
    use serde_json::json;

    use super::*;

    fn pod_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1",
                "namespace": "shop",
                "labels": { "app": "web", "managedFields": "a label, kept" },
                "resourceVersion": "42",
                "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Apply",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:metadata": { "f:labels": { ".": {}, "f:app": {} } } }
                }],
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1",
                    "controller": true
                }]
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{
                    "name": "c", "image": "nginx:1.27",
                    "resources": { "requests": { "cpu": "250m", "memory": "64Mi" } }
                }]
            },
            "status": { "phase": "Running" }
        })
    }

    #[test]
    fn decodes_what_k8s_openapi_decodes_without_managed_fields() {
        let text = pod_json().to_string();
        let lean: Lean<Pod> = serde_json::from_str(&text).unwrap();
        let mut full: Pod = serde_json::from_str(&text).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        assert_eq!(lean.0.metadata.managed_fields, None);
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
        // Only metadata's own key is dropped, not a label of that name.
        assert_eq!(
            lean.0.metadata.labels.as_ref().unwrap()["managedFields"],
            "a label, kept"
        );
    }

    #[test]
    fn decodes_nodes_and_watch_events_too() {
        let node = json!({
            "metadata": { "name": "n1", "managedFields": [{ "manager": "kubelet" }] },
            "status": { "allocatable": { "cpu": "4" } }
        });
        let lean: Lean<Node> = serde_json::from_value(node.clone()).unwrap();
        assert_eq!(lean.0.metadata.name.as_deref(), Some("n1"));
        assert_eq!(lean.0.metadata.managed_fields, None);
        let event = json!({ "type": "MODIFIED", "object": node }).to_string();
        let event: kube::api::WatchEvent<Lean<Node>> = serde_json::from_str(&event).unwrap();
        let kube::api::WatchEvent::Modified(n) = event else {
            panic!("not a modification")
        };
        assert_eq!(n.0.metadata.managed_fields, None);
    }

    /// A node as the API server sends a kwok node's heartbeat: managed fields, conditions,
    /// addresses, `nodeInfo`, capacity beside allocatable.
    fn heartbeat_node() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "kwok-node-17",
                "uid": "6d1b7a0e-8a36-4a8e-9d55-0b8f3c1f1d2a",
                "resourceVersion": "918273",
                "creationTimestamp": "2026-12-05T04:27:41Z",
                "labels": {
                    "kubernetes.io/hostname": "kwok-node-17",
                    "topology.kubernetes.io/zone": "zone-b",
                    "net": "high"
                },
                "annotations": { "kwok.x-k8s.io/node": "fake" },
                "managedFields": [{
                    "manager": "kwok", "operation": "Update", "subresource": "status",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:status": { "f:conditions": { "k:{\"type\":\"Ready\"}": {
                        "f:lastHeartbeatTime": {} } } } }
                }]
            },
            "spec": {
                "podCIDR": "10.0.17.0/24",
                "taints": [{ "key": "dedicated", "value": "gpu", "effect": "NoSchedule" }]
            },
            "status": {
                "capacity": { "cpu": "32", "memory": "256Gi", "pods": "110" },
                "allocatable": { "cpu": "31800m", "memory": "250Gi", "pods": "110",
                                 "example.com/gpu": "8" },
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2026-12-05T04:31:02Z",
                    "lastTransitionTime": "2026-12-05T04:27:41Z"
                }],
                "addresses": [{ "type": "InternalIP", "address": "10.0.17.4" }],
                "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
                "nodeInfo": {
                    "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                    "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "fake",
                    "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
                },
                "images": [{ "names": ["reg/app@sha256:1", "reg/app:v1"], "sizeBytes": 300 }],
                "declaredFeatures": ["ExtendWebSocketsToKubelet"],
                "phase": "Running"
            }
        })
    }

    #[test]
    fn lean_nodes_decode_what_the_api_objects_give() {
        let text = heartbeat_node().to_string();
        let lean: LeanNode = serde_json::from_str(&text).unwrap();
        let full: Node = serde_json::from_str(&text).unwrap();
        assert_eq!(lean.info, NodeInfo::from(&full));
        assert_eq!(lean.resource_version().as_deref(), Some("918273"));
        assert_eq!(lean.info.allocatable.milli_cpu, 31800);
        assert_eq!(lean.info.taints.len(), 1);
        assert_eq!(LeanNode::plural(&()), "nodes");

        // A quantity the API server let through but placer cannot parse: the whole list
        // counts as zero in both paths, and the watch does not fail on it.
        let mut odd = heartbeat_node();
        odd["status"]["allocatable"]["example.com/gpu"] = json!("8 units");
        let text = odd.to_string();
        let lean: LeanNode = serde_json::from_str(&text).unwrap();
        let full: Node = serde_json::from_str(&text).unwrap();
        assert_eq!(lean.info, NodeInfo::from(&full));
        assert_eq!(lean.info.allocatable, crate::objects::Resources::default());
        // An extender request's node is still refused, with the place named.
        let err = serde_json::from_str::<NodeInfo>(&text).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn lean_nodes_come_through_watch_events() {
        for (kind, modified) in [("MODIFIED", true), ("DELETED", false)] {
            let event = json!({ "type": kind, "object": heartbeat_node() }).to_string();
            let node = match serde_json::from_str(&event).unwrap() {
                kube::api::WatchEvent::<LeanNode>::Modified(n) if modified => n,
                kube::api::WatchEvent::Deleted(n) if !modified => n,
                _ => panic!("{kind}: another event"),
            };
            assert_eq!(node.info.name, "kwok-node-17");
            assert_eq!(node.meta().resource_version.as_deref(), Some("918273"));
        }
        let bookmark = json!({ "type": "BOOKMARK", "object": {
            "kind": "Node", "apiVersion": "v1", "metadata": { "resourceVersion": "99" } } });
        let event: kube::api::WatchEvent<LeanNode> = serde_json::from_value(bookmark).unwrap();
        assert!(matches!(event, kube::api::WatchEvent::Bookmark(b)
            if b.metadata.resource_version == "99"));
    }

    #[test]
    fn malformed_input_is_still_an_error() {
        // Skipped, but still parsed: broken JSON inside managedFields fails.
        let broken = r#"{"metadata":{"name":"p","managedFields":[{"a": }]}}"#;
        assert!(serde_json::from_str::<Lean<Pod>>(broken).is_err());
        // A wrong type elsewhere fails as k8s-openapi fails.
        let wrong = r#"{"metadata":{"name":7}}"#;
        let err = serde_json::from_str::<Lean<Pod>>(wrong).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn resource_metadata_is_the_wrapped_objects() {
        assert_eq!(Lean::<Pod>::plural(&()), "pods");
        assert_eq!(Lean::<Node>::kind(&()), "Node");
        let mut lean: Lean<Pod> = serde_json::from_value(pod_json()).unwrap();
        lean.meta_mut().name = Some("renamed".into());
        assert_eq!(lean.meta().name.as_deref(), Some("renamed"));
    }
}
