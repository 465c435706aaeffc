//! One selector per library of the Kubernetes environment, the quantity
//! edge cases, and the cost bound.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Selector;

const DRIVER: &str = "gpu.example.com";

fn device() -> Device {
    let string = |s: &str| DeviceAttribute {
        string: Some(s.to_owned()),
        ..Default::default()
    };
    let attributes = BTreeMap::from([
        ("model".to_owned(), string("NVIDIA A100-SXM4")),
        ("address".to_owned(), string("10.1.2.3")),
        (
            "endpoint".to_owned(),
            string("https://gpu.example.com:8443/v1/x?zone=a&zone=b"),
        ),
        (
            "version".to_owned(),
            DeviceAttribute {
                version: Some("1.2.3".to_owned()),
                ..Default::default()
            },
        ),
    ]);
    let capacity = |q: &str| DeviceCapacity {
        value: Quantity(q.to_owned()),
        request_policy: None,
    };
    let capacities = BTreeMap::from([
        ("memory".to_owned(), capacity("40Gi")),
        ("tiny".to_owned(), capacity("1n")),
        ("huge".to_owned(), capacity("1e18")),
        ("half".to_owned(), capacity("0.5m")),
    ]);
    Device {
        name: "d".to_owned(),
        attributes: Some(attributes),
        capacity: Some(capacities),
        ..Default::default()
    }
}

fn eval(expression: &str) -> Result<bool, String> {
    Selector::compile(expression)?.matches(DRIVER, &device())
}

fn holds(expression: &str) {
    assert_eq!(eval(expression), Ok(true), "{expression}");
}

fn fails_with(expression: &str, wanted: &str) {
    match eval(expression) {
        Err(e) => assert!(e.contains(wanted), "{expression}: {e}"),
        other => panic!("{expression}: {other:?}"),
    }
}

