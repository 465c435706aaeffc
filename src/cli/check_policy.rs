//! `placer check-policy FILE`.

use std::path::Path;

use anyhow::Context;

/// Validates the policy and prints it with defaults filled; an invalid
/// policy is an error naming `file:line:column`.
pub fn check_policy(path: &Path) -> anyhow::Result<()> {
    let policy = crate::policy::load(path)?;
    let yaml = serde_yaml_ng::to_string(&policy).context("rendering the effective policy")?;
    print!("{yaml}");
    Ok(())
}
