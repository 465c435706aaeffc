//! Logging set-up: `tracing` with an `RUST_LOG`-style filter, text or JSON.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber. The filter comes from `RUST_LOG`
/// (default: `info`, with kube's per-request spans kept at `warn`).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube=warn,tower_http=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // A second init (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // Panics are logged like everything else (the default hook writes a
    // plain line to stderr, which breaks `--log-format json`).
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(ToString::to_string);
        tracing::error!(
            panic = info.payload_as_str().unwrap_or("(no message)"),
            location = location.as_deref().unwrap_or("unknown"),
            "panic"
        );
    }));
}
