#include "server/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace arbiter::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;

}  // namespace

void ObserveSince(prometheus::Histogram& histogram, std::chrono::steady_clock::time_point start) {
  histogram.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
  return kBounds;
}

const prometheus::Histogram::BucketBoundaries& WaitBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBounds = {
      1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 172800};
  return kBounds;
}

std::string MetricsText(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

void Scrape::CollectInto(std::vector<prometheus::MetricFamily>& out) const {
  for (prometheus::MetricFamily& f : registry_->Collect()) out.push_back(std::move(f));
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      cycle_seconds(BuildHistogram()
                        .Name("arbiter_cycle_duration_seconds")
                        .Help("Time of one scheduling cycle.")
                        .Register(*registry_)
                        .Add({}, LatencyBuckets())),
      submit_seconds(BuildHistogram()
                         .Name("arbiter_submit_duration_seconds")
                         .Help("Time from a submission's arrival to its durable commit.")
                         .Register(*registry_)
                         .Add({}, LatencyBuckets())),
      agent_sync_seconds(BuildHistogram()
                             .Name("arbiter_agent_sync_duration_seconds")
                             .Help("Time the server takes to take a node agent's sync (its "
                                   "reports and the changes it is sent), without the long "
                                   "poll's wait.")
                             .Register(*registry_)
                             .Add({}, LatencyBuckets())),
      cycles(BuildCounter()
                 .Name("arbiter_cycles_total")
                 .Help("Scheduling cycles run.")
                 .Register(*registry_)
                 .Add({})),
      cycles_skipped(BuildCounter()
                         .Name("arbiter_cycles_skipped_total")
                         .Help("Scheduling cycles skipped: nothing had changed since a plan that "
                               "holds until later.")
                         .Register(*registry_)
                         .Add({})),
      submitted(BuildCounter()
                    .Name("arbiter_jobs_submitted_total")
                    .Help("Jobs accepted.")
                    .Register(*registry_)
                    .Add({})),
      bad_requests(BuildCounter()
                       .Name("arbiter_bad_requests_total")
                       .Help("Requests refused as bad input.")
                       .Register(*registry_)
                       .Add({})),
      internal_errors(BuildCounter()
                          .Name("arbiter_internal_errors_total")
                          .Help("State changes that failed after the store had recorded them "
                                "(restart the server to rebuild from the store).")
                          .Register(*registry_)
                          .Add({})),
      admitted_(BuildCounter()
                    .Name("arbiter_admitted_jobs_total")
                    .Help("Jobs started by a scheduling cycle, per queue (a job evicted and "
                          "started again counts again).")
                    .Register(*registry_)),
      admission_wait_(BuildHistogram()
                          .Name("arbiter_admission_wait_time_seconds")
                          .Help("Time from a job's becoming pending (submitted, evicted, requeued "
                                "or released) to its start by a scheduling cycle, per queue.")
                          .Register(*registry_)),
      evicted_(
          BuildCounter()
              .Name("arbiter_evicted_jobs_total")
              .Help("Jobs evicted by the scheduler, per queue and priority class of the "
                    "victim and reason (within_queue, queue_priority, reclaim, attained_service, "
                    "finish_time_fairness, allocation_round).")
              .Register(*registry_)),
      lost_gpu_seconds_(BuildCounter()
                            .Name("arbiter_lost_gpu_seconds_total")
                            .Help("GPU-seconds of work lost by evicted jobs (since their last "
                                  "checkpoint, plus their restart), per queue, priority class "
                                  "and reason; divide by 3600 for GPU-hours.")
                            .Register(*registry_)),
      stage_seconds_(BuildHistogram()
                         .Name("arbiter_cycle_stage_duration_seconds")
                         .Help("The engine's time in each stage of a scheduling cycle (filter is "
                               "timed within place and explain).")
                         .Register(*registry_)) {}

void Metrics::CollectInto(std::vector<prometheus::MetricFamily>& out) const {
  for (prometheus::MetricFamily& f : registry_->Collect()) out.push_back(std::move(f));
}

void Metrics::Admitted(const std::string& queue, double wait_seconds) {
  admitted_.Add({{"queue", queue}}).Increment();
  admission_wait_.Add({{"queue", queue}}, WaitBuckets()).Observe(wait_seconds);
}

void Metrics::Evicted(const std::string& queue, const std::string& priority_class,
                      const std::string& reason, double lost_gpu_seconds) {
  const prometheus::Labels labels{{"queue", queue}, {"class", priority_class}, {"reason", reason}};
  evicted_.Add(labels).Increment();
  lost_gpu_seconds_.Add(labels).Increment(lost_gpu_seconds);
}

void Metrics::StageTime(const std::string& stage, double seconds) {
  stage_seconds_.Add({{"stage", stage}}, LatencyBuckets()).Observe(seconds);
}

}  // namespace arbiter::server
