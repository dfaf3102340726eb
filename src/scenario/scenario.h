// Simulator scenarios: a YAML file with a cluster, workload generators and traces, and one or
// more configurations (queues, priority classes, scheduler settings) to compare on the same
// workload. docs/simulator.md is the reference of the format.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "arbiter/status.h"
#include "config/config.h"
#include "config/lint.h"
#include "core/state/cluster_state.h"
#include "sim/sim.h"

namespace arbiter::config {

// One configuration with the workload resolved against its queues and classes.
struct SimConfiguration {
  std::string name;
  std::string description;
  ClusterSpec cluster;
  EngineOptions engine;
  sim::Workload workload;
  // The memory fields of the cluster's nodes and of the workloads' job templates written as bare
  // numbers (for lint).
  std::vector<BareMemory> bare_memory;
  // The fields written in an alias spelling (for lint).
  std::vector<SpellingAlias> aliases;
};

struct Scenario {
  std::string name;
  std::string description;
  std::uint64_t seed = 1;
  sim::SimOptions options;
  std::vector<SimConfiguration> configurations;
  std::vector<std::string> workloads;  // the workloads' names, in file order
  // Trace rows skipped (with `skip_bad_rows: true`), each `FILE:LINE: problem`.
  std::vector<std::string> skipped_rows;
};

// Reads a scenario. Trace files are found relative to the scenario file's folder. `seed`
// replaces the file's seed. Errors read `FILE:LINE:COL: field.path: problem`.
Result<Scenario> LoadScenarioFile(const std::string& path,
                                  std::optional<std::uint64_t> seed = std::nullopt);
Result<Scenario> ParseScenario(std::string_view yaml, const std::string& file_name,
                               const std::string& base_dir,
                               std::optional<std::uint64_t> seed = std::nullopt);

// The configurations named in `names`, in that order (all of them, in file order, when `names` is
// empty); an unknown name is an error listing the known ones.
Result<std::vector<const SimConfiguration*>> ChooseConfigurations(
    const Scenario& scenario, std::span<const std::string> names);

// Simulates each of `chosen` on the scenario's workload and options, in parallel threads (each on
// its own copy of the cluster); the results in the order of `chosen`. `progress`, when given, is
// called with a run's index and its simulated time (from that run's thread). The first run that
// fails gives the error, prefixed with its configuration's name.
Result<std::vector<sim::RunResult>> SimulateConfigurations(
    const Scenario& scenario, std::span<const SimConfiguration* const> chosen,
    const std::function<void(std::size_t run, Millis now)>& progress = {});

// Lints one configuration of a scenario (docs/configuration.md, "Lint"; `state` is
// ClusterState::Create(c.cluster)): Lint of its cluster, scheduler and the jobs of its workload as
// the simulator runs them (an inference service counted with the replicas its base request rate
// asks for; a job that runs as batch or inference work without checkpoint_interval, which the
// simulator ignores there), then what only a workload tells (that ignored checkpoint_interval).
std::vector<LintWarning> LintConfiguration(const Scenario& scenario, const SimConfiguration& c,
                                           const ClusterState& state);

}  // namespace arbiter::config
