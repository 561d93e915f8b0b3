// The HTTP status codes the project reads and answers, each with its standard
// reason phrase ("Not Found", for status lines), the metav1.Status reason the
// API server gives it ("NotFound", in error bodies) and the StatusCode it
// stands for, both as an answer read (api_error.cc, resourceslicectl) and as
// an answer given (the inventory API's handler): the one place where HTTP
// codes meet meaning. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "common/status.h"

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

// What an HTTP answer means to the caller that reads it: 2xx kOk, 400
// InvalidArgument, 401 Unauthenticated, 403 PermissionDenied, 404 NotFound,
// 409 AlreadyExists (reason "AlreadyExists") or Conflict, 410 Gone, 413
// TooLarge, 422 Unprocessable, 429 and 5xx Unavailable (worth a retry), 501
// and 505 Internal, other 4xx InvalidArgument.
StatusCode statusCodeFromHttp(int http_code, std::string_view reason = {});

// The HTTP status that answers a request which failed with `code`: the
// reverse of statusCodeFromHttp, except that a client over its own limit
// (ResourceExhausted) gets 429 and a DeadlineExceeded 503; 500 for a code
// that names no fault of the request or of availability.
int httpCodeForStatus(StatusCode code);

}  // namespace rsc::client
