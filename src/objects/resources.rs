//! Resource quantities as kube-scheduler reads them (`resource.Quantity`),
//! and the resource lists a pod's effective request is computed from
//! ([`crate::objects::pod`] does that computation).

use std::collections::BTreeMap;

/// CPU in millicores, memory and ephemeral storage in bytes, the pod count,
/// and extended (scalar) resources by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Number of pods (allocatable `pods`; for a pod's request always 0).
    pub pods: i64,
    /// Extended resources (`example.com/gpu`, `hugepages-2Mi`, ...).
    pub scalar: BTreeMap<String, i64>,
}

/// A quantity string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuantityError(pub String);

/// Parses a Kubernetes quantity and returns it multiplied by `scale`
/// (1000 for millicores, 1 for bytes), rounded up like `Quantity.Value()`.
pub fn parse_quantity(s: &str, scale: i128) -> Result<i64, QuantityError> {
    let value = parse_scaled(s, scale)?;
    i64::try_from(value).map_err(|_| QuantityError(format!("invalid quantity {s:?}")))
}

/// [`parse_quantity`] without the `i64` limit: the quantity times `scale`,
/// rounded up, as an `i128` (at `scale` 10⁹, nano-units: exact for every
/// quantity Kubernetes writes, up to about 10²⁹).
pub fn parse_scaled(s: &str, scale: i128) -> Result<i128, QuantityError> {
    let err = || QuantityError(format!("invalid quantity {s:?}"));
    let s = s.trim();
    let (sign, body) = match s.strip_prefix('-') {
        Some(rest) => (-1i128, rest),
        None => (1i128, s.strip_prefix('+').unwrap_or(s)),
    };
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(split);
    if number.is_empty() || number == "." {
        return Err(err());
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if frac_part.contains('.') || int_part.len() + frac_part.len() > 30 {
        return Err(err());
    }
    let digits: i128 = format!("{int_part}{frac_part}")
        .parse()
        .map_err(|_| err())?;
    // value = digits × 10^-frac × multiplier, expressed as num/den.
    let mut num = digits.checked_mul(scale).ok_or_else(err)?;
    let mut den: i128 = 10i128.pow(frac_part.len() as u32);
    // Decimal fractions divide: 10^-divide more in the denominator.
    let mut divide = |by: u32| -> Result<(), QuantityError> {
        den = 10i128
            .checked_pow(by)
            .and_then(|d| den.checked_mul(d))
            .ok_or_else(err)?;
        Ok(())
    };
    let (base, exp): (i128, u32) = match suffix {
        "" => (10, 0),
        "n" => {
            divide(9)?;
            (10, 0)
        }
        "u" => {
            divide(6)?;
            (10, 0)
        }
        "m" => {
            divide(3)?;
            (10, 0)
        }
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        e if e.starts_with(['e', 'E']) => {
            let x: i32 = e[1..].parse().map_err(|_| err())?;
            if x >= 0 {
                (10, x as u32)
            } else {
                divide(x.unsigned_abs())?;
                (10, 0)
            }
        }
        _ => return Err(err()),
    };
    num = num
        .checked_mul(base.checked_pow(exp).ok_or_else(err)?)
        .ok_or_else(err)?;
    let value = num.checked_add(den - 1).ok_or_else(err)?.div_euclid(den);
    Ok(sign * value)
}

/// Parses the quantity of resource `name` in the unit placer counts it in:
/// millicores for `cpu`, plain units (bytes, pods, devices) otherwise.
pub fn parse_resource(name: &str, quantity: &str) -> Result<i64, QuantityError> {
    parse_quantity(quantity, if name == "cpu" { 1000 } else { 1 })
}

/// Parses every quantity of a `ResourceList`-like map and hands it to `set`;
/// an unparsable quantity is an error naming its resource.
fn parse_each<'a>(
    list: impl IntoIterator<Item = (&'a str, &'a str)>,
    mut set: impl FnMut(&str, i64),
) -> Result<(), QuantityError> {
    for (name, q) in list {
        let value = parse_resource(name, q).map_err(|e| QuantityError(format!("{name}: {e}")))?;
        set(name, value);
    }
    Ok(())
}

