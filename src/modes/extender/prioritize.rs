//! `POST /prioritize`: a 0..=10 score for every requested node (design §6).

use axum::extract::State;
use axum::response::Response;

use crate::framework::CycleState;
use crate::policy::PrioritizeHosts;
use crate::protocol::ExtenderArgsRef;
use crate::protocol::encode;

use super::body::{RawBody, decode_args_and_run};
use super::error::ApiError;
use super::request::{self, Resolved};
use super::{ExtenderState, json_bytes};

/// The handler.
pub async fn prioritize(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    decode_args_and_run(&state, body, respond)
        .await
        .map(json_bytes)
}

/// Scores the request's nodes and encodes the `HostPriorityList`. Names
/// placer does not know score 0. A scoring error answers 500: kube-scheduler
/// then ignores this extender's scores for the pod, which is the safe outcome.
pub fn respond(state: &ExtenderState, args: ExtenderArgsRef<'_>) -> Result<Vec<u8>, ApiError> {
    if !state.cache.is_synced() {
        return Err(ApiError::NotSynced);
    }
    let policy = state.policy.load();
    let req = request::decode(args)?;
    let snapshot = state.cache.snapshot();
    let cluster = snapshot.state();
    let Resolved { nodes, known } = req.resolve(cluster);
    state.metrics.observe_nodes("prioritize", nodes.len());
    let framework = request::profile_for(&policy, &req.pod).map_err(ApiError::internal)?;
    let table = framework
        .score_totals(&mut CycleState::new(), &req.pod, &known, cluster)
        .map_err(|s| ApiError::internal(s.attributed_message()))?;
    drop(known);
    drop(snapshot);
    let scored = || {
        request::with_positions(&nodes)
            .map(|(r, at)| (r.name, at.map_or(0, |k| table.extender_score(k))))
    };
    let mut out = Vec::with_capacity(2 + nodes.len() * 64);
    encode::priorities(
        &mut out,
        listed(policy.policy().extender.prioritize_hosts, scored),
    );
    Ok(out)
}

/// The hosts of `scored()` (in order, each with its 0..=10 score) that an
/// answer lists under `hosts` (see [`PrioritizeHosts`] for why each
/// setting ranks the hosts as `All` does). `scored` is called twice when
/// the scores shift: once for the lowest, once for the answer.
fn listed<T, I>(hosts: PrioritizeHosts, scored: impl Fn() -> I) -> impl Iterator<Item = (T, i64)>
where
    I: Iterator<Item = (T, i64)>,
{
    let shift = match hosts {
        // The lowest score over every requested host: an unknown name scores
        // 0, so then nothing shifts and no host would fall below 0.
        PrioritizeHosts::ShiftedNonZero => scored().map(|(_, s)| s).min().unwrap_or(0),
        PrioritizeHosts::All | PrioritizeHosts::NonZero => 0,
    };
    scored()
        .map(move |(host, s)| (host, s - shift))
        .filter(move |&(_, s)| hosts == PrioritizeHosts::All || s != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube-scheduler's `prioritizeNodes` with one extender: each node's
    /// plugin total plus `score × weight × 10` for the hosts the answer
    /// lists (a missing host adds nothing). Returns the nodes it could pick
    /// (every node at the highest total; it breaks ties at random).
    fn kube_scheduler_picks(plugins: &[i64], answer: &[(usize, i64)], weight: i64) -> Vec<usize> {
        let mut totals = plugins.to_vec();
        for &(node, score) in answer {
            totals[node] += score * weight * 10;
        }
        let best = totals.iter().copied().max().unwrap_or(0);
        (0..totals.len()).filter(|&i| totals[i] == best).collect()
    }

    #[test]
    fn every_setting_leads_kube_scheduler_to_the_same_nodes() {
        // xorshift64*: many small clusters, many ties and zeros.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        };
        let mut shortened = 0;
        for _ in 0..5_000 {
            let nodes = 1 + next(12) as usize;
            let floor = next(4) as i64;
            let scores: Vec<i64> = (0..nodes)
                .map(|_| floor + next(11 - floor as u64) as i64)
                .collect();
            let plugins: Vec<i64> = (0..nodes).map(|_| next(300) as i64).collect();
            let weight = 1 + next(5) as i64;
            let all: Vec<(usize, i64)> =
                listed(PrioritizeHosts::All, || scores.iter().copied().enumerate()).collect();
            assert_eq!(all.len(), nodes, "All lists every host");
            let expected = kube_scheduler_picks(&plugins, &all, weight);
            for hosts in [PrioritizeHosts::NonZero, PrioritizeHosts::ShiftedNonZero] {
                let answer: Vec<(usize, i64)> =
                    listed(hosts, || scores.iter().copied().enumerate()).collect();
                assert!(
                    answer.iter().all(|&(_, s)| (1..=10).contains(&s)),
                    "{answer:?}"
                );
                shortened += nodes - answer.len();
                assert_eq!(
                    kube_scheduler_picks(&plugins, &answer, weight),
                    expected,
                    "{hosts:?}: scores {scores:?}, plugins {plugins:?}, weight {weight}"
                );
            }
        }
        assert!(shortened > 0, "some answers left hosts out");
    }

    #[test]
    fn shifting_lowers_every_score_by_the_lowest() {
        let scored = [("a", 3), ("b", 7), ("c", 3), ("d", 10)];
        let got: Vec<_> = listed(PrioritizeHosts::ShiftedNonZero, || scored.into_iter()).collect();
        assert_eq!(got, [("b", 4), ("d", 7)]);
        let got: Vec<_> = listed(PrioritizeHosts::NonZero, || scored.into_iter()).collect();
        assert_eq!(got, scored);
        // An unknown name scores 0, so nothing shifts.
        let scored = [("a", 3), ("unknown", 0), ("b", 7)];
        let got: Vec<_> = listed(PrioritizeHosts::ShiftedNonZero, || scored.into_iter()).collect();
        assert_eq!(got, [("a", 3), ("b", 7)]);
    }
}
