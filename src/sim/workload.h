// Workload generators for the simulator: seeded random streams of training, batch and inference
// jobs. The random numbers come from the simulator's own generator and distributions (not the
// standard library's, whose distributions differ between implementations), so a seed gives the
// same workload everywhere. Standard library only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arbiter/model.h"
#include "sim/sim.h"

namespace arbiter::sim {

// xoshiro256** seeded through splitmix64.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t Next();
  double Uniform();  // [0, 1)
  double Exponential(double mean);
  double Normal();  // standard normal (Box-Muller)

 private:
  std::uint64_t s_[4];
};

// A seed for one named stream of a scenario: adding a workload does not change the others.
std::uint64_t StreamSeed(std::uint64_t seed, const std::string& name);

// A random quantity (durations in milliseconds, counts as numbers).
struct Dist {
  enum class Kind : std::uint8_t { kConstant, kUniform, kExponential, kLogNormal, kChoice };
  Kind kind = Kind::kConstant;
  double a = 0;                 // constant value; uniform low; exponential mean; lognormal median
  double b = 0;                 // uniform high; lognormal sigma
  std::vector<double> values;   // choice
  std::vector<double> weights;  // choice; empty: equal
  double Draw(Rng& rng) const;
  double Mean() const;
};

// When jobs of a generator arrive: a Poisson process, a fixed period with bursts, or given times;
// in [start, until) (until 0: the horizon), at most `count` jobs (0: no limit).
struct Arrivals {
  enum class Kind : std::uint8_t { kPoisson, kPeriodic, kAt };
  Kind kind = Kind::kPoisson;
  double per_hour = 1;  // Poisson
  Millis every = 0;     // periodic
  std::int32_t burst = 1;
  std::vector<Millis> at;
  Millis start = 0;
  Millis until = 0;
  std::int64_t count = 0;
};

struct Generator {
  std::string name;
  WorkKind kind = WorkKind::kBatch;
  Job job;  // template: queue, class, groups, GPU types, topology, checkpoints, restart overhead
  Arrivals arrivals;
  Dist work;  // ms of running time
  Dist gpus;  // whole GPUs per task (or milli when below 1); unset: the template's
  bool gpus_set = false;
  Millis checkpoint_cost = 0;
  double estimate_factor = 1;  // runtime estimate = work x factor; 0: no estimate
};

// The jobs of one generator, named "<name>-<k>", submit times ascending. Ids are left 0.
std::vector<SimJob> Generate(const Generator& generator, std::uint64_t seed, Millis horizon);

// Independent failures of each node: exponential times between failures with mean `mtbf`, each
// lasting `repair`; within [0, horizon).
std::vector<NodeOutage> RandomOutages(std::size_t nodes, Millis mtbf, Millis repair,
                                      std::uint64_t seed, Millis horizon);

}  // namespace arbiter::sim
