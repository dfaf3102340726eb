#pragma once

#include <cstdint>

namespace arbiter::bench {

// Fills a cluster of `nodes` with one cycle of `jobs` pending jobs, then times `arrivals` 8-GPU
// high-priority arrivals one by one; prints BENCH lines with `suffix`.
void RunPreemptBench(std::uint32_t nodes, std::uint32_t jobs, int arrivals, std::uint64_t seed,
                     const char* suffix);

}  // namespace arbiter::bench
