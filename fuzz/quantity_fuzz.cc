// libFuzzer's entry for the quantity target: its body is FuzzQuantity (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzQuantity(data, size);
  return 0;
}