impl Resources {
    /// Reads a `ResourceList`-like map; unparsable quantities are errors naming the resource.
    pub fn from_list<'a>(
        list: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, QuantityError> {
        let mut r = Resources::default();
        parse_each(list, |name, value| r.set(name, value))?;
        Ok(r)
    }

    /// Sets resource `name` to `value` (in [`parse_resource`]'s unit).
    fn set(&mut self, name: &str, value: i64) {
        match name {
            "cpu" => self.milli_cpu = value,
            "memory" => self.memory = value,
            "ephemeral-storage" => self.ephemeral_storage = value,
            "pods" => self.pods = value,
            other => {
                self.scalar.insert(other.to_string(), value);
            }
        }
    }

    /// Adds `other` to `self`, resource by resource.
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    /// Subtracts `other` from `self`, resource by resource.
    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.pods -= other.pods;
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e -= v;
            if *e == 0 {
                self.scalar.remove(k);
            }
        }
    }

    /// Raises each resource of `self` to at least `other`'s (keys of
    /// `other` that `self` lacks are added).
    pub fn max_with(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }
}

/// A `ResourceList` as kube-scheduler's resource helpers see it: the values,
/// and whether `cpu` and `memory` were given at all. A request that names
/// `cpu: 0` is not a missing one: the scoring defaults replace only what is
/// absent (`applyNonMissing`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestList {
    /// The quantities (absent ones are 0).
    pub values: Resources,
    /// `cpu` is a key of the list.
    pub has_cpu: bool,
    /// `memory` is a key of the list.
    pub has_memory: bool,
    /// `ephemeral-storage` is a key of the list (a key's position among a
    /// container's sorted request names names DRA's device requests).
    pub has_ephemeral_storage: bool,
}

impl RequestList {
    /// Reads a `ResourceList`-like map (see [`Resources::from_list`]).
    pub fn from_list<'a>(
        list: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, QuantityError> {
        let mut r = RequestList::default();
        parse_each(list, |name, value| r.set(name, value))?;
        Ok(r)
    }

    fn set(&mut self, name: &str, value: i64) {
        self.has_cpu |= name == "cpu";
        self.has_memory |= name == "memory";
        self.has_ephemeral_storage |= name == "ephemeral-storage";
        self.values.set(name, value);
    }

    /// `addResourceList`: adds `other`, keys included.
    pub fn add(&mut self, other: &RequestList) {
        self.values.add(&other.values);
        self.has_cpu |= other.has_cpu;
        self.has_memory |= other.has_memory;
        self.has_ephemeral_storage |= other.has_ephemeral_storage;
    }

    /// `maxResourceList`: raises each resource to at least `other`'s.
    pub fn max_with(&mut self, other: &RequestList) {
        self.values.max_with(&other.values);
        self.has_cpu |= other.has_cpu;
        self.has_memory |= other.has_memory;
        self.has_ephemeral_storage |= other.has_ephemeral_storage;
    }
}

impl<'de> serde::Deserialize<'de> for RequestList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ListVisitor { lenient: false })
    }
}

/// Decodes a `ResourceList` (`{"cpu": "250m", ...}`) straight into
/// [`Resources`]. A bad quantity fails while its own value is decoded, so the
/// decoder reports that value's position and field path.
impl<'de> serde::Deserialize<'de> for Resources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RequestList::deserialize(d).map(|l| l.values)
    }
}

/// A `ResourceList` of an object the API server accepted, decoded as the
/// watches take it: a quantity that does not parse makes the whole list count
/// as zero, as [`Resources::from_list`]'s callers treat the API objects,
/// instead of failing the object (and with it the watch).
pub struct LenientResources(pub Resources);

impl<'de> serde::Deserialize<'de> for LenientResources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ListVisitor { lenient: true })
            .map(|l| LenientResources(l.values))
    }
}

struct ListVisitor {
    /// An unparsable quantity empties the list instead of failing it.
    lenient: bool,
}

impl<'de> serde::de::Visitor<'de> for ListVisitor {
    type Value = RequestList;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map of resource names to quantities")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RequestList, A::Error> {
        let mut r = RequestList::default();
        let mut unparsable = false;
        while let Some(name) = map.next_key::<String>()? {
            match map.next_value_seed(QuantitySeed {
                name: &name,
                lenient: self.lenient,
            })? {
                Some(value) => r.set(&name, value),
                None => unparsable = true,
            }
        }
        Ok(if unparsable {
            RequestList::default()
        } else {
            r
        })
    }
}

