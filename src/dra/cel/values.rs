//! The CEL values a device selector sees, as views over the device (no map
//! is built per device): `device.driver`, `device.allowMultipleAllocations`,
//! `device.attributes[domain][id]` and `device.capacity[domain][id]`, plus
//! the `Quantity` and `Semver` values of capacities and version attributes.
//!
//! As in Kubernetes, an attribute or capacity name without a domain belongs
//! to the device's driver, and `device.attributes[d]` of a domain the device
//! has nothing in is an empty map (so `has(...)` and `in` say false).

use cel::ExecutionError;
use cel::common::traits::{Container, Indexer};
use cel::common::types::{CelBool, CelInt, CelString, MAP_TYPE, Type};
use cel::common::value::{CowVal, Val};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

use super::quantity::Quantity;
use super::semver::Semver;

static DEVICE_TYPE: Type = Type::new_unspecified_type("kubernetes.DRADevice");

/// The string key of a map index, or the error CEL gives for another type.
fn key(idx: &dyn Val) -> Result<&str, ExecutionError> {
    idx.downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: idx.get_type().name().to_owned(),
            want: "string".to_owned(),
        })
}

/// `device`: the device of `driver` being selected.
#[derive(Debug, Clone, Copy)]
pub(super) struct DeviceView<'v> {
    pub driver: &'v str,
    pub device: &'v Device,
}

/// `device.attributes` (`capacity: false`) or `device.capacity`.
#[derive(Debug, Clone, Copy)]
struct Domains<'v> {
    view: DeviceView<'v>,
    capacity: bool,
}

/// `device.attributes[domain]` or `device.capacity[domain]`.
#[derive(Debug, Clone, Copy)]
struct DomainMap<'v> {
    view: DeviceView<'v>,
    capacity: bool,
    domain: &'v str,
}

impl<'v> DomainMap<'v> {
    /// The stored name of `id` in this domain, if the device has it: the
    /// fully qualified name, or the bare id for the driver's own domain.
    fn lookup<T>(
        &self,
        map: Option<&'v std::collections::BTreeMap<String, T>>,
        id: &str,
    ) -> Option<&'v T> {
        let map = map?;
        if self.domain == self.view.driver
            && let Some(v) = map.get(id)
        {
            return Some(v);
        }
        // Names are at most 64 + 1 + 63 characters: one short-lived string
        // only for lookups of qualified names.
        map.get(&format!("{}/{id}", self.domain))
    }
}

macro_rules! view_val {
    ($ty:ident, $cel:expr $(, $container:ident)?) => {
        impl<'x> Val for $ty<'x> {
            $(
            fn $container(&self) -> Option<&dyn Container> {
                Some(self)
            }
            )?
            fn get_type(&self) -> &Type {
                &$cel
            }
            fn cel_type() -> &'static Type {
                &$cel
            }
            fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
            where
                Self: 'v,
            {
                Some(self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
            where
                Self: 'v,
            {
                Box::new(*self)
            }
        }
    };
}

view_val!(DeviceView, DEVICE_TYPE);
view_val!(Domains, MAP_TYPE, as_container);
view_val!(DomainMap, MAP_TYPE, as_container);

impl<'x> Indexer for DeviceView<'x> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let view = *self;
        match key(idx)? {
            "driver" => Ok(CowVal::owned(CelString::from(view.driver))),
            "allowMultipleAllocations" => Ok(CowVal::owned(CelBool::from(
                view.device.allow_multiple_allocations == Some(true),
            ))),
            "attributes" => Ok(CowVal::owned(Domains {
                view,
                capacity: false,
            })),
            "capacity" => Ok(CowVal::owned(Domains {
                view,
                capacity: true,
            })),
            other => Err(ExecutionError::no_such_key(other)),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl<'x> Indexer for Domains<'x> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        // The domain string must live as long as the view: find it among
        // the device's names (or the driver's) instead of borrowing `idx`.
        let wanted = key(idx)?;
        let view = self.view;
        let domain = if wanted == view.driver {
            Some(view.driver)
        } else {
            let names: Box<dyn Iterator<Item = &'x String>> = if self.capacity {
                Box::new(view.device.capacity.iter().flat_map(|m| m.keys()))
            } else {
                Box::new(view.device.attributes.iter().flat_map(|m| m.keys()))
            };
            names
                .filter_map(|n| n.split_once('/').map(|(d, _)| d))
                .find(|d| *d == wanted)
        };
        // An unknown domain is an empty map, as in Kubernetes.
        Ok(CowVal::owned(DomainMap {
            view,
            capacity: self.capacity,
            domain: domain.unwrap_or(""),
        }))
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl<'x> Indexer for DomainMap<'x> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let id = key(idx)?;
        let missing = || ExecutionError::no_such_key(id);
        if self.domain.is_empty() {
            return Err(missing());
        }
        if self.capacity {
            let capacity = self
                .lookup(self.view.device.capacity.as_ref(), id)
                .ok_or_else(missing)?;
            let q = Quantity::parse(&capacity.value.0).map_err(|e| {
                ExecutionError::function_error("quantity", format!("capacity {id}: {e}"))
            })?;
            return Ok(CowVal::owned(q));
        }
        let attribute = self
            .lookup(self.view.device.attributes.as_ref(), id)
            .ok_or_else(missing)?;
        attribute_value(attribute).map_err(|e| {
            ExecutionError::function_error("attribute", format!("attribute {id}: {e}"))
        })
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// `domain in device.attributes` (or `device.capacity`): whether any of
/// the device's names is in that domain (a bare name is in the driver's).
impl<'x> Container for Domains<'x> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        let wanted = key(value)?;
        let device = self.view.device;
        let names: Box<dyn Iterator<Item = &String>> = if self.capacity {
            Box::new(device.capacity.iter().flat_map(|m| m.keys()))
        } else {
            Box::new(device.attributes.iter().flat_map(|m| m.keys()))
        };
        Ok(names
            .map(|n| n.split_once('/').map_or(self.view.driver, |(d, _)| d))
            .any(|d| d == wanted))
    }
}

impl<'x> Container for DomainMap<'x> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        let id = key(value)?;
        if self.domain.is_empty() {
            return Ok(false);
        }
        Ok(if self.capacity {
            self.lookup(self.view.device.capacity.as_ref(), id)
                .is_some()
        } else {
            self.lookup(self.view.device.attributes.as_ref(), id)
                .is_some()
        })
    }
}

/// The CEL value of a scalar attribute (list attributes need
/// DRAListTypeAttributes, alpha and off by default).
fn attribute_value<'b, 'v>(a: &'v DeviceAttribute) -> Result<CowVal<'b, 'v>, String> {
    if let Some(i) = a.int {
        return Ok(CowVal::owned(CelInt::from(i)));
    }
    if let Some(b) = a.bool {
        return Ok(CowVal::owned(CelBool::from(b)));
    }
    if let Some(s) = &a.string {
        return Ok(CowVal::owned(CelString::from(s.as_str())));
    }
    if let Some(v) = &a.version {
        return Semver::parse(v, false)
            .map(CowVal::owned)
            .map_err(|e| format!("parse semantic version: {e}"));
    }
    Err("unsupported attribute value".to_owned())
}
