//! The deployment manifests are accepted by a real API server.

use std::path::Path;

use crate::harness::{TestEnv, manifests};

/// Every document under `manifests/` passes server-side apply in dry-run mode.
#[tokio::test]
async fn manifests_pass_server_side_dry_run() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let set = manifests::load(&root)?;
    let env = TestEnv::new("manifests").await?;

    let failures = manifests::dry_run_apply(env.client(), &set).await?;

    eprintln!(
        "manifests: {} objects, {} kustomizations, skipped (generator inputs/patches): {:?}",
        set.docs.len(),
        set.kustomizations.len(),
        set.skipped
    );
    assert!(
        failures.is_empty(),
        "rejected by the API server:\n{}",
        failures.join("\n")
    );
    Ok(())
}
