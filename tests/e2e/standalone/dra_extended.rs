//! Extended resources backed by DRA (DRAExtendedResource, GA in v1.37): a DeviceClass serves
//! `example.com/gpu`, no node's allocatable lists it, and pods request it in their containers'
//! resources as if a device plugin provided it. The scheduler allocates a device through a
//! ResourceClaim it creates for the pod and maps the container's request to it in the pod's
//! status. placer and stock kube-scheduler each schedule one copy of the objects and must agree
//! on placement, on the claim and mapping they write, and on the FailedScheduling text once the
//! devices run out.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::dra::{allocations, device_class_serving, gpu_nodes};
use super::volume_compare::COPY;
use super::*;
use crate::harness::compare::{SideBySide, assert_same_failure, comparable_plugins};

/// The extended resource the class serves.
const RESOURCE: &str = "example.com/gpu";
/// The annotation that marks a claim written for a pod's extended resources.
const ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// One `(container, resource, request)` of a pod's `status.extendedResourceClaimStatus`.
type Mapping = (String, String, String);

/// The claim named in `pod`'s `status.extendedResourceClaimStatus` and the status's mappings,
/// once the status has them; checks that the claim is marked, owned by the pod, named after it
/// and reserved for it.
async fn extended_claim_of(env: &TestEnv, pod: &str) -> anyhow::Result<(String, Vec<Mapping>)> {
    let (claim_name, mappings) = env
        .poll(
            &format!("{pod}'s extendedResourceClaimStatus"),
            SCHEDULING_TIMEOUT,
            || async {
                let p: Pod = env.pods().get(pod).await?;
                Ok(
                    match p.status.and_then(|s| s.extended_resource_claim_status) {
                        Some(s) => ControlFlow::Break((
                            s.resource_claim_name,
                            s.request_mappings
                                .into_iter()
                                .map(|m| (m.container_name, m.resource_name, m.request_name))
                                .collect::<Vec<_>>(),
                        )),
                        None => ControlFlow::Continue("not set".into()),
                    },
                )
            },
        )
        .await?;
    let claim = Api::<ResourceClaim>::namespaced(env.client().clone(), env.namespace())
        .get(&claim_name)
        .await
        .with_context(|| format!("{pod}'s claim {claim_name}"))?;
    let p: Pod = env.pods().get(pod).await?;
    let uid = p.metadata.uid.unwrap_or_default();
    assert!(
        claim_name.starts_with(&format!("{pod}-extended-resources-")),
        "{claim_name}"
    );
    assert_eq!(
        claim
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANNOTATION)
            .map(String::as_str),
        Some("true"),
        "{claim_name} is marked"
    );
    assert!(
        claim
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true)),
        "{claim_name} is owned by {pod}"
    );
    let reserved: Vec<String> = claim
        .status
        .and_then(|s| s.reserved_for)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect();
    assert_eq!(reserved, vec![uid], "{claim_name} is reserved for {pod}");
    Ok((claim_name, mappings))
}

/// One `example.com/gpu` per pod until the devices run out: placer and kube-scheduler each bind
/// two pods to their two one-GPU nodes, through claims they create (each allocated the GPU of
/// its pod's node), with the same request mapping, and give the third pod the same
/// FailedScheduling text.
#[tokio::test]
async fn extended_resources_backed_by_dra_match_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-extended").await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class_serving(&env, "gpu", None, Some(RESOURCE)).await?;
    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        layout.push(gpu_nodes(&env, tag).await?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = Vec::new();
    let mut mappings = Vec::new();
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let pod = |name: &str| {
            env.pod(name)
                .scheduler(scheduler)
                .node_selector(COPY, tag)
                .request(RESOURCE, "1")
        };
        let mut used = BTreeSet::new();
        for i in 0..2 {
            let name = format!("ext-{tag}{i}");
            env.create_pod(&pod(&name)).await?;
            let node = env.wait_pod_bound(&name).await?;
            let (claim, mapped) = extended_claim_of(&env, &name).await?;
            let allocated = allocations(&env).await?;
            assert!(
                allocated.contains(&(claim.clone(), node.clone(), "gpu-0".into())),
                "{scheduler}: {name} on {node}, its claim {claim} holds {allocated:?}"
            );
            mappings.push(mapped);
            used.insert(node);
        }
        assert_eq!(used.len(), 2, "{scheduler}: one pod per GPU");
        assert!(used.iter().all(|n| nodes.contains(n)));
        let name = format!("ext-{tag}2");
        env.create_pod(&pod(&name)).await?;
        let event = env.wait_pod_event(&name, "FailedScheduling").await?;
        texts.push(event.message.unwrap_or_default());
    }
    assert_same_failure(&texts, "cannot allocate all claims");
    let expected: Vec<Mapping> = vec![(
        "main".into(),
        RESOURCE.into(),
        "container-0-request-0".into(),
    )];
    for (i, m) in mappings.iter().enumerate() {
        assert_eq!(m, &expected, "pod {i}'s mapping");
    }
    allocations(&env).await?;
    Ok(())
}
