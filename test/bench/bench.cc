// resourceslice-bench: how fast a cluster's inventory reaches the API server
// through the controller, measured on the real API server from test/cluster
// and always as a ratio to a baseline measured in the same run (absolute
// times on a shared two-core machine are not comparable from run to run).
// Seven workloads (RESULTS.md describes each): initial sync, no-op re-push,
// churn, scale, the push API, the incomplete window and the burst. Every time
// is reported only after the published slices were checked to be complete and
// exactly as pushed. Single-threaded orchestration; the load runners start
// their own threads.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "client/api_limits.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "test/bench/cluster.h"
#include "test/bench/controller_process.h"
#include "test/bench/http_load.h"
#include "test/bench/inventory.h"
#include "test/bench/slice_watch.h"

#ifndef RSC_SOURCE_ROOT
#define RSC_SOURCE_ROOT "."
#endif
#ifndef RSC_BUILD_ROOT
#define RSC_BUILD_ROOT "."
#endif

namespace rsc::bench {
namespace {

// The workloads of the issue, at scale 1.
constexpr int kInitialGpuPools = 2000;
constexpr int kGpuDevices = 8;
constexpr int kInitialNicPools = 4;
constexpr int kNicDevices = 1000;
constexpr int kChurnPools = 200;
constexpr int kScalePools = 20000;
constexpr int kPushApiDevices = 128;
// Workload 6: pools grown from one full slice to 2 and to 16 slices, each
// growth measured this many times per side.
constexpr int kWindowRepeats = 5;
constexpr int kWindowUpdates = 20;  // direct updates timed for the round trip
constexpr char kWindowDriver[] = "window.example.com";

// Targets (the issue's).
constexpr double kInitialSyncTarget = 1.10;  // issue 13 (was 1.25)
constexpr double kRssJsonFactor = 2.5;
constexpr int64_t kRssAllowance = 50ll * 1024 * 1024;
constexpr double kPushApiTarget = 0.5;
constexpr double kNoopTarget = 0.5;    // workload 2, pushes per second vs the minimal handler
constexpr double kScaleTarget = 1.15;  // workload 4, time vs the direct-create baseline
// API reads while publishing: a constant (the start's LIST and WATCH, a
// version probe), never one per pool.
constexpr int64_t kMaxReads = 10;
// The controller's batching window (kDefaultBatchWindow): what a churn
// publish may take beyond the direct update.
constexpr double kBatchWindowMs = 10.0;
// Aim for RSS per 10,000 devices managed (issue 13).
constexpr double kRssPer10kAimMiB = 20.0;
constexpr double kWindowTarget = 2.0;  // 1 -> 16 window, in single-update round trips
// Workload 7, time to the last slice event vs the fully parallel baseline
// (issue 36).
constexpr double kBurst200Target = 1.20;
constexpr double kBurst2000Target = 1.20;

// Workload 7: one attribute of one device changed in this many node-local
// pools at once (scaled; at most the initial GPU pools), each size with its
// target.
struct BurstSize {
  int pools;
  double target;
};
constexpr std::array<BurstSize, 2> kBursts = {{{200, kBurst200Target}, {2000, kBurst2000Target}}};
// The sides of each burst size in turn (B baseline, C controller): they
// alternate, as in workload 1, so that drift of the machine falls on both.
constexpr std::string_view kBurstSequence = "BCBCB";
// Before each burst the API server must be quiet: less than this share of a
// core over kQuietSample, waiting at most kQuietMax. A burst takes about
// half a second, and the API server's work left from what came before (the
// garbage collection after 2,000 creates, say: 2.6 CPU-s in 1.5 s once)
// would otherwise fall on whichever side runs next. A collection the run
// before only set off is not seen by this wait (pprof at 22:26 on 12-05: the
// API server's mark workers on 61% of its samples from the end of a baseline
// burst into the controller's), so each run first forces one to its end.
constexpr double kQuietCores = 0.1;
constexpr auto kQuietSample = std::chrono::milliseconds(500);
constexpr auto kQuietMax = std::chrono::seconds(20);

// Requests in flight of the direct-write baselines (--parallel): upstream
// publishes from one process per node, so a burst has about every write in
// flight at once; 64 is also what the controller's inventory server takes
// from one client address by default, below.
constexpr int kDefaultParallel = 64;
// The controller's default --inventory-max-connections-per-client. Every
// push of the benchmark comes from one address, so a --parallel above it
// raises the controller's limit for workload 3's connections.
constexpr int kConnectionsPerClient = 64;

// How often the controller's /metrics is read while waiting for a publish:
// the reported time is late by at most this much. Each read costs the
// controller a scrape (the text of every metric, and /proc for the process
// collector), CPU the direct baseline never spends, so a long publish is
// read less often: every 10 us per pool, at least every 50 ms (200 ms for
// the 20,000 pools of workload 4, 0.4% of its time).
constexpr auto kPollPeriod = std::chrono::milliseconds(50);
constexpr auto kPollPerPool = std::chrono::microseconds(10);
// Time for late writes to show up before the write counters are read.
constexpr auto kSettle = std::chrono::seconds(1);
// The no-op workload repeats the whole inventory until this much time has
// been measured on each side.
constexpr double kNoopMinSeconds = 3.0;

struct Options {
  int workload = 0;  // 0: all
  double scale = 1.0;
  // The controller's --workers; unset: not passed, so that the controller
  // runs with its own default (which follows its API budget).
  std::optional<int> workers;
  // Requests in flight of the direct-write baselines (kDefaultParallel), not
  // tied to the controller's workers.
  int parallel = kDefaultParallel;
  double qps = 500;
  int burst = 1000;
  int connections = 8;
  double push_seconds = 10;
  std::filesystem::path out_dir = std::filesystem::path(RSC_BUILD_ROOT) / "test/bench/out";
  std::filesystem::path controller =
      std::filesystem::path(RSC_BUILD_ROOT) / "controller/resourceslice-controller";
  std::filesystem::path source_root = RSC_SOURCE_ROOT;
  // A second controller binary (a candidate fix) that workload 1 also runs,
  // alternating with the first, so both are measured in the same run.
  std::filesystem::path compare;
  std::string serve_minimal;
  bool no_plot = false;
  bool help = false;
};

constexpr std::string_view kUsage = R"(Usage: resourceslice-bench [flags]

Benchmarks resourceslice-controller against a real kube-apiserver (test/cluster),
each workload as a ratio to a baseline measured in the same run.

  --workload=N         run only workload N (1 initial sync, 2 no-op, 3 churn,
                       4 scale, 5 push API, 6 incomplete window, 7 burst);
                       default: all
  --scale=F            multiply pool counts by F (e.g. 0.05 for a smoke run)
  --workers=N          pass --workers=N to the controller (default: not passed,
                       the controller's own default)
  --parallel=N         requests in flight of the direct-write baselines of
                       workloads 1, 3, 4 and 7, and push connections of
                       workload 3 (64)
  --qps=Q --burst=B    client rate limit of controller and baseline (500/1000)
  --connections=N      push connections (8)
  --push-seconds=S     duration of each push-API measurement (10)
  --out-dir=DIR        where results.md, publish_curve.csv, publish_time.png
                       and the logs go
  --controller=PATH    the controller binary
  --source-root=PATH   the source tree (test/cluster, plot.py)
  --compare=PATH       a second controller binary (e.g. a candidate fix) that
                       workload 1 runs too, alternating with the first
  --no-plot            do not run plot.py
)";

StatusOr<Options> parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    try {
      if (name == "--workload") {
        o.workload = std::stoi(value);
      } else if (name == "--scale") {
        o.scale = std::stod(value);
      } else if (name == "--workers") {
        o.workers = std::stoi(value);
      } else if (name == "--parallel") {
        o.parallel = std::stoi(value);
      } else if (name == "--qps") {
        o.qps = std::stod(value);
      } else if (name == "--burst") {
        o.burst = std::stoi(value);
      } else if (name == "--connections") {
        o.connections = std::stoi(value);
      } else if (name == "--push-seconds") {
        o.push_seconds = std::stod(value);
      } else if (name == "--out-dir") {
        o.out_dir = value;
      } else if (name == "--controller") {
        o.controller = value;
      } else if (name == "--source-root") {
        o.source_root = value;
      } else if (name == "--compare") {
        o.compare = value;
      } else if (name == "--serve-minimal") {
        o.serve_minimal = value;
      } else if (name == "--no-plot") {
        o.no_plot = true;
      } else if (name == "--help" || name == "-h") {
        o.help = true;
      } else {
        return invalidArgument("unknown flag " + arg);
      }
    } catch (const std::exception&) {
      std::string message = "flag " + name;
      message += ": bad value \"" + value + "\"";
      return invalidArgument(message);
    }
  }
  if (o.workload < 0 || o.workload > 7) {
    return invalidArgument("--workload must be 1..7");
  }
  if (!(o.scale > 0 && o.scale <= 1)) {
    return invalidArgument("--scale must be in (0, 1]");
  }
  if (o.workers.value_or(1) < 1 || o.parallel < 1 || o.connections < 1 || o.burst < 1 ||
      o.qps <= 0 || o.push_seconds <= 0) {
    return invalidArgument(
        "--workers, --parallel, --connections, --burst, --qps, --push-seconds must be > 0");
  }
  return o;
}

int scaled(int n, double scale) { return std::max(1, static_cast<int>(std::lround(n * scale))); }

// Formatting for the table.
std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return (v < 0 ? "-" : "") + digits;
}
std::string secs(double s) { return fixed(s, s < 10 ? 2 : 1) + " s"; }
std::string millis(double ms) { return fixed(ms, ms < 10 ? 2 : 1) + " ms"; }
std::string mib(int64_t bytes) {
  return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 1) + " MiB";
}
std::string ratio(double r) { return fixed(r, 2) + "x"; }

