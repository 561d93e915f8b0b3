#include "controller/leader/write_fence.h"

#include "common/log.h"

namespace rsc::controller::leader {
namespace {

// Every object of this group that the controller writes is a ResourceSlice.
constexpr std::string_view kGuardedPrefix = "/apis/resource.k8s.io/";

}  // namespace

bool WriteFence::guarded(const client::HttpRequest& request) {
  return request.method != "GET" && request.method != "HEAD" &&
         std::string_view(request.path_and_query).starts_with(kGuardedPrefix);
}

Status WriteFence::refused(const client::HttpRequest& request) const {
  log::warning("Refused a slice write: this replica does not hold the leader lease",
               {{"verb", request.method}, {"path", request.path_and_query}});
  return Status(StatusCode::kFailedPrecondition,
                "not sent: this replica does not hold the leader lease", {}, kReasonNotLeader);
}

StatusOr<client::HttpResponse> WriteFence::send(const client::HttpRequest& request) {
  if (guarded(request) && !may_write_()) return refused(request);
  return inner_.send(request);
}

StatusOr<client::HttpResponse> WriteFence::stream(
    const client::HttpRequest& request,
    const std::function<void(const client::HttpResponse&)>& on_head,
    const std::function<bool(std::string_view)>& on_chunk, std::stop_token stop) {
  if (guarded(request) && !may_write_()) return refused(request);
  return inner_.stream(request, on_head, on_chunk, std::move(stop));
}

}  // namespace rsc::controller::leader
