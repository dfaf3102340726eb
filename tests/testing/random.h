// A seeded source of the small random choices the simulation property tests make (cluster sizes,
// job shapes, times): std::mt19937_64 with inclusive integer ranges.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>

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

}  // namespace arbiter::testing