// "2.2 / 8.2 (0.95 of 2 cores)": the CPU seconds of one side (the controller or the client, and
// the API server) and the share of the machine's cores they used over `seconds`. When both sides
// keep every core busy, the run is bound by CPU, and the ratio of the sums is the ratio of times.
constexpr char kCpuMetric[] =
    "CPU seconds: controller or client / API server (share of the cores); ratio of the sums";
std::string cpuCell(double own, double apiserver, double seconds) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return fixed(own, 1) + " / " + fixed(apiserver, 1) + " (" +
         fixed((own + apiserver) / (seconds * cores), 2) + " of " + std::to_string(cores) +
         " cores)";
}

void progress(const std::string& what) {
  static const Clock::TimePoint start = RealClock::instance().now();
  const double t = std::chrono::duration<double>(RealClock::instance().now() - start).count();
  std::cerr << "[bench " << fixed(t, 1) << "s] " << what << std::endl;
}

struct Row {
  std::string workload;
  std::string metric;
  std::string controller;
  std::string baseline;
  std::string ratio;
  std::string target;
  std::string verdict;  // "met", "MISSED", "FAILED" or ""
};

struct Curve {
  std::string workload;
  std::string series;
  // (pools published, seconds since the first push or create)
  std::vector<std::pair<int64_t, double>> points;
};

// What the controller and the API server had counted at one moment.
struct Counters {
  double writes = 0;  // slice_writes_total, every verb and result
  double creates = 0;
  double updates = 0;
  double deletes = 0;
  double failed_writes = 0;      // result != success
  double published = 0;          // publish_latency_seconds_count
  double gets = 0;               // rest_client_requests_total{method="GET"}
  double reconciles = 0;         // controller_runtime_reconcile_total
  double apiserver = 0;          // ResourceSlice writes the API server accepted
  double apiserver_refused = 0;  // and refused (retried by the client, or failed)
  double controller_cpu = 0;
  double apiserver_cpu = 0;

  Counters operator-(const Counters& o) const {
    return {writes - o.writes,
            creates - o.creates,
            updates - o.updates,
            deletes - o.deletes,
            failed_writes - o.failed_writes,
            published - o.published,
            gets - o.gets,
            reconciles - o.reconciles,
            apiserver - o.apiserver,
            apiserver_refused - o.apiserver_refused,
            controller_cpu - o.controller_cpu,
            apiserver_cpu - o.apiserver_cpu};
  }
};

// "2,032 / 2,032": slice writes by the controller's metric and accepted by the
// API server; requests the server refused (and the client retried) are shown
// apart, as they change nothing.
std::string writesCell(const Counters& d) {
  std::string cell =
      grouped(static_cast<int64_t>(d.writes)) + " / " + grouped(static_cast<int64_t>(d.apiserver));
  if (d.apiserver_refused > 0) {
    cell += " (+" + grouped(static_cast<int64_t>(d.apiserver_refused)) + " refused)";
  }
  return cell;
}

// Reconciles equal to pools (each pool once, its own writes never echoed
// back as another reconcile) and reads a constant.
std::string readsTarget(int64_t pools) {
  return "= " + grouped(pools) + "; <= " + std::to_string(kMaxReads);
}
std::string readsMet(const Counters& d, int64_t pools) {
  return d.reconciles == static_cast<double>(pools) && d.gets <= static_cast<double>(kMaxReads)
             ? "met"
             : "MISSED";
}

struct PublishRun {
  double seconds = 0;
  std::vector<std::pair<int64_t, double>> curve;
  LoadResult pushes;
};

struct BaselineRun {
  double seconds = 0;
  int64_t writes = 0;
  std::vector<double> pool_done;   // seconds, by pool
  std::vector<double> latency_ms;  // per write
  double client_cpu = 0;
  double apiserver_cpu = 0;
};

double selfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::vector<std::pair<int64_t, double>> curveOf(std::vector<double> done) {
  std::sort(done.begin(), done.end());
  std::vector<std::pair<int64_t, double>> out;
  for (size_t i = 0; i < done.size(); ++i) {
    out.emplace_back(static_cast<int64_t>(i + 1), done[i]);
  }
  return out;
}

// Calls `fn` with 0 .. count - 1 from min(threads, count) threads, each
// taking the next index when its call returns: how the direct-write
// baselines keep `threads` requests in flight. The first error stops the
// threads from taking more and is returned.
Status forEachInParallel(size_t count, int threads, const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status failure;
  std::vector<std::thread> running;
  const size_t n = std::min(count, static_cast<size_t>(std::max(1, threads)));
  running.reserve(n);
  for (size_t t = 0; t < n; ++t) {
    running.emplace_back([&] {
      for (size_t i = next++; i < count; i = next++) {
        Status s = fn(i);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (failure.ok()) {
            failure = std::move(s);
          }
          next = count;
        }
      }
    });
  }
  for (std::thread& t : running) {
    t.join();
  }
  return failure;
}

// `k` of `n` positions (k <= n), spread evenly over them: the pools a
// change touches, from all over the inventory.
std::vector<size_t> spread(size_t n, size_t k) {
  std::vector<size_t> out;
  out.reserve(k);
  for (size_t i = 0; i < k; ++i) {
    out.push_back(i * n / k);
  }
  return out;
}

// The writes of one attribute changed in `pools` one-slice pools: one update
// each, nothing else, and no generation bumped.
bool minimalUpdates(const Counters& d, size_t pools, int64_t bumped) {
  const auto n = static_cast<double>(pools);
  return d.updates == n && d.writes == d.updates && d.apiserver == n && bumped == 0;
}

double meanOf(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) {
    sum += v;
  }
  return values.empty() ? 0 : sum / static_cast<double>(values.size());
}

template <typename Run>
std::vector<double> secondsOf(const std::vector<Run>& runs) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const Run& r : runs) {
    out.push_back(r.seconds);
  }
  return out;
}

// "5.57 s (5.66 / 5.48)": the mean of runs, then each run; in milliseconds
// ("58.2 ms (61.0 / 55.3)") when the mean is under a second.
std::string runsCell(const std::vector<double>& seconds) {
  const double mean = meanOf(seconds);
  const bool ms = mean < 1;
  std::string each;
  for (double s : seconds) {
    each += (each.empty() ? "" : " / ") + (ms ? fixed(s * 1e3, 1) : fixed(s, 2));
  }
  return (ms ? millis(mean * 1e3) : secs(mean)) + " (" + each + ")";
}

// Push connections of a burst of `pools` pools: one per pool, up to as
// many as the controller takes from one address, as the drivers of a burst
// push at about the same moment.
int burstConnections(size_t pools) {
  return static_cast<int>(std::min(pools, static_cast<size_t>(kConnectionsPerClient)));
}

class Bench {
 public:
  explicit Bench(Options options) : o_(std::move(options)), clock_(RealClock::instance()) {}

  int run(const std::string& self);

 private:
  Status workloadInitialSync();
  Status workloadNoop();
  Status workloadChurn();
  Status workloadScale();
  Status workloadPushApi();
  Status workloadWindow();
  Status workloadBurst();
  // Makes the API server finish a garbage collection, then waits until it is
  // quiet (kQuietCores), at most kQuietMax; returns the seconds both took.
  double waitForQuietApiServer();
  // Grows pool `name` of kWindowDriver from one full slice to `slices` on the
  // running controller; returns the milliseconds from the first to the last
  // watch event of the new generation.
  StatusOr<double> windowOfGrowth(const std::string& name, int slices);
  // One burst of workload 7 on each side: the pools of initial_ at `chosen`
  // changed, pushed at once to the running controller, and checked; or the
  // baseline's `pools` at `chosen` changed and their slices (`stored`, kept
  // up to date) updated directly.
  struct BurstRun {
    double seconds = 0;
    Counters writes;
    int64_t bumped = 0;
  };
  StatusOr<BurstRun> burstController(const std::vector<size_t>& chosen);
  StatusOr<double> burstDirect(std::vector<BenchPool>& pools,
                               std::vector<client::ResourceSlice>& stored,
                               const std::vector<size_t>& chosen);
  // Seconds from calling `send` to the last of `changed`'s slices arriving
  // with its new content (BenchPool::carriesRevision) in a MODIFIED event
  // of a watch of the slices labelled `managed_by`, opened before.
  StatusOr<double> timeToLastEvent(const std::string& managed_by,
                                   const std::vector<const BenchPool*>& changed,
                                   const std::function<Status()>& send);

