//! `kubernetes.Quantity` in CEL: the value type, parsed as
//! `resource.ParseQuantity` does, compared and added exactly, and the
//! Kubernetes quantity library (`quantity()`, `isQuantity()`, `sign()`,
//! `compareTo`, `isGreaterThan`, `isLessThan`, `isInteger`, `asInteger`,
//! `asApproximateFloat`, `add`, `sub`).
//!
//! Exactness: a parsed quantity is a whole number of nano-units (Go rounds
//! anything finer up, away from zero), so it is held as a count of nanos —
//! in an `i128` when it fits (every quantity below about 1.7·10²⁹, the fast
//! path: comparisons are one integer compare), else in a `BigInt`.
//! Kubernetes' `inf.Dec` has no upper bound, but aligning two decimals of
//! very different scale costs time and memory proportional to the gap (a
//! capacity of `1e999999999` would stall Go's scheduler as well); placer
//! refuses, with an error, quantities of more than [`MAX_DIGITS`] digits.

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, CelString, INT_TYPE, STRING_TYPE};
use cel::{Env, ExecutionError};
use num_bigint::BigInt;

use super::{arg, function_error, owned, static_val};

/// `kubernetes.Quantity`'s CEL type.
pub(super) static QUANTITY_TYPE: cel::common::types::Type =
    cel::common::types::Type::new_unspecified_type("kubernetes.Quantity");

/// The most decimal digits of a quantity in nano-units placer evaluates
/// (10¹⁰⁰⁰ nanos is about 10⁹⁹¹ units; nothing Kubernetes itself writes
/// comes close).
pub(super) const MAX_DIGITS: usize = 1000;

const NANO_DIGITS: i64 = 9;

/// An exact quantity, in nano-units. `Nano` whenever the value fits an
/// `i128` (so equal values have equal representations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Quantity {
    /// The common case.
    Nano(i128),
    /// Beyond ±1.7·10²⁹ units, bounded by [`MAX_DIGITS`].
    Big(BigInt),
}

impl Quantity {
    fn from_big(n: BigInt) -> Result<Quantity, String> {
        if let Ok(small) = i128::try_from(&n) {
            return Ok(Quantity::Nano(small));
        }
        if n.magnitude().bits() > (MAX_DIGITS as u64) * 10 / 3 {
            return Err(out_of_range());
        }
        Ok(Quantity::Big(n))
    }

    fn big(&self) -> BigInt {
        match self {
            Quantity::Nano(n) => BigInt::from(*n),
            Quantity::Big(b) => b.clone(),
        }
    }

    /// `Quantity.Sign()`.
    pub fn sign(&self) -> i64 {
        match self {
            Quantity::Nano(n) => n.signum() as i64,
            Quantity::Big(b) => match b.sign() {
                num_bigint::Sign::Minus => -1,
                num_bigint::Sign::NoSign => 0,
                num_bigint::Sign::Plus => 1,
            },
        }
    }

    /// `Quantity.AsInt64()`: the value when it is a whole number that fits
    /// an `int64`.
    pub fn as_int64(&self) -> Option<i64> {
        match self {
            Quantity::Nano(n) if n % NANO == 0 => i64::try_from(n / NANO).ok(),
            _ => None,
        }
    }

    /// `Quantity.AsApproximateFloat64()`: mantissa × 10^exponent in
    /// floating point, the trailing zeros moved into the exponent.
    pub fn as_approximate_float(&self) -> f64 {
        let (mut mantissa, mut exponent) = (self.big(), -NANO_DIGITS);
        if mantissa == BigInt::ZERO {
            return 0.0;
        }
        let ten = BigInt::from(10);
        while (&mantissa % &ten) == BigInt::ZERO {
            mantissa /= &ten;
            exponent += 1;
        }
        let base = mantissa.to_string().parse::<f64>().unwrap_or(f64::NAN);
        base * 10f64.powi(i32::try_from(exponent).unwrap_or(i32::MAX))
    }

