// libFuzzer's entry for the agent_register target: its body is FuzzAgentRegister (fuzz/targets.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  arbiter::fuzz::FuzzAgentRegister(data, size);
  return 0;
}
