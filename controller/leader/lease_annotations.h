// The annotations the leader writes on its Lease (controller/main.cc) for the
// other replicas and resourceslicectl to reach its inventory API. Header only:
// resourceslicectl reads them without linking the elector.
#pragma once

namespace rsc::controller::leader {

// The leader's inventory URL, https://POD_IP:PORT with TLS.
inline constexpr char kInventoryUrlAnnotation[] = "resourceslice.dra.k8s.io/inventory-url";
// The name the leader's certificate carries (--inventory-server-name, the
// Service's DNS name), which its pod address is verified against.
inline constexpr char kInventoryServerNameAnnotation[] =
    "resourceslice.dra.k8s.io/inventory-server-name";

}  // namespace rsc::controller::leader
