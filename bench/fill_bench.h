#pragma once

#include <cstdint>
#include <string>

namespace arbiter::bench {

// One seeded run of the fill experiment (src/sim/fill.h) with the engine's default
// placement on the openb node and pod lists in `dir`: prints BENCH fill_seed_s (the median wall
// time of `reps` whole runs) and the run's allocation at 100% arrived.
void RunFillBench(const std::string& dir, std::uint64_t seed, int reps);

}  // namespace arbiter::bench