  // A fresh controller: stops the running one and deletes every slice it
  // managed, so that the new one starts from an empty cache.
  Status freshController(const std::string& name, const std::filesystem::path& binary = {},
                         std::vector<std::string> extra_args = {});
  // The initial inventory, published and checked, for workloads 2 and 3
  // when workload 1 did not run before them.
  Status ensureInitialInventory();
  StatusOr<Counters> counters();
  // Pushes every pool (no wait) from the push connections and waits until
  // the controller has published `expect` more pools.
  StatusOr<PublishRun> pushAndWait(const std::vector<BenchPool>& pools, int64_t expect);
  // Creates the baseline's slices of `pools` directly with our client,
  // --parallel requests in flight, at the controller's rate limit. With
  // `get_node`, each node-local pool first reads its Node, as the controller
  // does.
  StatusOr<BaselineRun> baselineCreate(const std::vector<BenchPool>& pools, bool get_node = false);
  // Checks the controller's slices of every driver in `pools` against them.
  StatusOr<CheckReport> checkController(const std::vector<BenchPool>& pools);
  // The baseline's slices of `pool` (its driver's *.example.net twin, owned
  // by its Node).
  std::vector<client::ResourceSlice> baselineSlicesOf(const BenchPool& pool) const;
  // The indices of initial_'s node-local (one-slice) pools, in order.
  std::vector<size_t> gpuPools() const;
  // How many of the controller's pools in `report` are at another
  // generation than the initial inventory's.
  int64_t bumpedGenerations(const CheckReport& report) const;
  // The baseline's slices of `pools`, created directly as the admin (not
  // measured) for a workload that then changes them; each pool's first
  // slice as stored.
  StatusOr<std::vector<client::ResourceSlice>> createBaselineSlices(
      const std::vector<BenchPool>& pools);
  // The update of `stored` (a pool's first baseline slice) to `pool`'s
  // content now.
  client::ResourceSlice baselineUpdate(const BenchPool& pool,
                                       const client::ResourceSlice& stored) const;
  // Opens --parallel connections of a new baseline client (as many reads at
  // once), as a publisher that has been running has them open, and waits
  // until the reads' tokens are back in its rate limiter: for the workloads
  // that time changes against a controller that has been running (3, 7).
  Status openConnections(client::KubeApi& api);
  StatusOr<MinimalServerProcess*> minimalServer();
  std::unique_ptr<client::RestKubeApi> baselineApi(
      std::unique_ptr<client::HttpTransport>* transport, Status* status);

  void add(Row row) { rows_.push_back(std::move(row)); }
  void fail(const std::string& workload, const Status& s) {
    failed_ = true;
    add({workload, "error", s.toString(), "", "", "", "FAILED"});
    progress("FAILED: " + s.toString());
  }
  void writeReport(double total_seconds);

  Options o_;
  Clock& clock_;
  std::string self_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ControllerProcess> controller_;
  std::unique_ptr<MinimalServerProcess> minimal_;
  std::map<std::string, std::string> node_uids_;
  int controller_runs_ = 0;
  // The initial inventory as the running controller has published it.
  std::vector<BenchPool> initial_;
  bool initial_published_ = false;
  std::map<std::string, int64_t> initial_generations_;
  std::vector<Row> rows_;
  std::vector<Curve> curves_;
  std::vector<std::string> notes_;
  bool failed_ = false;
  std::string load_before_;
};

StatusOr<Counters> Bench::counters() {
  Counters c;
  if (controller_ != nullptr) {
    ASSIGN_OR_RETURN(std::string text, controller_->metrics());
    const std::string writes = "resourceslice_controller_slice_writes_total";
    c.writes = sumSamples(text, writes);
    c.creates = sumSamples(text, writes, {{"verb", {"create"}}, {"result", {"success"}}});
    c.updates = sumSamples(text, writes, {{"verb", {"update"}}, {"result", {"success"}}});
    c.deletes = sumSamples(text, writes, {{"verb", {"delete"}}, {"result", {"success"}}});
    c.failed_writes = c.writes - c.creates - c.updates - c.deletes;
    c.published = sumSamples(text, "resourceslice_controller_publish_latency_seconds_count");
    c.gets = sumSamples(text, "rest_client_requests_total", {{"method", {"GET"}}});
    c.reconciles = sumSamples(text, "controller_runtime_reconcile_total");
    c.controller_cpu = processCpuSeconds(controller_->pid());
  }
  ASSIGN_OR_RETURN(const Cluster::SliceWrites server, cluster_->sliceWrites());
  c.apiserver = server.accepted;
  c.apiserver_refused = server.refused;
  c.apiserver_cpu = processCpuSeconds(cluster_->apiserverPid());
  return c;
}

Status Bench::freshController(const std::string& name, const std::filesystem::path& binary,
                              std::vector<std::string> extra_args) {
  controller_.reset();
  initial_published_ = false;
  RETURN_IF_ERROR(cluster_->deleteSlices(kControllerLabel));
  ControllerSettings s;
  s.binary = binary.empty() ? o_.controller : binary;
  s.kubeconfig = cluster_->kubeconfig();
  s.qps = o_.qps;
  s.burst = o_.burst;
  s.workers = o_.workers.value_or(0);
  s.extra_args = std::move(extra_args);
  if (o_.parallel > kConnectionsPerClient) {
    s.extra_args.push_back("--inventory-max-connections-per-client=" + std::to_string(o_.parallel));
  }
  const std::filesystem::path log =
      o_.out_dir / "logs" /
      ("controller-" + std::to_string(++controller_runs_) + "-" + name + ".log");
  ASSIGN_OR_RETURN(controller_, ControllerProcess::start(s, log, clock_));
  return okStatus();
}

StatusOr<MinimalServerProcess*> Bench::minimalServer() {
  if (minimal_ == nullptr) {
    ASSIGN_OR_RETURN(minimal_, MinimalServerProcess::start(self_, o_.out_dir / "logs", clock_));
  }
  return minimal_.get();
}

std::unique_ptr<client::RestKubeApi> Bench::baselineApi(
    std::unique_ptr<client::HttpTransport>* transport, Status* status) {
  client::ClientConfig config = cluster_->config();
  config.qps = o_.qps;
  config.burst = o_.burst;
  auto t = client::CpprestTransport::create(config, clock_);
  if (!t.ok()) {
    *status = t.status();
    return nullptr;
  }
  *transport = std::move(*t);
  client::RestKubeApiOptions options;
  options.qps = o_.qps;
  options.burst = o_.burst;
  auto api = client::RestKubeApi::create(**transport, clock_, options);
  if (!api.ok()) {
    *status = api.status();
    return nullptr;
  }
  return std::move(*api);
}

StatusOr<PublishRun> Bench::pushAndWait(const std::vector<BenchPool>& pools, int64_t expect) {
  std::vector<std::string> bodies;
  bodies.reserve(pools.size());
  std::vector<LoadRequest> requests;
  for (const BenchPool& p : pools) {
    bodies.push_back(p.body());
  }
  for (size_t i = 0; i < pools.size(); ++i) {
    requests.push_back({"PUT", pools[i].target(), bodies[i]});
  }
  ASSIGN_OR_RETURN(const Counters before, counters());

  PublishRun run;
  const uint16_t port = controller_->inventoryPort();
  const Clock::TimePoint start = clock_.now();
  std::thread pusher(
      [&] { run.pushes = runOnce("127.0.0.1", port, requests, o_.connections, clock_); });
  const Clock::TimePoint deadline =
      start + std::chrono::seconds(120) + std::chrono::milliseconds(50) * expect;
  Status result = deadlineExceeded("the controller did not publish every pool in time");
  int64_t seen = 0;
  run.curve.emplace_back(0, 0.0);
  const Clock::Duration poll = std::max<Clock::Duration>(kPollPeriod, kPollPerPool * expect);
  while (clock_.now() < deadline) {
    clock_.sleepFor(poll);
    StatusOr<std::string> text = controller_->metrics();
    if (!text.ok()) {
      result = text.status().withContext("read the controller's metrics");
      break;
    }
    const double t = std::chrono::duration<double>(clock_.now() - start).count();
    const int64_t published = static_cast<int64_t>(
        sumSamples(*text, "resourceslice_controller_publish_latency_seconds_count") -
        before.published);
    if (published != seen) {
      seen = published;
      run.curve.emplace_back(published, t);
    }
    if (published >= expect) {
      run.seconds = t;
      result = okStatus();
      break;
    }
    if (!controller_->running()) {
      result = unavailable("the controller exited; see " + controller_->logPath().string());
      break;
    }
  }
  pusher.join();
  RETURN_IF_ERROR(result);
  const int64_t accepted = run.pushes.count(200) + run.pushes.count(202);
  if (accepted != static_cast<int64_t>(pools.size())) {
    std::ostringstream codes;
    for (const auto& [code, n] : run.pushes.codes) {
      codes << " " << code << ":" << n;
    }
    return internalError("pushes not accepted (HTTP code:count" + codes.str() + ") " +
                         run.pushes.first_error);
  }
  return run;
}

StatusOr<BaselineRun> Bench::baselineCreate(const std::vector<BenchPool>& pools, bool get_node) {
  // Build every slice first: a driver has its objects in memory already.
  std::vector<std::vector<client::ResourceSlice>> slices;
  slices.reserve(pools.size());
  for (const BenchPool& p : pools) {
    slices.push_back(baselineSlicesOf(p));
  }
  Status made;
  std::unique_ptr<client::HttpTransport> transport;
  std::unique_ptr<client::RestKubeApi> api = baselineApi(&transport, &made);
  RETURN_IF_ERROR(made);

  BaselineRun run;
  run.pool_done.assign(pools.size(), 0);
  std::atomic<int64_t> writes{0};
  const double cpu0 = selfCpuSeconds();
  const double apiserver0 = processCpuSeconds(cluster_->apiserverPid());
  const Clock::TimePoint start = clock_.now();
  Status failure = forEachInParallel(pools.size(), o_.parallel, [&](size_t i) -> Status {
    if (get_node && pools[i].kind == PoolKind::kGpu) {
      StatusOr<client::Node> node = api->getNode(pools[i].node_or_fabric);
      if (!node.ok()) {
        return node.status().withContext("baseline get Node");
      }
    }
    for (const client::ResourceSlice& s : slices[i]) {
      StatusOr<client::ResourceSlice> created = api->createResourceSlice(s);
      if (!created.ok()) {
        return created.status().withContext("baseline create");
      }
      ++writes;
    }
    run.pool_done[i] = std::chrono::duration<double>(clock_.now() - start).count();
    return okStatus();
  });
  run.seconds = std::chrono::duration<double>(clock_.now() - start).count();
  run.client_cpu = selfCpuSeconds() - cpu0;
  run.apiserver_cpu = processCpuSeconds(cluster_->apiserverPid()) - apiserver0;
  run.writes = writes.load();
  RETURN_IF_ERROR(failure);
  return run;
}

