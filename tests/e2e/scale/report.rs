//! The tables a scale test prints (and writes to `PLACER_SCALE_OUT` when set): throughput and
//! cost per run, then the latencies the schedulers report in their own `/metrics`, then what
//! configuration f's extender probe saw.

use std::fmt::Write as _;

use super::measure::Outcome;
use super::probe;
use super::workload::Size;
use crate::harness::prom::Histogram;

/// kube-scheduler's and placer's histogram between the two scrapes of a run.
fn hist(o: &Outcome, placer: bool, name: &str, filter: &[(&str, &str)]) -> Histogram {
    let (before, after) = if placer {
        (&o.metrics_before.1, &o.metrics_after.1)
    } else {
        (&o.metrics_before.0, &o.metrics_after.0)
    };
    between(before, after, name, filter)
}

/// A histogram's observations between two scrapes.
fn between(before: &str, after: &str, name: &str, filter: &[(&str, &str)]) -> Histogram {
    Histogram::parse(after, name, filter).since(&Histogram::parse(before, name, filter))
}

/// placer's server-side time for `verb` between two scrapes, p50 / p90 / p99 ms.
fn served(before: &str, after: &str, verb: &str) -> String {
    quantiles(
        &between(
            before,
            after,
            "placer_request_duration_seconds",
            &[("verb", verb)],
        ),
        &[0.5, 0.9, 0.99],
    )
}

