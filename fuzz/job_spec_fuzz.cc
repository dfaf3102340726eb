// libFuzzer's entry for the job_spec target: its body is FuzzJobSpec (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzJobSpec(data, size);
  return 0;
}
