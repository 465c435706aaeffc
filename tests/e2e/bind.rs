//! `bindVerb: bind`: kube-scheduler delegates the binding of every pod to placer.

use crate::harness::logs::field;
use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, ScorePlugins, TestEnv, capability_policy,
};

/// Pods to schedule, and whether they carry the capability annotation.
const PODS: [(&str, bool); 4] = [
    ("secure-0", true),
    ("secure-1", true),
    ("ordinary-0", false),
    ("ordinary-1", false),
];

/// Every pod is bound to the node kube-scheduler chose (its "Successfully bound pod to node" log
/// line), and placer made each Binding: it logs "bound pod" with the same pod and node, and
/// counts at least one successful `bind` call per pod. Annotated pods end up on the labelled node.
#[tokio::test]
async fn placer_binds_pods_when_bind_verb_set() -> anyhow::Result<()> {
    let env = TestEnv::new("bind").await?;
    let nodes = env
        .create_nodes([
            env.node("hw").label(HW_LABEL, "true"),
            env.node("n2"),
            env.node("n3"),
        ])
        .await?;
    let rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e.bind_verb(Some("bind")),
    )
    .await?;

    for (name, secure) in PODS {
        let pod = env.pod(name);
        let pod = if secure {
            pod.annotation(HW_ANNOTATION, "true")
        } else {
            pod
        };
        env.create_pod(&pod).await?;
    }
    for (name, secure) in PODS {
        let node = env.wait_pod_bound(name).await?;
        if secure {
            assert_eq!(node, nodes[0], "{name} not on the labelled node");
        } else {
            assert!(nodes.contains(&node), "{name} bound to foreign node {node}");
        }
        let pod = format!("{}/{name}", env.namespace());
        let chosen = env
            .wait_log_line(
                rig.scheduler.log_path(),
                &["Successfully bound pod to node", &format!("pod=\"{pod}\"")],
            )
            .await?;
        assert_eq!(field(&chosen, "node"), Some(node.as_str()), "{chosen}");
        let bound = env
            .wait_log_line(rig.placer.log_path(), &["bound pod", &format!("pod={pod}")])
            .await?;
        assert_eq!(field(&bound, "node"), Some(node.as_str()), "{bound}");
    }

    let series = r#"placer_requests_total{verb="bind",outcome="success"}"#;
    let binds = rig.placer.metric(series).await?.unwrap_or(0.0);
    eprintln!("{series} = {binds}");
    let expected = PODS.len() as f64;
    assert!(
        binds >= expected,
        "{series} = {binds}, expected ≥ {expected}"
    );
    Ok(())
}
