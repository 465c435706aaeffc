//! CEL device selectors: compiled once per expression (in
//! [`super::Allocator::new`]), evaluated per device against views of the
//! device ([`values`]), in the environment kube-apiserver v1.37 gives
//! DRA selectors (the `StoredExpressions` environment the allocator runs
//! them in):
//!
//! - the CEL standard library with optional types and cel-rust's strings
//!   (`charAt`, `indexOf`, `join`, `split`, `format`, ...) and lists
//!   (`slice`, `flatten`, `distinct`, `sort`, `sortBy`, `lists.range`)
//!   extensions, which follow cel-go's `ext.Strings` and `ext.Lists`;
//! - `cel.bind` and the two-variable comprehensions ([`macros`]);
//! - Kubernetes' quantity ([`quantity`]: exact, arbitrary precision),
//!   semver version 1 ([`semver`]), regex ([`regex`]: `matches`, `find`,
//!   `findAll`), lists version 1 and cel-go's sets ([`lists`]), IP and CIDR
//!   ([`net`]), URL ([`url`]) and format ([`format`]) libraries.
//!
//! Not here: the authorizer library (DRA selectors have no authorizer
//! variable) and the type checker. cel-rust does not type-check, so an
//! expression Kubernetes rejects at compile time for a type error
//! (`"a" + 1`) fails here when evaluated, as a runtime error of the claim;
//! the one check kept at compile time is a result that is obviously not a
//! bool (a literal or a list or map literal), and invalid literal regular
//! expressions, as Kubernetes' validators do.
//!
//! Bounds: the expression length (as API validation), its nesting
//! ([`depth`]: at most 250 levels of brackets and conditionals and an AST
//! at most 250 levels deep, cel-go's `MaxRecursionDepth`; compiling and
//! evaluating run on a stack large enough for the selector, so a deep one
//! cannot overflow the scheduler's threads), the runtime cost ([`budget`]),
//! and any panic inside the interpreter becomes an error.

mod budget;
mod depth;
mod format;
mod lists;
mod macros;
mod net;
mod quantity;
mod regex;
mod semver;
mod url;
mod values;

#[cfg(test)]
mod depth_tests;
#[cfg(test)]
mod library_tests;
#[cfg(test)]
mod table_tests;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock};

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::types::CelBool;
use cel::common::value::{CowVal, FromVal, Val};
use cel::{Context, Env, ExecutionError, Value, extensions};
use k8s_openapi::api::resource::v1::Device;

pub(super) use quantity::Quantity;
use values::DeviceView;

/// `resourceapi.CELSelectorExpressionMaxLength`.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// A compiled selector expression.
pub(super) struct Selector {
    expression: IdedExpr,
    /// The stack evaluating (or dropping) `expression` needs.
    stack: usize,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Selector")
    }
}

impl Drop for Selector {
    fn drop(&mut self) {
        // Dropping the AST recurses over it as evaluating does.
        let expression = std::mem::take(&mut self.expression);
        stacker::maybe_grow(self.stack, self.stack, move || drop(expression));
    }
}

