//! The nesting limits (`depth.rs`): every shape of deep expression at
//! exactly its limit compiles, evaluates and is dropped on a 2 MiB thread,
//! one step past it fails to compile naming the limit, and the stack
//! estimates cover what compiling and evaluating use.
//!
//! A stack overflow aborts the process instead of failing a test, so the
//! tests that could overflow run in a child process (this test binary,
//! re-run on that one test), and an abort there fails the test here.

use std::process::Command;

use k8s_openapi::api::resource::v1::Device;

use super::depth::{self, MAX_DEPTH, MAX_NESTING};
use super::{ENV, MAX_EXPRESSION_LENGTH, Selector, compile_here};

const TWO_MIB: usize = 2 << 20;
const CHILD: &str = "PLACER_CEL_DEPTH_TEST_CHILD";

/// In the test process: runs test `name` of this module in a child process,
/// asserts it passed, and returns true. In the child: false (run the test).
fn ran_in_child_process(name: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_crate, path)| path);
    let test = format!("{module}::{name}");
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child test process runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} in a child process: {}\n{stdout}\n{stderr}",
        output.status
    );
    true
}

/// Runs `f` on a new thread with `stack` bytes of stack.
fn on_thread<T: Send + 'static>(stack: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("a thread")
        .join()
        .expect("the thread finished")
}

fn device() -> Device {
    Device {
        name: "d".to_owned(),
        ..Default::default()
    }
}

/// The limit a shape reaches first.
#[derive(Clone, Copy, Debug)]
enum Limit {
    Nesting,
    Depth,
    Length,
}

impl Limit {
    /// What the error one past the limit says.
    fn texts(self) -> [String; 2] {
        match self {
            Limit::Nesting => [
                "expression recursion limit exceeded: it nests ".to_owned(),
                format!("the limit is {MAX_NESTING}"),
            ],
            Limit::Depth => [
                "max recursion depth exceeded: it is ".to_owned(),
                format!("the limit is {MAX_DEPTH}"),
            ],
            Limit::Length => [
                "bytes long".to_owned(),
                format!("the limit is {MAX_EXPRESSION_LENGTH}"),
            ],
        }
    }
}

struct Shape {
    name: &'static str,
    /// The largest `n` within the limits.
    at_limit: usize,
    /// The expression with `n` repetitions.
    build: fn(usize) -> String,
    limit: Limit,
    /// `None`: the selector matches; otherwise part of its runtime error.
    error: Option<&'static str>,
}

fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

