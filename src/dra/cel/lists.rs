//! List and set functions of the Kubernetes environment that cel-rust's
//! extensions do not have: the Kubernetes lists library at version 1
//! (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`,
//! `includes`), cel-go's sets (`sets.contains`, `sets.equivalent`,
//! `sets.intersects`), the bounded `replace` and `lists.range` the cost
//! bound swaps in (see `budget.rs`), and the helpers of the two-variable
//! comprehensions (see `macros.rs`).

use std::cmp::Ordering;
use std::collections::HashMap;

use cel::common::types::{
    CelDouble, CelInt, CelList, CelMap, CelMapKey, CelString, CelUInt, DYN_TYPE, INT_TYPE,
    LIST_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError};

use super::budget::{MAX_LIST_LENGTH, MAX_STRING_BYTES};
use super::{arg, function_error, owned};

/// The elements of the list `v`.
fn elements<'b, 'v>(
    v: &'b (dyn Val + 'v),
    function: &str,
) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let iterable = v.as_iterable().ok_or_else(|| {
        function_error(function, format!("{} is not a list", v.get_type().name()))
    })?;
    let mut items = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        out.push(item);
    }
    Ok(out)
}

fn compare(a: &dyn Val, b: &dyn Val, function: &str) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| {
            function_error(
                function,
                format!("{} is not comparable", a.get_type().name()),
            )
        })?
        .compare(b)
}

fn list_arg<'a, 'b, 'v>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
    function: &str,
) -> Result<Vec<&'a (dyn Val + 'v)>, ExecutionError> {
    let v = args
        .get(i)
        .ok_or_else(|| function_error(function, "missing argument"))?;
    elements(v.as_ref(), function)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, 0, function)?;
    let mut best = *items.first().ok_or_else(|| {
        function_error(function, format!("{function}(list) called on empty list"))
    })?;
    for item in items.iter().skip(1) {
        if compare(*item, best, function)? == keep {
            best = *item;
        }
    }
    Ok(CowVal::from(best.clone_as_boxed()))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, 0, "sum")?;
    let Some(first) = items.first() else {
        return owned(CelInt::from(0));
    };
    let overflow = || function_error("sum", "integer overflow");
    if first.downcast_ref::<CelInt>().is_some() {
        let mut total: i64 = 0;
        for item in &items {
            let v = *item
                .downcast_ref::<CelInt>()
                .ok_or_else(|| function_error("sum", "mixed element types"))?
                .inner();
            total = total.checked_add(v).ok_or_else(overflow)?;
        }
        return owned(CelInt::from(total));
    }
    if first.downcast_ref::<CelUInt>().is_some() {
        let mut total: u64 = 0;
        for item in &items {
            let v = *item
                .downcast_ref::<CelUInt>()
                .ok_or_else(|| function_error("sum", "mixed element types"))?
                .inner();
            total = total.checked_add(v).ok_or_else(overflow)?;
        }
        return owned(CelUInt::from(total));
    }
    if first.downcast_ref::<CelDouble>().is_some() {
        let mut total = 0.0;
        for item in &items {
            total += *item
                .downcast_ref::<CelDouble>()
                .ok_or_else(|| function_error("sum", "mixed element types"))?
                .inner();
        }
        return owned(CelDouble::from(total));
    }
    Err(function_error(
        "sum",
        format!("cannot sum {}", first.get_type().name()),
    ))
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, 0, function)?;
    let wanted = args
        .get(1)
        .ok_or_else(|| function_error(function, "missing argument"))?
        .as_ref();
    let found = if last {
        items.iter().rposition(|i| i.equals(wanted))
    } else {
        items.iter().position(|i| i.equals(wanted))
    };
    owned(CelInt::from(found.map_or(-1, |i| i as i64)))
}

/// The elements of a list argument.
type Items<'a, 'v> = Vec<&'a (dyn Val + 'v)>;

fn set_pair<'a, 'b, 'v>(
    args: &'a [CowVal<'b, 'v>],
    function: &str,
) -> Result<[Items<'a, 'v>; 2], ExecutionError> {
    Ok([list_arg(args, 0, function)?, list_arg(args, 1, function)?])
}

fn contains_all(of: &[&dyn Val], items: &[&dyn Val]) -> bool {
    items.iter().all(|i| of.iter().any(|o| o.equals(*i)))
}

/// Output of `s.replace(from, to[, n])`, checked against
/// [`MAX_STRING_BYTES`] before it is built.
fn replace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = arg::<CelString>(&args, 0, "replace")?.inner();
    let from = arg::<CelString>(&args, 1, "replace")?.inner();
    let to = arg::<CelString>(&args, 2, "replace")?.inner();
    let limit = match args.get(3) {
        Some(_) => usize::try_from(*arg::<CelInt>(&args, 3, "replace")?.inner()).ok(),
        None => None,
    };
    let occurrences = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    };
    let replaced = limit.map_or(occurrences, |n| n.min(occurrences));
    let size = s.len() - replaced * from.len() + replaced.saturating_mul(to.len());
    if size > MAX_STRING_BYTES {
        return Err(function_error(
            "replace",
            format!(
                "result of {size} bytes is over the limit of {MAX_STRING_BYTES} placer evaluates"
            ),
        ));
    }
    owned(CelString::from(match limit {
        Some(n) => s.replacen(from, to, n),
        None => s.replace(from, to),
    }))
}