/// The environment every selector is compiled for and run in, built once
/// per process.
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
        let nesting = depth::nesting(expression);
        if nesting > depth::MAX_NESTING {
            return Err(format!(
                "compilation failed: expression recursion limit exceeded: it nests {nesting} levels \
                 deep (parentheses, brackets, braces, calls and conditionals), the limit is {}",
                depth::MAX_NESTING
            ));
        }
        let env = ENV.as_ref().map_err(Clone::clone)?;
        let stack = depth::compile_stack(nesting, expression.len());
        stacker::maybe_grow(stack, stack, || compile_here(env, expression, nesting))
    }

    /// Evaluates the selector for `device` of `driver`: its boolean result,
    /// or the runtime error (which Kubernetes also reports, for the claim or
    /// class, rather than skipping the device).
    pub fn matches(&self, driver: &str, device: &Device) -> Result<bool, String> {
        stacker::maybe_grow(self.stack, self.stack, || self.matches_here(driver, device))
    }

    /// [`Selector::matches`] on the current stack, however much is left.
    fn matches_here(&self, driver: &str, device: &Device) -> Result<bool, String> {
        let env = ENV.as_ref().map_err(Clone::clone)?;
        let result = catch_unwind(AssertUnwindSafe(|| {
            budget::reset();
            let mut context = Context::with_env(Arc::clone(env));
            context.add_variable_as_val("device", Box::new(DeviceView { driver, device }));
            Value::resolve_val(&self.expression, &context).map(|v| {
                v.downcast_ref::<CelBool>()
                    .map(|b| *b.inner())
                    .ok_or_else(|| v.get_type().name().to_owned())
            })
        }))
        .map_err(|_| "the CEL interpreter panicked".to_owned())?;
        match result {
            Ok(Ok(b)) => Ok(b),
            Ok(Err(kind)) => Err(format!(
                "CEL result of type {kind} could not be converted to bool"
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// [`Selector::compile`] after the length and nesting checks, on a stack
/// large enough for `nesting` (everything deep, the parse tree and a
/// rejected AST included, is dropped before this returns).
fn compile_here(env: &Env, expression: &str, nesting: usize) -> Result<Selector, String> {
    // The parser's own limit (one past the levels counted, as it counts the
    // whole expression as a level) makes it stop where the stack was sized.
    let parser_limit = u16::try_from(nesting + 1).unwrap_or(u16::MAX);
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        env.parser()
            .max_recursion_depth(parser_limit)
            .parse(expression)
    }))
    .map_err(|_| "compilation failed: the CEL parser panicked".to_owned())?;
    let mut parsed = parsed.map_err(|e| format!("compilation failed: {e}"))?;
    let ast_depth = depth::ast_depth(&parsed);
    if ast_depth > depth::MAX_DEPTH {
        return Err(format!(
            "compilation failed: max recursion depth exceeded: it is {ast_depth} levels deep \
             (operators, calls, field selections, indexes and macros), the limit is {}",
            depth::MAX_DEPTH
        ));
    }
    if let Some(kind) = obviously_not_bool(&parsed) {
        return Err(format!(
            "compilation failed: must evaluate to bool or the unknown type, not {kind}"
        ));
    }
    regex::validate_literals(&parsed).map_err(|e| format!("compilation failed: {e}"))?;
    budget::instrument(&mut parsed);
    Ok(Selector {
        stack: depth::eval_stack(depth::ast_depth(&parsed)),
        expression: parsed,
    })
}

/// The type of a result that is a literal other than a bool.
fn obviously_not_bool(e: &IdedExpr) -> Option<&'static str> {
    match &e.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => None,
        Expr::Literal(LiteralValue::Int(_)) => Some("int"),
        Expr::Literal(LiteralValue::UInt(_)) => Some("uint"),
        Expr::Literal(LiteralValue::Double(_)) => Some("double"),
        Expr::Literal(LiteralValue::String(_)) => Some("string"),
        Expr::Literal(LiteralValue::Bytes(_)) => Some("bytes"),
        Expr::Literal(LiteralValue::Null) => Some("null_type"),
        Expr::List(_) => Some("list"),
        Expr::Map(_) => Some("map"),
        _ => None,
    }
}

/// A function error of `function`.
pub(super) fn function_error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message.to_string())
}

/// Argument `i` of an overload as `T`.
pub(super) fn arg<'a, 'b, 'v, T: FromVal<'a, 'v>>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
    function: &str,
) -> Result<&'a T, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<T>())
        .ok_or_else(|| function_error(function, "unexpected argument type"))
}

/// The successful result of an overload (every overload returns a
/// `Result`, so this keeps their bodies short).
#[allow(clippy::unnecessary_wraps)]
pub(super) fn owned<'b, 'v, T: Val + 'v>(v: T) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(v))
}

/// Implements `Val` for an owned, comparable Kubernetes value type.
macro_rules! static_val {
    ($ty:ty, $cel:expr) => {
        impl cel::common::value::Val for $ty {
            fn get_type(&self) -> &cel::common::types::Type {
                <Self as cel::common::value::Val>::cel_type()
            }
            fn cel_type() -> &'static cel::common::types::Type {
                &$cel
            }
            fn as_comparer(&self) -> Option<&dyn cel::common::traits::Comparer> {
                Some(self)
            }
            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                other.downcast_ref::<Self>().is_some_and(|o| o == self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v>
            where
                Self: 'v,
            {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }
        impl cel::common::value::StaticVal for $ty {}
        impl cel::common::traits::Comparer for $ty {
            fn compare(
                &self,
                rhs: &dyn cel::common::value::Val,
            ) -> Result<std::cmp::Ordering, cel::ExecutionError> {
                rhs.downcast_ref::<Self>()
                    .map(|o| self.cmp(o))
                    .ok_or_else(|| {
                        cel::ExecutionError::function_error("compare", "values of different types")
                    })
            }
        }
    };
}
pub(super) use static_val;

/// What registers one library on the environment.
type Library = fn(&mut Env) -> Result<(), cel::DeclarationError>;

fn build_env() -> Result<Env, String> {
    let mut env = Env::stdlib();
    let libraries: [Library; 11] = [
        extensions::strings,
        extensions::lists,
        macros::register,
        budget::register,
        quantity::register,
        semver::register,
        regex::register,
        lists::register,
        net::register,
        url::register,
        format::register,
    ];
    for library in libraries {
        env.add_extension(library).map_err(|e| e.to_string())?;
    }
    Ok(env)
}
