//! The checks the API server makes on the parts of a Node or Pod placer
//! reads, for objects that come from a file rather than from an API server.
//!
//! Objects from the API server were validated there, so the cache turns a
//! quantity that still fails to parse into zero; a file gets no such pass,
//! and a typo must not silently become an empty node or a free pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::objects::resources::parse_resource;
use crate::yaml::FieldPath;

/// What is wrong with an object, and where inside it.
#[derive(Debug, PartialEq, Eq)]
pub struct Problem {
    /// The field, from the object's root.
    pub field: FieldPath,
    /// What is wrong with it.
    pub message: String,
}

/// A Node needs a name, and its capacity and allocatable must be valid,
/// non-negative quantities.
pub fn node(node: &Node) -> Result<(), Problem> {
    if node.metadata.name.as_deref().is_none_or(str::is_empty) {
        return Err(Problem {
            field: FieldPath::default().key("metadata").key("name"),
            message: "required value: a Node needs a name".into(),
        });
    }
    let status = FieldPath::default().key("status");
    let lists = node.status.iter().flat_map(|s| {
        [
            ("capacity", s.capacity.as_ref()),
            ("allocatable", s.allocatable.as_ref()),
        ]
    });
    for (name, list) in lists {
        resource_list(&status.key(name), list)?;
    }
    Ok(())
}

/// A Pod's requests and limits (per container, init container and for the
/// whole pod) and its overhead must be valid, non-negative quantities.
pub fn pod(pod: &Pod) -> Result<(), Problem> {
    let Some(spec) = &pod.spec else {
        return Ok(());
    };
    let at = FieldPath::default().key("spec");
    let kinds: [(&str, &[Container]); 2] = [
        ("containers", &spec.containers),
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
    ];
    for (kind, containers) in kinds {
        for (i, c) in containers.iter().enumerate() {
            requirements(
                &at.key(kind).index(i).key("resources"),
                c.resources.as_ref(),
            )?;
        }
    }
    requirements(&at.key("resources"), spec.resources.as_ref())?;
    resource_list(&at.key("overhead"), spec.overhead.as_ref())
}

fn requirements(
    field: &FieldPath,
    resources: Option<&ResourceRequirements>,
) -> Result<(), Problem> {
    let Some(r) = resources else {
        return Ok(());
    };
    resource_list(&field.key("requests"), r.requests.as_ref())?;
    resource_list(&field.key("limits"), r.limits.as_ref())
}

fn resource_list(
    field: &FieldPath,
    list: Option<&BTreeMap<String, Quantity>>,
) -> Result<(), Problem> {
    for (name, quantity) in list.into_iter().flatten() {
        let problem = |message: String| Problem {
            field: field.key(name),
            message,
        };
        match parse_resource(name, &quantity.0) {
            Err(e) => return Err(problem(e.to_string())),
            Ok(v) if v < 0 => {
                return Err(problem(format!(
                    "invalid value {:?}: must be greater than or equal to 0",
                    quantity.0
                )));
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_problem(json: serde_json::Value) -> Option<(String, String)> {
        let n: Node = serde_json::from_value(json).unwrap();
        node(&n).err().map(|p| (p.field.to_string(), p.message))
    }

    fn pod_problem(json: serde_json::Value) -> Option<(String, String)> {
        let p: Pod = serde_json::from_value(json).unwrap();
        pod(&p).err().map(|p| (p.field.to_string(), p.message))
    }

    #[test]
    fn node_quantities_and_name() {
        let named = |status: serde_json::Value| {
            node_problem(serde_json::json!({"metadata": {"name": "a"}, "status": status}))
        };
        assert_eq!(named(serde_json::json!({"capacity": {"cpu": "8"}})), None);
        assert_eq!(
            named(serde_json::json!({"capacity": {"cpu": "abc"}})),
            Some((
                "status.capacity.cpu".into(),
                "invalid quantity \"abc\"".into()
            ))
        );
        assert_eq!(
            named(serde_json::json!({"allocatable": {"memory": "1e9999"}})),
            Some((
                "status.allocatable.memory".into(),
                "invalid quantity \"1e9999\"".into()
            ))
        );
        assert_eq!(
            named(serde_json::json!({"allocatable": {"pods": "-1"}})),
            Some((
                "status.allocatable.pods".into(),
                "invalid value \"-1\": must be greater than or equal to 0".into()
            ))
        );
        assert_eq!(
            node_problem(serde_json::json!({"metadata": {"name": ""}})),
            Some((
                "metadata.name".into(),
                "required value: a Node needs a name".into()
            ))
        );
    }

    #[test]
    fn pod_requests_limits_and_overhead() {
        let container =
            |resources: serde_json::Value| serde_json::json!({"name": "c", "resources": resources});
        let problem = |spec: serde_json::Value| {
            pod_problem(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
        };
        assert_eq!(
            problem(
                serde_json::json!({"containers": [container(serde_json::json!({"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}))]})
            ),
            None
        );
        assert_eq!(
            problem(serde_json::json!({"containers": [
                container(serde_json::json!({})),
                container(serde_json::json!({"limits": {"memory": "lots"}}))
            ]})),
            Some((
                "spec.containers[1].resources.limits.memory".into(),
                "invalid quantity \"lots\"".into()
            ))
        );
        assert_eq!(
            problem(
                serde_json::json!({"containers": [], "initContainers": [container(serde_json::json!({"requests": {"cpu": "-100m"}}))]})
            ),
            Some((
                "spec.initContainers[0].resources.requests.cpu".into(),
                "invalid value \"-100m\": must be greater than or equal to 0".into()
            ))
        );
        assert_eq!(
            problem(serde_json::json!({"containers": [], "overhead": {"cpu": "x"}})),
            Some(("spec.overhead.cpu".into(), "invalid quantity \"x\"".into()))
        );
        assert_eq!(
            problem(
                serde_json::json!({"containers": [], "resources": {"requests": {"memory": "-1"}}})
            ),
            Some((
                "spec.resources.requests.memory".into(),
                "invalid value \"-1\": must be greater than or equal to 0".into()
            ))
        );
    }
}
