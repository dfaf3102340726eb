// libFuzzer's entry for the trace_helios target: its body is FuzzTraceHelios (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceHelios(data, size);
  return 0;
}
