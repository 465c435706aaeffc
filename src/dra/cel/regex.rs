//! Regular expressions in selectors: the standard `matches` and the
//! Kubernetes regex library's `find` and `findAll`, with RE2 syntax (the
//! `regex` crate's, which matches in linear time), and, as the Kubernetes
//! environment validates them, literal patterns checked at compile time.
//!
//! Bounds: a pattern compiles to at most [`PATTERN_SIZE_LIMIT`] bytes of
//! program (and lazy-DFA cache), so a pathological pattern is an error, not
//! a memory spike; compiled patterns are cached per thread (at most
//! [`CACHE_ENTRIES`]), so a selector does not recompile its pattern for
//! every device.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelBool, CelInt, CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::Val;
use cel::{Env, ExecutionError};
use regex::{Regex, RegexBuilder};

use super::budget::MAX_LIST_LENGTH;
use super::{arg, function_error, owned};

/// The most memory one compiled pattern may take.
pub(super) const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// Compiled patterns kept per thread.
const CACHE_ENTRIES: usize = 64;

thread_local! {
    static CACHE: RefCell<HashMap<String, Arc<Regex>>> = RefCell::new(HashMap::new());
}

/// `pattern` compiled with placer's limits.
fn compile(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("error parsing regexp: {e}"))
}

fn cached(function: &str, pattern: &str) -> Result<Arc<Regex>, ExecutionError> {
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = Arc::new(compile(pattern).map_err(|e| function_error(function, e))?);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_ENTRIES {
            c.clear();
        }
        c.insert(pattern.to_owned(), Arc::clone(&re));
    });
    Ok(re)
}

fn text_and_pattern<'a>(
    args: &'a [cel::common::value::CowVal<'_, '_>],
    function: &str,
) -> Result<(&'a str, Arc<Regex>), ExecutionError> {
    let text = arg::<CelString>(args, 0, function)?.inner();
    let pattern = arg::<CelString>(args, 1, function)?.inner();
    Ok((text, cached(function, pattern)?))
}

fn find_all(text: &str, re: &Regex, limit: i64) -> CelList<'static> {
    let take = usize::try_from(limit).map_or(MAX_LIST_LENGTH, |n| n.min(MAX_LIST_LENGTH));
    re.find_iter(text)
        .take(take)
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val>)
        .collect::<Vec<_>>()
        .into()
}

/// Registers `matches`, `find` and `findAll`.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let matches: cel::common::functions::Function = |a| {
        let (text, re) = text_and_pattern(&a, "matches")?;
        owned(CelBool::from(re.is_match(text)))
    };
    env.add_overload(
        "matches",
        "matches_string",
        vec![STRING_TYPE, STRING_TYPE],
        matches,
    )?;
    env.add_member_overload(
        "matches",
        "string_matches_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        matches,
    )?;
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        |a| {
            let (text, re) = text_and_pattern(&a, "find")?;
            owned(CelString::from(
                re.find(text).map_or("", |m| m.as_str()).to_owned(),
            ))
        },
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        |a| {
            let (text, re) = text_and_pattern(&a, "findAll")?;
            owned(find_all(text, &re, -1))
        },
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        |a| {
            let (text, re) = text_and_pattern(&a, "findAll")?;
            let limit = *arg::<CelInt>(&a, 2, "findAll")?.inner();
            owned(find_all(text, &re, limit))
        },
    )?;
    Ok(())
}

/// Kubernetes' `ValidateRegexLiterals`: a literal pattern of `matches`,
/// `find` or `findAll` that does not compile is a compile error.
pub(super) fn validate_literals(e: &IdedExpr) -> Result<(), String> {
    if let Expr::Call(call) = &e.expr {
        if matches!(call.func_name.as_str(), "matches" | "find" | "findAll") {
            // The pattern follows the text: the first argument of a member
            // call, the second of `matches(text, pattern)`.
            let pattern = if call.target.is_some() {
                call.args.first()
            } else {
                call.args.get(1)
            };
            if let Some(IdedExpr {
                expr: Expr::Literal(LiteralValue::String(p)),
                ..
            }) = pattern
            {
                compile(p.inner())
                    .map_err(|e| format!("invalid regular expression {:?}: {e}", p.inner()))?;
            }
        }
        if let Some(t) = &call.target {
            validate_literals(t)?;
        }
        for a in &call.args {
            validate_literals(a)?;
        }
        return Ok(());
    }
    let mut result = Ok(());
    super::budget::visit_children(e, |c| {
        if result.is_ok() {
            result = validate_literals(c);
        }
    });
    result
}
