// Every input of the fuzz targets, run through their bodies (fuzz/targets.h) in the normal build:
// the seeds (fuzz/corpus/NAME/) and every crash input a fuzzer found (fuzz/regressions/NAME/), so
// that a crash once fixed stays fixed. A target that crashes or breaks a check aborts its test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/targets.h"

namespace arbiter::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzz = fs::path(ARBITER_SOURCE_DIR) / "fuzz";

// The targets: the NAME of each fuzz/NAME_fuzz.cc.
std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(kFuzz)) {
    const std::string file = e.path().filename().string();
    constexpr std::string_view kSuffix = "_fuzz.cc";
    if (file.size() > kSuffix.size() && file.ends_with(kSuffix)) {
      names.push_back(file.substr(0, file.size() - kSuffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<fs::path> Inputs(const std::string& name) {
  std::vector<fs::path> files;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = kFuzz / kind / name;
    if (!fs::is_directory(dir)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzInputs : public testing::TestWithParam<std::string> {};

TEST_P(FuzzInputs, RunWithoutCrashing) {
  const std::string& name = GetParam();
  FuzzFunction target = FindTarget(name);
  ASSERT_NE(target, nullptr) << "fuzz/" << name << "_fuzz.cc has no entry in FindTarget";
  const std::vector<fs::path> files = Inputs(name);
  EXPECT_FALSE(files.empty()) << "no seeds in fuzz/corpus/" << name;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << file;
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                          std::istreambuf_iterator<char>());
    target(bytes.data(), bytes.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzInputs, testing::ValuesIn(TargetNames()),
                         [](const testing::TestParamInfo<std::string>& target_info) {
                           return target_info.param;
                         });

// Every folder of inputs belongs to a target (a renamed target leaves none behind).
TEST(FuzzInputs, EveryFolderNamesATarget) {
  for (const char* kind : {"corpus", "regressions"}) {
    if (!fs::is_directory(kFuzz / kind)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(kFuzz / kind)) {
      EXPECT_NE(FindTarget(e.path().filename().string()), nullptr)
          << "fuzz/" << kind << "/" << e.path().filename().string() << " names no target";
    }
  }
}

}  // namespace
}  // namespace arbiter::fuzz
