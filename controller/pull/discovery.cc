#include "controller/pull/discovery.h"

#include <algorithm>
#include <condition_variable>
#include <string_view>
#include <tuple>
#include <utility>

#include "controller/inventory/names.h"
#include "controller/pull/fetcher.h"

namespace rsc::controller::pull {
namespace {

// How a labelled Service is served, from its port and annotations.
struct ServiceSettings {
  std::string driver;
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
  if (auto error = inventory::driverNameError(settings.driver)) {
    problem = "label " + std::string(kDriverLabel) + ": " + *error;
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

bool allowed(const DiscoveryOptions& options, const std::string& ns) {
  return options.namespaces.empty() ||
         std::ranges::find(options.namespaces, ns) != options.namespaces.end();
}

// Kubernetes: an unset ready condition means ready.
bool usable(const client::Endpoint& endpoint) {
  return endpoint.conditions.ready.value_or(true) &&
         !endpoint.conditions.terminating.value_or(false);
}

// Adds the sources of one EndpointSlice of `service` to `sources` (by id; the first stays).
void addSources(const client::Service& service, const ServiceSettings& settings,
                const client::EndpointSlice& slice, std::map<std::string, SourceSpec>& sources) {
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
      const auto [it, added] = sources.try_emplace(id);
      if (!added) {
        continue;  // listed by an earlier slice too
      }
      SourceSpec& spec = it->second;
      spec.driver = settings.driver;
      spec.id = std::move(id);
      spec.url.append(https ? "https://" : "http://").append(host_port).append(settings.path);
      if (settings.node_scope && endpoint.node_name && !endpoint.node_name->empty()) {
        spec.caller.node_name = endpoint.node_name;
      }
      if (https) {
        spec.ca_pem = settings.ca_pem;
        spec.tls_server_name.append(name).append(".").append(ns).append(".svc");
      }
    }
  }
}

// An informer of the objects of `ns` ("" for all) that carry kDriverLabel, calling `changed`
// for every add, update and delete.
template <typename R>
std::unique_ptr<client::Informer<R>> informerOf(client::KubeApi& api, Clock& clock,
                                                const std::string& ns,
                                                const std::function<void()>& changed) {
  using Object = typename R::Object;
  client::InformerOptions<R> options;
  options.namespace_ = ns;
  options.label_selector = kDriverLabel;
  client::InformerHandlers<R> handlers;
  handlers.on_add = [changed](const Object&) { changed(); };
  handlers.on_update = [changed](const Object&, const Object&) { changed(); };
  handlers.on_delete = [changed](const Object&) { changed(); };
  return std::make_unique<client::Informer<R>>(api, clock, std::move(options), std::move(handlers));
}

}  // namespace

DiscoveryResult discoveredSources(const std::vector<client::Service>& services,
                                  const std::vector<client::EndpointSlice>& endpoint_slices,
                                  const DiscoveryOptions& options) {
  // Index the slices by (namespace, service), each Service's in name order.
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

  // Walk the Services that count.
  DiscoveryResult result;
  std::map<std::string, SourceSpec> sources;
  for (const client::Service& service : services) {
    if (!allowed(options, service.metadata.namespace_)) {
      continue;
    }
    std::optional<std::string> problem;
    const std::optional<ServiceSettings> settings = settingsOf(service, problem);
    if (!settings) {
      if (problem) {
        result.problems.push_back(
            {service.metadata.namespace_, service.metadata.name, std::move(*problem)});
      }
      continue;
    }
    const auto slices = slices_of.find({service.metadata.namespace_, service.metadata.name});
    if (slices == slices_of.end()) {
      continue;
    }
    for (const client::EndpointSlice* slice : slices->second) {
      addSources(service, *settings, *slice, sources);
    }
  }

  for (auto& [id, spec] : sources) {
    result.sources.push_back(std::move(spec));
  }
  std::ranges::sort(result.problems, {}, [](const DiscoveryProblem& p) {
    return std::tie(p.namespace_, p.service, p.message);
  });
  return result;
}

SourceDiscovery::SourceDiscovery(client::KubeApi& api, Clock& clock, DiscoveryOptions options,
                                 OnChange on_change)
    : options_(std::move(options)), on_change_(std::move(on_change)), problem_log_(clock) {
  // One pair of informers per allowed namespace, or one pair for all.
  std::vector<std::string> namespaces = options_.namespaces;
  if (namespaces.empty()) {
    namespaces.emplace_back();
  }
  const std::function<void()> changed = [this] {
    bool synced = false;
    {
      std::lock_guard lock(mu_);
      synced = informers_synced_;
    }
    if (synced) {
      refresh();
    }
  };
  for (const std::string& ns : namespaces) {
    Watch watch;
    watch.services = informerOf<client::Services>(api, clock, ns, changed);
    watch.endpoint_slices = informerOf<client::EndpointSlices>(api, clock, ns, changed);
    watches_.push_back(std::move(watch));
  }
}

SourceDiscovery::~SourceDiscovery() { stop(); }

void SourceDiscovery::start() {
  for (Watch& watch : watches_) {
    watch.services->start();
    watch.endpoint_slices->start();
  }
  // The informers call their handlers before they count as synced, so the first list is
  // computed here, once all of them have synced; events after that refresh on their own.
  sync_waiter_ = std::jthread([this](const std::stop_token& stop) {
    for (Watch& watch : watches_) {
      if (!watch.services->waitForSync(stop) || !watch.endpoint_slices->waitForSync(stop)) {
        return;
      }
    }
    {
      std::lock_guard lock(mu_);
      informers_synced_ = true;
    }
    refresh();
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
  for (const Watch& watch : watches_) {
    for (const auto& service : watch.services->store().list()) services.push_back(*service);
    for (const auto& slice : watch.endpoint_slices->store().list()) {
      endpoint_slices.push_back(*slice);
    }
  }
  DiscoveryResult result = discoveredSources(services, endpoint_slices, options_);
  logProblems(result.problems);

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

}  // namespace rsc::controller::pull
