// libFuzzer's entry for the jobs_yaml target: its body is FuzzJobsYaml (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzJobsYaml(data, size);
  return 0;
}
