//! `placer simulate` from the command line's entry point: the README's
//! example against its golden output, and bad input named by file, line and
//! field.

use std::path::{Path, PathBuf};

use placer::cli::{OutputFormat, SimulateArgs, error_message, simulate_to_string};

fn args(cluster: &Path, workload: &Path, format: OutputFormat) -> SimulateArgs {
    SimulateArgs {
        cluster: cluster.to_path_buf(),
        workload: workload.to_path_buf(),
        policy: PathBuf::from("policy.yaml"),
        scheduler_name: "placer".into(),
        seed: 0,
        max_of: None,
        drain: None,
        add_nodes: None,
        compare_profile: None,
        format,
    }
}

fn example(format: OutputFormat) -> String {
    let args = args(
        Path::new("examples/simulate/cluster.yaml"),
        Path::new("examples/simulate/workload.yaml"),
        format,
    );
    simulate_to_string(&args).unwrap_or_else(|e| panic!("{}", error_message(&e)))
}

#[test]
fn the_example_prints_its_golden_table_and_json() {
    let table = example(OutputFormat::Table);
    let golden = std::fs::read_to_string("examples/simulate/expected.txt").unwrap();
    assert_eq!(
        table, golden,
        "regenerate with: placer simulate --cluster examples/simulate/cluster.yaml --workload examples/simulate/workload.yaml > examples/simulate/expected.txt"
    );
    let json = example(OutputFormat::Json);
    let golden = std::fs::read_to_string("examples/simulate/expected.json").unwrap();
    assert_eq!(json, golden);
    // What the example shows: preemption, a pending pod, GPUs, spreading.
    assert!(table.contains("default/batch-a2           Evicted  -        preempted by shop/db"));
    assert!(table.contains("9 pods: 7 placed, 1 pending, 1 evicted, 0 departed"));
}

#[test]
fn the_readme_shows_the_example_output_exactly() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let table = example(OutputFormat::Table);
    let block = format!("```text\n{table}```");
    assert!(
        readme.contains(&block),
        "README's simulate example differs from:\n{table}"
    );
    assert!(readme.contains(
        "placer simulate --cluster examples/simulate/cluster.yaml --workload examples/simulate/workload.yaml"
    ));
}

#[test]
fn runs_repeat_and_seeds_differ() {
    let run = |seed| {
        let mut a = args(
            Path::new("examples/simulate/cluster.yaml"),
            Path::new("examples/simulate/workload.yaml"),
            OutputFormat::Json,
        );
        a.seed = seed;
        simulate_to_string(&a).unwrap()
    };
    assert_eq!(run(3), run(3));
    // Another seed draws other names (and may break ties otherwise).
    assert_ne!(run(3), run(4));
}

/// The error of simulating `workload` (written to a file) on the example cluster.
fn workload_error(workload: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.yaml");
    std::fs::write(&file, workload).unwrap();
    let a = args(
        Path::new("examples/simulate/cluster.yaml"),
        &file,
        OutputFormat::Table,
    );
    let e = simulate_to_string(&a).unwrap_err();
    error_message(&e).replace(&file.display().to_string(), "w.yaml")
}

#[test]
fn an_unknown_kind_is_named_with_its_line() {
    let e = workload_error(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    );
    assert_eq!(
        e,
        "w.yaml:7:7: document 2: kind: unsupported kind \"Service\" (expected Pod, Deployment, ReplicaSet, StatefulSet, Job, PriorityClass or List)"
    );
}

#[test]
fn a_template_without_resources_is_named_with_its_field() {
    let e = workload_error(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - name: web\n          image: web\n",
    );
    assert_eq!(
        e,
        "w.yaml:10:11: document 1, Deployment \"default/web\": spec.template.spec.containers[0].resources: required value: resources.requests (or limits): a simulated pod must say what it needs"
    );
}

#[test]
fn a_bad_quantity_and_a_missing_priority_class_are_named() {
    let e = workload_error(
        "kind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n    - name: c\n      resources: {requests: {cpu: lots}}\n",
    );
    assert!(e.starts_with("w.yaml:6:"), "{e}");
    assert!(
        e.contains("spec.containers[0].resources.requests.cpu"),
        "{e}"
    );
    let e = workload_error(
        "kind: Pod\nmetadata: {name: a}\nspec:\n  priorityClassName: gold\n  containers: [{name: c, resources: {requests: {cpu: 1}}}]\n",
    );
    assert!(
        e.contains("no PriorityClass \"gold\" in the workload"),
        "{e}"
    );
    assert!(
        e.starts_with("w.yaml:1:1: document 1, Pod \"default/a\""),
        "{e}"
    );
}

#[test]
fn duplicate_node_names_in_the_cluster_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("c.yaml");
    std::fs::write(
        &cluster,
        "kind: Node\nmetadata: {name: n}\n---\nkind: Node\nmetadata: {name: n}\n",
    )
    .unwrap();
    let a = args(
        &cluster,
        Path::new("examples/simulate/workload.yaml"),
        OutputFormat::Table,
    );
    let e = error_message(&simulate_to_string(&a).unwrap_err());
    assert!(e.contains("c.yaml:5:18: document 2, Node \"n\": metadata.name: duplicate node name (first in document 1)"), "{e}");
}

#[test]
fn a_second_pod_of_one_name_is_refused() {
    let pod = "kind: Pod\nmetadata: {name: a, namespace: x}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}\n";
    let e = workload_error(&format!("{pod}---\n{pod}"));
    assert!(e.starts_with("w.yaml:5:1: document 2, Pod \"x/a\""), "{e}");
    assert!(e.contains("a second pod named \"x/a\""), "{e}");
}

#[test]
fn a_timed_workload_waits_for_a_departure() {
    // One 4-cpu node; `b` arrives while `a` runs and gets its room when `a` leaves.
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("c.yaml");
    std::fs::write(
        &cluster,
        "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4', memory: 1Gi, pods: '10'}}\n",
    )
    .unwrap();
    let pod = |name: &str, at: &str, runs: &str| {
        format!(
            "---\nkind: Pod\nmetadata: {{name: {name}, annotations: {{simulate.placer.io/arrive-at: {at}, simulate.placer.io/runs-for: {runs}}}}}\nspec: {{containers: [{{name: c, resources: {{requests: {{cpu: '3'}}}}}}]}}\n"
        )
    };
    let workload = dir.path().join("w.yaml");
    std::fs::write(&workload, pod("a", "0s", "2h") + &pod("b", "30m", "1h")).unwrap();
    let a = args(&cluster, &workload, OutputFormat::Table);
    let table = simulate_to_string(&a).unwrap();
    assert!(table.contains("default/a  Departed  n"), "{table}");
    assert!(table.contains("default/b  Departed  n"), "{table}");
    assert!(table.contains("2 pods: 0 placed, 0 pending, 0 evicted, 2 departed\n  1 waited for room, the longest 1h30m0s\n"), "{table}");
    // A bad duration is named where it is written.
    std::fs::write(&workload, pod("a", "soon", "2h")).unwrap();
    let e = error_message(&simulate_to_string(&a).unwrap_err());
    assert!(e.contains("w.yaml:3:"), "{e}");
    assert!(
        e.contains("metadata.annotations.simulate.placer.io/arrive-at: \"soon\" is not a duration"),
        "{e}"
    );
}
