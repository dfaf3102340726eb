// libFuzzer's entry for the quota target: its body is FuzzQuota (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzQuota(data, size);
  return 0;
}
