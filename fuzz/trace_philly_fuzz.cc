// libFuzzer's entry for the trace_philly target: its body is FuzzTracePhilly (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTracePhilly(data, size);
  return 0;
}
