#pragma once

#include <cstdint>

namespace arbiter::bench {

// Resident memory of `jobs` pending jobs of the cycle benchmark's mix (as the engine takes them,
// std::vector<Job>) and of a cluster state of `nodes` nodes; prints BENCH lines.
void RunMemoryBench(std::uint32_t jobs, std::uint32_t nodes, std::uint64_t seed);

}  // namespace arbiter::bench
