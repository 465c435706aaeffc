//! The Kubernetes IP and CIDR libraries: `ip()`, `isIP()`,
//! `ip.isCanonical()`, `family()`, the address classes (`isUnspecified`,
//! `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`,
//! `isGlobalUnicast`), `cidr()`, `isCIDR()`, `containsIP`, `containsCIDR`,
//! `ip()` of a CIDR, `masked()`, `prefixLength()` and `string()` of both.
//! Addresses parse as Go's `netip` does (no leading zeros, no zones) and,
//! as Kubernetes requires, IPv4-mapped IPv6 addresses are refused.

use std::net::IpAddr;

use cel::common::types::{CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::{Env, ExecutionError};

use super::{arg, function_error, owned, static_val};

/// `net.IP`'s CEL type.
pub(super) static IP_TYPE: Type = Type::new_unspecified_type("net.IP");
/// `net.CIDR`'s CEL type.
pub(super) static CIDR_TYPE: Type = Type::new_unspecified_type("net.CIDR");

/// An IP address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ip(pub IpAddr);

/// A network: an address (not necessarily masked) and a prefix length.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Cidr {
    addr: IpAddr,
    bits: u8,
}

static_val!(Ip, IP_TYPE);
static_val!(Cidr, CIDR_TYPE);

fn is_mapped(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    if raw.contains('%') {
        return Err(format!("IP address {raw:?} with zone value is not allowed"));
    }
    let addr: IpAddr = raw.parse().map_err(|e| {
        format!("IP Address {raw:?} parse error during conversion from string: {e}")
    })?;
    if is_mapped(&addr) {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(addr)
}

fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let error = |why: &str| {
        format!(
            "network address parse error during conversion from string: netip.ParsePrefix({raw:?}): {why}"
        )
    };
    let (addr, bits) = raw.split_once('/').ok_or_else(|| error("no '/'"))?;
    if addr.contains('%') {
        return Err(error("IPv6 zones cannot be present in a prefix"));
    }
    let addr: IpAddr = addr.parse().map_err(|e| error(&format!("{e}")))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let valid_digits = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    let bits: u8 = bits
        .parse()
        .ok()
        .filter(|b| valid_digits && *b <= max)
        .ok_or_else(|| error(&format!("bad bits after slash: {bits:?}")))?;
    if is_mapped(&addr) {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(Cidr { addr, bits })
}

/// `addr` with all but its first `bits` bits cleared.
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let m = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(bits))
            };
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(bits))
            };
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

impl Cidr {
    fn contains(&self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4() && mask(addr, self.bits) == mask(self.addr, self.bits)
    }

    /// Go's `Overlaps(other) && Bits() <= other.Bits()`.
    fn contains_cidr(&self, other: &Cidr) -> bool {
        self.bits <= other.bits && self.contains(other.addr)
    }

    fn render(&self) -> String {
        format!("{}/{}", self.addr, self.bits)
    }
}

/// Go's `netip.Addr` classes.
fn is_link_local_unicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.octets()[0] == 0xff && v6.octets()[1] & 0x0f == 0x02,
    }
}

fn is_global_unicast(a: IpAddr) -> bool {
    let broadcast = matches!(a, IpAddr::V4(v4) if v4.is_broadcast());
    !(a.is_unspecified()
        || a.is_loopback()
        || a.is_multicast()
        || is_link_local_unicast(a)
        || broadcast)
}

fn ip_of(
    args: &[cel::common::value::CowVal<'_, '_>],
    i: usize,
    f: &str,
) -> Result<IpAddr, ExecutionError> {
    arg::<Ip>(args, i, f).map(|ip| ip.0)
}

fn cidr_of<'a>(
    args: &'a [cel::common::value::CowVal<'_, '_>],
    f: &str,
) -> Result<&'a Cidr, ExecutionError> {
    arg::<Cidr>(args, 0, f)
}

fn text<'a>(
    args: &'a [cel::common::value::CowVal<'_, '_>],
    i: usize,
    f: &str,
) -> Result<&'a str, ExecutionError> {
    arg::<CelString>(args, i, f).map(|s| s.inner())
}

