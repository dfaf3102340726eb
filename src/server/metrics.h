// Counters and latency histograms of the server, written in the Prometheus text format.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace arbiter::server {

// A latency histogram with fixed buckets (seconds), safe to observe from any thread.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
  void Observe(double seconds);
  // The time since `start`.
  void ObserveSince(std::chrono::steady_clock::time_point start) {
    Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // `name` with its _bucket, _sum and _count lines, and the HELP and TYPE lines.
  std::string Text(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::array<std::uint64_t, kBounds.size()> counts_{};  // GUARDED_BY(mu_), not cumulative
  std::uint64_t count_ = 0;                             // GUARDED_BY(mu_)
  double sum_ = 0;                                      // GUARDED_BY(mu_)
};

struct Metrics {
  Histogram cycle_seconds;
  Histogram submit_seconds;
  std::atomic<std::uint64_t> cycles{0};
  std::atomic<std::uint64_t> cycles_skipped{0};  // nothing had changed (Plan::stable_until)
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> bad_requests{0};
  // A change to the cluster state that failed after the store had recorded it: memory and store
  // may disagree until a restart rebuilds memory from the store (each is also logged).
  std::atomic<std::uint64_t> internal_errors{0};
};

}  // namespace arbiter::server
