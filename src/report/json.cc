// The JSON report: every metric of every run, keys as documented in docs/simulator.md.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "report/common.h"
#include "report/report.h"

namespace arbiter::report {
namespace {

using Value = nlohmann::ordered_json;

Value Number(double value) { return internal::Finite(value) ? Value(value) : Value(nullptr); }

Value Number(std::optional<double> value) { return value ? Number(*value) : Value(nullptr); }

// A statistic of a distribution: null when the distribution is empty.
Value Stat(const sim::Distribution& distribution, double value) {
  return distribution.count > 0 ? Number(value) : Value(nullptr);
}

void AddGroupKeys(const sim::GroupMetrics& g, Value& out) {
  out["jobs_submitted"] = g.jobs_submitted;
  out["jobs_completed"] = g.jobs_completed;
  out["wait_mean_s"] = Stat(g.wait, g.wait.mean);
  out["wait_p50_s"] = Stat(g.wait, g.wait.p50);
  out["wait_p95_s"] = Stat(g.wait, g.wait.p95);
  out["wait_p99_s"] = Stat(g.wait, g.wait.p99);
  out["jct_mean_s"] = Stat(g.jct, g.jct.mean);
  out["jct_p50_s"] = Stat(g.jct, g.jct.p50);
  out["jct_p95_s"] = Stat(g.jct, g.jct.p95);
  out["jct_p99_s"] = Stat(g.jct, g.jct.p99);
  out["training_completion_s"] = Stat(g.training_completion, g.training_completion.mean);
  out["longest_wait_s"] = Number(g.longest_wait_s);
  out["evictions"] = g.evictions;
  out["failures"] = g.failures;
  out["gpu_hours_lost"] = Number(g.gpu_hours_lost);
  out["gpu_hours_allocated"] = Number(g.gpu_hours_allocated);
  out["gpu_hours_useful"] = Number(g.gpu_hours_useful);
}

// A group's share of the run's whole capacity (all GPUs over the simulated time).
Value CapacityShare(const sim::RunResult& run, double gpu_hours) {
  const double capacity = run.total_gpus * static_cast<double>(run.horizon) / 3.6e6;
  return capacity > 0 ? Number(gpu_hours / capacity) : Value(nullptr);
}

// The metrics of a group of a run's jobs and services: the whole run, or one queue, class or
// workload.
Value GroupValue(const sim::RunResult& run, const sim::GroupMetrics& g,
                 const internal::Selection& in) {
  Value out = Value::object();
  out["gpu_utilization"] = CapacityShare(run, g.gpu_hours_useful);
  out["gpu_allocation"] = CapacityShare(run, g.gpu_hours_allocated);
  out["inference_latency_p50_ms"] = Number(internal::MaxServiceP50Ms(run, in));
  out["inference_latency_p99_ms"] = Number(internal::MaxServiceP99Ms(run, in));
  out["inference_latency_p99_worst_hour_ms"] =
      Number(internal::MaxServiceP99WorstWindowMs(run, in));
  out["inference_hours_over_slo"] = internal::TotalWindowsOverSlo(run, in);
  out["slo_miss_minutes"] = Number(internal::TotalSloMissMinutes(run, in));
  out["training_jct_mean_s"] = Number(internal::TrainingJctMeanS(run, in));
  AddGroupKeys(g, out);
  return out;
}

Value Groups(const sim::RunResult& run, const std::map<std::string, sim::GroupMetrics>& groups,
             internal::Selection::By by) {
  Value out = Value::object();
  for (const auto& [name, g] : groups) {
    Value group = GroupValue(run, g, internal::Selection{by, name});
    if (by == internal::Selection::By::kQueue) {
      group["guarantee_gpus"] = Number(g.guarantee_gpus);
      group["mean_gpus"] = Number(g.mean_gpus);
      group["share_of_guarantee"] =
          g.guarantee_gpus > 0 ? Number(g.mean_gpus / g.guarantee_gpus) : Value(nullptr);
      group["below_guarantee_hours"] = Number(g.below_guarantee_hours);
    }
    out[name] = std::move(group);
  }
  return out;
}

Value Services(const sim::RunResult& run) {
  Value out = Value::array();
  for (const sim::ServiceMetrics& s : run.services) {
    Value service = Value::object();
    service["name"] = s.name;
    service["queue"] = s.queue;
    service["requests"] = Number(s.requests);
    service["latency_p50_ms"] = Number(s.latency_p50_ms);
    service["latency_p99_ms"] = Number(s.latency_p99_ms);
    service["slo_ms"] = Number(s.slo_ms);
    service["latency_window_s"] =
        static_cast<double>(s.latency_window) / static_cast<double>(kMillisPerSecond);
    Value by_window = Value::array();
    for (const double p99 : s.latency_p99_by_window_ms) by_window.push_back(Number(p99));
    service["latency_p99_by_hour_ms"] = std::move(by_window);
    service["latency_p99_worst_hour_ms"] = Number(s.latency_p99_worst_window_ms);
    service["hours_over_slo"] = s.windows_over_slo;
    service["slo_miss_minutes"] = Number(s.slo_miss_minutes);
    service["timeout_fraction"] = Number(s.timeout_fraction);
    service["mean_replicas_wanted"] = Number(s.mean_replicas_wanted);
    service["mean_replicas_serving"] = Number(s.mean_replicas_serving);
    out.push_back(std::move(service));
  }
  return out;
}

// Each GPU model: its GPUs and the share of them allocated over the run (from the time series,
// each sample weighted by its interval; null without samples).
Value GpuTypes(const sim::RunResult& run) {
  Value out = Value::object();
  for (std::size_t t = 0; t < run.gpu_types.size(); ++t) {
    const double gpus = t < run.gpu_type_totals.size() ? run.gpu_type_totals[t] : 0;
    double area = 0;
    Millis covered = 0;
    Millis last = 0;
    for (const sim::Sample& s : run.series) {
      if (t < s.type_allocated_gpus.size()) {
        area += s.type_allocated_gpus[t] * static_cast<double>(s.t - last);
        covered += s.t - last;
      }
      last = s.t;
    }
    Value type = Value::object();
    type["gpus"] = Number(gpus);
    type["gpu_allocation"] = covered > 0 && gpus > 0
                                 ? Number(area / static_cast<double>(covered) / gpus)
                                 : Value(nullptr);
    out[run.gpu_types[t]] = std::move(type);
  }
  return out;
}

}  // namespace

std::string Json(std::span<const sim::RunResult> runs, const std::string& scenario) {
  Value out = Value::object();
  out["scenario"] = scenario;
  Value list = Value::array();
  for (const sim::RunResult& run : runs) {
    Value r = Value::object();
    r["name"] = run.name;
    r["horizon_s"] = static_cast<double>(run.horizon) / static_cast<double>(kMillisPerSecond);
    r["total_gpus"] = Number(run.total_gpus);
    r["events"] = run.events;
    r["cycles"] = run.cycles;
    r["cycles_skipped"] = run.cycles_skipped;
    r["jobs_parked"] = run.jobs_parked;
    r["cycles_rerun"] = run.cycles_rerun;
    r["cycles_stopped_early"] = run.cycles_stopped_early;
    Value metrics = GroupValue(run, run.overall, internal::Selection{});
    metrics["gpu_utilization"] = Number(run.gpu_utilization);  // the simulator's own figures
    metrics["gpu_allocation"] = Number(run.gpu_allocation);
    r["metrics"] = std::move(metrics);
    r["queues"] = Groups(run, run.queues, internal::Selection::By::kQueue);
    r["classes"] = Groups(run, run.classes, internal::Selection::By::kClass);
    r["workloads"] = Groups(run, run.workloads, internal::Selection::By::kWorkload);
    r["services"] = Services(run);
    r["gpu_types"] = GpuTypes(run);
    list.push_back(std::move(r));
  }
  out["runs"] = std::move(list);
  return out.dump(2) + "\n";
}

}  // namespace arbiter::report