/// Registers the IP and CIDR libraries.
pub(super) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let ip = || IP_TYPE.to_owned();
    let cidr = || CIDR_TYPE.to_owned();
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], |a| {
        owned(Ip(
            parse_ip(text(&a, 0, "ip")?).map_err(|e| function_error("ip", e))?
        ))
    })?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], |a| {
        owned(CelBool::from(parse_ip(text(&a, 0, "isIP")?).is_ok()))
    })?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical",
        vec![STRING_TYPE],
        |a| {
            let raw = text(&a, 0, "ip.isCanonical")?;
            let addr = parse_ip(raw).map_err(|e| function_error("ip.isCanonical", e))?;
            owned(CelBool::from(addr.to_string() == raw))
        },
    )?;
    env.add_overload("string", "ip_to_string", vec![ip()], |a| {
        owned(CelString::from(ip_of(&a, 0, "string")?.to_string()))
    })?;
    env.add_member_overload("family", "ip_family", ip(), vec![], |a| {
        owned(CelInt::from(if ip_of(&a, 0, "family")?.is_ipv4() {
            4
        } else {
            6
        }))
    })?;
    // Overloads are plain functions: one per class.
    macro_rules! class {
        ($name:literal, $id:literal, $test:expr) => {
            env.add_member_overload($name, $id, ip(), vec![], |a| {
                owned(CelBool::from($test(ip_of(&a, 0, $name)?)))
            })?;
        };
    }
    class!("isUnspecified", "ip_is_unspecified", |a: IpAddr| a
        .is_unspecified());
    class!("isLoopback", "ip_is_loopback", |a: IpAddr| a.is_loopback());
    class!(
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        is_link_local_multicast
    );
    class!(
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        is_link_local_unicast
    );
    class!("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast);
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], |a| {
        owned(parse_cidr(text(&a, 0, "cidr")?).map_err(|e| function_error("cidr", e))?)
    })?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], |a| {
        owned(CelBool::from(parse_cidr(text(&a, 0, "isCIDR")?).is_ok()))
    })?;
    env.add_overload("string", "cidr_to_string", vec![cidr()], |a| {
        owned(CelString::from(cidr_of(&a, "string")?.render()))
    })?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        cidr(),
        vec![STRING_TYPE],
        |a| {
            let addr = parse_ip(text(&a, 1, "containsIP")?)
                .map_err(|e| function_error("containsIP", e))?;
            owned(CelBool::from(cidr_of(&a, "containsIP")?.contains(addr)))
        },
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_ip",
        cidr(),
        vec![ip()],
        |a| {
            owned(CelBool::from(cidr_of(&a, "containsIP")?.contains(ip_of(
                &a,
                1,
                "containsIP",
            )?)))
        },
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        cidr(),
        vec![STRING_TYPE],
        |a| {
            let other = parse_cidr(text(&a, 1, "containsCIDR")?)
                .map_err(|e| function_error("containsCIDR", e))?;
            owned(CelBool::from(
                cidr_of(&a, "containsCIDR")?.contains_cidr(&other),
            ))
        },
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        cidr(),
        vec![cidr()],
        |a| {
            let other = arg::<Cidr>(&a, 1, "containsCIDR")?;
            owned(CelBool::from(
                cidr_of(&a, "containsCIDR")?.contains_cidr(other),
            ))
        },
    )?;
    env.add_member_overload("ip", "cidr_ip", cidr(), vec![], |a| {
        owned(Ip(cidr_of(&a, "ip")?.addr))
    })?;
    env.add_member_overload("masked", "cidr_masked", cidr(), vec![], |a| {
        let c = cidr_of(&a, "masked")?;
        owned(Cidr {
            addr: mask(c.addr, c.bits),
            bits: c.bits,
        })
    })?;
    env.add_member_overload("prefixLength", "cidr_prefix_length", cidr(), vec![], |a| {
        owned(CelInt::from(i64::from(cidr_of(&a, "prefixLength")?.bits)))
    })?;
    Ok(())
}