    /// `Quantity.Add`.
    pub fn checked_add(&self, other: &Quantity) -> Result<Quantity, String> {
        if let (Quantity::Nano(a), Quantity::Nano(b)) = (self, other)
            && let Some(sum) = a.checked_add(*b)
        {
            return Ok(Quantity::Nano(sum));
        }
        Quantity::from_big(self.big() + other.big())
    }

    /// `Quantity.Sub`.
    pub fn checked_sub(&self, other: &Quantity) -> Result<Quantity, String> {
        if let (Quantity::Nano(a), Quantity::Nano(b)) = (self, other)
            && let Some(diff) = a.checked_sub(*b)
        {
            return Ok(Quantity::Nano(diff));
        }
        Quantity::from_big(self.big() - other.big())
    }

    /// A whole number of units (`resource.NewQuantity(i, ...)`).
    pub fn from_units(units: i64) -> Quantity {
        Quantity::Nano(i128::from(units) * NANO)
    }

    /// Parses `s` as `resource.ParseQuantity` does: an optional sign,
    /// digits with an optional fraction, and a suffix (`n` … `E`, `Ki` …
    /// `Ei`, or an exponent `e3` / `E-3`); rounded up (away from zero) to
    /// a nano-unit; binary-suffixed values capped at 2⁶³−1 units.
    pub fn parse(s: &str) -> Result<Quantity, String> {
        let parts = Parts::of(s).ok_or_else(|| {
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_owned()
        })?;
        let (base, exponent, binary) =
            suffix(parts.suffix).ok_or_else(|| "unable to parse quantity's suffix".to_owned())?;
        let digits = format!("{}{}", parts.int, parts.frac)
            .trim_start_matches('0')
            .to_owned();
        if digits.is_empty() {
            return Ok(Quantity::Nano(0));
        }
        if s.len() > 2 * MAX_DIGITS {
            return Err(out_of_range());
        }
        // value = digits × 10^(−frac) × base^exponent, in nanos: the
        // decimal scale moves by 9.
        let mut scale = NANO_DIGITS - parts.frac.len() as i64;
        let digits_len = digits.len() as i64;
        if base == 10 {
            scale += exponent;
            // Tiny values round up to one nano without building 10^huge.
            if scale + digits_len <= 0 {
                return Ok(Quantity::Nano(if parts.negative { -1 } else { 1 }));
            }
            if scale + digits_len > MAX_DIGITS as i64 {
                return Err(out_of_range());
            }
        }
        let mut magnitude: BigInt = digits
            .parse()
            .map_err(|_| "unable to parse quantity's digits".to_owned())?;
        if base == 2 {
            // At most 2^60: `suffix` only gives the SI binary exponents.
            magnitude <<= exponent as usize;
        }
        let ten = BigInt::from(10);
        magnitude = if scale >= 0 {
            magnitude * ten.pow(scale as u32)
        } else {
            ceil_div(&magnitude, &ten.pow((-scale) as u32))
        };
        let max = BigInt::from(i64::MAX) * NANO;
        if binary && magnitude > max {
            magnitude = max;
        }
        Quantity::from_big(if parts.negative {
            -magnitude
        } else {
            magnitude
        })
    }
}

const NANO: i128 = 1_000_000_000;

fn out_of_range() -> String {
    format!(
        "quantity out of range: placer evaluates quantities of at most {MAX_DIGITS} digits in nano-units"
    )
}

fn ceil_div(a: &BigInt, b: &BigInt) -> BigInt {
    let (q, r) = (a / b, a % b);
    if r == BigInt::ZERO { q } else { q + 1 }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Quantity::Nano(a), Quantity::Nano(b)) => a.cmp(b),
            _ => self.big().cmp(&other.big()),
        }
    }
}

/// The pieces of a quantity string, as Go's `parseQuantityString` splits it.
struct Parts<'s> {
    negative: bool,
    int: &'s str,
    frac: &'s str,
    suffix: &'s str,
}

