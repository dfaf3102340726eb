// libFuzzer's entry for the trace_json target: its body is FuzzTraceJson (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceJson(data, size);
  return 0;
}