StatusOr<CheckReport> Bench::checkController(const std::vector<BenchPool>& pools) {
  ASSIGN_OR_RETURN(std::vector<client::ResourceSlice> live, cluster_->listSlices(kControllerLabel));
  std::vector<const BenchPool*> expected;
  expected.reserve(pools.size());
  for (const BenchPool& p : pools) {
    expected.push_back(&p);
  }
  return checkSlices(live, expected, node_uids_);
}

std::vector<client::ResourceSlice> Bench::baselineSlicesOf(const BenchPool& pool) const {
  auto uid = node_uids_.find(pool.node_or_fabric);
  return baselineSlices(pool, baselineDriver(pool.driver), kBaselineLabel,
                        uid == node_uids_.end() ? "" : uid->second);
}

std::vector<size_t> Bench::gpuPools() const {
  std::vector<size_t> gpu;
  for (size_t i = 0; i < initial_.size(); ++i) {
    if (initial_[i].kind == PoolKind::kGpu) {
      gpu.push_back(i);
    }
  }
  return gpu;
}

int64_t Bench::bumpedGenerations(const CheckReport& report) const {
  int64_t bumped = 0;
  for (const auto& [pool, generation] : report.generations) {
    auto it = initial_generations_.find(pool);
    if (it != initial_generations_.end() && it->second != generation) {
      ++bumped;
    }
  }
  return bumped;
}

StatusOr<std::vector<client::ResourceSlice>> Bench::createBaselineSlices(
    const std::vector<BenchPool>& pools) {
  std::vector<client::ResourceSlice> first(pools.size());
  RETURN_IF_ERROR(forEachInParallel(pools.size(), o_.parallel, [&](size_t j) -> Status {
    const BenchPool& p = pools[j];
    const std::vector<client::ResourceSlice> slices = baselineSlicesOf(p);
    for (size_t s = 0; s < slices.size(); ++s) {
      StatusOr<client::ResourceSlice> stored = cluster_->api().createResourceSlice(slices[s]);
      if (!stored.ok()) {
        return stored.status().withContext("create the baseline's slices of " + p.name);
      }
      if (s == 0) {
        first[j] = std::move(*stored);
      }
    }
    return okStatus();
  }));
  return first;
}

client::ResourceSlice Bench::baselineUpdate(const BenchPool& pool,
                                            const client::ResourceSlice& stored) const {
  client::ResourceSlice next = baselineSlicesOf(pool)[0];
  next.metadata = stored.metadata;
  return next;
}

Status Bench::openConnections(client::KubeApi& api) {
  client::ListOptions options;
  options.label_selector = std::string(kManagedByKey) + "=" + kBaselineLabel;
  options.limit = 1;
  RETURN_IF_ERROR(
      forEachInParallel(static_cast<size_t>(o_.parallel), o_.parallel, [&](size_t) -> Status {
        return api.listResourceSlices(options).status().withContext(
            "open the baseline's connections");
      }));
  clock_.sleepFor(std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(static_cast<double>(o_.parallel) / o_.qps)));
  return okStatus();
}

Status Bench::ensureInitialInventory() {
  if (initial_published_ && controller_ != nullptr) {
    return okStatus();
  }
  progress("setting up the initial inventory (not measured)");
  initial_ = makeInventory(scaled(kInitialGpuPools, o_.scale), kGpuDevices,
                           scaled(kInitialNicPools, o_.scale), kNicDevices);
  std::vector<std::string> nodes;
  for (const BenchPool& p : initial_) {
    if (p.kind == PoolKind::kGpu) {
      nodes.push_back(p.node_or_fabric);
    }
  }
  ASSIGN_OR_RETURN(node_uids_, cluster_->ensureNodes(nodes, o_.connections));
  RETURN_IF_ERROR(freshController("initial"));
  ASSIGN_OR_RETURN(PublishRun run, pushAndWait(initial_, static_cast<int64_t>(initial_.size())));
  (void)run;
  ASSIGN_OR_RETURN(CheckReport report, checkController(initial_));
  initial_generations_ = report.generations;
  initial_published_ = true;
  return okStatus();
}

// Workload 1: every pool pushed at once to a fresh controller, against the
// same slices created directly. Baseline and controller runs alternate
// (B C G B C B, G: the baseline that also reads each Node), so that drift of
// the shared machine during the run falls on both sides alike.
Status Bench::workloadInitialSync() {
  const std::string w = "1 initial sync";
  initial_ = makeInventory(scaled(kInitialGpuPools, o_.scale), kGpuDevices,
                           scaled(kInitialNicPools, o_.scale), kNicDevices);
  int64_t slices = 0;
  int64_t devices = 0;
  std::vector<std::string> nodes;
  for (const BenchPool& p : initial_) {
    slices += minimalSliceCount(p);
    devices += p.devices;
    if (p.kind == PoolKind::kGpu) {
      nodes.push_back(p.node_or_fabric);
    }
  }
  progress(w + ": " + std::to_string(initial_.size()) + " pools, " + std::to_string(slices) +
           " slices; creating " + std::to_string(nodes.size()) + " Nodes");
  ASSIGN_OR_RETURN(node_uids_, cluster_->ensureNodes(nodes, o_.connections));

  std::vector<BaselineRun> bases;
  std::vector<PublishRun> runs;
  std::vector<Counters> deltas;
  std::vector<PublishRun> compare_runs;
  std::vector<Counters> compare_deltas;
  std::optional<BaselineRun> with_get;
  // D: the --compare controller.
  const std::string sequence = o_.compare.empty() ? "BCGBCB" : "BCDGBDCB";
  for (size_t step = 0; step < sequence.size(); ++step) {
    const char what = sequence[step];
    if (what == 'B' || what == 'G') {
      progress(w + ": baseline" + (what == 'G' ? " that also reads each Node" : "") + " (step " +
               std::to_string(step + 1) + " of " + std::to_string(sequence.size()) + ")");
      ASSIGN_OR_RETURN(BaselineRun base, baselineCreate(initial_, what == 'G'));
      RETURN_IF_ERROR(cluster_->deleteSlices(kBaselineLabel));
      if (what == 'G') {
        with_get = std::move(base);
      } else {
        bases.push_back(std::move(base));
      }
      continue;
    }
    progress(w + (what == 'D' ? ": --compare controller" : ": controller") + " (step " +
             std::to_string(step + 1) + " of " + std::to_string(sequence.size()) + ")");
    RETURN_IF_ERROR(what == 'D' ? freshController("initial-sync-compare", o_.compare)
                                : freshController("initial-sync"));
    ASSIGN_OR_RETURN(const Counters before, counters());
    ASSIGN_OR_RETURN(PublishRun run, pushAndWait(initial_, static_cast<int64_t>(initial_.size())));
    clock_.sleepFor(kSettle);
    ASSIGN_OR_RETURN(const Counters after, counters());
    progress(w + ": checking the published slices");
    ASSIGN_OR_RETURN(CheckReport report, checkController(initial_));
    initial_generations_ = report.generations;
    initial_published_ = true;
    (what == 'D' ? compare_runs : runs).push_back(std::move(run));
    (what == 'D' ? compare_deltas : deltas).push_back(after - before);
  }
  if (!compare_runs.empty()) {
    // Workloads 2 and 3 go on with the controller under test.
    RETURN_IF_ERROR(freshController("initial"));
    ASSIGN_OR_RETURN(PublishRun again,
                     pushAndWait(initial_, static_cast<int64_t>(initial_.size())));
    (void)again;
    ASSIGN_OR_RETURN(CheckReport report, checkController(initial_));
    initial_generations_ = report.generations;
    initial_published_ = true;
  }

  auto mean = [](const auto& list, auto field) {
    double sum = 0;
    for (const auto& x : list) {
      sum += field(x);
    }
    return sum / static_cast<double>(list.size());
  };
  const double c = meanOf(secondsOf(runs));
  const double base = meanOf(secondsOf(bases));
  const double r = c / base;
  const std::string label = w + " (" + grouped(static_cast<int64_t>(initial_.size())) + " pools, " +
                            grouped(devices) + " devices, " + grouped(slices) + " slices)";
  add({label, "time to all published (mean of runs: each run)", runsCell(secondsOf(runs)),
       runsCell(secondsOf(bases)), ratio(r), "<= " + fixed(kInitialSyncTarget, 2) + "x",
       r <= kInitialSyncTarget ? "met" : "MISSED"});
  bool minimal = true;
  std::string writes;
  for (const Counters& d : deltas) {
    minimal = minimal && d.creates == static_cast<double>(slices) && d.writes == d.creates &&
              d.apiserver == static_cast<double>(slices);
    writes += (writes.empty() ? "" : ", ") + writesCell(d);
  }
  add({"", "API writes (controller metric / API server), each run", writes,
       grouped(bases.front().writes), "", "= " + grouped(slices) + " (slices)",
       minimal ? "met" : "MISSED"});
  add({"", "reconciles; API reads (GET), first run",
       grouped(static_cast<int64_t>(deltas.front().reconciles)) + "; " +
           grouped(static_cast<int64_t>(deltas.front().gets)),
       "0", "", readsTarget(static_cast<int64_t>(initial_.size())),
       readsMet(deltas.front(), static_cast<int64_t>(initial_.size()))});
  add({"", "baseline that also GETs each pool's Node, as the controller does", secs(c),
       secs(with_get->seconds), ratio(c / with_get->seconds), "", ""});
  if (!compare_runs.empty()) {
    const double cc = meanOf(secondsOf(compare_runs));
    add({"", "--compare " + o_.compare.string() + ": time; reconciles; GETs; CPU seconds",
         runsCell(secondsOf(compare_runs)) + "; " +
             grouped(static_cast<int64_t>(compare_deltas.front().reconciles)) + "; " +
             grouped(static_cast<int64_t>(compare_deltas.front().gets)) + "; " +
             fixed(mean(compare_deltas, [](const Counters& d) { return d.controller_cpu; }), 1) +
             " / " +
             fixed(mean(compare_deltas, [](const Counters& d) { return d.apiserver_cpu; }), 1),
         secs(base), ratio(cc / base), "", ""});
    for (const Counters& d : compare_deltas) {
      if (!(d.creates == static_cast<double>(slices) && d.writes == d.creates)) {
        failed_ = true;
      }
    }
  }
  const double c_cpu = mean(deltas, [](const Counters& d) { return d.controller_cpu; });
  const double c_api = mean(deltas, [](const Counters& d) { return d.apiserver_cpu; });
  const double b_cpu = mean(bases, [](const BaselineRun& b) { return b.client_cpu; });
  const double b_api = mean(bases, [](const BaselineRun& b) { return b.apiserver_cpu; });
  add({"", kCpuMetric, cpuCell(c_cpu, c_api, c), cpuCell(b_cpu, b_api, base),
       ratio((c_cpu + c_api) / (b_cpu + b_api)), "", ""});
  curves_.push_back({"1", "controller", runs.front().curve});
  curves_.push_back({"1", "baseline", curveOf(bases.front().pool_done)});
  if (!minimal) {
    failed_ = true;
  }
  return okStatus();
}

