// libFuzzer's entry for the client_config target: its body is FuzzClientConfig (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzClientConfig(data, size);
  return 0;
}
