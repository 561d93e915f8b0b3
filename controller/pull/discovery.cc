#include "controller/pull/discovery.h"

#include <algorithm>
#include <condition_variable>
#include <string_view>
#include <tuple>
#include <utility>

#include "client/names.h"
#include "common/strings.h"
#include "common/thread_name.h"
#include "controller/pull/fetcher.h"

namespace rsc::controller::pull {
namespace {

// How a labelled Service is served, from its port and annotations.
struct ServiceSettings {
  std::string driver;
  const PullBinding* binding = nullptr;
  std::string app_protocol;  // of the Service's inventory port
  std::string path;
  std::string ca_pem;
  bool node_scope = true;
};

std::string annotationOr(const client::Service& service, const char* key,
                         const std::string& fallback) {
  const auto it = service.metadata.annotations.find(key);
  return it == service.metadata.annotations.end() ? fallback : it->second;
}

// An HTTP path and query: '/' first, printable ASCII without spaces or a fragment.
bool validPath(std::string_view path) {
  return path.starts_with('/') &&
         std::ranges::all_of(path, [](char c) { return c > ' ' && c < 0x7f && c != '#'; });
}

// The settings of a Service that counts; nullopt for one that does not, with `problem` set when
// the Service was meant to count (it carries the label) but is wrong.
std::optional<ServiceSettings> settingsOf(const client::Service& service,
                                          std::optional<std::string>& problem) {
  const auto label = service.metadata.labels.find(kDriverLabel);
  if (label == service.metadata.labels.end()) {
    return std::nullopt;
  }
  ServiceSettings settings;
  settings.driver = label->second;
  if (const Status error = client::driverNameError(settings.driver); !error.ok()) {
    problem = "label " + std::string(kDriverLabel) + ": " + error.message();
    return std::nullopt;
  }
  const auto port = std::ranges::find_if(service.spec.ports, [](const client::ServicePort& p) {
    return p.name == kInventoryPortName;
  });
  if (port == service.spec.ports.end()) {
    problem = "no port named \"" + std::string(kInventoryPortName) + "\"";
    return std::nullopt;
  }
  settings.app_protocol = port->app_protocol;
  settings.path = annotationOr(service, kPathAnnotation, kDefaultInventoryPath);
  if (!validPath(settings.path)) {
    problem = "annotation " + std::string(kPathAnnotation) +
              ": must be a path that starts with '/', without spaces or '#'";
    return std::nullopt;
  }
  settings.ca_pem = annotationOr(service, kCaAnnotation, "");
  const std::string scope = annotationOr(service, kScopeAnnotation, kScopeNode);
  if (scope != kScopeNode && scope != kScopeCluster) {
    problem = "annotation " + std::string(kScopeAnnotation) + ": must be \"" + kScopeNode +
              "\" or \"" + kScopeCluster + "\", not \"" + scope + "\"";
    return std::nullopt;
  }
  settings.node_scope = scope == kScopeNode;
  return settings;
}

// Kubernetes: an unset ready condition means ready.
bool usable(const client::Endpoint& endpoint) {
  return endpoint.conditions.ready.value_or(true) &&
         !endpoint.conditions.terminating.value_or(false);
}

// The Pods of the bound namespaces by (namespace, name).
using PodIndex = std::map<std::pair<std::string_view, std::string_view>, const client::Pod*>;

// Why no Pod vouches for `address` of `endpoint` in namespace `ns`, or nullopt when its
// targetRef Pod does; `node` is then the Pod's node.
std::optional<std::string> unverified(const client::Endpoint& endpoint, const std::string& address,
                                      const std::string& ns, const PullBinding& binding,
                                      const PodIndex& pods, std::string& node) {
  if (!endpoint.target_ref || endpoint.target_ref->kind != "Pod" ||
      endpoint.target_ref->name.empty()) {
    return "the endpoint names no Pod (targetRef)";
  }
  const client::EndpointTargetRef& ref = *endpoint.target_ref;
  if (!ref.namespace_.empty() && ref.namespace_ != ns) {
    return "its targetRef names a Pod of another namespace (" + ref.namespace_ + ")";
  }
  const auto it = pods.find({ns, ref.name});
  if (it == pods.end() || (!ref.uid.empty() && ref.uid != it->second->metadata.uid)) {
    return "its targetRef Pod " + inQuotes(ref.name) + " does not exist";
  }
  const client::Pod& pod = *it->second;
  const std::string what = "its Pod " + inQuotes(ref.name);
  if (pod.metadata.deletion_timestamp) return what + " is being deleted";
  if (!pod.hasIp(address)) return what + " does not have the address " + address;
  if (pod.spec.node_name.empty()) return what + " runs on no node";
  if (endpoint.node_name && !endpoint.node_name->empty() &&
      *endpoint.node_name != pod.spec.node_name) {
    return what + " runs on node " + inQuotes(pod.spec.node_name) +
           ", not on the EndpointSlice's " + inQuotes(*endpoint.node_name);
  }
  if (!binding.service_account.empty() &&
      pod.spec.service_account_name != binding.service_account) {
    return what + " runs as ServiceAccount " + inQuotes(pod.spec.service_account_name) +
           ", not as " + inQuotes(binding.service_account) + " (--pull-driver)";
  }
  node = pod.spec.node_name;
  return std::nullopt;
}

// Adds the sources of one EndpointSlice of `service` to `sources`, and its refused addresses
// to `refused` (by id; the first stays).
void addSources(const client::Service& service, const ServiceSettings& settings,
                const client::EndpointSlice& slice, const PodIndex& pods,
                std::map<std::string, SourceSpec>& sources,
                std::map<std::string, DiscoveryRefusal>& refused) {
  const bool ipv6 = slice.address_type == "IPv6";
  if (!ipv6 && slice.address_type != "IPv4") {
    return;  // FQDN, or a type newer than this code
  }
  const auto port = std::ranges::find_if(
      slice.ports, [](const client::EndpointPort& p) { return p.name == kInventoryPortName; });
  const int32_t number = port == slice.ports.end() ? 0 : port->port.value_or(0);
  if (number <= 0 || number > 65535) {
    return;  // no inventory port, or no number (all ports): nothing to GET
  }
  const std::string& app_protocol =
      port->app_protocol.empty() ? settings.app_protocol : port->app_protocol;
  const bool https = app_protocol == "https";
  const std::string& ns = service.metadata.namespace_;
  const std::string& name = service.metadata.name;
  for (const client::Endpoint& endpoint : slice.endpoints) {
    if (!usable(endpoint)) {
      continue;
    }
    for (const std::string& address : endpoint.addresses) {
      std::string host_port = ipv6 ? "[" + address + "]" : address;
      host_port += ":" + std::to_string(number);
      std::string id;
      id.append(ns).append("/").append(name).append("/").append(host_port);
      if (sources.contains(id) || refused.contains(id)) {
        continue;  // listed by an earlier slice too
      }
      std::string node;
      if (auto why = unverified(endpoint, address, ns, *settings.binding, pods, node)) {
        refused.emplace(
            id, DiscoveryRefusal{id, settings.driver, IgnoredReason::kUnverified, std::move(*why)});
        continue;
      }
      SourceSpec& spec = sources[id];
      spec.driver = settings.driver;
      spec.id = std::move(id);
      spec.url.append(https ? "https://" : "http://").append(host_port).append(settings.path);
      if (settings.node_scope) {
        spec.caller.node_name = std::move(node);
      }
      if (https) {
        spec.ca_pem = settings.ca_pem;
        spec.tls_server_name.append(name).append(".").append(ns).append(".svc");
      }
    }
  }
}

// An informer of the objects of `ns` that match `label_selector`, calling `changed` for every
// add, update and delete.
template <typename R>
std::unique_ptr<client::Informer<R>> informerOf(client::KubeApi& api, Clock& clock,
                                                const std::string& ns,
                                                const std::string& label_selector,
                                                const std::function<void()>& changed) {
  using Object = typename R::Object;
  client::InformerOptions<R> options;
  options.namespace_ = ns;
  options.label_selector = label_selector;
  client::InformerHandlers<R> handlers;
  handlers.on_add = [changed](const Object&) { changed(); };
  handlers.on_update = [changed](const Object&, const Object&) { changed(); };
  handlers.on_delete = [changed](const Object&) { changed(); };
  return std::make_unique<client::Informer<R>>(api, clock, std::move(options), std::move(handlers));
}

}  // namespace

StatusOr<std::vector<PullBinding>> parsePullDriver(std::string_view value) {
  const size_t eq = value.find('=');
  if (eq == std::string_view::npos) {
    return invalidArgument(inQuotes(value) +
                           ": must be DRIVER=NAMESPACE[/SERVICEACCOUNT][,NAMESPACE[/SA]...]");
  }
  const std::string driver(value.substr(0, eq));
  if (const Status why = client::driverNameError(driver); !why.ok()) {
    return invalidArgument("the driver name " + inQuotes(driver) + " " + why.message());
  }
  std::vector<PullBinding> bindings;
  for (const std::string_view item : split(value.substr(eq + 1), ',')) {
    PullBinding binding;
    binding.driver = driver;
    const size_t slash = item.find('/');
    binding.namespace_ = std::string(item.substr(0, slash));
    if (slash != std::string_view::npos) {
      binding.service_account = std::string(item.substr(slash + 1));
      if (const Status why = client::dnsSubdomainError(binding.service_account); !why.ok()) {
        return invalidArgument("driver " + inQuotes(driver) + ": the ServiceAccount name " +
                               inQuotes(binding.service_account) + " " + why.message());
      }
    }
    if (const Status why = client::dnsLabelError(binding.namespace_); !why.ok()) {
      return invalidArgument("driver " + inQuotes(driver) + ": the namespace name " +
                             inQuotes(binding.namespace_) + " " + why.message());
    }
    if (std::ranges::any_of(
            bindings, [&](const PullBinding& b) { return b.namespace_ == binding.namespace_; })) {
      return invalidArgument("driver " + inQuotes(driver) + ": the namespace " +
                             inQuotes(binding.namespace_) + " is listed twice");
    }
    bindings.push_back(std::move(binding));
  }
  return bindings;
}

std::vector<std::string> DiscoveryOptions::namespaces() const {
  std::set<std::string> distinct;
  for (const PullBinding& b : bindings) distinct.insert(b.namespace_);
  return {distinct.begin(), distinct.end()};
}

const PullBinding* DiscoveryOptions::binding(std::string_view driver, std::string_view ns) const {
  const auto it = std::ranges::find_if(
      bindings, [&](const PullBinding& b) { return b.driver == driver && b.namespace_ == ns; });
  return it == bindings.end() ? nullptr : &*it;
}

DiscoveryResult discoveredSources(const std::vector<client::Service>& services,
                                  const std::vector<client::EndpointSlice>& endpoint_slices,
                                  const std::vector<client::Pod>& pods,
                                  const DiscoveryOptions& options) {
  // Index the slices by (namespace, service), each Service's in name order, and the Pods.
  std::map<std::pair<std::string, std::string>, std::vector<const client::EndpointSlice*>>
      slices_of;
  for (const client::EndpointSlice& slice : endpoint_slices) {
    const auto label = slice.metadata.labels.find(kServiceNameLabel);
    if (label != slice.metadata.labels.end()) {
      slices_of[{slice.metadata.namespace_, label->second}].push_back(&slice);
    }
  }
  for (auto& [key, slices] : slices_of) {
    std::ranges::sort(slices, {}, [](const client::EndpointSlice* s) { return s->metadata.name; });
  }
  PodIndex pod_index;
  for (const client::Pod& pod : pods) {
    pod_index.emplace(
        std::pair<std::string_view, std::string_view>(pod.metadata.namespace_, pod.metadata.name),
        &pod);
  }

  // Walk the Services of bound namespaces; of those, the ones their driver's binding allows.
  const std::vector<std::string> namespaces = options.namespaces();
  DiscoveryResult result;
  std::map<std::string, SourceSpec> sources;
  std::map<std::string, DiscoveryRefusal> refused;
  for (const client::Service& service : services) {
    const std::string& ns = service.metadata.namespace_;
    if (!std::ranges::binary_search(namespaces, ns)) {
      continue;
    }
    std::optional<std::string> problem;
    std::optional<ServiceSettings> settings = settingsOf(service, problem);
    if (!settings) {
      if (problem) {
        result.problems.push_back({ns, service.metadata.name, std::move(*problem)});
      }
      continue;
    }
    settings->binding = options.binding(settings->driver, ns);
    if (settings->binding == nullptr) {
      const std::string id = ns + "/" + service.metadata.name;
      refused.emplace(id, DiscoveryRefusal{id, settings->driver, IgnoredReason::kUnbound,
                                           "driver " + inQuotes(settings->driver) +
                                               " is not bound to namespace " + inQuotes(ns) +
                                               " (--pull-driver)"});
      continue;
    }
    const auto slices = slices_of.find({ns, service.metadata.name});
    if (slices == slices_of.end()) {
      continue;
    }
    for (const client::EndpointSlice* slice : slices->second) {
      addSources(service, *settings, *slice, pod_index, sources, refused);
    }
  }

  for (auto& [id, spec] : sources) {
    result.sources.push_back(std::move(spec));
  }
  for (auto& [id, refusal] : refused) {
    result.refused.push_back(std::move(refusal));
  }
  std::ranges::sort(result.problems, {}, [](const DiscoveryProblem& p) {
    return std::tie(p.namespace_, p.service, p.message);
  });
  return result;
}

SourceDiscovery::SourceDiscovery(client::KubeApi& api, Clock& clock, DiscoveryOptions options,
                                 OnChange on_change)
    : options_(std::move(options)),
      on_change_(std::move(on_change)),
      problem_log_(clock),
      refusal_log_(clock) {
  // Three informers per bound namespace; nothing cluster-wide.
  // Events only mark the list dirty; the discovery's thread recomputes it. A burst (a
  // DaemonSet rolled out: a Pod, its status and an EndpointSlice change per node) then costs a
  // few recomputations instead of one per event, each a walk of every object.
  const std::function<void()> changed = [this] {
    {
      std::lock_guard lock(mu_);
      dirty_ = true;
    }
    dirty_cv_.notify_all();
  };
  for (const std::string& ns : options_.namespaces()) {
    Watch watch;
    watch.services = informerOf<client::Services>(api, clock, ns, kDriverLabel, changed);
    watch.endpoint_slices =
        informerOf<client::EndpointSlices>(api, clock, ns, kDriverLabel, changed);
    // Every Pod: an endpoint's Pod need carry no label of ours.
    watch.pods = informerOf<client::Pods>(api, clock, ns, "", changed);
    watches_.push_back(std::move(watch));
  }
}

SourceDiscovery::~SourceDiscovery() { stop(); }

void SourceDiscovery::start() {
  for (Watch& watch : watches_) {
    watch.services->start();
    watch.endpoint_slices->start();
    watch.pods->start();
  }
  // The informers call their handlers before they count as synced, so the first list is
  // computed here, once all of them have synced; this thread then follows the events.
  sync_waiter_ = std::jthread([this](const std::stop_token& stop) {
    setThreadName("pull-discovery");
    for (Watch& watch : watches_) {
      if (!watch.services->waitForSync(stop) || !watch.endpoint_slices->waitForSync(stop) ||
          !watch.pods->waitForSync(stop)) {
        return;
      }
    }
    {
      std::lock_guard lock(mu_);
      informers_synced_ = true;
      dirty_ = false;  // the first list sees every event so far
    }
    refresh();
    // Then once after each batch of events that arrived during the previous refresh.
    while (true) {
      {
        std::unique_lock lock(mu_);
        if (!dirty_cv_.wait(lock, stop, [this] { return dirty_; })) return;
        dirty_ = false;
      }
      refresh();
    }
  });
}

void SourceDiscovery::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  synced_cv_.notify_all();
  if (sync_waiter_.joinable()) {
    sync_waiter_.request_stop();
    sync_waiter_.join();
  }
  for (Watch& watch : watches_) {
    watch.services->stop();
    watch.endpoint_slices->stop();
    watch.pods->stop();
  }
}