impl<'s> Parts<'s> {
    fn of(s: &'s str) -> Option<Parts<'s>> {
        if s.is_empty() {
            return None;
        }
        let (negative, body) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let int_end = body
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(body.len());
        let (int, rest) = body.split_at(int_end);
        let (frac, rest) = match rest.strip_prefix('.') {
            Some(after) => {
                let end = after
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after.len());
                after.split_at(end)
            }
            None => ("", rest),
        };
        // Go accepts "." and "" as zero digits ("1.", ".5", even ".").
        let letters = rest
            .find(|c: char| !"eEinumkKMGTP".contains(c))
            .unwrap_or(rest.len());
        let after_letters = &rest[letters..];
        let signed = after_letters
            .strip_prefix(['-', '+'])
            .unwrap_or(after_letters);
        if !signed.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Parts {
            negative,
            int,
            frac,
            suffix: rest,
        })
    }
}

/// Go's `suffixHandler.interpret`: (base, exponent, binary).
fn suffix(s: &str) -> Option<(i64, i64, bool)> {
    let decimal = |e| Some((10, e, false));
    match s {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((2, 10, true)),
        "Mi" => Some((2, 20, true)),
        "Gi" => Some((2, 30, true)),
        "Ti" => Some((2, 40, true)),
        "Pi" => Some((2, 50, true)),
        "Ei" => Some((2, 60, true)),
        e if e.len() > 1 && e.starts_with(['e', 'E']) => {
            // Go parses an int64 and keeps its low 32 bits.
            let parsed: i64 = e[1..].parse().ok()?;
            decimal(i64::from(parsed as i32))
        }
        _ => None,
    }
}

static_val!(Quantity, QUANTITY_TYPE);

fn quantity_arg<'a>(
    args: &'a [cel::common::value::CowVal<'_, '_>],
    i: usize,
    f: &str,
) -> Result<&'a Quantity, ExecutionError> {
    arg::<Quantity>(args, i, f)
}

fn result(f: &str, r: Result<Quantity, String>) -> Result<Quantity, ExecutionError> {
    r.map_err(|e| function_error(f, e))
}

