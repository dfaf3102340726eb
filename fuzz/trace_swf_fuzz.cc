// libFuzzer's entry for the trace_swf target: its body is FuzzTraceSwf (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceSwf(data, size);
  return 0;
}
