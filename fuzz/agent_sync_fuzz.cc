// libFuzzer's entry for the agent_sync target: its body is FuzzAgentSync (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzAgentSync(data, size);
  return 0;
}