bool SourceDiscovery::hasSynced() const {
  std::lock_guard lock(mu_);
  return reported_;
}

bool SourceDiscovery::waitForSync(std::stop_token stop) const {
  std::unique_lock lock(mu_);
  return synced_cv_.wait(lock, std::move(stop), [this] { return reported_; });
}

std::vector<SourceSpec> SourceDiscovery::sources() const {
  std::lock_guard lock(mu_);
  return sources_;
}

void SourceDiscovery::refresh() {
  std::lock_guard refreshing(refresh_mu_);
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      return;
    }
  }
  // Compute from a copy of the stores: the objects are few and small.
  std::vector<client::Service> services;
  std::vector<client::EndpointSlice> endpoint_slices;
  std::vector<client::Pod> pods;
  for (const Watch& watch : watches_) {
    for (const auto& service : watch.services->store().list()) services.push_back(*service);
    for (const auto& slice : watch.endpoint_slices->store().list()) {
      endpoint_slices.push_back(*slice);
    }
    for (const auto& pod : watch.pods->store().list()) pods.push_back(*pod);
  }
  DiscoveryResult result = discoveredSources(services, endpoint_slices, pods, options_);
  logProblems(result.problems);
  reportRefusals(result.refused);

  // Report a change (and the first list, whatever it is).
  {
    std::lock_guard lock(mu_);
    if (reported_ && result.sources == sources_) {
      return;
    }
    sources_ = result.sources;
  }
  log::info("pull: discovered inventory sources", {{"sources", result.sources.size()}});
  on_change_(std::move(result.sources));
  {
    std::lock_guard lock(mu_);
    reported_ = true;
  }
  synced_cv_.notify_all();
}

