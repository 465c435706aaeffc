//! Inputs for `placer simulate` at scale:
//!
//! ```sh
//! # The Alibaba GPU trace (cluster-trace-gpu-v2023) as a cluster and a timed workload:
//! cargo run --release --example simulate_inputs -- alibaba ../shared/data/alibaba-gpu-v2023 OUT [PODS_CSV]
//! # A synthetic cluster of NODES nodes in 3 zones and PODS pods in Deployments of 50:
//! cargo run --release --example simulate_inputs -- scale 5000 100000 OUT
//! ```
//!
//! Each writes `OUT/cluster.yaml` (nodes) and `OUT/workload.yaml` (pods), and
//! `OUT/policy.yaml` (kube-scheduler's default profile,
//! `examples/default-profile.yaml`, as schedulerName `placer-default`).
//!
//! **How the trace's GPUs are modelled** (the trace's README asks for it to
//! be stated): a node's GPUs are the extended resource `nvidia.com/gpu`
//! (a device plugin's count) and, for sharing, `alibaba.com/gpu-milli`:
//! 1000 per GPU. A task of whole GPUs asks for `nvidia.com/gpu: n` and
//! `alibaba.com/gpu-milli: 1000n`; a GPU-sharing task (`num_gpu` 1,
//! `gpu_milli` below 1000) asks for `alibaba.com/gpu-milli` only. This is
//! a fluid model of sharing: it checks a node's GPU share in total, not per
//! GPU, so a shared task may be placed where its share is free only split
//! across two GPUs, and a whole-GPU task where shares leave no GPU entirely
//! free. It over-admits; the exact model is DRA devices with consumable
//! capacity, which `placer simulate` does not model yet (it holds no
//! ResourceClaims). The GPU model is the node label `alibaba.com/gpu-model`
//! and a task's `gpu_spec` a required node affinity on it. A task arrives at
//! its `creation_time` and runs for `deletion_time - scheduled_time` once
//! bound (`deletion_time - creation_time` when it was never scheduled).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["alibaba", dir, out] => {
            alibaba(Path::new(dir), Path::new(out), "openb_pod_list_default.csv")
        }
        ["alibaba", dir, out, pods] => alibaba(Path::new(dir), Path::new(out), pods),
        ["scale", nodes, pods, out] => match (nodes.parse(), pods.parse()) {
            (Ok(n), Ok(p)) => scale(n, p, Path::new(out)),
            _ => Err("NODES and PODS must be numbers".into()),
        },
        _ => Err(
            "usage: simulate_inputs alibaba TRACE_DIR OUT [PODS_CSV] | scale NODES PODS OUT".into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The rows of a CSV file without quoting (the trace has none), keyed by its header.
fn read_csv(path: &Path) -> Result<Vec<std::collections::HashMap<String, String>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    lines
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let cells: Vec<&str> = line.split(',').collect();
            if cells.len() != header.len() {
                return Err(format!(
                    "{}:{}: {} fields, expected {}",
                    path.display(),
                    i + 2,
                    cells.len(),
                    header.len()
                ));
            }
            Ok(header
                .iter()
                .map(|h| h.to_string())
                .zip(cells.iter().map(|c| c.to_string()))
                .collect())
        })
        .collect()
}

fn number(row: &std::collections::HashMap<String, String>, key: &str) -> Result<i64, String> {
    let v = row.get(key).map_or("", String::as_str);
    if v.is_empty() {
        return Ok(0);
    }
    v.parse()
        .map_err(|_| format!("{key}: {v:?} is not a number"))
}

