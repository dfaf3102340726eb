// A seeded source of the small random choices the simulation property tests make (cluster sizes,
// job shapes, times): std::mt19937_64 with inclusive integer ranges.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>

#include "testing/builders.h"

namespace arbiter::testing {

// How many random cases a hand-written property test tries: `normal` in a normal build, scaled by
// ARBITER_PROPERTY_CASES over its normal 1000 (the sanitized builds run a tenth), at least one.
constexpr int PropertyCases(int normal) {
#ifdef ARBITER_PROPERTY_CASES
  return std::max(1,
                  static_cast<int>(static_cast<long long>(normal) * ARBITER_PROPERTY_CASES / 1000));
#else
  return normal;
#endif
}

class Random {
 public:
  explicit Random(std::uint64_t seed) : gen_(seed) {}
  std::int64_t In(std::int64_t lo, std::int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen_);
  }
  template <typename T>
  T Of(std::initializer_list<T> items) {
    return *(items.begin() + In(0, static_cast<std::int64_t>(items.size()) - 1));
  }
  bool Chance(int percent) { return In(0, 99) < percent; }

 private:
  std::mt19937_64 gen_;
};

// One random simulation of a property test: the cluster, the engine's options, the workload and
// the simulator's options.
struct SimCase {
  ClusterSpec cluster;
  EngineOptions engine;
  sim::Workload workload;
  sim::SimOptions options;
};

// A job of `gpus` GPUs (a gang of two tasks `gang_percent`% of the time when it has two or
// more), named "j<index>", in a queue of 1..queues and a class of 0..2 drawn from `rnd`.
inline Job RandomGpuJob(Random& rnd, int index, std::int64_t gpus, int gang_percent, int queues) {
  const bool gang = gpus >= 2 && rnd.Chance(gang_percent);
  Job job = GpuJob(0, gang ? 2 : 1, (gang ? gpus / 2 : gpus) * kMilliPerGpu);
  job.name = "j" + std::to_string(index);
  job.queue = static_cast<QueueId>(rnd.In(1, queues));
  job.priority_class = static_cast<PriorityClassId>(rnd.In(0, 2));
  return job;
}

}  // namespace arbiter::testing
