//! The real `placer` binary: `serve --snapshot` answering over TCP,
//! `check-policy` on a bad file, `--version`.

use std::process::{Command, Output};

use crate::support::{
    BIN, Client, FILTER_ANSWER, FILTER_NODES, Server, api_pod_args, copy_policy, policy_args,
    repo_file,
};

#[test]
fn serve_with_a_snapshot_answers_filter_over_tcp() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = copy_policy(dir.path());
    // Server::start waits for 200 from /readyz; check the body it answered with.
    let server = Server::start(dir.path(), &policy_args(&policy), Client::Plain);
    let ready = server.get("/readyz");
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (200, r#"{"status":"ready"}"#)
    );
    // A snapshot has no cluster behind it: the reads stay open, and the
    // start-up line says so.
    assert_eq!(server.get("/metrics").status, 200);
    assert!(
        server
            .log_text()
            .contains("open to anyone who reaches the port (--snapshot"),
        "{}",
        server.log_text()
    );

    // examples/cluster.yaml: only node-a1 and node-c1 carry hw-encrypt.
    let reply = server.post("/filter", &api_pod_args(FILTER_NODES));
    assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
    assert!(
        reply.header("content-length").is_some() && reply.header("transfer-encoding").is_none(),
        "answers carry a Content-Length: {}",
        reply.head
    );
    let reply = server.post("/filter", r#"{"NodeNames":5}"#);
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (
            400,
            r#"{"Error":"invalid JSON at line 1 column 14, field NodeNames: invalid type: integer `5`, expected a sequence"}"#
        )
    );
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("placer runs")
}

#[test]
fn check_policy_reports_file_line_column_and_fails() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(repo_file("policy.yaml")).expect("policy.yaml");
    let (line, column) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("SamePriority").map(|c| (i + 1, c + 1)))
        .expect("policy.yaml sets countPods: SamePriority");
    std::fs::write(
        &path,
        text.replace("countPods: SamePriority", "countPods: Same"),
    )
    .expect("write bad policy");
    let path = path.to_str().expect("UTF-8 path");

    let out = run(&["check-policy", path]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: {path}:{line}:{column}: profiles[0].plugins[1].args.countPods: unknown variant `Same`, expected one of `SamePriority`, `All`, `MatchLabelKeys`\n"
        )
    );
}

#[test]
fn check_policy_prints_the_effective_policy() {
    let out = run(&[
        "check-policy",
        repo_file("policy.yaml").to_str().expect("UTF-8"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("unknownTierScore: 10"), "{printed}");
}

#[test]
fn version_prints_name_and_version() {
    let out = run(&["--version"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "placer {} ({})\n",
            env!("CARGO_PKG_VERSION"),
            crate::support::built_commit()
        )
    );
}

#[test]
fn a_missing_file_names_its_os_error_once() {
    let missing = "/nonexistent/placer-missing.yaml";
    let not_found = "No such file or directory (os error 2)";
    let out = run(&["check-policy", missing]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: {missing}: {not_found}\n")
    );

    let policy = repo_file("policy.yaml");
    let policy = policy.to_str().expect("UTF-8 path");
    for source in ["--snapshot", "--kubeconfig"] {
        let out = run(&[
            "serve",
            "--policy",
            policy,
            source,
            missing,
            "--listen",
            "127.0.0.1:0",
        ]);
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.matches(not_found).count(), 1, "{source}: {stderr}");
        assert!(
            stderr.ends_with(&format!("{not_found}\n")),
            "{source}: {stderr}"
        );
    }
}

/// Delegated authentication needs both review clients: one kubeconfig flag alone, outside a
/// cluster, is a start-up error naming both flags (kube-scheduler logs a warning and then
/// forbids every path but the always-allowed ones).
#[test]
fn one_delegated_auth_kubeconfig_without_the_other_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
",
    )
    .expect("write kubeconfig");
    let policy = repo_file("policy.yaml");
    let snapshot = repo_file("examples/cluster.yaml");
    for (given, missing) in [
        ("--authentication-kubeconfig", "--authorization-kubeconfig"),
        ("--authorization-kubeconfig", "--authentication-kubeconfig"),
    ] {
        let out = run(&[
            "serve",
            "--policy",
            policy.to_str().expect("UTF-8 path"),
            "--snapshot",
            snapshot.to_str().expect("UTF-8 path"),
            "--listen",
            "127.0.0.1:0",
            given,
            kubeconfig.to_str().expect("UTF-8 path"),
        ]);
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "{given} is set but {missing} is not, and placer does not run in a cluster: set both"
            )),
            "{stderr}"
        );
    }
}
