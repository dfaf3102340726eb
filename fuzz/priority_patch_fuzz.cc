// libFuzzer's entry for the priority_patch target: its body is FuzzPriorityPatch (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzPriorityPatch(data, size);
  return 0;
}
