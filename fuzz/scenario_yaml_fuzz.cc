// libFuzzer's entry for the scenario_yaml target: its body is FuzzScenarioYaml (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzScenarioYaml(data, size);
  return 0;
}