/// `p50/p90/p99` in ms, or `–` without observations.
fn quantiles(h: &Histogram, qs: &[f64]) -> String {
    if h.count <= 0.0 {
        return "–".into();
    }
    let top = h.top_bound();
    qs.iter()
        .map(|q| match h.quantile(*q) {
            // In the +Inf bucket: only a lower bound is known.
            Some(s) if Some(s) == top => format!("≥{:.1}", s * 1e3),
            Some(s) => format!("{:.1}", s * 1e3),
            None => "?".into(),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The first two cells of a run's row in every table: its workload and configuration.
fn run_label(o: &Outcome) -> String {
    format!(
        "{} | {}. {}",
        o.workload.label(),
        o.config.letter(),
        o.config.describe()
    )
}

fn per_thousand(cpu: f64, pods: usize) -> f64 {
    cpu * 1000.0 / pods as f64
}

/// Both tables as Markdown.
pub fn render(size: Size, outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### {} nodes, {} initial pods, {} measured pods\n",
        size.nodes,
        size.initial_pods(),
        size.pods
    );
    out.push_str(
        "| workload | configuration | pods/s avg | p50 | p90 | run s | scheduler CPU-s / 1k pods | \
         apiserver / etcd / kwok CPU-s / 1k pods | RSS MiB: start-up VmHWM; peak / end (VmHWM) |\n\
         | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |\n",
    );
    for o in outcomes {
        let sched: f64 = o.cpu.iter().map(|(_, c)| c).sum();
        let parts = o
            .cpu
            .iter()
            .map(|(n, c)| format!("{n} {:.2}", per_thousand(*c, o.pods)))
            .collect::<Vec<_>>()
            .join(" + ");
        let infra = o
            .infra_cpu
            .iter()
            .map(|(_, c)| format!("{:.2}", per_thousand(*c, o.pods)))
            .collect::<Vec<_>>()
            .join(" / ");
        let memory = o
            .memory
            .iter()
            .map(|m| {
                format!(
                    "{} {:.0}; {:.0} / {:.0} ({:.0})",
                    m.name, m.start_hwm, m.peak, m.end, m.hwm
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} ({parts}) | {infra} | {memory} |",
            run_label(o),
            o.rate.0,
            o.rate.1,
            o.rate.2,
            o.elapsed.as_secs_f64(),
            per_thousand(sched, o.pods),
        );
    }
    out.push_str(
        "\nLatencies in ms (p50 / p90 / p99) from each scheduler's /metrics over the run. \
         kube-scheduler exposes no extender latency; its algorithm duration includes the \
         extender calls; ≥ marks a quantile above the histogram's largest finite bucket.\n\n\
         | workload | configuration | kube-scheduler algorithm | Filter | Score | Bind | \
         placer /filter | placer /prioritize | placer queued→bound | placer bind |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let q3 = [0.5, 0.9, 0.99];
    for o in outcomes {
        let point = |p: &str| {
            quantiles(
                &hist(
                    o,
                    false,
                    "scheduler_framework_extension_point_duration_seconds",
                    &[("extension_point", p)],
                ),
                &q3,
            )
        };
        let verb = |v: &str| {
            quantiles(
                &hist(o, true, "placer_request_duration_seconds", &[("verb", v)]),
                &q3,
            )
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            run_label(o),
            quantiles(
                &hist(
                    o,
                    false,
                    "scheduler_scheduling_algorithm_duration_seconds",
                    &[]
                ),
                &q3
            ),
            point("Filter"),
            point("Score"),
            point("Bind"),
            verb("filter"),
            verb("prioritize"),
            quantiles(
                &hist(o, true, "placer_scheduling_duration_seconds", &[]),
                &q3
            ),
            quantiles(&hist(o, true, "placer_bind_duration_seconds", &[]), &q3),
        );
    }
    placement_table(&mut out, outcomes);
    probe_table(&mut out, outcomes);
    out
}

/// Where each run's pods went: per zone (and the skew ZoneSpread keeps down) and per node.
fn placement_table(out: &mut String, outcomes: &[Outcome]) {
    out.push_str(
        "\nPlacement, initial and measured pods: pods per zone, the zones' skew (most − fewest) \
         and the fewest / most pods on one node.\n\n\
         | workload | configuration | pods per zone | zone skew | pods per node min / max |\n\
         | --- | --- | --- | ---: | --- |\n",
    );
    for o in outcomes {
        let p = &o.placement;
        let zones = p
            .per_zone
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" / ");
        let _ = writeln!(
            out,
            "| {} | {zones} | {} | {} / {} |",
            run_label(o),
            p.zone_skew(),
            p.node_min,
            p.node_max,
        );
    }
}

/// Configuration f's probe: client-side and server-side latencies, idle and during the burst.
fn probe_table(out: &mut String, outcomes: &[Outcome]) {
    let probed: Vec<_> = outcomes
        .iter()
        .filter_map(|o| Some((o, o.probe.as_ref()?)))
        .collect();
    let Some((_, first)) = probed.first() else {
        return;
    };
    let _ = write!(
        out,
        "\nExtender probe of (f), ms: one /filter ({} node names) then /prioritize (the names \
         kept) every {} ms; client-side p50 / p90 / p99 / max over loopback, and placer's \
         placer_request_duration_seconds p50 / p90 / p99 over the same phase. idle: {} s after \
         sync, before the first create; burst: to the last binding.\n\n\
         | workload | phase | pairs | /filter client | /prioritize client | /filter server | \
         /prioritize server | pods/s avg |\n\
         | --- | --- | ---: | --- | --- | --- | --- | ---: |\n",
        first.nodes,
        probe::PERIOD.as_millis(),
        probe::IDLE.as_secs(),
    );
    for (o, p) in probed {
        if let Some((idle, (before, after))) = &p.idle {
            let _ = writeln!(
                out,
                "| {} | idle | {} | {} | {} | {} | {} | – |",
                o.workload.label(),
                idle.prioritize.len(),
                probe::quantiles(&idle.filter),
                probe::quantiles(&idle.prioritize),
                served(before, after, "filter"),
                served(before, after, "prioritize"),
            );
        }
        let (before, after) = (&o.metrics_before.1, &o.metrics_after.1);
        let _ = writeln!(
            out,
            "| {} | burst | {} | {} | {} | {} | {} | {:.0} |",
            o.workload.label(),
            p.burst.prioritize.len(),
            probe::quantiles(&p.burst.filter),
            probe::quantiles(&p.burst.prioritize),
            served(before, after, "filter"),
            served(before, after, "prioritize"),
            o.rate.0,
        );
    }
}
