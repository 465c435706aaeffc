//! CPU time and memory of a process, read from `/proc/<pid>/stat` and `/proc/<pid>/status`.

use anyhow::{Context as _, anyhow};

/// Clock ticks per second of `utime`/`stime` in `/proc/<pid>/stat`.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// User plus system CPU seconds `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow!("{path}: no ')' in {stat:?}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let tick = |i: usize| -> anyhow::Result<f64> {
        let field = fields
            .get(i)
            .ok_or_else(|| anyhow!("{path}: too few fields"))?;
        Ok(field
            .parse::<u64>()
            .with_context(|| format!("{path}: field {field:?}"))? as f64)
    };
    Ok((tick(11)? + tick(12)?) / clock_ticks())
}

/// Resident memory of `pid` now and at its peak (`VmRSS`, `VmHWM`), in MiB.
pub fn rss_mib(pid: u32) -> anyhow::Result<(f64, f64)> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    let kib = |key: &str| -> anyhow::Result<f64> {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .ok_or_else(|| anyhow!("{path}: no {key}"))?;
        let value = line.trim().trim_end_matches("kB").trim();
        value
            .parse::<f64>()
            .with_context(|| format!("{path}: {key} {value:?}"))
    };
    Ok((kib("VmRSS:")? / 1024.0, kib("VmHWM:")? / 1024.0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        assert!(super::cpu_seconds(pid).is_ok_and(|s| s >= 0.0));
        let (rss, hwm) = super::rss_mib(pid).expect("status readable");
        assert!(rss > 0.0 && hwm >= rss);
    }
}