fn shapes() -> Vec<Shape> {
    let shape = |name, at_limit, build, limit| Shape {
        name,
        at_limit,
        build,
        limit,
        error: None,
    };
    vec![
        shape(
            "parentheses",
            250,
            |n| nested("(", "true", ")", n),
            Limit::Nesting,
        ),
        shape(
            "cel.bind",
            249,
            |n| {
                (0..n).fold("true".to_owned(), |body, i| {
                    format!("cel.bind(x{i}, {i}, {body})")
                })
            },
            Limit::Depth,
        ),
        shape(
            "comprehensions",
            124,
            |n| {
                (0..n).fold("true".to_owned(), |body, i| {
                    format!("[{i}].all(x{i}, {body})")
                })
            },
            Limit::Depth,
        ),
        shape(
            "lists",
            247,
            |n| format!("size({}) == 1", nested("[", "1", "]", n)),
            Limit::Depth,
        ),
        // Values as deep as the expression: compared and formatted
        // recursively.
        shape(
            "lists compared",
            248,
            |n| format!("{0} == {0}", nested("[", "1", "]", n)),
            Limit::Depth,
        ),
        shape(
            "lists formatted",
            246,
            |n| format!("\"%s\".format([{}]) != \"\"", nested("[", "1", "]", n)),
            Limit::Depth,
        ),
        shape(
            "maps",
            247,
            |n| format!("size({}) == 1", nested("{1: ", "1", "}", n)),
            Limit::Depth,
        ),
        shape(
            "global calls",
            248,
            |n| format!("{} == \"a\"", nested("string(", "\"a\"", ")", n)),
            Limit::Depth,
        ),
        shape(
            "conditionals chained",
            249,
            |n| format!("{} true", "false ? false :".repeat(n)),
            Limit::Depth,
        ),
        shape(
            "conditionals nested",
            125,
            |n| nested("true ? (", "true", ") : false", n),
            Limit::Nesting,
        ),
        shape(
            "negations in parentheses",
            124,
            |n| format!("{} == 1", nested("-(", "1", ")", 2 * n)),
            Limit::Depth,
        ),
        shape(
            "nots in parentheses",
            124,
            |n| nested("!(", "true", ")", 2 * n),
            Limit::Depth,
        ),
        shape(
            "additions",
            249,
            |n| format!("{} > 0", chain("1", " + ", n)),
            Limit::Depth,
        ),
        shape(
            "additions in parentheses",
            249,
            |n| nested("(", &format!("{} > 0", chain("1", "+", n)), ")", n),
            Limit::Depth,
        ),
        shape(
            "products",
            249,
            |n| format!("{} > 0", chain("1", "*", n)),
            Limit::Depth,
        ),
        shape(
            "comparisons",
            249,
            |n| format!("true{}", " == true".repeat(n)),
            Limit::Depth,
        ),
        shape(
            "memberships",
            248,
            |n| format!("true{}", " in [true]".repeat(n)),
            Limit::Depth,
        ),
        shape(
            "method calls",
            248,
            |n| format!("\"a\"{} == \"a\"", ".lowerAscii()".repeat(n)),
            Limit::Depth,
        ),
        Shape {
            error: Some("No such key"),
            ..shape(
                "qualified names",
                247,
                |n| format!("device.attributes{} == 1", ".a".repeat(n)),
                Limit::Depth,
            )
        },
        Shape {
            error: Some("No such key"),
            ..shape(
                "field selections",
                246,
                |n| format!("device.attributes[\"a\"]{} == 1", ".a".repeat(n)),
                Limit::Depth,
            )
        },
        Shape {
            error: Some("No such key"),
            ..shape(
                "indexes",
                247,
                |n| format!("device.attributes{} == 1", "[\"a\"]".repeat(n)),
                Limit::Depth,
            )
        },
        shape(
            "alternatives",
            1137,
            |n| format!("{} || true", chain("false", " || ", n)),
            Limit::Length,
        ),
        shape(
            "conjunctions",
            1707,
            |n| chain("true", "&&", n),
            Limit::Length,
        ),
        shape(
            "nots",
            5118,
            |n| format!("{}true", "!!".repeat(n)),
            Limit::Length,
        ),
        shape(
            "negations",
            5117,
            |n| format!("{}1 == 1", "--".repeat(n)),
            Limit::Length,
        ),
    ]
}

