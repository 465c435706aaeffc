//! Store keys of API objects, shared by the views (which name their own key)
//! and the cache (which stores them under it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A view kept in the cache's keyed stores: its key is `namespace/name` for namespaced
/// kinds and `name` for cluster-scoped ones.
pub trait Keyed {
    /// The store key.
    fn key(&self) -> String;
}

/// The store key of an API object (the same rule as [`Keyed::key`]).
pub fn object_key(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("");
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// `(namespace, name)` of an API object, each "" when absent: the fields
/// every namespaced view keeps.
pub fn namespace_and_name(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_keys_carry_the_namespace_and_cluster_scoped_keys_do_not() {
        let meta = |ns: Option<&str>| ObjectMeta {
            name: Some("x".into()),
            namespace: ns.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(object_key(&meta(Some("ns"))), "ns/x");
        assert_eq!(object_key(&meta(None)), "x");
    }
}
