//! Reading what placer and kube-scheduler logged: lines with given text, and their `key=value`
//! fields (placer's text format writes `pod=ns/name`, klog writes `pod="ns/name"`).

use std::ops::ControlFlow;
use std::path::Path;

use anyhow::Context as _;

use super::env::TestEnv;
use super::wait::SCHEDULING_TIMEOUT;

/// The lines of the log at `path` that contain every one of `needles`.
pub fn lines_with(path: &Path, needles: &[&str]) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read(path).with_context(|| format!("read log {}", path.display()))?;
    Ok(String::from_utf8_lossy(&text)
        .lines()
        .filter(|line| needles.iter().all(|n| line.contains(n)))
        .map(str::to_owned)
        .collect())
}

/// The value of the field `key` in a log line: `key=value` or `key="value"` (no escapes).
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|token| token.strip_prefix(&prefix))
        .map(|value| value.trim_matches('"'))
}

impl TestEnv {
    /// Waits until the log at `path` has a line containing every one of `needles`; returns the
    /// first such line.
    pub async fn wait_log_line(&self, path: &Path, needles: &[&str]) -> anyhow::Result<String> {
        self.poll(
            &format!("a line with {needles:?} in {}", path.display()),
            SCHEDULING_TIMEOUT,
            || async {
                Ok(match lines_with(path, needles)?.into_iter().next() {
                    Some(line) => ControlFlow::Break(line),
                    None => ControlFlow::Continue("no such line yet".into()),
                })
            },
        )
        .await
    }
}
