//! Classes of resource names (`v1helper.IsExtendedResourceName` and
//! kube-scheduler's `IsDRAExtendedResourceName`), read by the resource
//! plugins and DynamicResources' extended resources.

use crate::k8s::validation::is_qualified_name;
use crate::objects::pod::DEVICE_CLASS_PREFIX;

/// `v1helper.IsExtendedResourceName`: outside the `kubernetes.io` domain,
/// not a quota name, and valid once prefixed with `requests.`.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && is_qualified_name(&format!("requests.{name}"))
}

/// kube-scheduler's `IsDRAExtendedResourceName`: an extended resource name
/// or a DeviceClass's implicit name (`deviceclass.resource.kubernetes.io/<class>`),
/// which a DeviceClass may serve (DRAExtendedResource).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    name.starts_with(DEVICE_CLASS_PREFIX) || is_extended_resource_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `IsDRAExtendedResourceName`: extended resource names and the
    /// implicit class names, not native or quota names.
    #[test]
    fn dra_extended_names_are_extended_names_and_implicit_class_names() {
        assert!(is_dra_extended_resource_name("example.com/gpu"));
        assert!(is_dra_extended_resource_name(
            "deviceclass.resource.kubernetes.io/gpu"
        ));
        for name in [
            "cpu",
            "hugepages-2Mi",
            "kubernetes.io/batch",
            "requests.example.com/gpu",
        ] {
            assert!(!is_dra_extended_resource_name(name), "{name}");
        }
    }
}
