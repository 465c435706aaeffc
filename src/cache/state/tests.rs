use super::*;

#[test]
fn affinity_indexes_follow_the_pods() {
    let with = |name: &str, affinity: serde_json::Value| -> PodInfo {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": "n1", "affinity": affinity}
        }))
        .unwrap()
    };
    let term = serde_json::json!([{"topologyKey": "k", "labelSelector": {}}]);
    let mut c = ClusterState::default();
    c.apply_pod(with("plain", serde_json::json!({})));
    c.apply_pod(with(
        "anti",
        serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}),
    ));
    c.apply_pod(with(
        "prefers",
        serde_json::json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
            [{"weight": 1, "podAffinityTerm": term[0]}]}}),
    ));
    let names = |it: Vec<&PodInfo>| {
        let mut v: Vec<String> = it.into_iter().map(|p| p.name.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(names(c.pods_with_affinity().collect()), ["anti", "prefers"]);
    assert_eq!(
        names(c.pods_with_required_anti_affinity().collect()),
        ["anti"]
    );
    c.delete_pod("ns", "anti");
    assert_eq!(names(c.pods_with_affinity().collect()), ["prefers"]);
    assert!(c.pods_with_required_anti_affinity().next().is_none());
    c.replace_pods(vec![with("plain", serde_json::json!({}))]);
    assert!(c.pods_with_affinity().next().is_none());
}
use crate::cache::zone_index::CountSelector;
use crate::objects::Resources;
use crate::objects::pod::HostPort;

fn dim() -> CountDimension {
    CountDimension {
        zone_label: "zone".into(),
        selector: CountSelector::All,
        same_namespace: false,
    }
}

fn pod(name: &str, node: Option<&str>, phase: Option<&str>) -> PodInfo {
    PodInfo {
        name: name.into(),
        namespace: "ns".into(),
        node_name: node.map(str::to_string),
        phase: phase.map(str::to_string),
        ..Default::default()
    }
}

fn count(s: &ClusterState, zone: &str) -> u64 {
    s.zones()
        .counts(&dim(), &PodInfo::default())
        .and_then(|c| c.get(zone).copied())
        .unwrap_or(0)
}

#[test]
fn pod_lifecycle_moves_counts() {
    let mut s = ClusterState::with_dimensions(&[dim()]);
    s.apply_node(NodeInfo::new("a", [("zone", "z1")]));
    s.apply_pod(pod("p", None, None));
    assert_eq!(count(&s, "z1"), 0, "unassigned pods are not counted");
    s.apply_pod(pod("p", Some("a"), Some("Running")));
    assert_eq!(count(&s, "z1"), 1);
    s.apply_pod(pod("p", Some("a"), Some("Running")));
    assert_eq!(count(&s, "z1"), 1, "re-applying is idempotent");
    s.apply_pod(pod("p", Some("a"), Some("Succeeded")));
    assert_eq!(count(&s, "z1"), 0, "terminal pods stop counting");
    assert_eq!(s.pod_count(), 0);
    s.apply_pod(pod("q", Some("a"), None));
    s.delete_pod("ns", "q");
    assert_eq!(count(&s, "z1"), 0);
}

#[test]
fn relabelled_and_deleted_nodes_move_their_pods() {
    let mut s = ClusterState::with_dimensions(&[dim()]);
    s.apply_pod(pod("early", Some("a"), None));
    assert_eq!(count(&s, "z1"), 0, "node not known yet");
    s.apply_node(NodeInfo::new("a", [("zone", "z1")]));
    assert_eq!(count(&s, "z1"), 1, "pod counted once its node arrives");
    s.apply_node(NodeInfo::new("a", [("zone", "z2")]));
    assert_eq!((count(&s, "z1"), count(&s, "z2")), (0, 1));
    s.delete_node("a");
    assert_eq!(count(&s, "z2"), 0);
    s.apply_node(NodeInfo::new("a", [("zone", "z2")]));
    assert_eq!(count(&s, "z2"), 1);
}

#[test]
fn usage_follows_pods() {
    let mut s = ClusterState::default();
    let with = |name: &str, cpu: i64, port: i32| PodInfo {
        spec: Arc::new(crate::objects::pod::PodSpecInfo {
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            counted: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            host_ports: vec![HostPort {
                ip: "0.0.0.0".into(),
                protocol: "TCP".into(),
                port,
            }],
            ..Default::default()
        }),
        ..pod(name, Some("a"), None)
    };
    s.apply_pod(with("p", 100, 80));
    s.apply_pod(with("q", 250, 80));
    let u = s.usage("a").unwrap();
    assert_eq!(
        (u.requested.milli_cpu, u.pods, u.host_ports.len()),
        (350, 2, 1)
    );
    s.apply_pod(with("q", 300, 81));
    let u = s.usage("a").unwrap();
    assert_eq!(
        (u.requested.milli_cpu, u.pods, u.host_ports.len()),
        (400, 2, 2)
    );
    assert_eq!(s.pods_on("a").count(), 2);
    s.delete_pod("ns", "p");
    s.delete_pod("ns", "q");
    assert!(s.usage("a").is_none());
}

#[test]
fn relists_and_new_dimensions_recount() {
    let mut s = ClusterState::default();
    s.replace_nodes(vec![NodeInfo::new("a", [("zone", "z1")])]);
    s.replace_pods(vec![pod("p", Some("a"), None), pod("q", Some("a"), None)]);
    assert_eq!(count(&s, "z1"), 0, "dimension not configured yet");
    s.set_dimensions(&[dim()]);
    assert_eq!(count(&s, "z1"), 2);
    s.replace_pods(vec![pod("p", Some("a"), None)]);
    assert_eq!(count(&s, "z1"), 1);
    s.replace_nodes(vec![]);
    assert_eq!(count(&s, "z1"), 0);
    assert_eq!(s.node_count(), 0);
}

#[test]
fn records_read_their_own_usage_across_deletes_and_relists() {
    let on = |name: &str, node: &str, cpu: i64| PodInfo {
        spec: Arc::new(crate::objects::pod::PodSpecInfo {
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            counted: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            ..Default::default()
        }),
        ..pod(name, Some(node), None)
    };
    let cpu = |s: &ClusterState, node: &NodeInfo| s.usage_of(node).map(|u| u.requested.milli_cpu);
    let mut s = ClusterState::default();
    s.apply_node(NodeInfo::new("a", [("zone", "z1")]));
    s.apply_pod(on("p", "a", 300));
    let a = s.node("a").unwrap().clone();
    assert_eq!(cpu(&s, &a), Some(300));

    s.delete_node("a");
    s.apply_node(NodeInfo::new("b", [("zone", "z1")]));
    let b = s.node("b").unwrap().clone();
    assert_eq!(b.index.get(), a.index.get(), "b took a's index");
    assert_eq!(cpu(&s, &b), None, "not a's pods");
    assert_eq!(
        cpu(&s, &a),
        Some(300),
        "a's pods still count under its name"
    );

    s.apply_node(NodeInfo::new("a", [("zone", "z1")]));
    s.apply_pod(on("q", "b", 100));
    let a = s.node("a").unwrap().clone();
    assert_eq!((cpu(&s, &a), cpu(&s, &b)), (Some(300), Some(100)));

    // A relist hands out indexes afresh; the usage stays with the names.
    s.replace_nodes(vec![
        NodeInfo::new("c", [("zone", "z1")]),
        NodeInfo::new("b", [("zone", "z1")]),
        NodeInfo::new("a", [("zone", "z1")]),
    ]);
    let read = |s: &ClusterState, name: &str| cpu(s, s.node(name).unwrap());
    assert_eq!(
        (read(&s, "a"), read(&s, "b"), read(&s, "c")),
        (Some(300), Some(100), None)
    );
    s.delete_pod("ns", "p");
    assert_eq!(read(&s, "a"), None, "a node whose pods left reads empty");
    assert!(s.usage("a").is_none());
}

#[test]
fn counted_pods_with_equal_specs_or_labels_share_one_record() {
    // Shared as they are read, as the watches and the snapshot loader do;
    // the state keeps what it is given.
    let with_cpu = |name: &str, node: Option<&str>, cpu: &str| -> PodInfo {
        let mut pod: PodInfo = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app:1",
                "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        share_counted(&mut pod);
        pod
    };
    let mut c = ClusterState::default();
    c.apply_pod(with_cpu("a", Some("n1"), "1"));
    c.apply_pod(with_cpu("b", Some("n2"), "1"));
    c.apply_pod(with_cpu("other", Some("n1"), "2"));
    let spec =
        |c: &ClusterState, name: &str| c.pod("ns", name).map(|p| Arc::clone(&p.spec)).unwrap();
    assert!(Arc::ptr_eq(&spec(&c, "a"), &spec(&c, "b")));
    assert!(!Arc::ptr_eq(&spec(&c, "a"), &spec(&c, "other")));
    assert_eq!(spec(&c, "other").requests.milli_cpu, 2000);
    let labels =
        |c: &ClusterState, name: &str| c.pod("ns", name).map(|p| Arc::clone(&p.labels)).unwrap();
    assert!(Arc::ptr_eq(&labels(&c, "a"), &labels(&c, "other")));
    let mut relabelled = with_cpu("b", Some("n2"), "1");
    Arc::make_mut(&mut relabelled.labels).insert("app".into(), "api".into());
    share_counted(&mut relabelled);
    c.apply_pod(relabelled);
    assert!(!Arc::ptr_eq(&labels(&c, "a"), &labels(&c, "b")));
    assert_eq!(labels(&c, "b")["app"], "api");
    assert_eq!(labels(&c, "a")["app"], "web");

    // A relist keeps the shared records, and so does a copy of the state.
    c.replace_pods(vec![with_cpu("a", Some("n1"), "1")]);
    let mut copy = c.clone();
    copy.apply_pod(with_cpu("c", Some("n3"), "1"));
    assert!(Arc::ptr_eq(&spec(&c, "a"), &spec(&copy, "c")));
}