fn boxed_list<'v>(items: Vec<Box<dyn Val + 'v>>) -> CelList<'v> {
    items.into()
}

/// Registers the functions (see the module doc).
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], |a| {
        let items = list_arg(&a, 0, "isSorted")?;
        for pair in items.windows(2) {
            if compare(pair[0], pair[1], "isSorted")? == Ordering::Greater {
                return owned(cel::common::types::CelBool::from(false));
            }
        }
        owned(cel::common::types::CelBool::from(true))
    })?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], |a| {
        extreme(a, "min", Ordering::Less)
    })?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], |a| {
        extreme(a, "max", Ordering::Greater)
    })?;
    env.add_member_overload(
        "indexOf",
        "list_a_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        |a| position(a, "indexOf", false),
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        |a| position(a, "lastIndexOf", true),
    )?;
    env.add_member_overload(
        "includes",
        "list_includes_dyn_dyn",
        DYN_TYPE,
        vec![DYN_TYPE],
        |a| {
            let (target, wanted) = match a.as_slice() {
                [t, w] => (t.as_ref(), w.as_ref()),
                _ => return Err(function_error("includes", "takes one argument")),
            };
            let found = match target
                .as_iterable()
                .filter(|_| target.downcast_ref::<CelList>().is_some())
            {
                Some(_) => elements(target, "includes")?
                    .iter()
                    .any(|i| i.equals(wanted)),
                None => target.equals(wanted),
            };
            owned(cel::common::types::CelBool::from(found))
        },
    )?;
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![LIST_TYPE, LIST_TYPE],
        |a| {
            let [list, sub] = set_pair(&a, "sets.contains")?;
            owned(cel::common::types::CelBool::from(contains_all(&list, &sub)))
        },
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        |a| {
            let [x, y] = set_pair(&a, "sets.equivalent")?;
            owned(cel::common::types::CelBool::from(
                contains_all(&x, &y) && contains_all(&y, &x),
            ))
        },
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        |a| {
            let [x, y] = set_pair(&a, "sets.intersects")?;
            owned(cel::common::types::CelBool::from(
                x.iter().any(|i| y.iter().any(|j| i.equals(*j))),
            ))
        },
    )?;
    env.add_member_overload(
        "@replace",
        "string_replace_bounded",
        STRING_TYPE,
        vec![STRING_TYPE, STRING_TYPE],
        replace,
    )?;
    env.add_member_overload(
        "@replace",
        "string_replace_n_bounded",
        STRING_TYPE,
        vec![STRING_TYPE, STRING_TYPE, INT_TYPE],
        replace,
    )?;
    env.add_overload("@lists_range", "lists_range_bounded", vec![INT_TYPE], |a| {
        let n = *arg::<CelInt>(&a, 0, "lists.range")?.inner();
        let n = usize::try_from(n)
            .map_err(|_| function_error("lists.range", "the size must not be negative"))?;
        if n > MAX_LIST_LENGTH {
            return Err(function_error(
                "lists.range",
                format!("{n} elements are over the limit of {MAX_LIST_LENGTH} placer evaluates"),
            ));
        }
        owned(boxed_list(
            (0..n as i64)
                .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val>)
                .collect(),
        ))
    })?;
    env.add_overload("@indices", "indices", vec![DYN_TYPE], |a| {
        let target = a
            .first()
            .ok_or_else(|| function_error("@indices", "missing argument"))?;
        if let Some(map) = target.downcast_ref::<CelMap>() {
            let keys: Vec<Box<dyn Val>> = map
                .inner()
                .keys()
                .map(|k| k.inner().clone_as_boxed())
                .collect();
            return owned(boxed_list(keys));
        }
        let n = elements(target.as_ref(), "comprehension")?.len();
        owned(boxed_list(
            (0..n as i64)
                .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val>)
                .collect(),
        ))
    })?;
    env.add_overload("@pairs_to_map", "pairs_to_map", vec![LIST_TYPE], |a| {
        let mut map: HashMap<CelMapKey, Box<dyn Val>> = HashMap::new();
        for pair in list_arg(&a, 0, "transformMap")? {
            let kv = elements(pair, "transformMap")?;
            let [k, v] = kv.as_slice() else {
                return Err(function_error("transformMap", "internal: not a pair"));
            };
            let key = CelMapKey::try_from(CowVal::from(k.clone_as_boxed()))?;
            map.insert(key.into_static(), v.clone_as_boxed());
        }
        owned(CelMap::from(map))
    })?;
    env.add_overload("@merge_maps", "merge_maps", vec![LIST_TYPE], |a| {
        let mut merged: HashMap<CelMapKey, Box<dyn Val>> = HashMap::new();
        for entry in list_arg(&a, 0, "transformMapEntry")? {
            let map = entry.downcast_ref::<CelMap>().ok_or_else(|| {
                function_error("transformMapEntry", "the expression must give a map")
            })?;
            for (k, v) in map.inner() {
                let key = k.clone().into_static();
                if merged.contains_key(&key) {
                    return Err(function_error(
                        "transformMapEntry",
                        format!("insert failed: key {:?} already exists", k.inner()),
                    ));
                }
                merged.insert(key, v.clone_as_boxed());
            }
        }
        owned(CelMap::from(merged))
    })?;
    Ok(())
}
