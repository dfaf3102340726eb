// Lint of a scenario's configurations: config::Lint of each, with the jobs of its workload as the
// simulator runs them, then what only a workload tells.

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "sim/sim.h"

namespace arbiter::config {
namespace {

// The index of a workload in the file, by its name (the number of workloads when unknown).
std::size_t WorkloadIndex(const Scenario& scenario, const std::string& name) {
  return static_cast<std::size_t>(
      std::find(scenario.workloads.begin(), scenario.workloads.end(), name) -
      scenario.workloads.begin());
}

// checkpoint-interval-ignored: jobs that run as batch work, or replicas of an inference service,
// with a checkpoint_interval: the simulator keeps checkpoints of training work only. One warning
// per workload, in file order.
void CheckpointIntervalIgnored(const Scenario& scenario, const SimConfiguration& c,
                               std::vector<LintWarning>& out) {
  struct Ignored {
    bool service = false;
    std::int64_t jobs = 0;
    Millis shortest = 0, longest = 0;
  };
  std::map<std::size_t, std::pair<std::string, Ignored>> by_workload;  // by index
  auto note = [&](const std::string& workload, bool service, Millis interval) {
    auto& [name, i] = by_workload[WorkloadIndex(scenario, workload)];
    name = workload;
    i.service = service;
    i.shortest = i.jobs == 0 ? interval : std::min(i.shortest, interval);
    i.longest = std::max(i.longest, interval);
    ++i.jobs;
  };
  for (const sim::SimJob& j : c.workload.jobs) {
    if (j.kind != sim::WorkKind::kTraining && j.job.checkpoint_interval > 0)
      note(j.workload, false, j.job.checkpoint_interval);
  }
  for (const sim::InferenceService& s : c.workload.services) {
    if (s.replica.checkpoint_interval > 0) note(s.name, true, s.replica.checkpoint_interval);
  }
  for (const auto& [index, entry] : by_workload) {
    const auto& [name, i] = entry;
    const std::string field = index < scenario.workloads.size()
                                  ? fmt::format("workloads[{}]", index)
                                  : std::string("workloads");
    const std::string interval =
        i.shortest == i.longest
            ? DurationText(i.shortest)
            : fmt::format("{} to {}", DurationText(i.shortest), DurationText(i.longest));
    if (i.service) {
      out.push_back(
          {kLintCheckpointIntervalIgnored, field,
           fmt::format(
               "workload '{}' is an inference service whose replicas set checkpoint_interval "
               "({}): the simulator keeps no checkpoint of a replica (a stopped replica starts "
               "again after its startup), so the interval changes nothing; leave "
               "checkpoint_interval out of its job",
               name, interval)});
      continue;
    }
    out.push_back(
        {kLintCheckpointIntervalIgnored, field,
         fmt::format(
             "{} job{} of workload '{}' run{} as batch work but set{} checkpoint_interval ({}): "
             "the simulator keeps no checkpoint of batch work, so an evicted or failed batch job "
             "starts over from zero whatever the interval, and the run's evictions cost more "
             "than the configuration suggests (lint counts these jobs as jobs that never "
             "checkpoint); make the workload kind: training if its jobs do checkpoint (with "
             "checkpoint_cost, the time one takes), or leave checkpoint_interval out",
             i.jobs, i.jobs == 1 ? "" : "s", name, i.jobs == 1 ? "s" : "", i.jobs == 1 ? "s" : "",
             interval)});
  }
}

}  // namespace

std::vector<LintWarning> LintConfiguration(const Scenario& scenario, const SimConfiguration& c,
                                           const ClusterState& state) {
  // The jobs as the simulator runs them: a job that runs as batch or inference work keeps no
  // checkpoint, whatever its checkpoint_interval says.
  std::vector<Job> jobs;
  for (const sim::SimJob& j : c.workload.jobs) {
    Job& job = jobs.emplace_back(j.job);
    if (j.kind != sim::WorkKind::kTraining) job.checkpoint_interval = 0;
  }
  for (const sim::InferenceService& s : c.workload.services) {
    const double wanted = s.rate.base / (s.replica_rate * s.target_utilization);
    const auto replicas = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(wanted)),
                                                   s.min_replicas, s.max_replicas);
    for (std::int64_t r = 0; r < replicas; ++r) {
      Job& job = jobs.emplace_back(s.replica);
      job.checkpoint_interval = 0;
    }
  }
  ClusterConfig config;
  config.cluster = c.cluster;
  config.engine = c.engine;
  config.bare_memory = c.bare_memory;
  config.aliases = c.aliases;
  std::vector<LintWarning> out = Lint(config, state, jobs);
  CheckpointIntervalIgnored(scenario, c, out);
  return out;
}

}  // namespace arbiter::config
