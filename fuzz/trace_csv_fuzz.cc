// libFuzzer's entry for the trace_csv target: its body is FuzzTraceCsv (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzTraceCsv(data, size);
  return 0;
}
