//! Every policy the repository ships must load: the root `policy.yaml`, the
//! chart's per-mode policies and the ones embedded in the manifests'
//! ConfigMaps (rendered from the chart).

use std::path::Path;

use serde_yaml_ng::Value;

fn shipped_policies() -> Vec<(String, String)> {
    let mut found = vec![(
        "policy.yaml".to_string(),
        std::fs::read_to_string("policy.yaml").expect("policy.yaml at the repository root"),
    )];
    for mode in ["extender", "standalone", "both"] {
        let path = format!("charts/placer/files/policy-{mode}.yaml");
        let text = std::fs::read_to_string(&path).expect("the chart's policy for every mode");
        found.push((path, text));
    }
    let mut dirs = vec![Path::new("manifests").to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("manifests/ exists") {
            let path = entry.expect("readable entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable manifest");
            for doc in serde_yaml_ng::Deserializer::from_str(&text) {
                let value = <Value as serde::Deserialize>::deserialize(doc).expect("valid YAML");
                if value.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
                    continue;
                }
                let Some(Value::Mapping(data)) = value.get("data") else {
                    continue;
                };
                for (key, body) in data {
                    let (Some(key), Some(body)) = (key.as_str(), body.as_str()) else {
                        continue;
                    };
                    if body.contains("placer/v1alpha1") {
                        found.push((format!("{}:{key}", path.display()), body.to_string()));
                    }
                }
            }
        }
    }
    found
}

/// `--mode both` in the chart ships the root policy (both profiles): the copy must not drift.
#[test]
fn the_charts_both_mode_policy_is_the_root_policy() {
    assert_eq!(
        std::fs::read_to_string("charts/placer/files/policy-both.yaml").expect("chart policy"),
        std::fs::read_to_string("policy.yaml").expect("root policy"),
        "charts/placer/files/policy-both.yaml differs from policy.yaml: copy it over"
    );
}

#[test]
fn every_shipped_policy_loads() {
    let policies = shipped_policies();
    assert!(
        policies.len() >= 3,
        "expected the root policy and two ConfigMap policies, found {:?}",
        policies.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    for (name, text) in policies {
        if let Err(e) = placer::policy::parse(&text, &name) {
            panic!("{e}");
        }
    }
}

#[test]
fn the_root_policy_has_an_extender_and_a_standalone_profile() {
    let text = std::fs::read_to_string("policy.yaml").expect("policy.yaml");
    let policy = placer::policy::CompiledPolicy::new(
        placer::policy::parse(&text, "policy.yaml").expect("valid"),
    );
    let extender = policy.profile("extender").expect("extender profile");
    let standalone = policy.profile("placer").expect("standalone profile");
    let extender_names: Vec<&str> = extender.plugins().iter().map(|p| p.plugin.name()).collect();
    assert_eq!(
        extender_names,
        ["CapabilityFilter", "ZoneSpread", "NetQoS", "DefaultBinder"],
        "a profile naming no Bind plugin binds with DefaultBinder"
    );
    let names: Vec<&str> = standalone
        .plugins()
        .iter()
        .map(|p| p.plugin.name())
        .collect();
    for safety in [
        "PrioritySort",
        "NodeResourcesFit",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
    ] {
        assert!(
            names.contains(&safety),
            "standalone profile lacks {safety}: {names:?}"
        );
    }
}

#[test]
fn the_queue_is_ordered_by_prioritysort_enabled_or_not() {
    let compiled = |plugins: &str| {
        let text = format!(
            "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n{plugins}"
        );
        placer::policy::CompiledPolicy::new(placer::policy::parse(&text, "t").expect("valid"))
    };
    let enabled = compiled("  - name: PrioritySort\n  - name: NodeName\n");
    assert_eq!(enabled.queue_sort().name(), "PrioritySort");
    let profile = enabled.profile("s").expect("profile");
    assert_eq!(profile.queue_sort().map(|s| s.name()), Some("PrioritySort"));
    let default = compiled("  - name: NodeName\n");
    assert!(
        default
            .profile("s")
            .expect("profile")
            .queue_sort()
            .is_none()
    );
    assert_eq!(default.queue_sort().name(), "PrioritySort");
}

/// NodeAffinity's `addedAffinity` (kube-scheduler's `NodeAffinityArgs`) loads
/// in a policy, and a bad term is reported with its place and kube-scheduler's
/// field path (issue 23).
#[test]
fn a_policy_carries_added_affinity_and_reports_bad_terms_where_they_are() {
    let policy = |req: &str| {
        format!(
            "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n  \
             - name: NodeAffinity\n    args:\n      addedAffinity:\n        \
             requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          \
             - matchExpressions: [{{key: {req}, operator: In, values: [a]}}]\n"
        )
    };
    let p = placer::policy::parse(&policy("pool"), "p.yaml").unwrap();
    let args = serde_json::to_value(&p).unwrap()["profiles"][0]["plugins"][0]["args"].clone();
    assert_eq!(
        args["addedAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "pool"
    );
    let e = placer::policy::parse(&policy("a/b/c"), "p.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.yaml:"), "{e}");
    assert!(
        e.contains("profiles[0].plugins[0]")
            && e.contains("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: \"a/b/c\""),
        "{e}"
    );
}
