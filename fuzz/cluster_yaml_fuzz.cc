// libFuzzer's entry for the cluster_yaml target: its body is FuzzClusterYaml (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzClusterYaml(data, size);
  return 0;
}
