#include "test/bench/controller_process.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "controller/http/http_server.h"
#include "test/bench/http_load.h"

namespace rsc::bench {

namespace {

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "VmHWM:   123456 kB" -> bytes.
int64_t statusField(const std::string& status, const std::string& field) {
  const size_t at = status.find("\n" + field + ":");
  if (at == std::string::npos) {
    return 0;
  }
  std::istringstream in(status.substr(at + field.size() + 2));
  int64_t kib = 0;
  in >> kib;
  return kib * 1024;
}

}  // namespace

Memory processMemory(pid_t pid) {
  const std::string status = "\n" + readFile("/proc/" + std::to_string(pid) + "/status");
  return {statusField(status, "VmHWM"), statusField(status, "VmRSS")};
}

double processCpuSeconds(pid_t pid) {
  // Fields 14 and 15 of /proc/PID/stat, after the parenthesised name.
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return 0;
  }
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i >= 14) {
      ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

StatusOr<std::unique_ptr<ControllerProcess>> ControllerProcess::start(
    const ControllerSettings& settings, const std::filesystem::path& log, Clock& clock) {
  const int inventory = testing::freePort();
  const int metrics = testing::freePort();
  const int health = testing::freePort();
  std::vector<std::string> argv = {
      settings.binary.string(),
      "--kubeconfig=" + settings.kubeconfig.string(),
      "--auth=none",
      "--inventory-bind-address=127.0.0.1:" + std::to_string(inventory),
      "--metrics-bind-address=127.0.0.1:" + std::to_string(metrics),
      "--health-probe-bind-address=127.0.0.1:" + std::to_string(health),
      "--kube-api-qps=" + std::to_string(settings.qps),
      "--kube-api-burst=" + std::to_string(settings.burst),
  };
  if (settings.workers > 0) {
    argv.push_back("--workers=" + std::to_string(settings.workers));
  }
  argv.insert(argv.end(), settings.extra_args.begin(), settings.extra_args.end());
  std::unique_ptr<ControllerProcess> c(
      new ControllerProcess(std::make_unique<testing::Process>(argv, log)));
  c->inventory_port_ = static_cast<uint16_t>(inventory);
  c->metrics_port_ = static_cast<uint16_t>(metrics);
  c->health_port_ = static_cast<uint16_t>(health);

  const Clock::TimePoint deadline = clock.now() + std::chrono::minutes(1);
  HttpConnection probe("127.0.0.1", c->health_port_);
  while (clock.now() < deadline) {
    if (!c->process_->running()) {
      return unavailable("the controller exited at start; see " + log.string());
    }
    StatusOr<Answer> ready = probe.send("GET", "/readyz");
    if (ready.ok() && ready->code == 200) {
      return c;
    }
    clock.sleepFor(std::chrono::milliseconds(100));
  }
  return deadlineExceeded("the controller did not become ready; see " + log.string());
}

ControllerProcess::~ControllerProcess() {
  process_->signal(SIGTERM);
  process_->wait(std::chrono::seconds(30));
}

StatusOr<std::string> ControllerProcess::metrics() {
  HttpConnection conn("127.0.0.1", metrics_port_);
  StatusOr<Answer> a = conn.send("GET", "/metrics");
  if (!a.ok()) {
    return a.status();
  }
  if (a->code != 200) {
    return unavailable("GET /metrics: HTTP " + std::to_string(a->code));
  }
  return std::move(a->body);
}

StatusOr<std::unique_ptr<MinimalServerProcess>> MinimalServerProcess::start(
    const std::filesystem::path& self, const std::filesystem::path& dir, Clock& clock) {
  const std::filesystem::path port_file = dir / "minimal-server.port";
  std::error_code ec;
  std::filesystem::remove(port_file, ec);
  auto m = std::make_unique<MinimalServerProcess>();
  m->process_ = std::make_unique<testing::Process>(
      std::vector<std::string>{self.string(), "--serve-minimal=" + port_file.string()},
      dir / "minimal-server.log");
  const Clock::TimePoint deadline = clock.now() + std::chrono::seconds(30);
  while (clock.now() < deadline) {
    const std::string port = readFile(port_file);
    if (!port.empty() && port.back() == '\n') {
      m->port_ = static_cast<uint16_t>(std::strtoul(port.c_str(), nullptr, 10));
      if (m->port_ != 0) {
        return m;
      }
    }
    if (!m->process_->running()) {
      break;
    }
    clock.sleepFor(std::chrono::milliseconds(50));
  }
  return unavailable("the minimal server did not start; see " +
                     (dir / "minimal-server.log").string());
}

int serveMinimal(const std::filesystem::path& port_file) {
  // SIGTERM is taken by sigwait below, so block it before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  controller::http::HttpServerOptions options;
  options.bind_address = "127.0.0.1:0";
  options.name = "minimal";
  auto server = controller::http::HttpServer::start(
      options,
      [](const controller::http::HttpRequest&, const controller::http::HttpServer::Responder& r) {
        controller::http::HttpResponse ok;
        ok.status = 200;
        r(std::move(ok));
      });
  if (!server.ok()) {
    return 1;
  }
  {
    std::ofstream out(port_file.string() + ".tmp");
    out << (*server)->port() << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(port_file.string() + ".tmp", port_file, ec);
  if (ec) {
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->stop(std::chrono::seconds(1));
  return 0;
}

}  // namespace rsc::bench
