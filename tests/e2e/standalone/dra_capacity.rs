//! Consumable capacity (DRAConsumableCapacity, on by default in v1.37): the test driver publishes
//! one NIC per node that allows multiple allocations, with 10G of `bandwidth` whose request
//! policy rounds requests up to whole gigabits (default 1G). placer and stock kube-scheduler, each
//! on its own node and claims, schedule the same pods one after the other; both must share the NIC
//! the same way: the same consumed amounts, a share ID per allocation, and the same
//! FailedScheduling text for the pod the rest of the bandwidth cannot hold.

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::dra::{device_class, publish_slice};
use super::volume_compare::{COPY, copy_nodes};
use super::*;
use crate::harness::compare::{SideBySide, assert_same_failure, comparable_plugins};

/// Publishes `node`'s shareable NIC.
async fn publish_nic(env: &TestEnv, node: &str) -> anyhow::Result<()> {
    let nic = json!([{
        "name": "nic-0",
        "allowMultipleAllocations": true,
        "capacity": { "bandwidth": {
            "value": "10G",
            "requestPolicy": { "default": "1G", "validRange": { "min": "1G", "step": "1G" } },
        } },
    }]);
    publish_slice(env, node, "nics", nic).await
}

/// A claim `name` for one NIC of class `nic`, asking for `bandwidth` (or for the default).
async fn nic_claim(env: &TestEnv, name: &str, bandwidth: Option<&str>) -> anyhow::Result<()> {
    let mut exactly =
        json!({ "deviceClassName": "nic", "allocationMode": "ExactCount", "count": 1 });
    if let Some(bw) = bandwidth {
        exactly["capacity"] = json!({ "requests": { "bandwidth": bw } });
    }
    let claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "devices": { "requests": [{ "name": "nic", "exactly": exactly }] } },
    }))?;
    Api::<ResourceClaim>::namespaced(env.client().clone(), env.namespace())
        .create(&PostParams::default(), &claim)
        .await
        .with_context(|| format!("create claim {name}"))?;
    Ok(())
}

/// Claim `name`'s allocation as `(device, consumed bandwidth)`, checking that the result is a
/// share (a UUID share ID).
async fn share_of(env: &TestEnv, name: &str) -> anyhow::Result<(String, Option<String>)> {
    let claim = Api::<ResourceClaim>::namespaced(env.client().clone(), env.namespace())
        .get(name)
        .await?;
    let results = claim
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    let [result] = results.as_slice() else {
        anyhow::bail!("{name}: expected one result, got {results:?}");
    };
    let share = result.share_id.as_deref().unwrap_or_default();
    anyhow::ensure!(
        share.len() == 36 && share.chars().filter(|c| *c == '-').count() == 4,
        "{name}: share ID {share:?} is not a UUID"
    );
    let bandwidth = result
        .consumed_capacity
        .as_ref()
        .and_then(|c| c.get("bandwidth"))
        .map(|q| q.0.clone());
    Ok((result.device.clone(), bandwidth))
}

/// Four pods share each scheduler's NIC: 4G, 3500M (rounded up to 4G), then 2500M (3G: more
/// than the 2G left, so FailedScheduling), then the default 1G, which fits. Both schedulers must
/// record the same consumption and give the third pod the same text.
#[tokio::test]
async fn shared_devices_are_shared_by_capacity_as_kube_scheduler_does() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-capacity").await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class(&env, "nic", None).await?;
    let asks = [Some("4G"), Some("3500M"), Some("2500M"), None];
    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = copy_nodes(&env, tag, 1).await?;
        publish_nic(&env, &nodes[0]).await?;
        for (i, ask) in asks.iter().enumerate() {
            nic_claim(&env, &format!("bw-{tag}{i}"), *ask).await?;
        }
        layout.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = Vec::new();
    let mut shares = Vec::new();
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let mut consumed = Vec::new();
        for i in 0..asks.len() {
            let (name, claim) = (format!("nic-{tag}{i}"), format!("bw-{tag}{i}"));
            let pod = env.pod(&name).scheduler(scheduler).node_selector(COPY, tag);
            env.create_pod_with_spec(
                &pod,
                json!({ "resourceClaims": [{ "name": "nic", "resourceClaimName": claim }] }),
            )
            .await?;
            if i == 2 {
                let event = env.wait_pod_event(&name, "FailedScheduling").await?;
                texts.push(event.message.unwrap_or_default());
                continue;
            }
            assert_eq!(env.wait_pod_bound(&name).await?, nodes[0], "{scheduler}");
            let (device, bandwidth) = share_of(&env, &claim).await?;
            assert_eq!(device, "nic-0", "{scheduler}");
            consumed.push(bandwidth);
        }
        shares.push(consumed);
    }
    assert_same_failure(&texts, "cannot allocate all claims");
    eprintln!("placer: {:?}\nkube-scheduler: {:?}", shares[0], shares[1]);
    assert_eq!(shares[0], shares[1]);
    let expected: Vec<Option<String>> = ["4G", "4G", "1G"]
        .iter()
        .map(|s| Some((*s).to_owned()))
        .collect();
    assert_eq!(shares[0], expected);
    Ok(())
}
