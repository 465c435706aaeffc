//! The scheduling loop against a stand-in API server: when it starts
//! attempting pods.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::client::Body;
use tokio::sync::watch;

use super::scheduler::Standalone;
use crate::cache::{Cache, share_counted};
use crate::objects::{NodeInfo, PodInfo};
use crate::policy::{self, CompiledPolicy};
use crate::state::AppState;
use crate::testing::stand_in_api;

const POLICY: &str = r#"apiVersion: placer/v1alpha1
kind: Policy
profiles:
  - schedulerName: placer
    plugins:
      - name: PrioritySort
      - name: NodeUnschedulable
"#;

/// One pending pod of placer's, as the unscheduled-pod list returns it.
const PENDING_LIST: &str = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"10"},
"items":[{"metadata":{"name":"p","namespace":"default","uid":"u1","resourceVersion":"5"},
"spec":{"schedulerName":"placer","containers":[{"name":"c","image":"i"}]}}]}"#;

/// An API server that lists [`PENDING_LIST`], holds every watch open, and
/// answers anything else with `201 {}`; it records each request's method
/// and path.
fn api_server(seen: Arc<Mutex<Vec<String>>>) -> kube::Client {
    stand_in_api(move |req: http::Request<Body>| {
        let seen = seen.clone();
        async move {
            let query = req.uri().query().unwrap_or_default().to_owned();
            let path = req.uri().path().to_owned();
            if let Ok(mut seen) = seen.lock() {
                seen.push(format!("{} {path}", req.method()));
            }
            if query.contains("watch=true") {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            match path.as_str() {
                "/api/v1/pods" => (200, PENDING_LIST),
                _ => (201, "{}"),
            }
        }
    })
}

fn bindings(seen: &Mutex<Vec<String>>) -> usize {
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    seen.iter().filter(|r| r.ends_with("/binding")).count()
}

#[tokio::test]
async fn no_pod_is_attempted_before_the_cache_has_listed_nodes_and_pods() {
    let policy = CompiledPolicy::new(policy::parse(POLICY, "test.yaml").unwrap());
    let cache = Arc::new(Cache::new());
    // A node is in, but the lists are not complete: an attempt now would
    // place the pod without knowing the cluster.
    cache
        .write()
        .apply_node(NodeInfo::new("n1", Vec::<(String, String)>::new()));
    // A bound pod equal to the pending one but for its name, as the
    // watches give it: the assumed pod must share its records.
    let mut neighbour: PodInfo = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "q", "namespace": "default", "uid": "u2"},
        "spec": {"schedulerName": "placer", "nodeName": "n1",
            "containers": [{"name": "c", "image": "i"}]}
    }))
    .unwrap();
    share_counted(&mut neighbour);
    cache.write().apply_pod(neighbour);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = AppState::new(policy, cache.clone());
    let standalone = Standalone::new(api_server(seen.clone()), state, "test");
    let (stop_tx, stop_rx) = watch::channel(false);
    let run = tokio::spawn(standalone.run(None, stop_rx, Duration::from_secs(10)));

    // The pending pod is listed at once; nothing is bound while the cache
    // is not synced.
    let listed = async {
        while !seen
            .lock()
            .is_ok_and(|s| s.iter().any(|r| r == "GET /api/v1/pods"))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), listed)
        .await
        .expect("the loop lists the pending pods");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(bindings(&seen), 0, "bound before the cache synced");

    cache.mark_nodes_synced();
    cache.mark_pods_synced();
    let bound = async {
        while bindings(&seen) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), bound)
        .await
        .expect("the pod is bound once the cache synced");
    assert_eq!(bindings(&seen), 1);
    {
        let state = cache.read();
        let (assumed, neighbour) = (state.pod("default", "p"), state.pod("default", "q"));
        let (Some(assumed), Some(neighbour)) = (assumed, neighbour) else {
            panic!("the assumed pod and its neighbour are both counted");
        };
        assert!(Arc::ptr_eq(&assumed.spec, &neighbour.spec));
    }

    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the loop stops")
        .unwrap();
}

