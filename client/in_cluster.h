// The in-cluster configuration of a pod: the API server from the service
// environment variables, the mounted service account's token (re-read as it
// rotates, see credentials.h), CA and namespace. Used by loadConfig
// (config.h). A pure function over files; thread-safe.
#pragma once

#include "client/config.h"
#include "common/status.h"

namespace rsc::client {

// https://$KUBERNETES_SERVICE_HOST:PORT (an IPv6 host bracketed), the service
// account's token file and CA, and the namespace from $POD_NAMESPACE or the
// service account's namespace file.
StatusOr<ClientConfig> loadInClusterConfig(const ConfigEnvironment& env);

}  // namespace rsc::client