/// One quantity of the resource it names, parsed inside the decoder's string
/// call so that a parse error gets the string's position; `None` for an
/// unparsable one when lenient.
struct QuantitySeed<'a> {
    name: &'a str,
    lenient: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for QuantitySeed<'_> {
    type Value = Option<i64>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for QuantitySeed<'_> {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a quantity string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Option<i64>, E> {
        match parse_resource(self.name, v) {
            Ok(value) => Ok(Some(value)),
            Err(_) if self.lenient => Ok(None),
            Err(e) => Err(E::custom(e)),
        }
    }
}

/// CPU a container that requests none is scored with (kube-scheduler's
/// `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory a container that requests none is scored with, in bytes
/// (kube-scheduler's `DefaultMemoryRequest`, 200Mi).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

impl Resources {
    /// This container request with kube-scheduler's scoring defaults for a
    /// missing (zero) cpu or memory request (`NonMissingContainerRequests`).
    #[must_use]
    pub fn with_non_zero_defaults(&self) -> Resources {
        let mut r = self.clone();
        if r.milli_cpu == 0 {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if r.memory == 0 {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_like_kubernetes() {
        assert_eq!(parse_quantity("100m", 1000), Ok(100));
        assert_eq!(parse_quantity("1", 1000), Ok(1000));
        assert_eq!(parse_quantity("1.5", 1000), Ok(1500));
        assert_eq!(parse_quantity("0.1", 1000), Ok(100));
        assert_eq!(parse_quantity("1Gi", 1), Ok(1 << 30));
        assert_eq!(parse_quantity("128Mi", 1), Ok(128 << 20));
        assert_eq!(parse_quantity("1G", 1), Ok(1_000_000_000));
        assert_eq!(parse_quantity("1e3", 1), Ok(1000));
        assert_eq!(parse_quantity("1500m", 1), Ok(2), "bytes round up");
        assert_eq!(
            parse_quantity("1n", 1000),
            Ok(1),
            "rounds up to a millicore"
        );
        assert_eq!(parse_quantity("110", 1), Ok(110));
        for bad in ["", "abc", "1.2.3", "1Qi", "m", "1e", "."] {
            assert!(parse_quantity(bad, 1).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scaled_quantities_are_exact_and_overflow_is_an_error() {
        assert_eq!(parse_scaled("0.3", 1_000_000_000), Ok(300_000_000));
        assert_eq!(
            parse_scaled("40Gi", 1_000_000_000),
            Ok((40i128 << 30) * 1_000_000_000)
        );
        assert_eq!(parse_scaled("1n", 1_000_000_000), Ok(1));
        // 30 fractional digits in nano-units: the denominator passes i128.
        let tiny = format!(".{}n", "0".repeat(29) + "1");
        assert!(parse_scaled(&tiny, 1_000_000_000).is_err());
        assert!(parse_scaled("1e-40", 1).is_err());
        assert!(parse_quantity("9e18", 1).is_ok());
        assert!(parse_quantity("1e19", 1).is_err(), "past i64");
    }

    #[test]
    fn resource_lists_name_the_bad_entry() {
        let r = Resources::from_list([
            ("cpu", "2"),
            ("memory", "1Gi"),
            ("pods", "110"),
            ("example.com/gpu", "4"),
        ])
        .unwrap();
        assert_eq!(
            (r.milli_cpu, r.memory, r.pods, r.scalar["example.com/gpu"]),
            (2000, 1 << 30, 110, 4)
        );
        assert_eq!(
            Resources::from_list([("memory", "lots")]).unwrap_err().0,
            "memory: invalid quantity \"lots\""
        );
    }

    #[test]
    fn add_and_sub_are_inverse() {
        let mut a = Resources::from_list([("cpu", "1"), ("x/y", "2")]).unwrap();
        let b = Resources::from_list([("cpu", "500m"), ("x/y", "2")]).unwrap();
        a.add(&b);
        a.sub(&b);
        assert_eq!(
            a,
            Resources::from_list([("cpu", "1"), ("x/y", "2")]).unwrap()
        );
    }
}