// Workload 2: the same inventory pushed again; nothing may be written. The
// push rate is compared with the minimal handler given the same requests,
// alternating rounds so that both see the same machine.
Status Bench::workloadNoop() {
  const std::string w = "2 no-op re-push";
  RETURN_IF_ERROR(ensureInitialInventory());
  ASSIGN_OR_RETURN(MinimalServerProcess * minimal, minimalServer());
  std::vector<std::string> bodies;
  for (const BenchPool& p : initial_) {
    bodies.push_back(p.body());
  }
  std::vector<LoadRequest> requests;
  for (size_t i = 0; i < initial_.size(); ++i) {
    requests.push_back({"PUT", initial_[i].target(), bodies[i]});
  }
  progress(w + ": " + std::to_string(requests.size()) + " pushes a round");
  ASSIGN_OR_RETURN(const Counters before, counters());
  double c_seconds = 0;
  double m_seconds = 0;
  int64_t c_pushes = 0;
  int64_t m_pushes = 0;
  int64_t c_ok = 0;
  int rounds = 0;
  std::string error;
  while (rounds < 20 && (rounds == 0 || std::min(c_seconds, m_seconds) < kNoopMinSeconds)) {
    ++rounds;
    LoadResult c =
        runOnce("127.0.0.1", controller_->inventoryPort(), requests, o_.connections, clock_);
    LoadResult m = runOnce("127.0.0.1", minimal->port(), requests, o_.connections, clock_);
    c_seconds += c.seconds;
    m_seconds += m.seconds;
    c_pushes += c.total();
    m_pushes += m.total();
    c_ok += c.count(200);
    if (error.empty()) {
      error = c.first_error.empty() ? m.first_error : c.first_error;
    }
  }
  clock_.sleepFor(kSettle);
  ASSIGN_OR_RETURN(const Counters after, counters());
  const Counters d = after - before;
  if (c_ok != c_pushes) {
    return internalError("no-op pushes: " + std::to_string(c_pushes - c_ok) +
                         " not answered 200 (published) " + error);
  }
  const double c_rate = static_cast<double>(c_pushes) / c_seconds;
  const double m_rate = static_cast<double>(m_pushes) / m_seconds;
  const bool zero = d.writes == 0 && d.apiserver == 0;
  add({w + " (" + grouped(static_cast<int64_t>(requests.size())) + " pools x " +
           std::to_string(rounds) + " rounds)",
       "API writes (controller metric / API server)", writesCell(d), "", "", "= 0",
       zero ? "met" : "MISSED"});
  add({"", "pushes per second (vs minimal handler)", fixed(c_rate, 0), fixed(m_rate, 0),
       ratio(c_rate / m_rate), ">= " + fixed(kNoopTarget, 2) + "x",
       c_rate / m_rate >= kNoopTarget ? "met" : "MISSED"});
  if (!zero) {
    failed_ = true;
  }
  return okStatus();
}

// Workload 3: one attribute of one device changed in each of 200 pools,
// pushed with ?wait= from min(--parallel, pools) connections; latency is push
// to published as the driver sees it. Baseline: the same one-slice updates
// made directly, as many in flight.
Status Bench::workloadChurn() {
  const std::string w = "3 churn";
  RETURN_IF_ERROR(ensureInitialInventory());
  const std::vector<size_t> gpu = gpuPools();
  const size_t k = std::min(gpu.size(), static_cast<size_t>(scaled(kChurnPools, o_.scale)));
  std::vector<size_t> chosen;
  for (size_t at : spread(gpu.size(), k)) {
    chosen.push_back(gpu[at]);
  }
  std::vector<BenchPool> old_pools;
  for (size_t i : chosen) {
    old_pools.push_back(initial_[i]);
    ++initial_[i].revision;
  }
  std::vector<std::string> bodies;
  bodies.reserve(chosen.size());
  for (size_t i : chosen) {
    bodies.push_back(initial_[i].body());
  }
  std::vector<LoadRequest> requests;
  for (size_t j = 0; j < chosen.size(); ++j) {
    requests.push_back({"PUT", initial_[chosen[j]].target("wait=60s"), bodies[j]});
  }
  // As many push connections as the baseline has requests in flight.
  const int connections = static_cast<int>(std::min(k, static_cast<size_t>(o_.parallel)));
  progress(w + ": " + std::to_string(k) + " pools, controller, " + std::to_string(connections) +
           " connections");
  ASSIGN_OR_RETURN(const Counters before, counters());
  LoadResult c = runOnce("127.0.0.1", controller_->inventoryPort(), requests, connections, clock_);
  clock_.sleepFor(kSettle);
  ASSIGN_OR_RETURN(const Counters after, counters());
  const Counters d = after - before;
  if (c.count(200) != static_cast<int64_t>(k)) {
    return internalError("churn pushes: " + std::to_string(static_cast<int64_t>(k) - c.count(200)) +
                         " not answered 200 (published) within the wait " + c.first_error);
  }
  progress(w + ": checking the published slices");
  ASSIGN_OR_RETURN(CheckReport report, checkController(initial_));
  const int64_t bumped = bumpedGenerations(report);

  // Baseline: the old slices created (not measured), then updated.
  progress(w + ": baseline");
  ASSIGN_OR_RETURN(const std::vector<client::ResourceSlice> created,
                   createBaselineSlices(old_pools));
  {
    Status made;
    std::unique_ptr<client::HttpTransport> transport;
    std::unique_ptr<client::RestKubeApi> api = baselineApi(&transport, &made);
    RETURN_IF_ERROR(made);
    RETURN_IF_ERROR(openConnections(*api));
    std::vector<client::ResourceSlice> updates;
    for (size_t j = 0; j < chosen.size(); ++j) {
      updates.push_back(baselineUpdate(initial_[chosen[j]], created[j]));
    }
    std::vector<double> latency(updates.size(), 0);
    RETURN_IF_ERROR(forEachInParallel(updates.size(), connections, [&](size_t i) -> Status {
      const Clock::TimePoint sent = clock_.now();
      StatusOr<client::ResourceSlice> stored = api->updateResourceSlice(updates[i]);
      latency[i] = std::chrono::duration<double, std::milli>(clock_.now() - sent).count();
      return stored.status().withContext("baseline update");
    }));
    RETURN_IF_ERROR(cluster_->deleteSlices(kBaselineLabel));

    const double c50 = quantile(c.latency_ms, 0.5);
    const double c99 = quantile(c.latency_ms, 0.99);
    const double b50 = quantile(latency, 0.5);
    const double b99 = quantile(latency, 0.99);
    const bool minimal = minimalUpdates(d, k, bumped);
    add({w + " (" + grouped(static_cast<int64_t>(k)) + " pools, 1 attribute each)",
         "API writes (controller metric / API server); generations bumped",
         writesCell(d) + "; " + std::to_string(bumped),
         grouped(static_cast<int64_t>(updates.size())), "",
         "= " + grouped(static_cast<int64_t>(k)) + "; 0", minimal ? "met" : "MISSED"});
    add({"", "publish latency p50 / p99 (vs direct update)", millis(c50) + " / " + millis(c99),
         millis(b50) + " / " + millis(b99), ratio(c50 / b50) + " / " + ratio(c99 / b99),
         "p50 <= direct + " + millis(kBatchWindowMs) + " batch window (" +
             millis(b50 + kBatchWindowMs) + ")",
         c50 <= b50 + kBatchWindowMs ? "met" : "MISSED"});
    if (!minimal) {
      failed_ = true;
    }
  }
  return okStatus();
}

