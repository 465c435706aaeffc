//! `process_*` metrics, the set every Go component (client_golang's process
//! collector) exports: CPU seconds, resident and virtual memory, open and
//! maximum file descriptors, threads, start time. Read from `/proc/self` at
//! each scrape; on a system without `/proc` the families are simply absent.
//!
//! Written here rather than taken from a crate: `kubert-prometheus-process`,
//! the prometheus-client collector there is, is built against
//! prometheus-client 0.23, whose `Collector` trait is not 0.26's, and
//! `metrics-process` serves the `metrics` facade, not prometheus-client.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// The kernel's clock ticks per second in `/proc/<pid>/stat`: `USER_HZ`,
/// fixed at 100 in the proc ABI (Go's procfs assumes the same).
const USER_HZ: f64 = 100.0;

/// One reading of `/proc/self`; a field the kernel did not give is `None`.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    threads: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    max_virtual_bytes: Option<f64>,
}

impl Reading {
    fn now() -> Reading {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let mut r = Reading::default();
        if let Some(stat) = read("/proc/self/stat") {
            let boot = read("/proc/stat").and_then(|s| boot_time(&s));
            r.read_stat(&stat, boot);
        }
        if let Some(status) = read("/proc/self/status") {
            r.read_status(&status);
        }
        if let Some(limits) = read("/proc/self/limits") {
            r.read_limits(&limits);
        }
        r.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64);
        r
    }

    /// `/proc/self/stat`: utime and stime (fields 14, 15), starttime (22),
    /// in ticks; `boot` is the boot time in seconds since the epoch.
    fn read_stat(&mut self, stat: &str, boot: Option<f64>) {
        // The command name (field 2) is in parentheses and may hold spaces.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return;
        };
        // `after` starts at field 3 (state).
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
        if let (Some(user), Some(system)) = (field(14), field(15)) {
            self.cpu_seconds = Some((user + system) / USER_HZ);
        }
        if let (Some(start), Some(boot)) = (field(22), boot) {
            self.start_time_seconds = Some(boot + start / USER_HZ);
        }
    }

    /// `/proc/self/status`: VmRSS, VmSize (kB) and Threads.
    fn read_status(&mut self, status: &str) {
        for line in status.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let number = value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok());
            match key {
                "VmRSS" => self.resident_bytes = number.map(|kb| kb * 1024.0),
                "VmSize" => self.virtual_bytes = number.map(|kb| kb * 1024.0),
                "Threads" => self.threads = number,
                _ => {}
            }
        }
    }

    /// `/proc/self/limits`: the soft limits on open files and address space.
    fn read_limits(&mut self, limits: &str) {
        for line in limits.lines() {
            let soft = |name: &str| {
                let rest = line.strip_prefix(name)?;
                match rest.split_whitespace().next()? {
                    "unlimited" => Some(f64::INFINITY),
                    v => v.parse::<f64>().ok(),
                }
            };
            if let Some(v) = soft("Max open files") {
                self.max_fds = Some(v);
            }
            if let Some(v) = soft("Max address space") {
                self.max_virtual_bytes = Some(v);
            }
        }
    }
}

/// `btime` of `/proc/stat`: the boot time in seconds since the epoch.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Collects [`Reading`]s at every scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = Reading::now();
        if let Some(v) = r.cpu_seconds {
            let counter = ConstCounter::new(v);
            let metric = encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds.",
                Some(&Unit::Seconds),
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges = [
            (
                "process_start_time",
                "Start time of the process since unix epoch in seconds.",
                Some(Unit::Seconds),
                r.start_time_seconds,
            ),
            (
                "process_resident_memory",
                "Resident memory size in bytes.",
                Some(Unit::Bytes),
                r.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes.",
                Some(Unit::Bytes),
                r.virtual_bytes,
            ),
            (
                "process_virtual_memory_max",
                "Maximum amount of virtual memory available in bytes.",
                Some(Unit::Bytes),
                r.max_virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                None,
                r.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                None,
                r.max_fds,
            ),
            (
                "process_threads",
                "Number of OS threads in the process.",
                None,
                r.threads,
            ),
        ];
        for (name, help, unit, value) in gauges {
            let Some(value) = value else { continue };
            let gauge = ConstGauge::new(value);
            let metric =
                encoder.encode_descriptor(name, help, unit.as_ref(), gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_proc_files_as_the_kernel_writes_them() {
        let mut r = Reading::default();
        // A command name with a space and a parenthesis, as comm may hold.
        let stat = "4242 (pla cer)) S 1 4242 4242 0 -1 4194560 2000 0 0 0 150 50 0 0 20 0 7 0 \
                    12345 123456789 2000 18446744073709551615";
        r.read_stat(
            stat,
            boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
        );
        assert_eq!(r.cpu_seconds, Some(2.0), "(150 + 50) ticks");
        assert_eq!(r.start_time_seconds, Some(1_700_000_000.0 + 123.45));
        r.read_status("Name:\tplacer\nVmSize:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t7\n");
        assert_eq!(r.resident_bytes, Some(1024.0 * 1024.0));
        assert_eq!(r.virtual_bytes, Some(2048.0 * 1024.0));
        assert_eq!(r.threads, Some(7.0));
        r.read_limits(
            "Limit                     Soft Limit           Hard Limit           Units\n\
             Max open files            1024                 524288               files\n\
             Max address space         unlimited            unlimited            bytes\n",
        );
        assert_eq!(r.max_fds, Some(1024.0));
        assert_eq!(r.max_virtual_bytes, Some(f64::INFINITY));
    }

    #[test]
    fn this_process_has_cpu_memory_and_descriptors() {
        let r = Reading::now();
        assert!(r.cpu_seconds.is_some_and(|c| c >= 0.0), "{r:?}");
        assert!(r.resident_bytes.is_some_and(|b| b > 0.0), "{r:?}");
        assert!(r.open_fds.is_some_and(|n| n >= 3.0), "{r:?}");
        assert!(r.start_time_seconds.is_some_and(|t| t > 1.6e9), "{r:?}");
    }
}
