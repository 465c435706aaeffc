//! The runtime cost bound of a selector evaluation.
//!
//! Kubernetes runs every selector with a cost limit
//! (`CELSelectorExpressionMaxCost`, 1,000,000 units; cel-go's cost tracker
//! stops the evaluation with "actual cost limit exceeded"), and the API
//! server rejects selectors whose *estimated* cost exceeds it. placer
//! cannot rely on the estimate (a selector may have been admitted by an
//! older server) and cel-rust has no cost tracker, so the compiled
//! expression is instrumented instead, and each evaluation draws on a
//! budget of [`COST_LIMIT`] units (per thread, reset per evaluation):
//!
//! - **Loops.** Every comprehension iteration (`all`, `exists`, `map`,
//!   `filter`, `exists_one`, `sortBy`, the two-variable forms) charges the
//!   number of nodes of its loop condition and step (a string literal
//!   weighs one more per ten bytes), whether or not short-circuiting skips
//!   some — the shape of cel-go's estimate. `cel.bind` does not loop.
//! - **Sizes.** Where an operation's time depends on the size of a value
//!   the compiler cannot see (a non-literal string, list or map), that
//!   operand is charged one unit plus one per ten bytes or elements when
//!   it is evaluated: arguments and receivers of string and list
//!   functions, both sides of a comparison without a literal side, the
//!   container of `in`. Values a function or `+` builds (strings, lists),
//!   and every element `map` collects, are charged by their size too, and
//!   refused above [`MAX_STRING_BYTES`] / [`MAX_LIST_LENGTH`].
//! - **Output that could outgrow its inputs** is bounded before it is
//!   built: `replace` (its result size is checked first) and
//!   `lists.range` (at most [`MAX_LIST_LENGTH`]).
//!
//! What is *not* charged: the part of the expression outside any loop
//! (evaluated once, bounded by the 10 KiB expression limit), constant-time
//! operations on quantities, versions, IPs, CIDRs and URLs, and map and
//! list indexing. A regular expression is compiled with the `regex`
//! crate's size limits and matched in linear time (see `regex.rs`).

use std::cell::Cell;

use cel::common::ast::{CallExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators};
use cel::common::types::{CelBytes, CelInt, CelString, DYN_TYPE, INT_TYPE};
use cel::common::value::Val;
use cel::{Env, ExecutionError};

use super::function_error;

/// `resourceapi.CELSelectorExpressionMaxCost`.
pub(super) const COST_LIMIT: u64 = 1_000_000;
/// The longest string an evaluation may build.
pub(super) const MAX_STRING_BYTES: usize = 1 << 20;
/// The longest list (or largest map) an evaluation may build.
pub(super) const MAX_LIST_LENGTH: usize = 100_000;

thread_local! {
    static REMAINING: Cell<u64> = const { Cell::new(COST_LIMIT) };
}

/// Starts a new evaluation's budget on this thread.
pub(super) fn reset() {
    REMAINING.with(|r| r.set(COST_LIMIT));
}

/// Takes `units` from the budget, or fails as cel-go does past the limit.
pub(super) fn charge(units: u64) -> Result<(), ExecutionError> {
    REMAINING.with(|r| {
        let left = r.get();
        if units > left {
            r.set(0);
            Err(ExecutionError::function_error(
                "cost",
                "operation cancelled: actual cost limit exceeded",
            ))
        } else {
            r.set(left - units);
            Ok(())
        }
    })
}

/// The size a value is charged by: bytes of a string or bytes, elements
/// of a list or map, zero for a scalar.
pub(super) fn size_of(v: &dyn Val) -> usize {
    if let Some(s) = v.downcast_ref::<CelString>() {
        return s.inner().len();
    }
    if let Some(b) = v.downcast_ref::<CelBytes>() {
        return b.inner().len();
    }
    v.as_sizer()
        .map_or(0, |s| usize::try_from(*s.size().inner()).unwrap_or(0))
}

