//! CEL device selectors: compiled once per expression (in
//! [`super::Allocator::new`]), evaluated per device against views of the
//! device ([`super::cel_values`]), with the Kubernetes library functions
//! device selectors use: `quantity()`, `isQuantity()`, `semver()`,
//! `isSemver()` and the `Quantity` and `Semver` methods (`compareTo`,
//! `isGreaterThan`, `isLessThan`, ...).
//!
//! The interpreter is the `cel` crate (cel-rust). Kubernetes bounds the
//! cost of an expression when the API server admits the object (estimated
//! cost at most `CELSelectorExpressionMaxCost`); this crate has no cost
//! model, so the allocator bounds what it can: the expression length (as
//! API validation does), one evaluation per device and request, and any
//! panic inside the interpreter becomes an error.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock};

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{CelBool, CelDouble, CelInt, CelString, INT_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Context, Env, ExecutionError, Program, Value};
use k8s_openapi::api::resource::v1::Device;

use super::cel_values::{DeviceView, QUANTITY_TYPE, Quantity, SEMVER_TYPE, Semver};

/// `resourceapi.CELSelectorExpressionMaxLength`.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// A compiled selector expression.
pub(super) struct Selector {
    program: Program,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Selector")
    }
}

/// The environment every selector is compiled for and run in: the standard
/// library plus the Kubernetes functions, built once per process.
static ENV: LazyLock<Result<Arc<Env>, String>> = LazyLock::new(|| build_env().map(Arc::new));

impl Selector {
    /// Compiles `expression`, or says why it cannot be used (the text
    /// follows "CEL compile error: " in the allocator's messages).
    pub fn compile(expression: &str) -> Result<Selector, String> {
        if expression.len() > MAX_EXPRESSION_LENGTH {
            return Err(format!(
                "compilation failed: expression is {} bytes long, the limit is {MAX_EXPRESSION_LENGTH}",
                expression.len()
            ));
        }
        let env = ENV.as_ref().map_err(Clone::clone)?;
        let compiled = catch_unwind(AssertUnwindSafe(|| env.compile(expression)))
            .map_err(|_| "compilation failed: the CEL parser panicked".to_owned())?;
        let program = compiled.map_err(|e| format!("compilation failed: {e}"))?;
        Ok(Selector { program })
    }

    /// Evaluates the selector for `device` of `driver`: its boolean result,
    /// or the runtime error (which Kubernetes also reports, for the claim or
    /// class, rather than skipping the device).
    pub fn matches(&self, driver: &str, device: &Device) -> Result<bool, String> {
        let env = ENV.as_ref().map_err(Clone::clone)?;
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut context = Context::with_env(Arc::clone(env));
            context.add_variable_as_val("device", Box::new(DeviceView { driver, device }));
            self.program.execute(&context)
        }))
        .map_err(|_| "the CEL interpreter panicked".to_owned())?;
        match result {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "CEL result of type {} could not be converted to bool",
                value_type(&other)
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Null => "null_type",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        _ => "other",
    }
}

fn arg<'a, 'b, 'v, T: cel::common::value::FromVal<'a, 'v>>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
    function: &str,
) -> Result<&'a T, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<T>())
        .ok_or_else(|| ExecutionError::function_error(function, "unexpected argument type"))
}

fn text<'a>(args: &'a [CowVal<'_, '_>], function: &str) -> Result<&'a str, ExecutionError> {
    arg::<CelString>(args, 0, function).map(|s| s.inner())
}

fn quantity_of(
    args: &[CowVal<'_, '_>],
    i: usize,
    function: &str,
) -> Result<Quantity, ExecutionError> {
    arg::<Quantity>(args, i, function).copied()
}

fn semver_of<'a>(
    args: &'a [CowVal<'_, '_>],
    i: usize,
    function: &str,
) -> Result<&'a Semver, ExecutionError> {
    arg::<Semver>(args, i, function)
}

fn ordering(o: std::cmp::Ordering) -> i64 {
    o as i64
}

