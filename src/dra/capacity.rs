//! Consumable capacity (DRAConsumableCapacity, beta and on by default in
//! v1.37, with DRAFractionalCapacityRange): a device may publish
//! `capacity` values with a request policy (a default, a valid range with a
//! step, or a list of valid values), a request may ask for an amount of
//! them (`capacity.requests`), and a device with `allowMultipleAllocations`
//! is shared by as many allocations as its capacity holds, each recording
//! what it consumes (`consumedCapacity`) under its own `shareID`.
//!
//! What a request consumes of one capacity: its request rounded up to the
//! policy (to the range's minimum or next step, or the next valid value),
//! or, when it asks for none, the policy's default or else the whole
//! value. A device fits when it has every capacity the request names, no
//! consumption breaks the policy, and what its shares hold already plus
//! what this search took of it plus this consumption stays within each
//! value (Go's `CmpRequestOverCapacity`).
//!
//! Amounts are exact: nano-units in an `i128`, with the format the quantity
//! was written in, so that a computed amount is written back as Go's
//! `Quantity.String()` writes it.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, Device, DeviceCapacity,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::objects::resources::parse_scaled;

const NANO: i128 = 1_000_000_000;
const NANO_PER_MILLI: i128 = 1_000_000;

/// How a quantity is written (`resource.Format`): the suffix family of the
/// string it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// `1e3`
    DecimalExponent,
    /// `1Ki`, `1Mi`, ...
    BinarySI,
    /// `1k`, `500m`, plain numbers.
    DecimalSI,
}

/// An exact quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Amount {
    /// The value in nano-units.
    pub nano: i128,
    pub format: Format,
}

impl Amount {
    /// Parses a quantity string.
    pub fn parse(s: &str) -> Result<Amount, String> {
        let nano = parse_scaled(s, NANO).map_err(|e| e.to_string())?;
        let suffix = s
            .trim()
            .trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-'));
        // As Go's suffix lookup: the SI tables first (so "E" is exa), then
        // an exponent.
        let format = if suffix.ends_with('i') {
            Format::BinarySI
        } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSI
        };
        Ok(Amount { nano, format })
    }

    fn of(q: &Quantity) -> Result<Amount, String> {
        Amount::parse(&q.0)
    }

    fn with_nano(self, nano: i128) -> Amount {
        Amount { nano, ..self }
    }

    /// `Quantity.Value()`: rounded up to a whole unit.
    fn value(self) -> i128 {
        div_ceil(self.nano, NANO)
    }

    /// `Quantity.MilliValue()`: rounded up to a milli-unit.
    fn milli(self) -> i128 {
        div_ceil(self.nano, NANO_PER_MILLI)
    }

    /// Go's `safeMilliValue`: the milli value when it is exact and fits an
    /// `int64`.
    fn safe_milli(self) -> Option<i128> {
        (self.nano % NANO_PER_MILLI == 0 && i64::try_from(self.milli()).is_ok())
            .then(|| self.milli())
    }

    /// The string Go's `Quantity.String()` gives for this value and format.
    pub fn canonical(self) -> String {
        if self.nano == 0 {
            return "0".to_owned();
        }
        let whole = self.nano % NANO == 0;
        if self.format == Format::BinarySI && self.nano.abs() >= 1024 * NANO && whole {
            let (mut number, mut exponent) = (self.nano / NANO, 0);
            while number % 1024 == 0 && exponent < 6 {
                number /= 1024;
                exponent += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exponent];
            return format!("{number}{suffix}");
        }
        // Decimal: strip factors of ten, then lower the exponent to a
        // multiple of three.
        let (mut number, mut exponent) = (self.nano, -9i32);
        while number % 10 == 0 {
            number /= 10;
            exponent += 1;
        }
        let down = exponent.rem_euclid(3);
        number *= 10i128.pow(down as u32);
        exponent -= down;
        let suffix = match self.format {
            Format::DecimalExponent if exponent == 0 => String::new(),
            Format::DecimalExponent => format!("e{exponent}"),
            _ => match exponent {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                _ => "",
            }
            .to_owned(),
        };
        format!("{number}{suffix}")
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 { q } else { q + 1 }
}

/// What one request asks of device capacities, parsed once per pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct CapacityRequests(BTreeMap<String, Amount>);