/// Charges `v` by its size, refusing values over the limits.
pub(super) fn charge_value(v: &dyn Val) -> Result<(), ExecutionError> {
    let size = size_of(v);
    let is_string =
        v.downcast_ref::<CelString>().is_some() || v.downcast_ref::<CelBytes>().is_some();
    let limit = if is_string {
        MAX_STRING_BYTES
    } else {
        MAX_LIST_LENGTH
    };
    if size > limit {
        return Err(function_error(
            "cost",
            format!("value of size {size} is over the limit of {limit} placer evaluates"),
        ));
    }
    charge(1 + size as u64 / 10)
}

const ITER: &str = "@iter";
const SIZE: &str = "@size";

/// Registers the charging functions the instrumentation calls.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    // @iter(n, x): one loop iteration of weight n, passing x through.
    env.add_overload(ITER, ITER, vec![INT_TYPE, DYN_TYPE], |mut a| {
        let value = a
            .pop()
            .ok_or_else(|| function_error(ITER, "missing argument"))?;
        let weight = a
            .first()
            .and_then(|w| w.downcast_ref::<CelInt>())
            .map_or(1, |w| u64::try_from(*w.inner()).unwrap_or(1));
        charge(weight)?;
        charge_value(value.as_ref())?;
        Ok(value)
    })?;
    // @size(x): x charged by its size, passed through.
    env.add_overload(SIZE, SIZE, vec![DYN_TYPE], |mut a| {
        let value = a
            .pop()
            .ok_or_else(|| function_error(SIZE, "missing argument"))?;
        charge_value(value.as_ref())?;
        Ok(value)
    })?;
    Ok(())
}

/// Functions whose cost does not depend on the size of their operands
/// (methods of parsed values, logic, indexing): never wrapped.
const CONSTANT: &[&str] = &[
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::CONDITIONAL,
    operators::NOT_STRICTLY_FALSE,
    operators::INDEX,
    operators::OPT_INDEX,
    operators::OPT_SELECT,
    operators::NEGATE,
    operators::SUBSTRACT,
    operators::MULTIPLY,
    operators::DIVIDE,
    operators::MODULO,
    "has",
    ITER,
    SIZE,
    "compareTo",
    "isGreaterThan",
    "isLessThan",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "sign",
    "major",
    "minor",
    "patch",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "containsIP",
    "containsCIDR",
    "prefixLength",
    "masked",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "hasValue",
    "value",
    "orValue",
    "or",
    "int",
    "uint",
    "double",
    "bool",
    "type",
    "dyn",
];

const COMPARISONS: &[&str] = &[
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
];

/// Functions that build strings or lists from their operands: their
/// result is charged (and size-checked) too.
const GROWING: &[&str] = &[
    "join",
    "split",
    "format",
    "lowerAscii",
    "upperAscii",
    "substring",
    "trim",
    "charAt",
    "reverse",
    "quote",
    "flatten",
    "slice",
    "distinct",
    "sort",
    "@sortByAssociatedKeys",
    "findAll",
    "string",
    "@indices",
];

/// Namespaces a call's target may spell (`sets.contains(...)`): not
/// values, never wrapped.
const NAMESPACES: &[&str] = &[
    "strings", "lists", "sets", "format", "optional", "math", "cel", "ip",
];

/// Functions replaced by bounded versions: (namespace or "", name, new name).
const RENAMED: &[(&str, &str, &str)] = &[
    ("", "replace", "@replace"),
    ("lists", "range", "@lists_range"),
];

/// Instruments `expr` in place (see the module doc).
pub(super) fn instrument(expr: &mut IdedExpr) {
    let mut next_id = max_id(expr) + 1;
    walk(expr, &mut next_id);
}

fn max_id(e: &IdedExpr) -> u64 {
    let mut max = e.id;
    visit_children(e, |c| max = max.max(max_id(c)));
    max
}

