// The one place where HTTP answers of the API server become Status codes:
// 400 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied, 404 NotFound,
// 409 AlreadyExists or Conflict, 410 Gone, 413 TooLarge, 422 Unprocessable,
// 429 and 5xx Unavailable. The metav1.Status body (reason, message, causes with
// field paths) is kept in the Status; a body that is not a Status (a 429 may be
// plain text) still gives the right code. Pure functions, thread-safe.
#pragma once

#include <string_view>

#include "client/http_status.h"  // statusCodeFromHttp
#include "client/objects.h"
#include "common/status.h"

namespace rsc::client {

// Builds a Status from an error response: `body` is parsed as a metav1.Status
// when it is one (message, reason, details.causes[].field/message); otherwise
// the first 256 bytes of the body are the message.
Status statusFromHttpResponse(int http_code, std::string_view body);

// Builds a Status from a metav1.Status object (e.g. a watch ERROR event).
Status statusFromKubeStatus(const Json& status);

// True for errors worth retrying with backoff: Unavailable (429, 5xx,
// connection errors) and DeadlineExceeded.
bool isRetryable(const Status& status);

}  // namespace rsc::client