impl CapacityRequests {
    /// The request's `capacity.requests`; a quantity that does not parse is
    /// an error naming it.
    pub fn parse(requests: Option<&BTreeMap<String, Quantity>>) -> Result<Self, String> {
        let mut parsed = BTreeMap::new();
        for (name, q) in requests.into_iter().flatten() {
            let amount = Amount::of(q).map_err(|e| format!("capacity {name:?}: {e}"))?;
            parsed.insert(name.clone(), amount);
        }
        Ok(CapacityRequests(parsed))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Capacity name → nano-units: what a device's shares consume.
pub(super) type Consumed = BTreeMap<String, i128>;

/// Adds `amounts` to `into`.
pub(super) fn add_to(into: &mut Consumed, amounts: &[(String, Amount)]) {
    for (name, amount) in amounts {
        *into.entry(name.clone()).or_default() += amount.nano;
    }
}

/// Takes `amounts` back out of `from`, dropping what reaches zero.
pub(super) fn subtract_from(from: &mut Consumed, amounts: &[(String, Amount)]) {
    for (name, amount) in amounts {
        if let Some(v) = from.get_mut(name) {
            *v -= amount.nano;
            if *v == 0 {
                from.remove(name);
            }
        }
    }
}

/// Whether `requests` fit what is left of `device`'s capacity ([`fits`]),
/// skipping, without parsing anything, the devices [`needs_check`] rules out.
pub(super) fn device_fits(
    requests: &CapacityRequests,
    device: &Device,
    held: Option<&Consumed>,
    taking: Option<&Consumed>,
) -> Result<bool, String> {
    let shared = device.allow_multiple_allocations == Some(true);
    if !needs_check(requests, device.capacity.as_ref(), shared) {
        return Ok(true);
    }
    fits(requests, device.capacity.as_ref(), held, taking)
}

/// Whether a device needs the capacity check at all: it does when it is
/// shared, when the request asks for capacity, or when some capacity has a
/// policy or a negative value (which a filled request would break). For
/// every other device the check passes by construction (each capacity is
/// consumed whole, once), so it is skipped without parsing anything.
fn needs_check(
    requests: &CapacityRequests,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    shared: bool,
) -> bool {
    let Some(capacity) = capacity else {
        return !requests.is_empty();
    };
    shared
        || !requests.is_empty()
        || capacity
            .values()
            .any(|c| c.request_policy.is_some() || c.value.0.trim_start().starts_with('-'))
}

/// Whether `requests` fit a device with `capacity`, on top of `held` (what
/// its allocated shares consume) and `taking` (what this search's shares
/// of it consume). `Err`: a request the device's arithmetic cannot
/// represent, or a negative amount; Go aborts the allocation for those.
pub(super) fn fits(
    requests: &CapacityRequests,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    held: Option<&Consumed>,
    taking: Option<&Consumed>,
) -> Result<bool, String> {
    let empty = BTreeMap::new();
    let capacity = capacity.unwrap_or(&empty);
    if requests.0.keys().any(|name| !capacity.contains_key(name)) {
        // Another device may have the capacity: not an error.
        return Ok(false);
    }
    // Every amount first, so that an error never depends on which
    // capacity breaks a policy first.
    let resolved = consumption(requests, Some(capacity))?;
    for ((name, cap), (_, consumed)) in capacity.iter().zip(&resolved) {
        if violates_policy(*consumed, cap.request_policy.as_ref())? {
            return Ok(false);
        }
        let already = |c: Option<&Consumed>| c.and_then(|c| c.get(name)).copied().unwrap_or(0);
        let total = consumed.nano + already(held) + already(taking);
        if total > Amount::of(&cap.value)?.nano {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What `requests` consume of each of a device's capacities (Go's
/// `GetConsumedCapacityFromRequest`), in capacity name order.
pub(super) fn consumption(
    requests: &CapacityRequests,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
) -> Result<Vec<(String, Amount)>, String> {
    let mut out = Vec::with_capacity(capacity.map_or(0, BTreeMap::len));
    for (name, cap) in capacity.into_iter().flatten() {
        let consumed = consumed_of(requests.0.get(name).copied(), cap)
            .map_err(|e| format!("capacity {name:?}: {e}"))?;
        if consumed.nano < 0 {
            return Err(format!("capacity {name:?}: capacity value is negative"));
        }
        out.push((name.clone(), consumed));
    }
    Ok(out)
}

/// Go's `calculateConsumedCapacity`.
fn consumed_of(requested: Option<Amount>, cap: &DeviceCapacity) -> Result<Amount, String> {
    let policy = cap.request_policy.as_ref();
    let Some(requested) = requested else {
        return Amount::of(
            policy
                .and_then(|p| p.default.as_ref())
                .unwrap_or(&cap.value),
        );
    };
    let Some(policy) = policy else {
        return Ok(requested);
    };
    if let Some(range) = &policy.valid_range {
        return round_up_range(requested, range);
    }
    if let Some(values) = &policy.valid_values {
        for v in values {
            let v = Amount::of(v)?;
            if requested.nano <= v.nano {
                return Ok(v);
            }
        }
    }
    Ok(requested)
}

/// A range's bounds and step, parsed.
struct Range {
    min: Amount,
    max: Option<Amount>,
    step: Option<Amount>,
}

impl Range {
    fn of(range: &CapacityRequestPolicyRange) -> Result<Range, String> {
        Ok(Range {
            min: Amount::of(&range.min)?,
            max: range.max.as_ref().map(Amount::of).transpose()?,
            step: range.step.as_ref().map(Amount::of).transpose()?,
        })
    }

    /// Go's `useMilli` (fractional ranges on): milli arithmetic when every
    /// bound is an exact milli value and the step at least 1m.
    fn use_milli(&self) -> bool {
        [Some(self.min), self.max, self.step]
            .into_iter()
            .flatten()
            .all(|q| q.safe_milli().is_some())
            && self.step.is_none_or(|s| s.milli() >= 1)
    }
}

const NOT_REPRESENTABLE: &str =
    "capacity request cannot be represented in the device's range arithmetic";

/// Go's `roundUpRange`: the minimum, or the request rounded up to the next
/// step from the minimum, in milli-units or whole units.
fn round_up_range(requested: Amount, range: &CapacityRequestPolicyRange) -> Result<Amount, String> {
    let range = Range::of(range)?;
    if requested.nano < range.min.nano {
        return Ok(range.min);
    }
    let Some(step) = range.step else {
        return Ok(requested);
    };
    let milli = range.use_milli();
    let (unit, requested_units, step_units, min_units) = if milli {
        let Some(requested_milli) = requested.safe_milli() else {
            return Err(format!(
                "{NOT_REPRESENTABLE}: request {} is not a representable milli value",
                requested.canonical()
            ));
        };
        (
            NANO_PER_MILLI,
            requested_milli,
            step.milli(),
            range.min.milli(),
        )
    } else {
        if requested.value() > i128::from(i64::MAX) {
            return Err(format!(
                "{NOT_REPRESENTABLE}: request {} exceeds MaxInt64",
                requested.canonical()
            ));
        }
        (NANO, requested.value(), step.value(), range.min.value())
    };
    if step_units <= 0 {
        return Err(format!(
            "{NOT_REPRESENTABLE}: step {} is not positive",
            step.canonical()
        ));
    }
    let steps = div_ceil(requested_units - min_units, step_units);
    let rounded = min_units + step_units * steps;
    if min_units >= 0 && rounded > i128::from(i64::MAX) {
        let bound = if milli {
            "the milli-value range"
        } else {
            "MaxInt64"
        };
        return Err(format!(
            "{NOT_REPRESENTABLE}: rounding request {} up to the next step passes {bound}",
            requested.canonical()
        ));
    }
    Ok(step.with_nano(rounded * unit))
}

/// Go's `violatesPolicy`: the policy's default always passes; otherwise a
/// value above the range's maximum or off its steps, or not among the
/// valid values.
fn violates_policy(value: Amount, policy: Option<&CapacityRequestPolicy>) -> Result<bool, String> {
    let Some(policy) = policy else {
        return Ok(false);
    };
    if let Some(default) = &policy.default
        && Amount::of(default)?.nano == value.nano
    {
        return Ok(false);
    }
    if let Some(range) = &policy.valid_range {
        let range = Range::of(range)?;
        if range.max.is_some_and(|max| value.nano > max.nano) {
            return Ok(true);
        }
        let Some(step) = range.step else {
            return Ok(false);
        };
        let (value_units, step_units, min_units) = if range.use_milli() {
            let Some(value_milli) = value.safe_milli() else {
                return Ok(true);
            };
            (value_milli, step.milli(), range.min.milli())
        } else {
            (value.value(), step.value(), range.min.value())
        };
        return Ok(step_units == 0 || (value_units - min_units) % step_units != 0);
    }
    if let Some(values) = policy.valid_values.as_ref().filter(|v| !v.is_empty()) {
        for v in values {
            if Amount::of(v)?.nano == value.nano {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    Ok(false)
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