/// Calls `f` on each child of `e`.
pub(super) fn visit_children<'e>(e: &'e IdedExpr, mut f: impl FnMut(&'e IdedExpr)) {
    match &e.expr {
        Expr::Call(c) => {
            c.target.iter().for_each(|t| f(t));
            c.args.iter().for_each(f);
        }
        Expr::Select(s) => f(&s.operand),
        Expr::List(l) => l.elements.iter().for_each(f),
        Expr::Map(m) => m.entries.iter().for_each(|entry| {
            if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                f(&me.key);
                f(&me.value);
            }
        }),
        Expr::Struct(s) => s.entries.iter().for_each(|entry| {
            if let cel::common::ast::EntryExpr::StructField(sf) = &entry.expr {
                f(&sf.value);
            }
        }),
        Expr::Comprehension(c) => {
            f(&c.iter_range);
            f(&c.accu_init);
            f(&c.loop_cond);
            f(&c.loop_step);
            f(&c.result);
        }
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
    }
}

/// The static weight of evaluating `e` once.
fn weight(e: &IdedExpr) -> i64 {
    let own = match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => 1 + s.inner().len() as i64 / 10,
        _ => 1,
    };
    let mut total = own;
    visit_children(e, |c| total = total.saturating_add(weight(c)));
    total
}

fn is_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_))
}

fn wrap(e: &mut IdedExpr, next_id: &mut u64, function: &str, weight: Option<i64>) {
    let inner = std::mem::replace(
        e,
        IdedExpr {
            id: e.id,
            expr: Expr::Unspecified,
        },
    );
    let mut args = Vec::with_capacity(2);
    if let Some(w) = weight {
        args.push(IdedExpr {
            id: bump(next_id),
            expr: Expr::Literal(LiteralValue::Int(CelInt::from(w))),
        });
    }
    args.push(inner);
    *e = IdedExpr {
        id: bump(next_id),
        expr: Expr::Call(CallExpr {
            func_name: function.to_owned(),
            target: None,
            args,
        }),
    };
}

fn bump(next_id: &mut u64) -> u64 {
    *next_id += 1;
    *next_id
}

fn wrap_size_unless_literal(e: &mut IdedExpr, next_id: &mut u64) {
    if !is_literal(e) {
        wrap(e, next_id, SIZE, None);
    }
}

fn walk(e: &mut IdedExpr, next_id: &mut u64) {
    match &mut e.expr {
        Expr::Call(call) => {
            if let Some(t) = call.target.as_deref_mut() {
                walk(t, next_id);
            }
            call.args.iter_mut().for_each(|a| walk(a, next_id));
            if call_post_charged(call, next_id) {
                wrap(e, next_id, SIZE, None);
            }
        }
        Expr::Select(s) => walk(&mut s.operand, next_id),
        Expr::List(l) => l.elements.iter_mut().for_each(|c| walk(c, next_id)),
        Expr::Map(m) => m.entries.iter_mut().for_each(|entry| {
            if let cel::common::ast::EntryExpr::MapEntry(me) = &mut entry.expr {
                walk(&mut me.key, next_id);
                walk(&mut me.value, next_id);
            }
        }),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|entry| {
            if let cel::common::ast::EntryExpr::StructField(sf) = &mut entry.expr {
                walk(&mut sf.value, next_id);
            }
        }),
        Expr::Comprehension(c) => {
            walk(&mut c.iter_range, next_id);
            walk(&mut c.accu_init, next_id);
            walk(&mut c.loop_cond, next_id);
            walk_step(&mut c.loop_step, &c.accu_var, next_id);
            walk(&mut c.result, next_id);
            let binds_only = matches!(&c.iter_range.expr, Expr::List(ListExpr { elements, .. }) if elements.is_empty());
            if binds_only {
                return;
            }
            let per_iteration = weight(&c.loop_cond) + weight(&c.loop_step);
            if !is_literal(&c.loop_cond) {
                wrap(&mut c.loop_cond, next_id, ITER, Some(per_iteration));
            } else if let Some((guard, item)) = append_step(&mut c.loop_step, &c.accu_var) {
                match guard {
                    Some(guard) => {
                        wrap(guard, next_id, ITER, Some(per_iteration));
                        wrap(item, next_id, ITER, Some(0));
                    }
                    None => wrap(item, next_id, ITER, Some(per_iteration)),
                }
            } else {
                wrap(&mut c.loop_step, next_id, ITER, Some(per_iteration));
            }
        }
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
    }
}

