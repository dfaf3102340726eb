// The server's metrics (docs/metrics.md), kept and written by prometheus-cpp's core library: its
// registry, families, counters and histograms, and its text serializer (which escapes label
// values and help texts). The server's own HTTP layer serves the text at /metrics.
//
// Two kinds: the counters and histograms below live as long as the core and are changed where
// the event happens (any thread: prometheus-cpp's metrics are thread-safe); the gauges that
// describe the cluster at this moment (quotas, usage, pending jobs, nodes) are read from the
// state at each scrape into a registry of that scrape (Core::CollectMetrics).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace arbiter::server {

// Seconds since `start`, into `histogram`.
void ObserveSince(prometheus::Histogram& histogram, std::chrono::steady_clock::time_point start);

// Buckets (seconds): latencies of the server's own work (a cycle, a stage, a submission, a sync),
// and waits of jobs for admission (a second to two days).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();
const prometheus::Histogram::BucketBoundaries& WaitBuckets();

// The Prometheus text format (version 0.0.4) of the families, in the order given.
std::string MetricsText(const std::vector<prometheus::MetricFamily>& families);

// A registry for one scrape: gauges read from the state now, added by name and labels.
class Scrape {
 public:
  Scrape() : registry_(std::make_shared<prometheus::Registry>()) {}
  prometheus::Family<prometheus::Gauge>& Gauge(const std::string& name, const std::string& help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  }
  prometheus::Family<prometheus::Counter>& Counter(const std::string& name,
                                                   const std::string& help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  }
  // The families added, appended to `out`.
  void CollectInto(std::vector<prometheus::MetricFamily>& out) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

// What the server counts and times as it goes.
class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The counters' and histograms' families, appended to `out`.
  void CollectInto(std::vector<prometheus::MetricFamily>& out) const;

  // A job bound by a cycle, `wait_seconds` after it last became pending.
  void Admitted(const std::string& queue, double wait_seconds);
  // A job evicted by a cycle, the work it loses and why (within_queue, queue_priority, reclaim,
  // attained_service, finish_time_fairness).
  void Evicted(const std::string& queue, const std::string& priority_class,
               const std::string& reason, double lost_gpu_seconds);
  // The engine's time in a stage of a cycle.
  void StageTime(const std::string& stage, double seconds);

 private:
  std::shared_ptr<prometheus::Registry> registry_;

 public:
  // Created with the registry, in the constructor; used directly.
  prometheus::Histogram& cycle_seconds;
  prometheus::Histogram& submit_seconds;
  prometheus::Histogram& agent_sync_seconds;
  prometheus::Counter& cycles;
  prometheus::Counter& cycles_skipped;  // nothing had changed (Plan::stable_until)
  prometheus::Counter& submitted;
  prometheus::Counter& bad_requests;
  // A change to the cluster state that failed after the store had recorded it: memory and store
  // may disagree until a restart rebuilds memory from the store (each is also logged).
  prometheus::Counter& internal_errors;

 private:
  prometheus::Family<prometheus::Counter>& admitted_;
  prometheus::Family<prometheus::Histogram>& admission_wait_;
  prometheus::Family<prometheus::Counter>& evicted_;
  prometheus::Family<prometheus::Counter>& lost_gpu_seconds_;
  prometheus::Family<prometheus::Histogram>& stage_seconds_;
};

}  // namespace arbiter::server
