// Kubeconfig files as kubectl reads them: YAML or JSON (client/yaml.h),
// several files merged as KUBECONFIG=a:b is, one context selected (the
// current-context or --context), its cluster and user turned into a
// ClientConfig. Used by loadConfig (config.h) and by tests that hold a
// kubeconfig. Pure functions over files; thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "client/config.h"
#include "common/status.h"

namespace rsc::client {

// Loads kubeconfig files merged as kubectl merges them: for clusters, users,
// contexts and current-context the first file that defines a name wins.
// `context`, when not empty, is selected instead of current-context.
// Relative file paths resolve against the folder of the file that names them.
// Supported: certificate-authority(-data), insecure-skip-tls-verify,
// tls-server-name, proxy-url (http://), client-certificate(-data),
// client-key(-data), token, tokenFile, exec (client.authentication.k8s.io v1
// and v1beta1). auth-provider, username/password and impersonation fail with
// an error naming the field: "kubeconfig /x/config: users[0].user.as: ...".
StatusOr<ClientConfig> loadKubeconfig(const std::vector<std::filesystem::path>& files,
                                      const std::string& context = "");

}  // namespace rsc::client
