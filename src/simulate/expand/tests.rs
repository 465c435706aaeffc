use super::*;

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_yaml_ng::from_str(text).unwrap()
}

const TEMPLATE: &str = "
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: i, resources: {limits: {cpu: '1', nvidia.com/gpu: '1'}}}]";

#[test]
fn a_deployment_becomes_a_replica_set_and_its_pods() {
    let mut e = Expander::new(0, "placer");
    let d: Deployment = yaml(&format!(
        "metadata: {{name: web, namespace: shop}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: web}}}}\n  template:{TEMPLATE}"
    ));
    e.deployment(&d).unwrap();
    let out = e.take();
    assert_eq!(out.pods.len(), 3);
    let rs = &out.replica_sets[0].0;
    let hash = rs.name.strip_prefix("web-").unwrap().to_string();
    assert!(hash.bytes().all(|b| ALPHANUMS.contains(&b)), "{hash}");
    assert_eq!(rs.namespace, "shop");
    let selector = rs.selector.as_ref().unwrap().match_labels.as_ref().unwrap();
    assert_eq!(selector.get("pod-template-hash"), Some(&hash));
    for p in &out.pods {
        let suffix = p.name.strip_prefix(&format!("{}-", rs.name)).unwrap();
        assert_eq!(suffix.len(), 5);
        assert_eq!(p.labels.get("pod-template-hash"), Some(&hash));
        assert_eq!(p.labels.get("app").map(String::as_str), Some("web"));
        let owner = p.controller.as_ref().unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("ReplicaSet", rs.name.as_str())
        );
        assert_eq!(p.scheduler_name, "placer");
        // Limits stand for missing requests, as the API server defaults them.
        assert_eq!(p.spec.requests.milli_cpu, 1000);
        assert_eq!(p.spec.requests.scalar.get("nvidia.com/gpu"), Some(&1));
    }
    let names: HashSet<&str> = out.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 3);
}

#[test]
fn a_stateful_set_numbers_its_pods() {
    let mut e = Expander::new(0, "placer");
    let ss: StatefulSet = yaml(&format!(
        "metadata: {{name: db}}\nspec:\n  replicas: 2\n  ordinals: {{start: 5}}\n  selector: {{matchLabels: {{app: web}}}}\n  template:{TEMPLATE}"
    ));
    e.stateful_set(&ss).unwrap();
    let out = e.take();
    let names: Vec<&str> = out.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["db-5", "db-6"]);
    let p = &out.pods[1];
    assert_eq!(p.namespace, "default");
    assert_eq!(
        p.labels
            .get("statefulset.kubernetes.io/pod-name")
            .map(String::as_str),
        Some("db-6")
    );
    assert_eq!(
        p.labels
            .get("apps.kubernetes.io/pod-index")
            .map(String::as_str),
        Some("6")
    );
    assert_eq!(p.controller.as_ref().unwrap().kind, "StatefulSet");
    assert_eq!(out.stateful_sets[0].0.name, "db");
}

#[test]
fn a_job_starts_parallelism_pods_at_most_completions() {
    let mut e = Expander::new(0, "placer");
    let job: Job = yaml(&format!(
        "metadata: {{name: train}}\nspec:\n  parallelism: 4\n  completions: 3\n  completionMode: Indexed\n  template:{TEMPLATE}"
    ));
    e.job(&job).unwrap();
    let out = e.take();
    assert_eq!(out.pods.len(), 3);
    for (i, p) in out.pods.iter().enumerate() {
        assert!(p.name.starts_with(&format!("train-{i}-")), "{}", p.name);
        assert_eq!(p.labels.get("job-name").map(String::as_str), Some("train"));
        assert_eq!(
            p.labels.get("batch.kubernetes.io/job-completion-index"),
            Some(&i.to_string())
        );
        assert_eq!(p.controller.as_ref().unwrap().api_version, "batch/v1");
    }
}

#[test]
fn priority_classes_set_priorities_and_seeds_set_names() {
    let mut e = Expander::new(1, "placer");
    let class: PriorityClass = yaml("metadata: {name: gold}\nvalue: 100");
    let default: PriorityClass = yaml("metadata: {name: base}\nvalue: 7\nglobalDefault: true");
    e.add_priority_class(&class);
    e.add_priority_class(&default);
    let pod =
        |spec: &str| -> Pod { yaml(&format!("metadata: {{generateName: p-}}\nspec: {spec}")) };
    e.pod(pod("{priorityClassName: gold, containers: []}"))
        .unwrap();
    e.pod(pod("{containers: []}")).unwrap();
    assert!(
        e.pod(pod("{priorityClassName: silver, containers: []}"))
            .unwrap_err()
            .contains("silver")
    );
    let out = e.take();
    assert_eq!((out.pods[0].priority, out.pods[1].priority), (100, 7));
    let again = {
        let mut e = Expander::new(1, "placer");
        e.pod(pod("{containers: []}")).unwrap();
        e.take().pods[0].name.clone()
    };
    assert_eq!(again, out.pods[0].name);
    assert_ne!(out.pods[0].uid, out.pods[1].uid);
}

#[test]
fn too_many_replicas_is_an_error_not_an_allocation() {
    let mut e = Expander::new(0, "placer");
    let rs: ReplicaSet = yaml(&format!(
        "metadata: {{name: big}}\nspec:\n  replicas: 2000000\n  selector: {{matchLabels: {{app: web}}}}\n  template:{TEMPLATE}"
    ));
    assert!(
        e.replica_set(&rs)
            .unwrap_err()
            .contains("more than 1000000 pods")
    );
}
