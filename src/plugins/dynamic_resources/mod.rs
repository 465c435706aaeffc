//! Dynamic Resource Allocation: ResourceClaims whose devices the scheduler
//! allocates from ResourceSlices (kube-scheduler's DynamicResources plugin).

pub mod allocator;
