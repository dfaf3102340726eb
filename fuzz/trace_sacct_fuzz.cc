// libFuzzer's entry for the trace_sacct target: its body is FuzzTraceSacct (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceSacct(data, size);
  return 0;
}
