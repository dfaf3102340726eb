// libFuzzer's entry for the binary_records target: its body is FuzzBinaryRecords (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzBinaryRecords(data, size);
  return 0;
}