/// `build(n)` for the largest `n` within the length limit.
fn longest(build: fn(usize) -> String) -> String {
    let fits = |n| build(n).len() <= MAX_EXPRESSION_LENGTH;
    let (mut lo, mut hi) = (1, 2);
    while fits(hi) {
        (lo, hi) = (hi, hi * 2);
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    build(lo)
}

#[test]
fn sixteen_nested_binds_compile_and_evaluate_on_a_2_mib_thread() {
    // Once aborted the process: the parser overflowed a 2 MiB stack.
    if ran_in_child_process("sixteen_nested_binds_compile_and_evaluate_on_a_2_mib_thread") {
        return;
    }
    let result = on_thread(TWO_MIB, || {
        let expression = (0..16).fold("x0 == 0".to_owned(), |body, i| {
            format!("cel.bind(x{i}, {i}, {body})")
        });
        Selector::compile(&expression)?.matches("d", &device())
    });
    assert_eq!(result, Ok(true));
}

#[test]
fn every_shape_runs_on_a_2_mib_thread_up_to_its_limit() {
    if ran_in_child_process("every_shape_runs_on_a_2_mib_thread_up_to_its_limit") {
        return;
    }
    let failures = on_thread(TWO_MIB, || {
        let mut failures = Vec::new();
        for shape in shapes() {
            let n = shape.at_limit;
            match Selector::compile(&(shape.build)(n + 1)) {
                Err(e)
                    if e.starts_with("compilation failed: ")
                        && shape.limit.texts().iter().all(|t| e.contains(t.as_str())) => {}
                other => failures.push(format!(
                    "{}: one past the limit (n = {}): {:?}",
                    shape.name,
                    n + 1,
                    other.map(drop)
                )),
            }
            let selector = match Selector::compile(&(shape.build)(n)) {
                Ok(selector) => selector,
                Err(e) => {
                    failures.push(format!("{} at the limit (n = {n}): {e}", shape.name));
                    continue;
                }
            };
            match (shape.error, selector.matches("d", &device())) {
                (None, Ok(true)) => {}
                (Some(wanted), Err(e)) if e.contains(wanted) => {}
                (_, other) => failures.push(format!("{} at n = {n}: {other:?}", shape.name)),
            }
            drop(selector);
            // As deep as the length limit allows: refused as cleanly.
            let longest = longest(shape.build);
            match Selector::compile(&longest) {
                Ok(_) if matches!(shape.limit, Limit::Length) => {}
                Err(e) if e.starts_with("compilation failed: ") && e.contains("the limit is") => {}
                other => failures.push(format!(
                    "{} at {} bytes: {:?}",
                    shape.name,
                    longest.len(),
                    other.map(drop)
                )),
            }
        }
        failures
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_stack_estimates_cover_compiling_evaluating_and_dropping() {
    if ran_in_child_process("the_stack_estimates_cover_compiling_evaluating_and_dropping") {
        return;
    }
    let env = ENV.as_ref().expect("the environment");
    for shape in shapes() {
        let (name, expression) = (shape.name, (shape.build)(shape.at_limit));
        // Each step on a thread with just the stack estimated for it.
        let nesting = depth::nesting(&expression);
        let stack = depth::compile_stack(nesting, expression.len());
        let selector = on_thread(stack, move || compile_here(env, &expression, nesting))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        on_thread(selector.stack, move || {
            let mut selector = selector;
            let _ = selector.matches_here("d", &device());
            drop(std::mem::take(&mut selector.expression));
        });
        // The longest chain the length limit allows, parsed and refused
        // for its depth, nesting no deeper than the limit.
        let longest = longest(shape.build);
        let nesting = depth::nesting(&longest);
        if nesting <= MAX_NESTING {
            let stack = depth::compile_stack(nesting, longest.len());
            let _ = on_thread(stack, move || {
                compile_here(env, &longest, nesting).map(drop)
            });
        }
    }
}

#[test]
fn nesting_counts_what_the_parser_nests_and_skips_literals() {
    let cases = [
        ("true", 0),
        ("f(x)", 1),
        ("[[1], {1: (2)}]", 3),
        ("a ? b : c ? d : e", 2),
        ("(a ? b : c ? d : e)", 3),
        ("[a ? b : c, d ? e : f]", 2),
        ("a.?b.?c", 0),
        ("[?a, ?b]", 1),
        ("{?1: 2}", 1),
        (r#""((((" == '[[[['"#, 0),
        (r#""\"(((" == '\'[[['"#, 0),
        (r#"r"\" == "(""#, 0),
        (r#"r'\' == '('"#, 0),
        (r#""""((("""  == '''[['''"#, 0),
        (r#"b"((" == B'[[' && br"(\" == rB'['"#, 0),
        ("x // ((((\n == 1", 0),
        // Literals CEL's lexer rejects are not skipped: their brackets
        // reach the parser as tokens.
        ("\"((\n\"", 2),
        (r#""\q((""#, 2),
        ("'(((", 3),
        (r#"rb"((""#, 0),
    ];
    for (expression, want) in cases {
        assert_eq!(depth::nesting(expression), want, "{expression}");
    }
}

#[test]
fn a_past_the_limit_selector_is_a_compile_error_of_the_claim() {
    let expression = nested("(", "true", ")", MAX_NESTING + 1);
    let error = Selector::compile(&expression).expect_err("too deep");
    assert_eq!(
        error,
        format!(
            "compilation failed: expression recursion limit exceeded: it nests {} levels deep \
             (parentheses, brackets, braces, calls and conditionals), the limit is {MAX_NESTING}",
            MAX_NESTING + 1
        )
    );
    let expression = format!("{} > 0", chain("1", "+", MAX_DEPTH + 1));
    let error = Selector::compile(&expression).expect_err("too deep");
    assert!(
        error.starts_with("compilation failed: max recursion depth exceeded: it is ")
            && error.ends_with(&format!("the limit is {MAX_DEPTH}")),
        "{error}"
    );
}
