#include "controller/pull/source.h"

#include "common/enum_names.h"

namespace rsc::controller::pull {

std::string_view ignoredReasonName(IgnoredReason reason) {
  static constexpr auto kNames =
      enumNames<IgnoredReason>({{IgnoredReason::kOverLimit, "OverLimit"},
                                {IgnoredReason::kInvalid, "Invalid"},
                                {IgnoredReason::kUnbound, "Unbound"},
                                {IgnoredReason::kUnverified, "Unverified"}});
  return kNames(reason);
}

}  // namespace rsc::controller::pull