#[tokio::test]
async fn a_stop_while_waiting_for_the_cache_ends_the_loop() {
    let policy = CompiledPolicy::new(policy::parse(POLICY, "test.yaml").unwrap());
    let state = AppState::new(policy, Arc::new(Cache::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let standalone = Standalone::new(api_server(seen.clone()), state, "test");
    let (stop_tx, stop_rx) = watch::channel(false);
    let run = tokio::spawn(standalone.run(None, stop_rx, Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the loop stops without the cache ever syncing")
        .unwrap();
    assert_eq!(bindings(&seen), 0);
}

/// The binding points, with plugins that log what they are asked to do.
mod binding_cycle {
    use std::sync::Mutex as StdMutex;

    use futures::future::BoxFuture;
    use tokio::sync::Semaphore;

    use super::*;
    use crate::framework::{
        ApiWrite, BindPlugin, CycleState, Framework, Permit, PermitPlugin, PostBindPlugin,
        PreBindPlugin, ReservePlugin, Status, WaitingPods, WeightedPlugin,
    };
    use crate::metrics::Metrics;
    use crate::modes::standalone::binding::{BindingCycle, failure_of, reserve_and_permit};
    use crate::modes::standalone::report::Reporter;
    use crate::objects::PodInfo;

    type Log = Arc<StdMutex<Vec<String>>>;

    fn entries(log: &Log) -> Vec<String> {
        log.lock().unwrap().clone()
    }

    /// A plugin at every binding point, each behaviour chosen per test.
    struct Step {
        name: &'static str,
        log: Log,
        reserve: Status,
        permit: Permit,
        pre_flight: Status,
        pre_bind: Status,
        bind: Status,
    }

    impl Step {
        fn new(name: &'static str, log: &Log) -> Self {
            Step {
                name,
                log: log.clone(),
                reserve: Status::success(),
                permit: Permit::Allow,
                pre_flight: Status::skip(""),
                pre_bind: Status::success(),
                bind: Status::skip(""),
            }
        }

        fn note(&self, what: &str) {
            self.log
                .lock()
                .unwrap()
                .push(format!("{what} {}", self.name));
        }
    }

    impl crate::framework::Plugin for Step {
        fn name(&self) -> &'static str {
            self.name
        }
        fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
            Some(self)
        }
        fn as_permit(&self) -> Option<&dyn PermitPlugin> {
            Some(self)
        }
        fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
            Some(self)
        }
        fn as_bind(&self) -> Option<&dyn BindPlugin> {
            Some(self)
        }
        fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
            Some(self)
        }
    }

    impl ReservePlugin for Step {
        fn reserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> Status {
            self.note("reserve");
            self.reserve.clone()
        }
        fn unreserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> Vec<ApiWrite> {
            self.note("unreserve");
            Vec::new()
        }
    }

    impl PermitPlugin for Step {
        fn permit(&self, _: &mut CycleState, _: &PodInfo, _: &str, _: &WaitingPods) -> Permit {
            self.note("permit");
            self.permit.clone()
        }
    }

    impl PreBindPlugin for Step {
        fn pre_bind_pre_flight(&self, _: &CycleState, _: &PodInfo, _: &str) -> Status {
            self.pre_flight.clone()
        }
        fn pre_bind<'a>(
            &'a self,
            _: &'a CycleState,
            _: &'a PodInfo,
            _: &'a str,
            _: &'a kube::Client,
        ) -> BoxFuture<'a, Status> {
            self.note("pre-bind");
            Box::pin(std::future::ready(self.pre_bind.clone()))
        }
    }

    impl BindPlugin for Step {
        fn bind<'a>(
            &'a self,
            _: &'a CycleState,
            _: &'a PodInfo,
            _: &'a str,
            _: &'a kube::Client,
        ) -> BoxFuture<'a, Status> {
            self.note("bind");
            Box::pin(std::future::ready(self.bind.clone()))
        }
    }

    impl PostBindPlugin for Step {
        fn post_bind(&self, _: &CycleState, _: &PodInfo, _: &str) {
            self.note("post-bind");
        }
    }

    fn framework(steps: Vec<Step>) -> Framework {
        let plugins = steps
            .into_iter()
            .map(|s| WeightedPlugin {
                plugin: Arc::new(s),
                weight: 1,
            })
            .collect();
        Framework::new("placer", plugins)
    }

    fn pod() -> PodInfo {
        PodInfo {
            name: "p".into(),
            namespace: "default".into(),
            uid: "u1".into(),
            ..Default::default()
        }
    }

    /// What a binding cycle needs, around a stand-in API server.
    struct Rig {
        client: kube::Client,
        seen: Arc<Mutex<Vec<String>>>,
        reporter: Arc<Reporter>,
        waiting: WaitingPods,
        slots: Arc<Semaphore>,
        metrics: Metrics,
    }

    impl Rig {
        fn new() -> Self {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let client = api_server(seen.clone());
            Rig {
                reporter: Arc::new(Reporter::new(client.clone(), "placer", "test")),
                client,
                seen,
                waiting: WaitingPods::default(),
                slots: Arc::new(Semaphore::new(1)),
                metrics: Metrics::new(),
            }
        }

        /// Reserve, Permit, then the binding cycle, as the loop runs them.
        async fn schedule(&self, fw: &Framework) -> Result<(), crate::framework::PluginError> {
            let (pod, mut state) = (pod(), CycleState::new());
            reserve_and_permit(fw, &mut state, &pod, "n1", &self.waiting, &self.client)?;
            let cycle = BindingCycle {
                framework: fw,
                client: &self.client,
                reporter: &self.reporter,
                waiting: &self.waiting,
                slots: &self.slots,
                metrics: &self.metrics,
            };
            cycle.run(&mut state, &pod, "n1", None).await
        }

        fn nominations(&self) -> usize {
            let seen = self.seen.lock().unwrap();
            seen.iter()
                .filter(|r| *r == "PATCH /api/v1/namespaces/default/pods/p/status")
                .count()
        }
    }

    #[tokio::test]
    async fn a_reserve_failure_unreserves_every_plugin_in_reverse_order() {
        let log = Log::default();
        let mut b = Step::new("B", &log);
        b.reserve = Status::unschedulable("no room left on the device");
        let fw = framework(vec![Step::new("A", &log), b, Step::new("C", &log)]);
        let e = Rig::new().schedule(&fw).await.unwrap_err();
        assert_eq!(
            entries(&log),
            [
                "reserve A",
                "reserve B",
                "unreserve C",
                "unreserve B",
                "unreserve A"
            ]
        );
        let (failure, unschedulable) = failure_of(&e);
        assert_eq!(
            failure.message(),
            "0/1 nodes are available: 1 no room left on the device."
        );
        assert!(
            unschedulable,
            "a Reserve rejection waits for a cluster change"
        );
    }

    #[tokio::test]
    async fn a_permit_that_denies_unreserves_and_nothing_is_bound() {
        let log = Log::default();
        let mut gate = Step::new("Gate", &log);
        gate.permit = Permit::Deny(Status::unschedulable("gang incomplete"));
        let fw = framework(vec![Step::new("A", &log), gate]);
        let e = Rig::new().schedule(&fw).await.unwrap_err();
        assert_eq!(
            entries(&log),
            [
                "reserve A",
                "reserve Gate",
                "permit A",
                "permit Gate",
                "unreserve Gate",
                "unreserve A"
            ]
        );
        assert_eq!(e.status.plugin(), "Gate");
        assert_eq!(
            failure_of(&e).0.message(),
            "0/1 nodes are available: 1 gang incomplete."
        );
    }

    #[tokio::test]
    async fn a_waiting_pod_is_bound_once_allowed_and_its_node_nominated_first() {
        let log = Log::default();
        let mut gate = Step::new("Gate", &log);
        gate.permit = Permit::Wait(Duration::from_secs(60));
        let mut binder = Step::new("Binder", &log);
        binder.bind = Status::success();
        let fw = framework(vec![gate, binder]);
        let rig = Arc::new(Rig::new());
        let run = {
            let (rig, fw) = (rig.clone(), fw.clone());
            tokio::spawn(async move { rig.schedule(&fw).await })
        };
        let waiting = async {
            while rig.waiting.get("u1").is_none() || rig.nominations() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the pod waits at Permit, nominated to its node");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !entries(&log).iter().any(|e| e.starts_with("bind")),
            "bound while waiting"
        );
        rig.waiting.get("u1").unwrap().allow("Gate");
        run.await.unwrap().unwrap();
        assert_eq!(
            entries(&log),
            [
                "reserve Gate",
                "reserve Binder",
                "permit Gate",
                "permit Binder",
                "bind Gate",
                "bind Binder",
                "post-bind Gate",
                "post-bind Binder"
            ]
        );
        assert!(rig.waiting.is_empty(), "the wait is over");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_runs_out_rejects_the_pod_and_unreserves_it() {
        let log = Log::default();
        let mut gate = Step::new("Gate", &log);
        gate.permit = Permit::Wait(Duration::from_secs(3));
        let fw = framework(vec![gate]);
        let e = Rig::new().schedule(&fw).await.unwrap_err();
        assert_eq!(
            entries(&log),
            ["reserve Gate", "permit Gate", "unreserve Gate"]
        );
        let (failure, unschedulable) = failure_of(&e);
        assert_eq!(
            failure.message(),
            "0/1 nodes are available: 1 rejected due to timeout after waiting 3s at plugin Gate."
        );
        assert!(unschedulable);
    }

    #[tokio::test]
    async fn a_pre_bind_failure_unreserves_and_never_binds() {
        let log = Log::default();
        let mut volumes = Step::new("Volumes", &log);
        volumes.pre_flight = Status::success();
        volumes.pre_bind = Status::error("the claim could not be written");
        let mut binder = Step::new("Binder", &log);
        binder.bind = Status::success();
        let fw = framework(vec![volumes, binder]);
        let rig = Rig::new();
        let e = rig.schedule(&fw).await.unwrap_err();
        assert_eq!(
            entries(&log),
            [
                "reserve Volumes",
                "reserve Binder",
                "permit Volumes",
                "permit Binder",
                "pre-bind Volumes",
                "unreserve Binder",
                "unreserve Volumes"
            ]
        );
        let (failure, unschedulable) = failure_of(&e);
        assert_eq!(
            failure.message(),
            r#"running PreBind plugin "Volumes": the claim could not be written"#
        );
        assert!(!unschedulable, "an error goes to backoff");
        assert_eq!(
            rig.nominations(),
            1,
            "a PreBind plugin that acts nominates the node first"
        );
    }

    #[tokio::test]
    async fn pre_bind_plugins_that_skip_at_pre_flight_do_not_run_and_nominate_nothing() {
        let log = Log::default();
        let mut binder = Step::new("Binder", &log);
        binder.bind = Status::success();
        let fw = framework(vec![Step::new("Idle", &log), binder]);
        let rig = Rig::new();
        rig.schedule(&fw).await.unwrap();
        assert!(!entries(&log).iter().any(|e| e.starts_with("pre-bind")));
        assert_eq!(rig.nominations(), 0);
    }

    #[tokio::test]
    async fn bind_plugins_run_until_one_does_not_skip() {
        let log = Log::default();
        let mut first = Step::new("First", &log);
        first.bind = Status::success();
        let mut second = Step::new("Second", &log);
        second.bind = Status::success();
        let fw = framework(vec![Step::new("Skipper", &log), first, second]);
        Rig::new().schedule(&fw).await.unwrap();
        let binds: Vec<String> = entries(&log)
            .into_iter()
            .filter(|e| e.starts_with("bind"))
            .collect();
        assert_eq!(binds, ["bind Skipper", "bind First"]);

        let log = Log::default();
        let fw = framework(vec![Step::new("Skipper", &log)]);
        let e = Rig::new().schedule(&fw).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"running Bind plugin "Skipper": every Bind plugin skipped the pod"#
        );
        assert_eq!(
            entries(&log).last().map(String::as_str),
            Some("unreserve Skipper")
        );
    }

    #[tokio::test]
    async fn a_profile_without_a_bind_plugin_binds_with_default_binder() {
        let policy = CompiledPolicy::new(policy::parse(POLICY, "test.yaml").unwrap());
        let fw = policy.profile("placer").unwrap();
        let binders: Vec<&str> = fw
            .plugins()
            .iter()
            .filter(|p| p.plugin.as_bind().is_some())
            .map(|p| p.plugin.name())
            .collect();
        assert_eq!(binders, ["DefaultBinder"]);
        let rig = Rig::new();
        rig.schedule(fw).await.unwrap();
        let seen = rig.seen.lock().unwrap().clone();
        assert_eq!(seen, ["POST /api/v1/namespaces/default/pods/p/binding"]);
    }
}
