//! Build script: the commit placer is built from, as the compile-time
//! variable `PLACER_GIT_COMMIT` (read by `placer_build_info` and
//! `placer --version`).
//!
//! An image build has no `.git`: the Dockerfile passes the commit in the
//! environment variable of the same name (its `REVISION` build argument),
//! which wins. Otherwise `git` is asked, if there is a git and a work tree;
//! without either the commit is "unknown", never an error, so a build from
//! a source tarball works.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PLACER_GIT_COMMIT");
    let commit = std::env::var("PLACER_GIT_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PLACER_GIT_COMMIT={commit}");
}

/// `git <args>` in the package's directory: its trimmed output, or `None`
/// when git is missing, fails, or says nothing.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git")
        .arg("-C")
        .arg(&dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The commit HEAD names, 12 hex digits; rebuilds when HEAD moves.
fn git_commit() -> Option<String> {
    // Both paths are absolute with --path-format (git 2.31+); older gits
    // print them relative to the package directory, which Path::join handles.
    let git_dir = git(&["rev-parse", "--path-format=absolute", "--git-dir"])?;
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .unwrap_or_else(|| git_dir.clone());
    let head = Path::new(&git_dir).join("HEAD");
    watch(&head);
    if let Ok(text) = std::fs::read_to_string(&head)
        && let Some(reference) = text.trim().strip_prefix("ref: ")
    {
        watch(&Path::new(&common).join(reference));
        watch(&Path::new(&common).join("packed-refs"));
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

/// Reruns this script when `path` changes; only for paths that exist, as a
/// missing one would rerun it on every build.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
