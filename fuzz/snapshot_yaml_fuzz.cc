// libFuzzer's entry for the snapshot_yaml target: its body is FuzzSnapshotYaml (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzSnapshotYaml(data, size);
  return 0;
}