fn write(out: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = out.join(name);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// kube-scheduler v1.37's default profile (schedulerName `placer-default`).
const TRACE_POLICY: &str = include_str!("default-profile.yaml");

fn alibaba(dir: &Path, out: &Path, pods_csv: &str) -> Result<(), String> {
    let mut cluster = String::new();
    for row in read_csv(&dir.join("openb_node_list_all_node.csv"))? {
        let (cpu, mem, gpus) = (
            number(&row, "cpu_milli")?,
            number(&row, "memory_mib")?,
            number(&row, "gpu")?,
        );
        let model = &row["model"];
        let _ = write!(
            cluster,
            "---\nkind: Node\napiVersion: v1\nmetadata:\n  name: {}\n  labels: {{kubernetes.io/hostname: {0}{}}}\nstatus:\n  allocatable: {{cpu: {cpu}m, memory: {mem}Mi, pods: '110'",
            row["sn"],
            if model.is_empty() {
                String::new()
            } else {
                format!(", alibaba.com/gpu-model: {model}")
            },
        );
        if gpus > 0 {
            let _ = write!(
                cluster,
                ", nvidia.com/gpu: '{gpus}', alibaba.com/gpu-milli: '{}'",
                gpus * 1000
            );
        }
        cluster.push_str("}\n");
    }
    let mut workload = String::new();
    for row in read_csv(&dir.join(pods_csv))? {
        let (cpu, mem) = (number(&row, "cpu_milli")?, number(&row, "memory_mib")?);
        let (gpus, milli) = (number(&row, "num_gpu")?, number(&row, "gpu_milli")?);
        let created = number(&row, "creation_time")?;
        let scheduled = number(&row, "scheduled_time")?;
        let deleted = number(&row, "deletion_time")?;
        let started = if scheduled > 0 || created == 0 {
            scheduled
        } else {
            created
        };
        let runs_for = (deleted - started).max(1);
        let mut requests = format!("cpu: {cpu}m, memory: {mem}Mi");
        if gpus >= 1 && (gpus > 1 || milli >= 1000) {
            let _ = write!(
                requests,
                ", nvidia.com/gpu: '{gpus}', alibaba.com/gpu-milli: '{}'",
                gpus * 1000
            );
        } else if gpus == 1 && milli > 0 {
            let _ = write!(requests, ", alibaba.com/gpu-milli: '{milli}'");
        }
        let affinity = match row["gpu_spec"].as_str() {
            "" => String::new(),
            spec => format!(
                "\n  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: alibaba.com/gpu-model, operator: In, values: [{}]}}]}}]}}}}}}",
                spec.split('|').collect::<Vec<_>>().join(", ")
            ),
        };
        let _ = write!(
            workload,
            "---\nkind: Pod\napiVersion: v1\nmetadata:\n  name: {}\n  namespace: trace\n  labels: {{qos: {}}}\n  annotations: {{simulate.placer.io/arrive-at: {created}s, simulate.placer.io/runs-for: {runs_for}s}}\nspec:\n  schedulerName: placer-default{affinity}\n  containers: [{{name: task, image: task, resources: {{requests: {{{requests}}}}}}}]\n",
            row["name"], row["qos"],
        );
    }
    for (name, text) in [
        ("cluster.yaml", &cluster),
        ("workload.yaml", &workload),
        ("policy.yaml", &TRACE_POLICY.to_owned()),
    ] {
        let path = write(out, name, text)?;
        println!("{}", path.display());
    }
    Ok(())
}

fn scale(nodes: usize, pods: usize, out: &Path) -> Result<(), String> {
    let mut cluster = String::new();
    for i in 0..nodes {
        let _ = write!(
            cluster,
            "---\nkind: Node\napiVersion: v1\nmetadata:\n  name: node-{i:05}\n  labels: {{kubernetes.io/hostname: node-{i:05}, topology.kubernetes.io/zone: zone-{}}}\nstatus:\n  allocatable: {{cpu: '32', memory: 128Gi, pods: '110'}}\n",
            i % 3
        );
    }
    let mut workload = String::new();
    let per = 50;
    for d in 0..pods.div_ceil(per) {
        let replicas = per.min(pods - d * per);
        let cpu = [250, 500, 1000, 2000][d % 4];
        let _ = write!(
            workload,
            "---\nkind: Deployment\napiVersion: apps/v1\nmetadata: {{name: app-{d:05}, namespace: scale}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: app-{d:05}}}}}\n  template:\n    metadata: {{labels: {{app: app-{d:05}}}}}\n    spec:\n      schedulerName: placer-default\n      containers: [{{name: c, image: app, resources: {{requests: {{cpu: {cpu}m, memory: {}Mi}}}}}}]\n",
            cpu * 2
        );
    }
    for (name, text) in [
        ("cluster.yaml", &cluster),
        ("workload.yaml", &workload),
        ("policy.yaml", &TRACE_POLICY.to_owned()),
    ] {
        let path = write(out, name, text)?;
        println!("{}", path.display());
    }
    Ok(())
}
