// libFuzzer's entry for the trace_tiresias target: its body is FuzzTraceTiresias (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceTiresias(data, size);
  return 0;
}
