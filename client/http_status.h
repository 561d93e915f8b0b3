// The HTTP status codes the project reads and answers, each with its standard
// reason phrase ("Not Found", for status lines) and the metav1.Status reason
// the API server gives it ("NotFound", in error bodies): one table, read by
// the API client (api_error.cc) and by the inventory API's server and
// handler. Pure functions; thread-safe.
#pragma once

#include <string_view>

namespace rsc::client {

// Returns the standard reason phrase of an HTTP status ("Not Found"), or
// "Unknown".
std::string_view httpReasonPhrase(int code);

// Returns the metav1.Status reason of an HTTP error status ("NotFound"), or
// "InternalError" for a code without one.
std::string_view kubeStatusReason(int code);

// Returns the HTTP status a metav1.Status reason stands for (several reasons
// share one: AlreadyExists and Conflict are both 409), or 0 for an unknown
// reason.
int httpCodeForKubeReason(std::string_view reason);

}  // namespace rsc::client