/// Registers the Kubernetes quantity library.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let q = || QUANTITY_TYPE.to_owned();
    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], |a| {
        let s = arg::<CelString>(&a, 0, "quantity")?;
        owned(result("quantity", Quantity::parse(s.inner()))?)
    })?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], |a| {
        let s = arg::<CelString>(&a, 0, "isQuantity")?;
        owned(CelBool::from(Quantity::parse(s.inner()).is_ok()))
    })?;
    env.add_overload("sign", "quantity_sign", vec![q()], |a| {
        owned(CelInt::from(quantity_arg(&a, 0, "sign")?.sign()))
    })?;
    env.add_member_overload("compareTo", "quantity_compare_to", q(), vec![q()], |a| {
        let ord = quantity_arg(&a, 0, "compareTo")?.cmp(quantity_arg(&a, 1, "compareTo")?);
        owned(CelInt::from(ord as i64))
    })?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        q(),
        vec![q()],
        |a| {
            owned(CelBool::from(
                quantity_arg(&a, 0, "isGreaterThan")? > quantity_arg(&a, 1, "isGreaterThan")?,
            ))
        },
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", q(), vec![q()], |a| {
        owned(CelBool::from(
            quantity_arg(&a, 0, "isLessThan")? < quantity_arg(&a, 1, "isLessThan")?,
        ))
    })?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], |a| {
        owned(CelBool::from(
            quantity_arg(&a, 0, "isInteger")?.as_int64().is_some(),
        ))
    })?;
    env.add_member_overload("asInteger", "quantity_get_int", q(), vec![], |a| {
        let v = quantity_arg(&a, 0, "asInteger")?
            .as_int64()
            .ok_or_else(|| function_error("asInteger", "cannot convert value to integer"))?;
        owned(CelInt::from(v))
    })?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_get_float",
        q(),
        vec![],
        |a| {
            owned(CelDouble::from(
                quantity_arg(&a, 0, "asApproximateFloat")?.as_approximate_float(),
            ))
        },
    )?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], |a| {
        let (x, y) = (quantity_arg(&a, 0, "add")?, quantity_arg(&a, 1, "add")?);
        owned(result("add", x.checked_add(y))?)
    })?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![INT_TYPE], |a| {
        let x = quantity_arg(&a, 0, "add")?;
        let y = Quantity::from_units(*arg::<CelInt>(&a, 1, "add")?.inner());
        owned(result("add", x.checked_add(&y))?)
    })?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], |a| {
        let (x, y) = (quantity_arg(&a, 0, "sub")?, quantity_arg(&a, 1, "sub")?);
        owned(result("sub", x.checked_sub(y))?)
    })?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], |a| {
        let x = quantity_arg(&a, 0, "sub")?;
        let y = Quantity::from_units(*arg::<CelInt>(&a, 1, "sub")?.inner());
        owned(result("sub", x.checked_sub(&y))?)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    fn nano(s: &str) -> i128 {
        match Quantity::parse(s) {
            Ok(Quantity::Nano(n)) => n,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn parses_every_suffix_exactly() {
        assert_eq!(nano("1n"), 1);
        assert_eq!(nano("1u"), 1_000);
        assert_eq!(nano("0.5m"), 500_000);
        assert_eq!(nano("1"), 1_000_000_000);
        assert_eq!(nano("1.5k"), 1_500_000_000_000);
        assert_eq!(nano("1Ki"), 1024 * 1_000_000_000);
        assert_eq!(nano("1e18"), 10i128.pow(27));
        assert_eq!(nano("1E"), 10i128.pow(27));
        assert_eq!(nano("1e-3"), 1_000_000);
        assert_eq!(nano("-2Mi"), -(2 << 20) * 1_000_000_000);
        assert_eq!(nano("+.5"), 500_000_000);
        assert_eq!(nano("1."), 1_000_000_000);
        assert_eq!(nano("0"), 0);
        assert_eq!(nano("000"), 0);
    }

    #[test]
    fn rounds_up_below_a_nano_away_from_zero() {
        assert_eq!(nano("0.5n"), 1);
        assert_eq!(nano("1.1n"), 2);
        assert_eq!(nano("-0.1n"), -1);
        assert_eq!(nano("1e-999999"), 1);
        assert_eq!(nano("0.0000000000000000000000000000000001"), 1);
    }

    #[test]
    fn binary_values_are_capped_at_int64() {
        assert_eq!(nano("8Ei"), i128::from(i64::MAX) * 1_000_000_000);
        assert_eq!(nano("-16Ei"), -i128::from(i64::MAX) * 1_000_000_000);
    }

    #[test]
    fn big_values_compare_exactly() {
        let big = Quantity::parse("1e30").expect("valid");
        assert!(matches!(big, Quantity::Big(_)));
        let bigger = Quantity::parse("1000000000000000000000000000001").expect("valid");
        assert!(bigger > big);
        assert!(Quantity::parse("-1e30").expect("valid") < Quantity::parse("1n").expect("valid"));
        assert_eq!(
            big.checked_sub(&Quantity::parse("1e30").expect("valid")),
            Ok(Quantity::Nano(0))
        );
        assert!(Quantity::parse("1e2000").is_err());
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in [
            "", "abc", "1.2.3", "1Ki3", "1e", "1 ", " 1", "--1", "1Zi", "1e1.5", "1mm",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn integer_views() {
        assert_eq!(Quantity::parse("5k").expect("valid").as_int64(), Some(5000));
        assert_eq!(Quantity::parse("0.5").expect("valid").as_int64(), None);
        assert_eq!(Quantity::parse("1e19").expect("valid").as_int64(), None);
        assert_eq!(
            Quantity::parse("1.5")
                .expect("valid")
                .as_approximate_float(),
            1.5
        );
    }
}
