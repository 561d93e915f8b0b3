// The Kubernetes name rules, next to the API types they constrain: written out
// as the API server applies them to ResourceSlices (apimachinery validation and the
// resource.k8s.io validation): DNS labels and subdomains, qualified names,
// label values, semantic versions. Each function returns InvalidArgument
// saying why `text` is not valid (the message alone, for the caller to put
// after the field's path), or OK. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace rsc::client {

inline constexpr size_t kDnsLabelMaxLength = 63;
inline constexpr size_t kDnsSubdomainMaxLength = 253;
inline constexpr size_t kDriverNameMaxLength = 63;
inline constexpr size_t kPoolNameMaxLength = 253;
// The identifier part of a device attribute or capacity name, and its domain.
inline constexpr size_t kDeviceMaxIdLength = 32;
inline constexpr size_t kDeviceMaxDomainLength = 63;
inline constexpr size_t kLabelValueMaxLength = 63;

// RFC 1123 label: lower-case alphanumerics and '-', at most 63 characters.
Status dnsLabelError(std::string_view text);
// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
Status dnsSubdomainError(std::string_view text);

// A DRA driver name. The API server compares driver names case-insensitively
// but slice names are built from them and must be lower case, so upper case
// is refused here.
Status driverNameError(std::string_view text);
// A pool name: at most 253 characters, '/'-separated DNS subdomains.
Status poolNameError(std::string_view text);
Status nodeNameError(std::string_view text);

// A device attribute or capacity name: a C identifier of at most 32
// characters, optionally prefixed by "<domain>/" where the domain is a DNS
// subdomain of at most 63 characters.
Status deviceQualifiedNameError(std::string_view text);

// A label key (Kubernetes "qualified name"): an optional DNS subdomain prefix
// and '/', then a name of at most 63 alphanumerics, '-', '_' and '.', that
// starts and ends with an alphanumeric. Taint keys and binding conditions.
Status labelKeyError(std::string_view text);
// A label value: empty, or like the name part of a label key.
Status labelValueError(std::string_view text);

// Semantic Versioning 2.0.0 ("1.2.3-rc.1+build.5").
Status semverError(std::string_view text);

}  // namespace rsc::client
