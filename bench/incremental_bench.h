#pragma once

#include <cstdint>

namespace arbiter::bench {

// A cluster of `nodes` filled to `fill_pct` % of its GPUs by jobs of the cycle benchmark's mix,
// then `arrivals` single arrivals of the same mix, each one Engine::Schedule of one pending job on
// that cluster (the engine gives the state back after each); prints BENCH lines with `suffix`.
void RunIncrementalBench(std::uint32_t nodes, double fill_pct, int arrivals, std::uint64_t seed,
                         const char* suffix);

}  // namespace arbiter::bench