#[test]
fn a_selector_per_library() {
    let a = r#"device.attributes["gpu.example.com"]"#;
    // strings extension (cel-rust's)
    holds(&format!(
        r#"{a}.model.lowerAscii().split("-")[0] == "nvidia a100""#
    ));
    holds(&format!(
        r#"{a}.model.indexOf("A100") == 7 && "%s/%d".format(["x", 2]) == "x/2""#
    ));
    // lists extension (cel-rust's) and Kubernetes' lists
    holds(
        "[3, 1, 2].sort() == [1, 2, 3] && [1, [2, 3]].flatten() == [1, 2, 3] && lists.range(3) == [0, 1, 2]",
    );
    holds(
        "[1, 2, 3].isSorted() && [1, 2, 3].sum() == 6 && [4, 2].min() == 2 && [1, 2, 2].lastIndexOf(2) == 2",
    );
    holds("[1, 2].includes(2) && 'a'.includes('a')");
    // sets
    holds(
        "sets.contains([1, 2, 3], [2, 3]) && sets.equivalent([1, 2], [2, 1, 1]) && !sets.intersects([1], [2])",
    );
    // regex
    holds(&format!(
        r#"{a}.model.find("A[0-9]+") == "A100" && "a1b22".findAll("[0-9]+") == ["1", "22"]"#
    ));
    holds(r#""a1b22c333".findAll("[0-9]+", 2) == ["1", "22"] && matches("abc", "^a")"#);
    // ip and cidr
    holds(&format!(
        r#"ip({a}.address).family() == 4 && cidr("10.0.0.0/8").containsIP({a}.address)"#
    ));
    holds(
        r#"cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16") && cidr("10.1.2.3/8").masked() == cidr("10.0.0.0/8")"#,
    );
    holds(r#"ip("fe80::1").isLinkLocalUnicast()"#);
    holds(r#"!isIP("::ffff:1.2.3.4") && isIP("::1")"#);
    holds(r#"ip.isCanonical("2001:db8::1") && !ip.isCanonical("2001:DB8::1")"#);
    holds(
        r#"string(cidr("192.168.0.0/24").ip()) == "192.168.0.0" && cidr("::/0").prefixLength() == 0"#,
    );
    // url
    holds(&format!(
        r#"url({a}.endpoint).getHostname() == "gpu.example.com" && url({a}.endpoint).getPort() == "8443" && url({a}.endpoint).getQuery()["zone"] == ["a", "b"]"#
    ));
    holds(r#"url("/a%20b").getEscapedPath() == "/a%20b" && !isURL("no-scheme")"#);
    // format
    holds(
        r#"!format.dns1123Label().validate("my-name").hasValue() && format.named("dns1035Label").hasValue()"#,
    );
    holds(r#"format.dns1123Label().validate("a.b").value() == ["must not contain dots"]"#);
    // semver, in full
    holds(&format!(
        r#"{a}.version.isGreaterThan(semver("v1.2", true)) && {a}.version.compareTo(semver("1.2.3")) == 0 && {a}.version.minor() == 2"#
    ));
    // quantity
    holds(
        r#"quantity("1.5").add(1).compareTo(quantity("2500m")) == 0 && sign(quantity("-1")) == -1"#,
    );
    holds(
        r#"quantity("5").isInteger() && quantity("5").asInteger() == 5 && quantity("1.5").asApproximateFloat() == 1.5"#,
    );
    // two-variable comprehensions
    holds("[10, 20].all(i, v, v == (i + 1) * 10) && {'a': 1}.exists(k, v, k == 'a' && v == 1)");
    holds(
        "[1, 2, 3].transformList(i, v, v > 1, v * 2) == [4, 6] && {'a': 1}.transformMap(k, v, v + 1) == {'a': 2}",
    );
    holds(
        "[1, 2].existsOne(i, v, v == 2) && [1, 2].transformMapEntry(i, v, {string(v): i}) == {'1': 0, '2': 1}",
    );
    // optional types
    holds(r#"optional.of(1).orValue(2) == 1 && {"a": 1}[?"b"].orValue(3) == 3"#);
}

#[test]
fn quantities_compare_as_kubernetes_does() {
    let c = r#"device.capacity["gpu.example.com"]"#;
    // 1n: below a milli-unit, yet exact and above zero.
    holds(&format!(
        r#"{c}.tiny.isGreaterThan(quantity("0")) && {c}.tiny.isLessThan(quantity("2n"))"#
    ));
    holds(&format!(r#"{c}.tiny == quantity("0.5n")"#)); // rounded up to 1n, as Go does
    // 1e18: beyond i64 milli-units.
    holds(&format!(
        r#"{c}.huge.compareTo(quantity("1E")) == 0 && {c}.huge.isLessThan(quantity("1000000000000000001"))"#
    ));
    holds(&format!(
        r#"{c}.huge.add(quantity("1e18")).compareTo(quantity("2e18")) == 0 && !{c}.huge.add(1).isInteger() == false"#
    ));
    // 0.5m: half a milli-unit, not 0 or 1m.
    holds(&format!(
        r#"{c}.half.isGreaterThan(quantity("499999n")) && {c}.half.isLessThan(quantity("1m"))"#
    ));
    holds(&format!(
        r#"!{c}.half.isInteger() && {c}.memory.compareTo(quantity("42949672960")) == 0"#
    ));
    // Beyond i128 nanos, still exact.
    holds(
        r#"quantity("1e30").isLessThan(quantity("1000000000000000000000000000001")) && quantity("8Ei").asInteger() == 9223372036854775807"#,
    );
    fails_with(r#"quantity("1e5000").sign() == 1"#, "out of range");
}

#[test]
fn evaluations_are_bounded() {
    // Doubling a string through binds: charged by size, refused past 1 MiB.
    fails_with(
        r#"cel.bind(a, lists.range(100000).map(i, "yy").join(), cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, size(d) > 0))))"#,
        "over the limit",
    );
    // Output that would outgrow its input is refused before it is built.
    fails_with(
        r#"size(lists.range(50000).map(i, "y").join().replace("y", lists.range(1000).map(i, "zz").join())) > 0"#,
        "over the limit",
    );
    fails_with("size(lists.range(1000001)) > 0", "limit");
    // A nested loop over a large range runs out of budget.
    fails_with(
        "lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))",
        "actual cost limit exceeded",
    );
    // A regular expression too large to compile is an error.
    fails_with(r#""a".matches("(a{1000}){1000}")"#, "regexp");
}