/// The successful result of an overload (every overload returns a
/// `Result`, so this keeps their bodies short).
#[allow(clippy::unnecessary_wraps)]
fn owned<'b, 'v, T: Val + 'v>(v: T) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(v))
}

/// `cel.bind(name, init, expr)` (cel-go's `ext.Bindings`, part of the
/// Kubernetes device selector environment): `expr` with `name` bound to
/// `init`, evaluated once. Expanded, as cel-go does, into a comprehension
/// over an empty list whose accumulator is the bound name.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    // Only `cel.bind`: another target's `bind` is an ordinary call.
    if !target
        .as_ref()
        .is_some_and(|t| matches!(&t.expr, Expr::Ident(name) if name == "cel"))
    {
        return Ok(None);
    }
    let [name, init, body]: [IdedExpr; 3] = std::mem::take(args)
        .try_into()
        .map_err(|_| helper.new_error(0, "cel.bind takes three arguments"))?;
    let Expr::Ident(var) = &name.expr else {
        return Err(helper.new_error(
            name.id,
            "cel.bind() variable names must be simple identifiers",
        ));
    };
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(var.clone())),
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

fn build_env() -> Result<Env, String> {
    let mut env = Env::stdlib();
    env.add_macro(Macro::receiver("bind", 3, bind_macro))
        .map_err(|e| e.to_string())?;
    let q = || QUANTITY_TYPE.to_owned();
    let s = || SEMVER_TYPE.to_owned();
    let str_t = || STRING_TYPE.to_owned();
    let int_t = || INT_TYPE.to_owned();
    let global: Vec<(&str, &str, Vec<Type>, cel::common::functions::Function)> = vec![
        ("quantity", "quantity_string", vec![str_t()], |a| {
            let t = text(&a, "quantity")?;
            let parsed =
                Quantity::parse(t).map_err(|e| ExecutionError::function_error("quantity", e))?;
            owned(parsed)
        }),
        ("isQuantity", "is_quantity_string", vec![str_t()], |a| {
            owned(CelBool::from(
                Quantity::parse(text(&a, "isQuantity")?).is_ok(),
            ))
        }),
        ("semver", "semver_string", vec![str_t()], |a| {
            let t = text(&a, "semver")?;
            let parsed = semver::Version::parse(t)
                .map_err(|e| ExecutionError::function_error("semver", e))?;
            owned(Semver(parsed))
        }),
        ("isSemver", "is_semver_string", vec![str_t()], |a| {
            owned(CelBool::from(
                semver::Version::parse(text(&a, "isSemver")?).is_ok(),
            ))
        }),
    ];
    for (name, id, args, f) in global {
        env.add_overload(name, id, args, f)
            .map_err(|e| e.to_string())?;
    }
    type Member = (
        &'static str,
        &'static str,
        fn() -> Type,
        Vec<Type>,
        cel::common::functions::Function,
    );
    let members: Vec<Member> = vec![
        ("compareTo", "quantity_compare_to", q, vec![q()], |a| {
            let (x, y) = (
                quantity_of(&a, 0, "compareTo")?,
                quantity_of(&a, 1, "compareTo")?,
            );
            owned(CelInt::from(ordering(x.cmp(&y))))
        }),
        (
            "isGreaterThan",
            "quantity_is_greater_than",
            q,
            vec![q()],
            |a| {
                owned(CelBool::from(
                    quantity_of(&a, 0, "isGreaterThan")? > quantity_of(&a, 1, "isGreaterThan")?,
                ))
            },
        ),
        ("isLessThan", "quantity_is_less_than", q, vec![q()], |a| {
            owned(CelBool::from(
                quantity_of(&a, 0, "isLessThan")? < quantity_of(&a, 1, "isLessThan")?,
            ))
        }),
        ("sign", "quantity_sign", q, vec![], |a| {
            owned(CelInt::from(quantity_of(&a, 0, "sign")?.0.signum()))
        }),
        ("isInteger", "quantity_is_integer", q, vec![], |a| {
            owned(CelBool::from(
                quantity_of(&a, 0, "isInteger")?.0 % 1000 == 0,
            ))
        }),
        ("asInteger", "quantity_as_integer", q, vec![], |a| {
            let x = quantity_of(&a, 0, "asInteger")?;
            if x.0 % 1000 != 0 {
                return Err(ExecutionError::function_error(
                    "asInteger",
                    "cannot convert value to integer",
                ));
            }
            owned(CelInt::from(x.0 / 1000))
        }),
        ("asApproximateFloat", "quantity_as_float", q, vec![], |a| {
            owned(CelDouble::from(
                quantity_of(&a, 0, "asApproximateFloat")?.0 as f64 / 1000.0,
            ))
        }),
        ("add", "quantity_add_quantity", q, vec![q()], |a| {
            let (x, y) = (quantity_of(&a, 0, "add")?, quantity_of(&a, 1, "add")?);
            let sum =
                x.0.checked_add(y.0)
                    .ok_or_else(|| ExecutionError::function_error("add", "overflow"))?;
            owned(Quantity(sum))
        }),
        ("add", "quantity_add_int", q, vec![int_t()], |a| {
            let x = quantity_of(&a, 0, "add")?;
            let y = *arg::<CelInt>(&a, 1, "add")?.inner();
            let sum = y
                .checked_mul(1000)
                .and_then(|y| x.0.checked_add(y))
                .ok_or_else(|| ExecutionError::function_error("add", "overflow"))?;
            owned(Quantity(sum))
        }),
        ("sub", "quantity_sub_quantity", q, vec![q()], |a| {
            let (x, y) = (quantity_of(&a, 0, "sub")?, quantity_of(&a, 1, "sub")?);
            let diff =
                x.0.checked_sub(y.0)
                    .ok_or_else(|| ExecutionError::function_error("sub", "overflow"))?;
            owned(Quantity(diff))
        }),
        ("sub", "quantity_sub_int", q, vec![int_t()], |a| {
            let x = quantity_of(&a, 0, "sub")?;
            let y = *arg::<CelInt>(&a, 1, "sub")?.inner();
            let diff = y
                .checked_mul(1000)
                .and_then(|y| x.0.checked_sub(y))
                .ok_or_else(|| ExecutionError::function_error("sub", "overflow"))?;
            owned(Quantity(diff))
        }),
        ("compareTo", "semver_compare_to", s, vec![s()], |a| {
            let (x, y) = (
                semver_of(&a, 0, "compareTo")?,
                semver_of(&a, 1, "compareTo")?,
            );
            owned(CelInt::from(ordering(x.cmp(y))))
        }),
        (
            "isGreaterThan",
            "semver_is_greater_than",
            s,
            vec![s()],
            |a| {
                owned(CelBool::from(
                    semver_of(&a, 0, "isGreaterThan")? > semver_of(&a, 1, "isGreaterThan")?,
                ))
            },
        ),
        ("isLessThan", "semver_is_less_than", s, vec![s()], |a| {
            owned(CelBool::from(
                semver_of(&a, 0, "isLessThan")? < semver_of(&a, 1, "isLessThan")?,
            ))
        }),
        ("major", "semver_major", s, vec![], |a| {
            owned(CelInt::from(
                i64::try_from(semver_of(&a, 0, "major")?.0.major).unwrap_or(i64::MAX),
            ))
        }),
        ("minor", "semver_minor", s, vec![], |a| {
            owned(CelInt::from(
                i64::try_from(semver_of(&a, 0, "minor")?.0.minor).unwrap_or(i64::MAX),
            ))
        }),
        ("patch", "semver_patch", s, vec![], |a| {
            owned(CelInt::from(
                i64::try_from(semver_of(&a, 0, "patch")?.0.patch).unwrap_or(i64::MAX),
            ))
        }),
    ];
    for (name, id, target, args, f) in members {
        env.add_member_overload(name, id, target(), args, f)
            .map_err(|e| e.to_string())?;
    }
    Ok(env)
}
