//! The selector cases of Kubernetes' DRA CEL package
//! (`dynamic-resource-allocation/cel/compile_test.go`, v0.37) and of the
//! `CELDeviceSelector` API documentation, restated: each row compiles an
//! expression, evaluates it for one device and expects what kube-scheduler
//! gets. Rows on list-valued attributes (DRAListTypeAttributes, alpha and
//! off) are left out; where upstream's type checker rejects an expression
//! at compile time and cel-rust can only fail at evaluation, the row says
//! so with [`Expect::Rejected`]. Not yet here: upstream's four cases that
//! iterate `device.attributes` / `device.capacity` or one domain of them
//! with a macro (`exists_one` over the domains or ids): placer's zero-copy
//! device views answer lookups and `in`, but are not iterable.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Selector;

enum Expect {
    Match(bool),
    CompileError(&'static str),
    RuntimeError(&'static str),
    /// A compile error upstream, an evaluation error here.
    Rejected,
}

enum Value {
    Bool(bool),
    Int(i64),
    Str(&'static str),
    Version(&'static str),
}

struct Case {
    name: &'static str,
    expression: &'static str,
    driver: &'static str,
    attributes: &'static [(&'static str, Value)],
    capacity: &'static [(&'static str, &'static str)],
    allow_multiple: Option<bool>,
    expect: Expect,
}

const DRA: &str = "dra.example.com";

const fn case(name: &'static str, expression: &'static str, expect: Expect) -> Case {
    Case {
        name,
        expression,
        driver: DRA,
        attributes: &[],
        capacity: &[],
        allow_multiple: None,
        expect,
    }
}

fn device(c: &Case) -> Device {
    let attributes: BTreeMap<String, DeviceAttribute> = c
        .attributes
        .iter()
        .map(|(name, v)| {
            let mut a = DeviceAttribute::default();
            match v {
                Value::Bool(b) => a.bool = Some(*b),
                Value::Int(i) => a.int = Some(*i),
                Value::Str(s) => a.string = Some((*s).to_owned()),
                Value::Version(s) => a.version = Some((*s).to_owned()),
            }
            ((*name).to_owned(), a)
        })
        .collect();
    let capacity: BTreeMap<String, DeviceCapacity> = c
        .capacity
        .iter()
        .map(|(name, q)| {
            (
                (*name).to_owned(),
                DeviceCapacity {
                    value: Quantity((*q).to_owned()),
                    request_policy: None,
                },
            )
        })
        .collect();
    Device {
        name: "d".to_owned(),
        attributes: Some(attributes),
        capacity: Some(capacity),
        allow_multiple_allocations: c.allow_multiple,
        ..Default::default()
    }
}

fn cases() -> Vec<Case> {
    use Expect::{CompileError, Match, Rejected, RuntimeError};
    use Value::{Bool, Int, Str, Version};
    vec![
        case("true", "true", Match(true)),
        case("false", "false", Match(false)),
        case("syntax error", "?!", CompileError("compilation failed")),
        case(
            "an int result",
            "1",
            CompileError("must evaluate to bool or the unknown type, not int"),
        ),
        Case {
            driver: "",
            ..case(
                "a missing attribute of an unknown domain",
                r#"device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))"#,
                RuntimeError("noSuchAttr"),
            )
        },
        Case {
            driver: "",
            ..case(
                "the same, indexed",
                r#"device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))"#,
                RuntimeError("noSuchAttr"),
            )
        },
        case(
            "an unknown domain is not in the map",
            r#""no-such-domain" in device.attributes"#,
            Match(false),
        ),
        Case {
            attributes: &[("dra.example.com/something", Bool(true))],
            ..case(
                "a known domain is",
                r#""dra.example.com" in device.attributes"#,
                Match(true),
            )
        },
        Case {
            driver: "",
            ..case(
                "an empty driver name",
                r#"device.driver == """#,
                Match(true),
            )
        },
        case(
            "the driver name",
            r#"device.driver == "dra.example.com""#,
            Match(true),
        ),
        Case {
            attributes: &[("name", Bool(true))],
            ..case(
                "the driver is the default domain",
                r#"device.attributes["dra.example.com"].name"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("name", Bool(true))],
            ..case(
                "indexing by name",
                r#"device.attributes["dra.example.com"]["name"]"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("name", Bool(true))],
            ..case(
                "cel.bind",
                r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("other.example.com/name", Bool(true))],
            ..case(
                "a qualified attribute name",
                r#"device.attributes["other.example.com"].name"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("name", Int(1))],
            ..case(
                "an int attribute",
                r#"device.attributes["dra.example.com"].name > 0"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("name", Str("fish"))],
            ..case(
                "a string attribute",
                r#"device.attributes["dra.example.com"].name == "fish""#,
                Match(true),
            )
        },
        Case {
            attributes: &[("name", Int(1))],
            ..case(
                "exists on a scalar",
                r#"device.attributes["dra.example.com"].name.exists(x, x > 0)"#,
                RuntimeError("iterable"),
            )
        },
        Case {
            attributes: &[("name", Version("1.0.0"))],
            ..case(
                "a version attribute",
                r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("name", Version("1.0.0"))],
            ..case(
                "relaxed versions",
                r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)"#,
                Match(true),
            )
        },
        Case {
            capacity: &[("name", "1Mi")],
            ..case(
                "a capacity",
                r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
                Match(true),
            )
        },
        Case {
            capacity: &[("name", "1Mi")],
            ..case(
                "a capacity checked first",
                r#""name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
                Match(true),
            )
        },
        case(
            "a missing capacity checked first",
            r#"!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
            Match(true),
        ),
        Case {
            attributes: &[
                ("bool", Bool(true)),
                ("int", Int(1)),
                ("string", Str("fish")),
                ("version", Version("1.0.0")),
            ],
            capacity: &[("quantity", "1Mi")],
            ..case(
                "every kind of value",
                r#"device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("a", Bool(true)), ("b", Bool(true)), ("c", Bool(true))],
            ..case(
                "many attributes",
                r#"device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("services", Str("some_example_value"))],
            ..case(
                "split",
                r#"device.attributes["dra.example.com"].services.split("example").size() >= 2"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("services", Str("asymetric"))],
            ..case(
                "matches",
                r#"device.attributes["dra.example.com"].services.matches("[^a]?sym")"#,
                Match(true),
            )
        },
        case(
            "over the cost limit",
            r#"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))"#,
            RuntimeError("actual cost limit exceeded"),
        ),
        Case {
            allow_multiple: Some(true),
            ..case(
                "allowMultipleAllocations",
                "device.allowMultipleAllocations == true",
                Match(true),
            )
        },
        case(
            "allowMultipleAllocations unset",
            "device.allowMultipleAllocations == false",
            Match(true),
        ),
        Case {
            attributes: &[
                ("model", Str("a100")),
                ("ext.example.com/family", Str("ampere")),
            ],
            capacity: &[("modules", "8")],
            ..case(
                "the API documentation's example",
                r#"device.driver == "dra.example.com" && device.attributes["dra.example.com"].model == "a100" && device.attributes["ext.example.com"].family == "ampere" && device.capacity["dra.example.com"].modules.compareTo(quantity("4")) > 0"#,
                Match(true),
            )
        },
        Case {
            attributes: &[("someBool", Bool(true)), ("anotherBool", Bool(false))],
            ..case(
                "the API documentation's bind example",
                r#"cel.bind(dra, device.attributes["dra.example.com"], dra.someBool && dra.anotherBool)"#,
                Match(false),
            )
        },
        case("a type error", r#""a" + 1 == "a1""#, Rejected),
        case(
            "an invalid literal pattern",
            r#""x".matches("[")"#,
            CompileError("invalid regular expression"),
        ),
    ]
}

#[test]
fn upstream_selector_table() {
    for c in cases() {
        let compiled = Selector::compile(c.expression);
        let selector = match (&c.expect, compiled) {
            (Expect::CompileError(want), Err(e)) => {
                assert!(
                    e.contains(want),
                    "{}: compile error {e:?} lacks {want:?}",
                    c.name
                );
                continue;
            }
            (Expect::CompileError(_), Ok(_)) => panic!("{}: compiled", c.name),
            (_, Err(e)) => panic!("{}: compile error {e}", c.name),
            (_, Ok(s)) => s,
        };
        let result = selector.matches(c.driver, &device(&c));
        match (&c.expect, result) {
            (Expect::Match(want), Ok(got)) => assert_eq!(got, *want, "{}", c.name),
            (Expect::RuntimeError(want), Err(e)) => {
                assert!(
                    e.contains(want),
                    "{}: runtime error {e:?} lacks {want:?}",
                    c.name
                );
            }
            (Expect::Rejected, Err(_)) => {}
            (_, other) => panic!("{}: {other:?}", c.name),
        }
    }
}
