//! Golden tests: JSON exactly as kube-scheduler's Go encoder writes it
//! (`extender/v1/types_test.go`, `TestCompatibility`), in both directions.

use super::*;

fn roundtrip<T>(golden: &str)
where
    T: serde::de::DeserializeOwned + Serialize,
{
    let v: T = from_slice(golden.as_bytes()).unwrap();
    assert_eq!(serde_json::to_string(&v).unwrap(), golden);
    let lower: T = from_slice(golden.to_lowercase().as_bytes()).unwrap();
    assert_eq!(
        serde_json::to_string(&lower).unwrap(),
        serde_json::to_string(&from_slice::<T>(golden.to_lowercase().as_bytes()).unwrap()).unwrap()
    );
}

#[test]
fn host_priority_matches_go() {
    roundtrip::<HostPriority>(r#"{"Host":"myhost","Score":1}"#);
    let list: HostPriorityList =
        serde_json::from_str(r#"[{"Host":"a","Score":10},{"host":"b","score":3}]"#).unwrap();
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        r#"[{"Host":"a","Score":10},{"Host":"b","Score":3}]"#
    );
}

#[test]
fn binding_types_match_go() {
    roundtrip::<ExtenderBindingArgs>(
        r#"{"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"}"#,
    );
    roundtrip::<ExtenderBindingResult>(r#"{"Error":"myerror"}"#);
    let lower: ExtenderBindingArgs =
        from_slice(br#"{"podname":"p","PODNAMESPACE":"n","poduid":"u","node":"x"}"#).unwrap();
    assert_eq!(
        (
            lower.pod_name.as_str(),
            lower.pod_namespace.as_str(),
            lower.pod_uid.as_str(),
            lower.node.as_str()
        ),
        ("p", "n", "u", "x")
    );
}

#[test]
fn preemption_result_matches_go() {
    roundtrip::<ExtenderPreemptionResult>(
        r#"{"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}}"#,
    );
}

#[test]
fn filter_args_from_scheduler_decode() {
    let names: ExtenderArgs = from_slice(
        br#"{"Pod":{"metadata":{"name":"p","namespace":"default","uid":"u1","creationTimestamp":null},"spec":{"containers":[{"name":"c","image":"busybox","resources":{}}]},"status":{}},"Nodes":null,"NodeNames":["node-a","node-b"]}"#,
    )
    .unwrap();
    assert_eq!(
        names.node_names.as_deref(),
        Some(&["node-a".to_string(), "node-b".to_string()][..])
    );
    assert!(names.nodes.is_none());
    assert!(names.pod.unwrap().get().contains("\"uid\":\"u1\""));

    let full: ExtenderArgs = from_slice(
        br#"{"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"node-a","labels":{"a":"b"}},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}}}]},"NodeNames":null}"#,
    )
    .unwrap();
    let nodes = full.nodes.unwrap();
    assert_eq!(nodes.metadata.unwrap().get(), "{}");
    assert_eq!(
        nodes.items[0].get(),
        r#"{"metadata":{"name":"node-a","labels":{"a":"b"}},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}}}"#,
        "node objects are kept byte for byte"
    );
}

#[test]
fn filter_result_emits_every_field_in_go_order() {
    let r = ExtenderFilterResult {
        node_names: Some(vec!["gpu-1".into()]),
        failed_nodes: Some([("gpu-2".to_string(), "x".to_string())].into()),
        failed_and_unresolvable_nodes: Some(Default::default()),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        r#"{"Nodes":null,"NodeNames":["gpu-1"],"FailedNodes":{"gpu-2":"x"},"FailedAndUnresolvableNodes":{},"Error":""}"#
    );
    let encoded = serde_json::to_string(&r).unwrap();
    let back: ExtenderFilterResult = from_slice(encoded.as_bytes()).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), encoded);
}

#[test]
fn preemption_args_both_forms_and_nulls() {
    let meta: ExtenderPreemptionArgs = from_slice(
        br#"{"Pod":{"metadata":{"name":"p"}},"NodeNameToVictims":null,"NodeNameToMetaVictims":{"gpu-1":{"Pods":[{"UID":"aa11"}],"NumPDBViolations":0},"gpu-2":{"Pods":[],"NumPDBViolations":1},"gpu-3":null}}"#,
    )
    .unwrap();
    let m = meta.node_name_to_meta_victims.unwrap();
    assert_eq!(m["gpu-1"].pods[0].uid, "aa11");
    assert_eq!(m["gpu-2"].num_pdb_violations, 1);
    assert_eq!(
        m["gpu-3"],
        MetaVictims::default(),
        "null victims decode as empty"
    );
    let full: ExtenderPreemptionArgs = from_slice(
        br#"{"Pod":null,"NodeNameToVictims":{"gpu-1":{"Pods":[{"metadata":{"name":"batch-7","uid":"aa11"}}],"NumPDBViolations":0}},"NodeNameToMetaVictims":null}"#,
    )
    .unwrap();
    assert_eq!(full.node_name_to_victims.unwrap()["gpu-1"].pods.len(), 1);
    assert!(full.pod.is_none());
}

#[test]
fn absent_null_and_unknown_fields_are_alike() {
    for body in [
        r#"{}"#,
        r#"{"Pod":null,"Nodes":null,"NodeNames":null}"#,
        r#"{"Extra":{"deep":[1,2]},"nodenames":null}"#,
        "null",
    ] {
        let a: ExtenderArgs = from_slice(body.as_bytes()).unwrap();
        assert!(
            a.pod.is_none() && a.nodes.is_none() && a.node_names.is_none(),
            "{body}"
        );
    }
}

#[test]
fn errors_name_the_field_and_position() {
    let e = from_slice::<ExtenderArgs>(br#"{"Pod":null,"NodeNames":["a",5]}"#).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid JSON at line 1 column 30, field NodeNames[1]: invalid type: integer `5`, expected a string"
    );
    let e = from_slice::<ExtenderArgs>(br#"{"NodeNames":["a""#).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid JSON at line 1 column 17, field NodeNames: EOF while parsing a list"
    );
    let e = from_slice::<HostPriority>(br#"{"Host":"a","Score":7.5}"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("field Score: invalid type: floating point"),
        "{}",
        e.to_string()
    );
    let e = from_slice::<ExtenderArgs>(br#"{"NodeNames":[]} trailing"#).unwrap_err();
    assert!(
        e.to_string().contains("trailing characters"),
        "{}",
        e.to_string()
    );
    let e = from_slice::<ExtenderArgs>(b"{").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid JSON at line 1 column 1: EOF while parsing an object"
    );
    let e = from_slice::<ExtenderArgs>(br#"[1]"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("expected a JSON object (ExtenderArgs)"),
        "{}",
        e.to_string()
    );
}

#[test]
fn a_body_that_is_not_utf8_names_where_and_utf8_names_decode() {
    // The fast path checks the body as UTF-8 once and skips serde's check
    // per string; a bad byte must still be an error with its place.
    let e = from_slice::<ExtenderArgs>(b"{\"NodeNames\":[\"a\",\"b\xff\"]}").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid JSON at line 1 column 21, field NodeNames[1]: invalid unicode code point"
    );
    let args: crate::protocol::ExtenderArgsRef =
        from_slice(r#"{"NodeNames":["nöde-1","n\u00f6de-2"]}"#.as_bytes()).unwrap();
    let names = args.node_names.unwrap();
    assert_eq!(names, ["nöde-1", "nöde-2"]);
    assert!(matches!(names[0], std::borrow::Cow::Borrowed(_)));
}

#[test]
fn nested_errors_count_from_the_request_body() {
    let body = b"{\"NodeNames\":[],\n \"Pod\":{\"metadata\":{\"labels\":{\"app\":5}}}}";
    let args: ExtenderArgs = from_slice(body).unwrap();
    let e = from_raw::<crate::objects::PodInfo>(args.pod.as_deref().unwrap(), "Pod").unwrap_err();
    assert_eq!(e.path, "Pod.metadata.labels.app");
    let e = e.relocate(body);
    assert_eq!((e.line, e.column), (2, 37));
    assert!(e.to_string().starts_with("invalid JSON at line 2 column 37, field Pod.metadata.labels.app: invalid type: integer `5`"), "{e}");
}

#[test]
fn an_error_without_a_position_points_at_the_embedded_value() {
    /// Fails after reading its whole value, as a cross-field check would.
    #[derive(Debug)]
    struct Refused;
    impl<'de> serde::Deserialize<'de> for Refused {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            serde::de::IgnoredAny::deserialize(d)?;
            Err(serde::de::Error::custom("refused"))
        }
    }
    let body = b"{\"NodeNames\":[],\n  \"Pod\":{\"a\":1}}";
    let args: ExtenderArgs = from_slice(body).unwrap();
    let e = from_raw::<Refused>(args.pod.as_deref().unwrap(), "Pod").unwrap_err();
    assert_eq!((e.line, e.column), (0, 0));
    let e = e.relocate(body);
    assert_eq!((e.line, e.column), (2, 9), "the Pod's opening brace");
}
