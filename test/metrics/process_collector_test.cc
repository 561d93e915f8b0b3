#include "metrics/process_collector.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>

#include "common/clock.h"
#include "test/metrics/snapshot.h"
#include "test/metrics/temp_dir.h"

namespace rsc::metrics {
namespace {

using testing::TempDir;

// A process whose command contains spaces and parentheses, 2.5 s of user and
// 1.5 s of system CPU time (at 100 ticks per second), started 123.45 s after
// boot, with 100 MiB of virtual memory and 2560 resident pages.
constexpr char kStat[] =
    "4242 (rsc (test) ctl) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 150 0 0 20 0 8 0 12345 "
    "104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
constexpr char kSystemStat[] =
    "cpu  10 0 20 300 0 0 0 0 0 0\n"
    "cpu0 10 0 20 300 0 0 0 0 0 0\n"
    "intr 0\n"
    "btime 1700000000\n"
    "processes 4242\n";
constexpr char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            1024                 524288               files     \n"
    "Max address space         unlimited            unlimited            bytes     \n"
    "Max locked memory         8388608              8388608              bytes     \n";

void writeFakeProc(const TempDir& dir, int open_fds) {
  dir.write("self/stat", kStat);
  dir.write("stat", kSystemStat);
  dir.write("self/limits", kLimits);
  std::filesystem::create_directories(dir.path() / "self/fd");
  for (int fd = 0; fd < open_fds; ++fd) {
    dir.write("self/fd/" + std::to_string(fd), "");
  }
}

ProcessCollector fakeCollector(const TempDir& dir) {
  return ProcessCollector(
      {.proc_root = dir.path(), .clock_ticks_per_second = 100, .page_size = 4096});
}

TEST(ProcessCollector, FakeProcGivesExactValues) {
  TempDir dir;
  writeFakeProc(dir, 5);
  const Snapshot snap(fakeCollector(dir));

  EXPECT_EQ(snap.value("process_cpu_seconds_total", {}), 4.0);
  EXPECT_EQ(snap.value("process_resident_memory_bytes", {}), 2560.0 * 4096);
  EXPECT_EQ(snap.value("process_virtual_memory_bytes", {}), 104857600.0);
  EXPECT_EQ(snap.value("process_virtual_memory_max_bytes", {}), 18446744073709551615.0);
  EXPECT_EQ(snap.value("process_open_fds", {}), 5.0);
  EXPECT_EQ(snap.value("process_max_fds", {}), 1024.0);
  EXPECT_DOUBLE_EQ(*snap.value("process_start_time_seconds", {}), 1700000000 + 123.45);
  EXPECT_EQ(snap.families().size(), 7u);
}

TEST(ProcessCollector, TypesAreThoseOfTheGoClient) {
  TempDir dir;
  writeFakeProc(dir, 1);
  const Snapshot snap(fakeCollector(dir));
  ASSERT_NE(snap.family("process_cpu_seconds_total"), nullptr);
  EXPECT_EQ(snap.family("process_cpu_seconds_total")->type, prometheus::MetricType::Counter);
  for (const auto& family : snap.families()) {
    if (family.name == "process_cpu_seconds_total") {
      continue;
    }
    EXPECT_EQ(family.type, prometheus::MetricType::Gauge) << family.name;
    EXPECT_FALSE(family.help.empty()) << family.name;
  }
}

TEST(ProcessCollector, EachCollectReadsAgain) {
  TempDir dir;
  writeFakeProc(dir, 2);
  const auto collector = fakeCollector(dir);
  EXPECT_EQ(Snapshot(collector).value("process_open_fds", {}), 2.0);
  dir.write("self/fd/9", "");
  EXPECT_EQ(Snapshot(collector).value("process_open_fds", {}), 3.0);
}

TEST(ProcessCollector, UnreadableFileDropsOnlyItsMetrics) {
  TempDir dir;
  writeFakeProc(dir, 3);
  std::filesystem::remove(dir.path() / "self/limits");
  std::filesystem::remove(dir.path() / "stat");
  const Snapshot snap(fakeCollector(dir));
  EXPECT_EQ(snap.family("process_max_fds"), nullptr);
  EXPECT_EQ(snap.family("process_virtual_memory_max_bytes"), nullptr);
  EXPECT_EQ(snap.family("process_start_time_seconds"), nullptr);
  EXPECT_EQ(snap.value("process_cpu_seconds_total", {}), 4.0);
  EXPECT_EQ(snap.value("process_open_fds", {}), 3.0);
}

TEST(ProcessCollector, MalformedStatDropsItsMetrics) {
  TempDir dir;
  writeFakeProc(dir, 1);
  dir.write("self/stat", "4242 (truncated) S 1 2 3\n");
  const Snapshot snap(fakeCollector(dir));
  EXPECT_EQ(snap.family("process_cpu_seconds_total"), nullptr);
  EXPECT_EQ(snap.family("process_resident_memory_bytes"), nullptr);
  EXPECT_EQ(snap.family("process_start_time_seconds"), nullptr);
  EXPECT_EQ(snap.value("process_max_fds", {}), 1024.0);

  dir.write("self/stat", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 notanumber 1 2 3 4 5 6 7 8 9 10 11\n");
  EXPECT_EQ(Snapshot(fakeCollector(dir)).family("process_cpu_seconds_total"), nullptr);
}

TEST(ProcessCollector, MissingProcRootGivesNoMetrics) {
  TempDir dir;
  const Snapshot snap(fakeCollector(dir));
  EXPECT_TRUE(snap.families().empty());
}

TEST(ProcessCollector, RealProcGivesPlausibleValues) {
  if (!std::filesystem::exists("/proc/self/stat")) {
    GTEST_SKIP() << "no /proc here";
  }
  const Snapshot snap{ProcessCollector()};
  ASSERT_EQ(snap.families().size(), 7u);
  EXPECT_GE(*snap.value("process_cpu_seconds_total", {}), 0.0);
  EXPECT_GT(*snap.value("process_resident_memory_bytes", {}), 1024.0 * 1024);
  EXPECT_GT(*snap.value("process_virtual_memory_bytes", {}),
            *snap.value("process_resident_memory_bytes", {}));
  EXPECT_GE(*snap.value("process_open_fds", {}), 3.0);
  EXPECT_GE(*snap.value("process_max_fds", {}), *snap.value("process_open_fds", {}));
  const double now =
      std::chrono::duration<double>(RealClock::instance().systemNow().time_since_epoch()).count();
  const double started = *snap.value("process_start_time_seconds", {});
  EXPECT_LE(started, now + 1);        // not in the future (tick rounding aside)
  EXPECT_GT(started, now - 86400.0);  // this test binary started less than a day ago
}

}  // namespace
}  // namespace rsc::metrics