// Workload 4: 20,000 node-local pools to a fresh controller, against the
// same slices created directly; the controller's peak memory.
Status Bench::workloadScale() {
  const std::string w = "4 scale";
  const int n = scaled(kScalePools, o_.scale);
  std::vector<BenchPool> pools = makeInventory(n, kGpuDevices, 0, 0);
  std::vector<std::string> nodes;
  nodes.reserve(pools.size());
  for (const BenchPool& p : pools) {
    nodes.push_back(p.node_or_fabric);
  }
  progress(w + ": " + std::to_string(n) + " pools; creating Nodes");
  controller_.reset();
  initial_published_ = false;
  ASSIGN_OR_RETURN(node_uids_, cluster_->ensureNodes(nodes, o_.connections));
  RETURN_IF_ERROR(cluster_->deleteSlices(kControllerLabel));

  progress(w + ": baseline (before)");
  ASSIGN_OR_RETURN(BaselineRun base1, baselineCreate(pools));
  RETURN_IF_ERROR(cluster_->deleteSlices(kBaselineLabel));

  progress(w + ": controller");
  RETURN_IF_ERROR(freshController("scale"));
  const Memory idle = processMemory(controller_->pid());
  ASSIGN_OR_RETURN(const Counters before, counters());
  ASSIGN_OR_RETURN(PublishRun run, pushAndWait(pools, n));
  clock_.sleepFor(kSettle);
  ASSIGN_OR_RETURN(const Counters after, counters());
  const Counters d = after - before;
  progress(w + ": checking the published slices");
  ASSIGN_OR_RETURN(CheckReport report, checkController(pools));
  const Memory mem = processMemory(controller_->pid());

  // The second baseline on the same number of objects as the first.
  progress(w + ": baseline (after)");
  controller_.reset();
  RETURN_IF_ERROR(cluster_->deleteSlices(kControllerLabel));
  ASSIGN_OR_RETURN(BaselineRun base2, baselineCreate(pools));
  RETURN_IF_ERROR(cluster_->deleteSlices(kBaselineLabel));
  BaselineRun base = base1;
  base.seconds = (base1.seconds + base2.seconds) / 2;
  base.client_cpu = (base1.client_cpu + base2.client_cpu) / 2;
  base.apiserver_cpu = (base1.apiserver_cpu + base2.apiserver_cpu) / 2;

  const double r = run.seconds / base.seconds;
  const int64_t limit =
      static_cast<int64_t>(kRssJsonFactor * static_cast<double>(report.json_bytes)) + kRssAllowance;
  const double per10k = static_cast<double>(mem.peak) / (static_cast<double>(report.devices) / 1e4);
  const double marginal10k =
      static_cast<double>(mem.peak - idle.rss) / (static_cast<double>(report.devices) / 1e4);
  add({w + " (" + grouped(n) + " pools, " + grouped(report.devices) + " devices)",
       "time to all published", secs(run.seconds),
       secs(base.seconds) + " (" + fixed(base1.seconds, 1) + " / " + fixed(base2.seconds, 1) + ")",
       ratio(r), "<= " + fixed(kScaleTarget, 2) + "x", r <= kScaleTarget ? "met" : "MISSED"});
  const bool minimal = d.creates == n && d.writes == d.creates && d.apiserver == n;
  add({"", "API writes (controller metric / API server)", writesCell(d), grouped(base.writes), "",
       "= " + grouped(n), minimal ? "met" : "MISSED"});
  add({"", "reconciles; API reads (GET)",
       grouped(static_cast<int64_t>(d.reconciles)) + "; " + grouped(static_cast<int64_t>(d.gets)),
       "0", "", readsTarget(n), readsMet(d, n)});
  add({"", kCpuMetric, cpuCell(d.controller_cpu, d.apiserver_cpu, run.seconds),
       cpuCell(base.client_cpu, base.apiserver_cpu, base.seconds),
       ratio((d.controller_cpu + d.apiserver_cpu) / (base.client_cpu + base.apiserver_cpu)), "",
       ""});
  add({"", "controller peak RSS (VmHWM) vs 2.5 x slice JSON + 50 MiB", mib(mem.peak),
       mib(limit) + " (JSON " + mib(report.json_bytes) + ")",
       fixed(static_cast<double>(mem.peak) / static_cast<double>(limit), 2) + " of limit",
       "< limit", mem.peak < limit ? "met" : "MISSED"});
  add({"", "RSS per 10,000 devices managed (peak; above idle)",
       mib(static_cast<int64_t>(per10k)) + "; " + mib(static_cast<int64_t>(marginal10k)),
       "idle RSS " + mib(idle.rss), "", "< " + fixed(kRssPer10kAimMiB, 0) + " MiB (peak)",
       per10k < kRssPer10kAimMiB * 1024 * 1024 ? "met" : "MISSED"});
  curves_.push_back({"4", "controller", run.curve});
  curves_.push_back({"4", "baseline", curveOf(base.pool_done)});
  if (!minimal) {
    failed_ = true;
  }
  return okStatus();
}

// Workload 5: no-op pushes of one 128-device pool from several connections,
// against the minimal handler; alternating halves on each side.
Status Bench::workloadPushApi() {
  const std::string w = "5 push API";
  if (controller_ == nullptr) {
    RETURN_IF_ERROR(freshController("push-api"));
  }
  ASSIGN_OR_RETURN(MinimalServerProcess * minimal, minimalServer());
  BenchPool pool;
  pool.kind = PoolKind::kGpu;
  pool.driver = kGpuDriver;
  pool.name = "push-api";
  pool.node_or_fabric = nodeName(0);
  pool.index = 99999;
  pool.devices = kPushApiDevices;
  using NodeUids = std::map<std::string, std::string>;
  ASSIGN_OR_RETURN(NodeUids uids, cluster_->ensureNodes({pool.node_or_fabric}, 1));
  node_uids_.insert(uids.begin(), uids.end());
  const std::string body = pool.body();
  {
    HttpConnection conn("127.0.0.1", controller_->inventoryPort());
    ASSIGN_OR_RETURN(Answer first, conn.send("PUT", pool.target("wait=60s"), body));
    if (first.code != 200) {
      return internalError("first push of the push-API pool: HTTP " + std::to_string(first.code) +
                           " " + first.body);
    }
  }
  const double seconds = std::max(2.0, o_.push_seconds * o_.scale);
  progress(w + ": " + std::to_string(o_.connections) + " connections, 2 x " +
           fixed(seconds / 2, 1) + " s on each side");
  const auto half =
      std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(seconds / 2));
  const LoadRequest request{"PUT", pool.target(), body};
  ASSIGN_OR_RETURN(const Counters before, counters());
  LoadResult c;
  LoadResult m;
  // The server processes' CPU during their own load.
  double c_cpu = 0;
  double m_cpu = 0;
  for (int round = 0; round < 2; ++round) {
    double cpu0 = processCpuSeconds(controller_->pid());
    LoadResult cr =
        runFor("127.0.0.1", controller_->inventoryPort(), request, o_.connections, half, clock_);
    c_cpu += processCpuSeconds(controller_->pid()) - cpu0;
    cpu0 = processCpuSeconds(minimal->pid());
    LoadResult mr = runFor("127.0.0.1", minimal->port(), request, o_.connections, half, clock_);
    m_cpu += processCpuSeconds(minimal->pid()) - cpu0;
    for (auto [from, to] : {std::pair{&cr, &c}, std::pair{&mr, &m}}) {
      to->seconds += from->seconds;
      to->latency_ms.insert(to->latency_ms.end(), from->latency_ms.begin(), from->latency_ms.end());
      for (const auto& [code, n] : from->codes) {
        to->codes[code] += n;
      }
      if (to->first_error.empty()) {
        to->first_error = from->first_error;
      }
    }
  }
  clock_.sleepFor(kSettle);
  ASSIGN_OR_RETURN(const Counters after, counters());
  const Counters d = after - before;
  if (c.count(200) != c.total() || m.count(200) != m.total()) {
    return internalError("push-API answers other than 200: controller " +
                         std::to_string(c.total() - c.count(200)) + ", minimal " +
                         std::to_string(m.total() - m.count(200)) + " " + c.first_error +
                         m.first_error);
  }
  const double c_rate = static_cast<double>(c.total()) / c.seconds;
  const double m_rate = static_cast<double>(m.total()) / m.seconds;
  const double r = c_rate / m_rate;
  add({w + " (no-op push of " + std::to_string(kPushApiDevices) + " devices, " +
           std::to_string(body.size() / 1024) + " KiB, " + std::to_string(o_.connections) +
           " connections)",
       "requests per second (vs minimal handler)", fixed(c_rate, 0), fixed(m_rate, 0), ratio(r),
       ">= " + fixed(kPushApiTarget, 2) + "x", r >= kPushApiTarget ? "met" : "MISSED"});
  add({"", "latency p50 / p99",
       millis(quantile(c.latency_ms, 0.5)) + " / " + millis(quantile(c.latency_ms, 0.99)),
       millis(quantile(m.latency_ms, 0.5)) + " / " + millis(quantile(m.latency_ms, 0.99)),
       ratio(quantile(c.latency_ms, 0.5) / quantile(m.latency_ms, 0.5)) + " / " +
           ratio(quantile(c.latency_ms, 0.99) / quantile(m.latency_ms, 0.99)),
       "", ""});
  const double c_us = 1e6 * c_cpu / static_cast<double>(c.total());
  const double m_us = 1e6 * m_cpu / static_cast<double>(m.total());
  add({"", "server CPU per request", fixed(c_us, 0) + " us", fixed(m_us, 0) + " us",
       ratio(c_us / m_us), "", ""});
  add({"", "API writes during the pushes (controller metric / API server)", writesCell(d), "", "",
       "= 0", d.writes == 0 && d.apiserver == 0 ? "met" : "MISSED"});
  return okStatus();
}

