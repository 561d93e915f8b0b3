#include "common/thread_name.h"

#include <pthread.h>

#include <string>

namespace rsc {

void setThreadName(std::string_view name) {
  const std::string cut(name.substr(0, kMaxThreadName));
  // Fails only for a name too long, which the cut prevents.
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace rsc
