// libFuzzer's entry for the trace_pai target: its body is FuzzTracePai (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTracePai(data, size);
  return 0;
}
