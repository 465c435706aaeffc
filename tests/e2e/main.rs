//! End-to-end tests of placer against a real control plane: etcd and kube-apiserver built from
//! Go modules (`tests/cluster/build.sh`), stock kube-scheduler, and placer run as a process.
//!
//! Run with `cargo test --test e2e -- --test-threads=2`. One control plane is shared by all tests
//! of this binary; each test isolates itself (see `harness`). Environment knobs:
//! - `PLACER_E2E_BIN_DIR`: directory with prebuilt etcd, kube-apiserver and kube-scheduler
//!   (default: build or reuse them with `tests/cluster/build.sh`);
//! - `PLACER_E2E_PLACER_BIN`: another placer binary to test (default: cargo's build);
//! - `PLACER_E2E_HELM_DIR`: directory with helm and the CRDs the chart test installs (default:
//!   build or reuse them with `tests/cluster/build-helm.sh`);
//! - `PLACER_E2E_RUST_LOG`: placer's log filter (default `info`);
//! - `PLACER_E2E_KEEP=1`: keep the temp dirs with configs and logs of every process;
//! - `PLACER_E2E_RACE_NO_PROMPTS=1`: run the `retry` race tests with `--no-retry-prompts` (they
//!   then report the stuck pods and fail), `PLACER_E2E_RACE_TRIALS` and `PLACER_E2E_PENDING_PODS`:
//!   their sizes (40 trials, 1,000 pending pods);
//! - `PLACER_E2E_ROLLOUT_DELAY`: placer's `--shutdown-delay-seconds` in the `rollout` test
//!   (default 5; 0 shows the failed calls the delay prevents).

mod harness;

mod access;
mod bind;
mod chart;
mod chart_install;
mod differential;
mod differential_scores;
mod explain;
mod extender;
mod freshness;
mod lean;
mod manifests;
mod outage;
mod restart;
mod retry;
mod rollout;
mod scale;
mod smoke;
mod standalone;
mod throughput;
