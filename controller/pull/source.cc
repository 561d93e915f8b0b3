#include "controller/pull/source.h"

namespace rsc::controller::pull {

std::string_view ignoredReasonName(IgnoredReason reason) {
  switch (reason) {
    case IgnoredReason::kOverLimit:
      return "OverLimit";
    case IgnoredReason::kInvalid:
      return "Invalid";
    case IgnoredReason::kUnbound:
      return "Unbound";
    case IgnoredReason::kUnverified:
      return "Unverified";
  }
  return "Unknown";
}

}  // namespace rsc::controller::pull