std::string readFileText(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string cpuModel() {
  std::istringstream in(readFileText("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown CPU";
}

std::string loadAverage() {
  std::istringstream in(readFileText("/proc/loadavg"));
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

void Bench::writeReport(double total_seconds) {
  std::ostringstream md;
  md << "Run " << formatTime(clock_.systemNow()) << " on " << std::thread::hardware_concurrency()
     << " CPUs (" << cpuModel() << "), load average " << load_before_ << " before and "
     << loadAverage() << " after; scale " << o_.scale << ", "
     << (o_.workers ? "--workers=" + std::to_string(*o_.workers)
                    : std::string("controller --workers default"))
     << ", baseline parallelism " << o_.parallel << ", --kube-api-qps=" << fixed(o_.qps, 0)
     << " --kube-api-burst=" << o_.burst << " (controller and baseline), " << o_.connections
     << " push connections; " << secs(total_seconds) << " in all.\n\n";
  md << "| workload | metric | controller | baseline | ratio | target | |\n";
  md << "|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows_) {
    md << "| " << r.workload << " | " << r.metric << " | " << r.controller << " | " << r.baseline
       << " | " << r.ratio << " | " << r.target << " | " << r.verdict << " |\n";
  }
  for (const std::string& n : notes_) {
    md << "\n" << n << "\n";
  }
  std::cout << "\n" << md.str() << std::flush;

  std::error_code ec;
  std::filesystem::create_directories(o_.out_dir, ec);
  std::ofstream(o_.out_dir / "results.md") << md.str();
  {
    std::ofstream csv(o_.out_dir / "publish_curve.csv");
    csv << "workload,series,pools,seconds\n";
    for (const Curve& c : curves_) {
      for (const auto& [pools, seconds] : c.points) {
        csv << c.workload << "," << c.series << "," << pools << "," << fixed(seconds, 4) << "\n";
      }
    }
  }
  if (!o_.no_plot && !curves_.empty()) {
    const std::string cmd = "/usr/bin/python3 " + (o_.source_root / "test/bench/plot.py").string() +
                            " " + (o_.out_dir / "publish_curve.csv").string() + " " +
                            (o_.out_dir / "publish_time.png").string();
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "warning: the plot was not made (" << cmd << ")\n";
    }
  }
}

int Bench::run(const std::string& self) {
  self_ = self;
  load_before_ = loadAverage();
  std::error_code ec;
  std::filesystem::create_directories(o_.out_dir / "logs", ec);
  if (!std::filesystem::exists(o_.controller)) {
    std::cerr << "resourceslice-bench: no controller binary at " << o_.controller << "\n";
    return 2;
  }
  const Clock::TimePoint start = clock_.now();
  progress("starting the test cluster");
  StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::start(o_.source_root, clock_);
  if (!cluster.ok()) {
    std::cerr << "resourceslice-bench: " << cluster.status().toString() << "\n";
    return 2;
  }
  cluster_ = std::move(*cluster);

  const std::array<std::pair<int, Status (Bench::*)()>, 7> workloads = {{
      {1, &Bench::workloadInitialSync},
      {2, &Bench::workloadNoop},
      {3, &Bench::workloadChurn},
      {4, &Bench::workloadScale},
      {5, &Bench::workloadPushApi},
      {6, &Bench::workloadWindow},
      {7, &Bench::workloadBurst},
  }};
  const std::array<const char*, 8> names = {
      "",        "1 initial sync", "2 no-op re-push",     "3 churn",
      "4 scale", "5 push API",     "6 incomplete window", "7 burst"};
  for (const auto& [n, fn] : workloads) {
    if (o_.workload != 0 && o_.workload != n) {
      continue;
    }
    Status s = (this->*fn)();
    if (!s.ok()) {
      fail(names[n], s);
    }
  }
  controller_.reset();
  minimal_.reset();
  writeReport(std::chrono::duration<double>(clock_.now() - start).count());
  cluster_.reset();
  return failed_ ? 1 : 0;
}

// The body of a pool of kWindowDriver with `devices` small devices, for
// every node.
std::string windowPoolBody(int devices) {
  Json list = Json::array();
  for (int i = 0; i < devices; ++i) {
    list.push_back({{"name", "dev-" + std::to_string(i)},
                    {"attributes", {{"index", {{"int", i}}}, {"model", {{"string", "W-1"}}}}}});
  }
  return Json{{"allNodes", true}, {"devices", std::move(list)}}.dump();
}

StatusOr<double> Bench::windowOfGrowth(const std::string& name, int slices) {
  const uint16_t port = controller_->inventoryPort();
  const std::string target =
      std::string("/v1/drivers/") + kWindowDriver + "/pools/" + name + "?wait=60s";
  const std::string one = windowPoolBody(static_cast<int>(client::kResourceSliceMaxDevices));
  LoadResult first = runOnce("127.0.0.1", port, {{"PUT", target, one}}, 1, clock_);
  if (first.count(200) != 1) {
    return internalError("window pool " + name + " not published " + first.first_error);
  }

  // Watch the driver's slices from now on: when each slice of the pool
  // arrives at a generation above the one just published.
  client::ListOptions list_options;
  list_options.field_selector = std::string("spec.driver=") + kWindowDriver;
  ASSIGN_OR_RETURN(client::ResourceSliceList listed,
                   cluster_->api().listResourceSlices(list_options));
  int64_t published = 0;
  for (const client::ResourceSlice& s : listed.items) {
    if (s.spec.pool.name == name) published = std::max(published, s.spec.pool.generation);
  }
  SliceWatch watch(
      cluster_->api(), list_options, listed.resource_version,
      [&](client::WatchEventType, const client::ResourceSlice& s) {
        return s.spec.pool.name == name && s.spec.pool.generation > published;
      },
      clock_);
  const std::string grown =
      windowPoolBody(static_cast<int>(client::kResourceSliceMaxDevices) * slices);
  LoadResult second = runOnce("127.0.0.1", port, {{"PUT", target, grown}}, 1, clock_);
  if (second.count(200) != 1) {
    return internalError("grown window pool " + name + " not published " + second.first_error);
  }
  StatusOr<std::vector<Clock::TimePoint>> arrivals =
      watch.waitFor(static_cast<size_t>(slices), std::chrono::seconds(30));
  if (!arrivals.ok()) {
    return arrivals.status().withContext("window pool " + name + " at the new generation");
  }
  const auto [lo, hi] = std::minmax_element(arrivals->begin(), arrivals->end());
  return std::chrono::duration<double, std::milli>(*hi - *lo).count();
}

// Workload 6: the time in which the scheduler may see a pool incomplete while
// its generation changes: a pool of one full slice grows to 2 and to 16
// slices, and a watch on the slices measures first to last event of the new
// generation. The controller writes the slices of one step concurrently;
// the baseline is the same controller writing one slice at a time
// (--max-parallel-slice-writes=1). The target compares the 1 -> 16 window
// with one direct update's round trip in the same run.
Status Bench::workloadWindow() {
  const std::string w = "6 incomplete window";
  const int repeats = std::max(1, static_cast<int>(std::lround(kWindowRepeats * o_.scale)));

  // One update's round trip, measured directly.
  progress(w + ": single-update round trip");
  std::vector<double> update_ms;
  {
    Status made;
    std::unique_ptr<client::HttpTransport> transport;
    std::unique_ptr<client::RestKubeApi> api = baselineApi(&transport, &made);
    RETURN_IF_ERROR(made);
    client::ResourceSlice slice;
    slice.metadata.generate_name = "window-rtt-";
    slice.metadata.labels[kManagedByKey] = kBaselineLabel;
    slice.spec.driver = "window.example.net";
    slice.spec.pool = {"rtt", 1, 1};
    slice.spec.all_nodes = true;
    // A full slice of the devices the window pools hold, so that the round
    // trip is that of one of the writes that make up a window.
    for (int i = 0; i < static_cast<int>(client::kResourceSliceMaxDevices); ++i) {
      client::Device d;
      d.name = "dev-" + std::to_string(i);
      d.attributes["index"].int_value = i;
      d.attributes["model"].string_value = "W-1";
      slice.spec.devices.emplace_back(d);
    }
    ASSIGN_OR_RETURN(client::ResourceSlice stored, api->createResourceSlice(slice));
    for (int i = 1; i <= kWindowUpdates; ++i) {
      stored.spec.devices[0].edit(
          [&](client::Device& dev) { dev.attributes["index"].int_value = i; });
      const Clock::TimePoint sent = clock_.now();
      ASSIGN_OR_RETURN(stored, api->updateResourceSlice(stored));
      update_ms.push_back(std::chrono::duration<double, std::milli>(clock_.now() - sent).count());
    }
    RETURN_IF_ERROR(cluster_->deleteSlices(kBaselineLabel));
  }
  const double rtt = quantile(update_ms, 0.5);

  // Window per growth and side; sides alternate per repeat so that drift of
  // the machine falls on both.
  std::map<std::pair<bool, int>, std::vector<double>> windows;
  int pool_number = 0;
  for (int r = 0; r < repeats; ++r) {
    for (const bool sequential : {false, true}) {
      RETURN_IF_ERROR(
          freshController(sequential ? "window-sequential" : "window-parallel", {},
                          sequential ? std::vector<std::string>{"--max-parallel-slice-writes=1"}
                                     : std::vector<std::string>{}));
      for (const int slices : {2, 16}) {
        progress(w + ": 1 -> " + std::to_string(slices) + " slices, " +
                 (sequential ? "sequential" : "parallel") + ", repeat " + std::to_string(r + 1));
        ASSIGN_OR_RETURN(const double ms,
                         windowOfGrowth("grow-" + std::to_string(++pool_number), slices));
        windows[{sequential, slices}].push_back(ms);
      }
    }
  }
  controller_.reset();
  RETURN_IF_ERROR(cluster_->deleteSlices(kControllerLabel));

  add({w + " (" + std::to_string(repeats) + " repeats)",
       "round trip of one direct update of a 128-device slice, p50", "", millis(rtt), "", "", ""});
  for (const int slices : {2, 16}) {
    const double parallel = quantile(windows[{false, slices}], 0.5);
    const double sequential = quantile(windows[{true, slices}], 0.5);
    Row row{"",
            "window 1 -> " + std::to_string(slices) + " slices p50 (vs one slice at a time)",
            millis(parallel),
            millis(sequential),
            ratio(parallel / sequential),
            "",
            ""};
    if (slices == 16) {
      row.target =
          "<= " + ratio(kWindowTarget) + " update round trip (" + millis(kWindowTarget * rtt) + ")";
      row.verdict = parallel <= kWindowTarget * rtt ? "met" : "MISSED";
    }
    add(row);
  }
  return okStatus();
}

StatusOr<double> Bench::timeToLastEvent(const std::string& managed_by,
                                        const std::vector<const BenchPool*>& changed,
                                        const std::function<Status()>& send) {
  std::map<std::string, const BenchPool*> by_name;
  for (const BenchPool* p : changed) {
    by_name[p->name] = p;
  }
  client::ListOptions options;
  options.label_selector = std::string(kManagedByKey) + "=" + managed_by;
  // Only the list's resourceVersion matters: the watch starts there.
  client::ListOptions probe = options;
  probe.limit = 1;
  ASSIGN_OR_RETURN(const client::ResourceSliceList listed,
                   cluster_->api().listResourceSlices(probe));
  SliceWatch watch(
      cluster_->api(), options, listed.resource_version,
      [&](client::WatchEventType type, const client::ResourceSlice& s) {
        auto it = by_name.find(s.spec.pool.name);
        return type == client::WatchEventType::kModified && it != by_name.end() &&
               it->second->carriesRevision(s);
      },
      clock_);
  const Clock::TimePoint start = clock_.now();
  RETURN_IF_ERROR(send());
  const auto timeout = std::chrono::seconds(120) +
                       std::chrono::milliseconds(50) * static_cast<int64_t>(by_name.size());
  ASSIGN_OR_RETURN(const std::vector<Clock::TimePoint> arrivals,
                   watch.waitFor(by_name.size(), timeout));
  return std::chrono::duration<double>(arrivals.back() - start).count();
}

StatusOr<Bench::BurstRun> Bench::burstController(const std::vector<size_t>& chosen) {
  std::vector<const BenchPool*> changed;
  std::vector<std::string> bodies;
  for (size_t i : chosen) {
    ++initial_[i].revision;
    changed.push_back(&initial_[i]);
    bodies.push_back(initial_[i].body());
  }
  std::vector<LoadRequest> requests;
  for (size_t j = 0; j < chosen.size(); ++j) {
    requests.push_back({"PUT", initial_[chosen[j]].target(), bodies[j]});
  }
  const int connections = burstConnections(chosen.size());
  BurstRun run;
  ASSIGN_OR_RETURN(const Counters before, counters());
  ASSIGN_OR_RETURN(
      run.seconds, timeToLastEvent(kControllerLabel, changed, [&]() -> Status {
        const LoadResult pushed =
            runOnce("127.0.0.1", controller_->inventoryPort(), requests, connections, clock_);
        const int64_t accepted = pushed.count(200) + pushed.count(202);
        if (accepted != static_cast<int64_t>(requests.size())) {
          return internalError("burst pushes: " + std::to_string(requests.size() - accepted) +
                               " not accepted " + pushed.first_error);
        }
        return okStatus();
      }));
  clock_.sleepFor(kSettle);
  ASSIGN_OR_RETURN(const Counters after, counters());
  run.writes = after - before;
  ASSIGN_OR_RETURN(const CheckReport report, checkController(initial_));
  run.bumped = bumpedGenerations(report);
  return run;
}

StatusOr<double> Bench::burstDirect(std::vector<BenchPool>& pools,
                                    std::vector<client::ResourceSlice>& stored,
                                    const std::vector<size_t>& chosen) {
  std::vector<const BenchPool*> changed;
  std::vector<client::ResourceSlice> updates;
  for (size_t at : chosen) {
    ++pools[at].revision;
    changed.push_back(&pools[at]);
    updates.push_back(baselineUpdate(pools[at], stored[at]));
  }
  Status made;
  std::unique_ptr<client::HttpTransport> transport;
  std::unique_ptr<client::RestKubeApi> api = baselineApi(&transport, &made);
  RETURN_IF_ERROR(made);
  RETURN_IF_ERROR(openConnections(*api));
  return timeToLastEvent(kBaselineLabel, changed, [&] {
    return forEachInParallel(updates.size(), o_.parallel, [&](size_t j) -> Status {
      StatusOr<client::ResourceSlice> updated = api->updateResourceSlice(updates[j]);
      if (!updated.ok()) {
        return updated.status().withContext("baseline update");
      }
      stored[chosen[j]] = std::move(*updated);
      return okStatus();
    });
  });
}

double Bench::waitForQuietApiServer() {
  const Clock::TimePoint start = clock_.now();
  // A collection that the run before set off would otherwise run during this one.
  if (Status collected = cluster_->collectGarbage(); !collected.ok()) {
    progress("could not make the API server collect its garbage: " + collected.message());
  }
  const pid_t pid = cluster_->apiserverPid();
  const double sample = std::chrono::duration<double>(kQuietSample).count();
  while (clock_.now() - start < kQuietMax) {
    const double before = processCpuSeconds(pid);
    clock_.sleepFor(kQuietSample);
    if ((processCpuSeconds(pid) - before) / sample < kQuietCores) {
      break;
    }
  }
  return std::chrono::duration<double>(clock_.now() - start).count();
}

// Workload 7: one attribute of one device changed in 200 and in 2,000 pools
// at the same moment, each pushed once (no ?wait) from up to 64 connections;
// the time from the first push to the last slice event of the new content
// on a watch of the controller's slices, as a scheduler sees the burst land.
// Baseline: the same one-slice updates made directly, --parallel in flight,
// timed the same way on a watch of its own slices. Sides alternate per size
// (kBurstSequence), each run starting on a quiet API server, and the means
// are compared.
Status Bench::workloadBurst() {
  const std::string w = "7 burst";
  RETURN_IF_ERROR(ensureInitialInventory());
  const std::vector<size_t> gpu = gpuPools();
  // The baseline's own copy of the GPU pools, changed as the controller's
  // are, and their slices, created once (not measured).
  progress(w + ": creating the baseline's " + std::to_string(gpu.size()) + " slices");
  std::vector<BenchPool> direct;
  for (size_t i : gpu) {
    direct.push_back(initial_[i]);
  }
  ASSIGN_OR_RETURN(std::vector<client::ResourceSlice> stored, createBaselineSlices(direct));

  for (const BurstSize& size : kBursts) {
    const size_t k = std::min(gpu.size(), static_cast<size_t>(scaled(size.pools, o_.scale)));
    const std::vector<size_t> at = spread(gpu.size(), k);
    std::vector<size_t> chosen;
    for (size_t a : at) {
      chosen.push_back(gpu[a]);
    }
    std::vector<double> base;
    std::vector<double> controller;
    std::vector<double> quiet_waits;
    std::string writes;
    std::string bumped;
    bool minimal = true;
    for (size_t step = 0; step < kBurstSequence.size(); ++step) {
      const bool direct_side = kBurstSequence[step] == 'B';
      quiet_waits.push_back(waitForQuietApiServer());
      progress(w + ": " + std::to_string(k) + " pools, " +
               (direct_side ? "baseline" : "controller") + " (step " + std::to_string(step + 1) +
               " of " + std::to_string(kBurstSequence.size()) + ")");
      if (direct_side) {
        ASSIGN_OR_RETURN(const double seconds, burstDirect(direct, stored, at));
        base.push_back(seconds);
        continue;
      }
      ASSIGN_OR_RETURN(const BurstRun run, burstController(chosen));
      controller.push_back(run.seconds);
      minimal = minimal && minimalUpdates(run.writes, k, run.bumped);
      writes += (writes.empty() ? "" : ", ") + writesCell(run.writes);
      bumped += (bumped.empty() ? "" : ", ") + std::to_string(run.bumped);
    }
    const double c = meanOf(controller);
    const double b = meanOf(base);
    const double r = c / b;
    add({w + " (" + grouped(static_cast<int64_t>(k)) + " pools, 1 attribute each, " +
             std::to_string(burstConnections(k)) + " push connections)",
         "first push to last slice event (mean of runs: each run)", runsCell(controller),
         runsCell(base), ratio(r), "<= " + ratio(size.target),
         r <= size.target ? "met" : "MISSED"});
    std::string waited;
    for (double q : quiet_waits) {
      waited += (waited.empty() ? "" : " / ") + fixed(q, 1);
    }
    add({"", "forced a GC, then waited for a quiet API server, before each run (s, in run order)",
         waited, "", "", "", ""});
    add({"", "API writes (controller metric / API server), each run; generations bumped",
         writes + "; " + bumped, grouped(static_cast<int64_t>(k)), "",
         "= " + grouped(static_cast<int64_t>(k)) + "; 0", minimal ? "met" : "MISSED"});
    if (!minimal) {
      failed_ = true;
    }
  }
  return cluster_->deleteSlices(kBaselineLabel);
}

}  // namespace
}  // namespace rsc::bench

int main(int argc, char** argv) {
  rsc::StatusOr<rsc::bench::Options> options = rsc::bench::parseOptions(argc, argv);
  if (!options.ok()) {
    std::cerr << "resourceslice-bench: " << options.status().message() << "\n"
              << rsc::bench::kUsage;
    return 2;
  }
  if (options->help) {
    std::cout << rsc::bench::kUsage;
    return 0;
  }
  if (!options->serve_minimal.empty()) {
    return rsc::bench::serveMinimal(options->serve_minimal);
  }
  // A closed push connection must not kill the benchmark.
  signal(SIGPIPE, SIG_IGN);
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  rsc::bench::Bench bench(*options);
  return bench.run(ec ? std::string(argv[0]) : self.string());
}
