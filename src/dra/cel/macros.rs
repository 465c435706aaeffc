//! The macros of the Kubernetes environment that cel-rust does not have:
//! `cel.bind` (cel-go's `ext.Bindings`) and the two-variable
//! comprehensions (cel-go's `ext.TwoVarComprehensions`: `all`, `exists`,
//! `existsOne` / `exists_one` with an index or key and a value,
//! `transformList`, `transformMap`, `transformMapEntry`).
//!
//! cel-rust's interpreter iterates with one variable, so a two-variable
//! form is expanded over the target's indices (a list's positions, a map's
//! keys), binding the value by lookup:
//! `t.all(i, v, p)` ⇒ `cel.bind(@target, t, @indices(@target).all(i,
//! cel.bind(v, @target[i], p)))`. `@`-names cannot be written in CEL, so
//! the expansion cannot clash with the expression's own names.

use cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators,
};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env};

const TARGET: &str = "@target";
const RESULT: &str = "@result";

/// Registers the macros on `env`.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    env.add_macro(Macro::receiver("all", 3, |h, t, a| {
        two_var(h, t, a, Fold::All)
    }))?;
    env.add_macro(Macro::receiver("exists", 3, |h, t, a| {
        two_var(h, t, a, Fold::Exists)
    }))?;
    env.add_macro(Macro::receiver("existsOne", 3, |h, t, a| {
        two_var(h, t, a, Fold::ExistsOne)
    }))?;
    env.add_macro(Macro::receiver(operators::EXISTS_ONE, 3, |h, t, a| {
        two_var(h, t, a, Fold::ExistsOne)
    }))?;
    for arity in [3, 4] {
        env.add_macro(Macro::receiver("transformList", arity, |h, t, a| {
            two_var(h, t, a, Fold::List)
        }))?;
        env.add_macro(Macro::receiver("transformMap", arity, |h, t, a| {
            two_var(h, t, a, Fold::Map)
        }))?;
        env.add_macro(Macro::receiver("transformMapEntry", arity, |h, t, a| {
            two_var(h, t, a, Fold::MapEntry)
        }))?;
    }
    Ok(())
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_owned(),
        target: None,
        args,
    }))
}

fn literal(h: &mut MacroExprHelper<'_>, v: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(v))
}

fn list(h: &mut MacroExprHelper<'_>, elements: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::List(ListExpr::new(elements)))
}

/// `body` with `var` bound to `init`, evaluated once: a comprehension over
/// an empty list whose accumulator is the bound name, as cel-go expands it.
fn bind(h: &mut MacroExprHelper<'_>, var: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let comprehension = ComprehensionExpr {
        iter_range: list(h, Vec::new()),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.to_owned(),
        accu_init: init,
        loop_cond: literal(h, LiteralValue::Boolean(false.into())),
        loop_step: ident(h, var),
        result: body,
    };
    h.next_expr(Expr::Comprehension(Box::new(comprehension)))
}

fn variable_name(h: &MacroExprHelper<'_>, e: &IdedExpr, what: &str) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(
            e.id,
            format!("{what} variable names must be simple identifiers"),
        )),
    }
}

/// `cel.bind(name, init, expr)`. Only on the `cel` namespace: another
/// target's `bind` is an ordinary call.
fn bind_macro(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !target
        .as_ref()
        .is_some_and(|t| matches!(&t.expr, Expr::Ident(name) if name == "cel"))
    {
        return Ok(None);
    }
    let [name, init, body]: [IdedExpr; 3] = std::mem::take(args)
        .try_into()
        .map_err(|_| h.new_error(0, "cel.bind takes three arguments"))?;
    let var = variable_name(h, &name, "cel.bind()")?;
    Ok(Some(bind(h, &var, init, body)))
}

#[derive(Clone, Copy)]
enum Fold {
    All,
    Exists,
    ExistsOne,
    List,
    Map,
    MapEntry,
}

/// Expands a two-variable comprehension (see the module doc).
fn two_var(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    fold: Fold,
) -> Result<Option<IdedExpr>, ParseError> {
    let Some(range) = target.take() else {
        return Ok(None);
    };
    let mut parts = std::mem::take(args).into_iter();
    let (Some(first), Some(second)) = (parts.next(), parts.next()) else {
        return Err(h.new_error(range.id, "two-variable comprehensions take two variables"));
    };
    let index = variable_name(h, &first, "comprehension")?;
    let value = variable_name(h, &second, "comprehension")?;
    if index == value {
        return Err(h.new_error(second.id, format!("duplicate variable name: {value}")));
    }
    let rest: Vec<IdedExpr> = parts.collect();
    // With the value bound: `cel.bind(value, @target[index], e)`.
    let with_value = |h: &mut MacroExprHelper<'_>, e: IdedExpr| {
        let (t, i) = (ident(h, TARGET), ident(h, &index));
        let lookup = call(h, operators::INDEX, vec![t, i]);
        bind(h, &value, lookup, e)
    };
    let (filter, body) = match <[IdedExpr; 2]>::try_from(rest) {
        Ok([f, e]) => (Some(with_value(h, f)), e),
        Err(mut one) => (
            None,
            one.pop()
                .ok_or_else(|| h.new_error(range.id, "missing expression"))?,
        ),
    };
    let body = with_value(h, body);
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, RESULT);
    let (init, cond, step, result) = match fold {
        Fold::All | Fold::Exists => {
            let all = matches!(fold, Fold::All);
            let a = accu(h);
            let tested = if all {
                a
            } else {
                call(h, operators::LOGICAL_NOT, vec![a])
            };
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![tested]);
            let a = accu(h);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = call(h, op, vec![a, body]);
            (
                literal(h, LiteralValue::Boolean(all.into())),
                cond,
                step,
                accu(h),
            )
        }
        Fold::ExistsOne => {
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let plus = call(h, operators::ADD, vec![a, one]);
            let a = accu(h);
            let step = call(h, operators::CONDITIONAL, vec![body, plus, a]);
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let result = call(h, operators::EQUALS, vec![a, one]);
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            (literal(h, LiteralValue::Int(0.into())), cond, step, result)
        }
        Fold::List | Fold::Map | Fold::MapEntry => {
            let item = match fold {
                // The pair (key, value) `@pairs_to_map` assembles.
                Fold::Map => {
                    let i = ident(h, &index);
                    list(h, vec![i, body])
                }
                _ => body,
            };
            let a = accu(h);
            let appended = list(h, vec![item]);
            let append = call(h, operators::ADD, vec![a, appended]);
            let step = match filter {
                Some(f) => {
                    let a = accu(h);
                    call(h, operators::CONDITIONAL, vec![f, append, a])
                }
                None => append,
            };
            let a = accu(h);
            let result = match fold {
                Fold::Map => call(h, "@pairs_to_map", vec![a]),
                Fold::MapEntry => call(h, "@merge_maps", vec![a]),
                _ => a,
            };
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            (list(h, Vec::new()), cond, step, result)
        }
    };
    let t = ident(h, TARGET);
    let indices = call(h, "@indices", vec![t]);
    let comprehension = ComprehensionExpr {
        iter_range: indices,
        iter_var: index.clone(),
        iter_var2: None,
        accu_var: RESULT.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    };
    let loop_expr = h.next_expr(Expr::Comprehension(Box::new(comprehension)));
    Ok(Some(bind(h, TARGET, range, loop_expr)))
}