/// The loop step of a comprehension: as [`walk`], except that the
/// accumulator's own `accu + [item]` is left as cel-rust's in-place
/// append recognises it.
fn walk_step(step: &mut IdedExpr, accu: &str, next_id: &mut u64) {
    if let Some((guard, item)) = append_step(step, accu) {
        if let Some(g) = guard {
            walk(g, next_id);
        }
        walk(item, next_id);
        return;
    }
    walk(step, next_id);
}

/// `accu + [item]` or `guard ? accu + [item] : accu`: the guard and item.
fn append_step<'e>(
    step: &'e mut IdedExpr,
    accu: &str,
) -> Option<(Option<&'e mut IdedExpr>, &'e mut IdedExpr)> {
    let guarded = match &step.expr {
        Expr::Call(c)
            if c.func_name == operators::CONDITIONAL
                && c.target.is_none()
                && c.args.len() == 3
                && is_accu(&c.args[2], accu)
                && is_append(&c.args[1], accu) =>
        {
            true
        }
        _ if is_append(step, accu) => false,
        _ => return None,
    };
    if !guarded {
        return Some((None, appended_item(step)?));
    }
    let Expr::Call(c) = &mut step.expr else {
        return None;
    };
    let (guard, rest) = c.args.split_first_mut()?;
    Some((Some(guard), appended_item(rest.first_mut()?)?))
}

fn is_accu(e: &IdedExpr, accu: &str) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == accu)
}

/// `accu + [item]`.
fn is_append(e: &IdedExpr, accu: &str) -> bool {
    let Expr::Call(c) = &e.expr else { return false };
    c.func_name == operators::ADD
        && c.target.is_none()
        && matches!(c.args.as_slice(), [lhs, IdedExpr { expr: Expr::List(l), .. }] if is_accu(lhs, accu) && l.elements.len() == 1)
}

/// The item of an `accu + [item]` (see [`is_append`]).
fn appended_item(e: &mut IdedExpr) -> Option<&mut IdedExpr> {
    let Expr::Call(c) = &mut e.expr else {
        return None;
    };
    match &mut c.args.get_mut(1)?.expr {
        Expr::List(l) => l.elements.first_mut(),
        _ => None,
    }
}

/// Wraps what a call's cost depends on, renames the calls placer bounds
/// itself, and says whether the call's result must be charged.
fn call_post_charged(call: &mut CallExpr, next_id: &mut u64) -> bool {
    let name = call.func_name.as_str();
    let namespace = match call.target.as_deref() {
        Some(IdedExpr {
            expr: Expr::Ident(n),
            ..
        }) if NAMESPACES.contains(&n.as_str()) => Some(n.clone()),
        _ => None,
    };
    if let Some((_, _, new)) = RENAMED
        .iter()
        .find(|(ns, old, _)| *old == name && (ns.is_empty() || namespace.as_deref() == Some(ns)))
    {
        call.func_name = (*new).to_owned();
        if namespace.is_some() {
            call.target = None;
        }
    }
    let name = call.func_name.as_str();
    if CONSTANT.contains(&name) {
        return false;
    }
    if COMPARISONS.contains(&name) {
        if !call.args.iter().any(is_literal) {
            call.args
                .iter_mut()
                .for_each(|a| wrap(a, next_id, SIZE, None));
        }
        return false;
    }
    if name == operators::IN {
        if let Some(container) = call.args.get_mut(1)
            && !matches!(container.expr, Expr::List(_) | Expr::Map(_))
        {
            wrap(container, next_id, SIZE, None);
        }
        return false;
    }
    if name == operators::ADD {
        // The accumulators of macros are internal (`@result`): their
        // `+` is the loop's own and charged per iteration.
        return !matches!(call.args.first(), Some(IdedExpr { expr: Expr::Ident(n), .. }) if n.starts_with('@'));
    }
    let growing = GROWING.contains(&name);
    if namespace.is_none()
        && let Some(t) = call.target.as_deref_mut()
    {
        wrap_size_unless_literal(t, next_id);
    }
    call.args
        .iter_mut()
        .for_each(|a| wrap_size_unless_literal(a, next_id));
    growing
}
