// TempDir: a fresh directory under $TMPDIR for one test, removed with
// everything in it when the object goes. Used by the process collector tests
// (a fake /proc) and the exposition tests (files for promtool).
// Not synchronised: one test thread owns it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace rsc::metrics::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rsc-metrics-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << " failed";
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `content` to `relative` under the directory, creating parents.
  std::filesystem::path write(const std::filesystem::path& relative,
                              std::string_view content) const {
    const auto file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << content;
    EXPECT_TRUE(out.good()) << "write " << file;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace rsc::metrics::testing
