// libFuzzer's entry for the trace_openb target: its body is FuzzTraceOpenb (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceOpenb(data, size);
  return 0;
}
