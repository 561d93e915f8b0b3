#include "test/fuzz/promises.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace rsc::testing {

void broken(std::string_view target, std::string_view promise, std::string_view detail) {
  std::fprintf(stderr, "%.*s fuzzer: %.*s%s%.*s\n", static_cast<int>(target.size()), target.data(),
               static_cast<int>(promise.size()), promise.data(), detail.empty() ? "" : ": ",
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void checkJsonRoundTrip(std::string_view target, std::string_view what,
                        const client::ResourceSlice& slice) {
  const std::string subject(what);
  std::string text;
  try {
    text = client::toJson(slice).dump();
  } catch (const std::exception& e) {
    broken(target, subject + " does not serialise", e.what());
  }
  const client::Json parsed = client::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    broken(target, subject + " serialises to invalid JSON", text);
  }
  const StatusOr<client::ResourceSlice> again = client::resourceSliceFromJson(parsed);
  if (!again.ok()) {
    broken(target, subject + " does not decode again", again.status().toString());
  }
  if (!(*again == slice)) {
    broken(target, subject + " changes in a JSON round trip", text);
  }
}

}  // namespace rsc::testing