void SourceDiscovery::logProblems(const std::vector<DiscoveryProblem>& problems) {
  std::map<std::string, std::string> now;
  for (const DiscoveryProblem& problem : problems) {
    const std::string key = problem.namespace_ + "/" + problem.service;
    now.emplace(key, problem.message);
    const auto before = logged_problems_.find(key);
    if (before != logged_problems_.end() && before->second == problem.message) {
      continue;  // told already
    }
    if (const auto held = problem_log_.allow(key)) {
      log::warning("pull: Service skipped by discovery", {{"namespace", problem.namespace_},
                                                          {"service", problem.service},
                                                          {"problem", problem.message},
                                                          {"held", *held}});
    }
  }
  logged_problems_ = std::move(now);
}

void SourceDiscovery::reportRefusals(const std::vector<DiscoveryRefusal>& refused) {
  std::set<std::pair<std::string, IgnoredReason>> now;
  for (const DiscoveryRefusal& refusal : refused) {
    std::pair key(refusal.id, refusal.reason);
    if (!refused_.contains(key)) {
      if (options_.on_refused) options_.on_refused(refusal.reason);
      const std::string_view reason = ignoredReasonName(refusal.reason);
      if (const auto held = refusal_log_.allow(reason)) {
        log::warning("pull: inventory endpoint refused", {{"endpoint", refusal.id},
                                                          {"driver", refusal.driver},
                                                          {"reason", reason},
                                                          {"problem", refusal.message},
                                                          {"linesHeldBack", *held}});
      }
    }
    now.insert(std::move(key));
  }
  refused_ = std::move(now);
}

}  // namespace rsc::controller::pull
