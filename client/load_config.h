// loadConfig: the one place that chooses where the client configuration comes
// from, in the order of DESIGN.md section 6, over the loaders by job
// (kubeconfig.h, in_cluster.h). main and resourceslicectl call it once.
// Reads files, keeps nothing open; thread-safe.
#pragma once

#include <string>

#include "client/config.h"
#include "common/status.h"

namespace rsc::client {

// Loads the configuration in DESIGN order: `explicit_kubeconfig_path` when not
// empty (it must exist), then in-cluster when KUBERNETES_SERVICE_HOST/PORT are
// set and the service account token exists, then the files of $KUBECONFIG
// (':'-separated) that exist, merged, then ~/.kube/config. `context`, when not
// empty, selects that context instead of current-context (as kubectl's
// --context); in-cluster has no contexts, so it is then skipped.
StatusOr<ClientConfig> loadConfig(const std::string& explicit_kubeconfig_path,
                                  const ConfigEnvironment& env = ConfigEnvironment::fromProcess(),
                                  const std::string& context = "");

}  // namespace rsc::client
