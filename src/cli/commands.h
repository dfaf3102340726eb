// Subcommands of the arbiter command that live in their own files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace arbiter::cli {

// A GPU amount for people: "8", "0.5".
std::string FormatGpus(std::int64_t milli);

// The commands that talk to a running server (src/cli/client.cc): submit, jobs, job, cancel,
// hold, release, queues, nodes, cordon, uncordon, drain, snapshot; and explain by job id.
struct ClientOptions;
struct ClientCommands {
  std::shared_ptr<ClientOptions> options;
  std::vector<std::pair<CLI::App*, int (*)(const ClientOptions&)>> commands;
};
// Whether `name` is one of those subcommands.
bool IsClientCommand(std::string_view name);
// Adds the subcommands to `app` (only the one named `only` when it is not empty), and the
// connection flags to `explain` too when it is not null.
ClientCommands AddClientCommands(CLI::App& app, CLI::App* explain, std::string_view only = {});
// Whether the parsed command is for the whole program rather than the front (front.cc): its
// server is not plain http (https needs the TLS libraries the front does not load), or its
// connection settings are wrong (the whole program says what is wrong).
bool NeedsWholeProgram(const ClientCommands& commands);
// Runs the client subcommand that was parsed, if any; returns its exit status.
std::optional<int> RunClientCommand(const ClientCommands& commands);
// `arbiter explain ID` against the server.
int RunExplainServer(const ClientCommands& commands, const std::string& id);

struct SimArgs {
  std::string scenario;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> runs;  // configurations to run; empty: all
  std::string json;               // file, or "-" for stdout
  std::string html;
  std::string csv;
  bool quiet = false;  // no progress bar
  // Every cycle's plan checked (sim::SimOptions::check_invariants): a violation ends the run.
  bool check_invariants = false;
};

// `arbiter whatif` (docs/whatif.md): a history file (`arbiter history -o FILE`) replayed under the
// configuration it ran under (`config`: a cluster file that replaces it, its server section
// giving the cycle timing) and under `proposed` (a cluster file whose queues, classes and
// scheduler options replace the current ones; the nodes stay).
struct WhatifArgs {
  std::string history;
  std::string config;
  std::string proposed;  // empty: only the fidelity of the current configuration
  std::string since;     // ISO 8601 UTC; empty: the first submit of the history
  std::string until;     // ISO 8601 UTC; empty: when the history was taken
  std::string html;
};
}  // namespace arbiter::cli
#include "cli/history.h"
#include "sim/sim.h"
namespace arbiter::cli {
// How the replay of the current configuration compares with what happened: per job that started
// in both, its recorded first start and its simulated one (relative to the window's start).
struct Fidelity {
  struct Start {
    JobId id = 0;
    Millis recorded = 0;
    Millis simulated = 0;
  };
  std::vector<Start> starts;
  std::size_t not_started = 0;  // started in the record, not in the replay
  // Still pending at the window's end in the record: no recorded start, so in no figure above.
  std::size_t pending_in_record = 0;
  double mean_error_s = 0;
  double p99_error_s = 0;
  double max_error_s = 0;
  // The waits (first start - submit) of those jobs, recorded and replayed, by queue and "(all)".
  std::map<std::string, std::vector<double>> recorded_wait_s, replayed_wait_s;
};
struct WhatifResult {
  Millis since = 0;
  Millis until = 0;
  std::vector<Replay> replays;       // current, then proposed
  std::vector<sim::RunResult> runs;  // current, then proposed
  Fidelity fidelity;
};
Result<WhatifResult> Whatif(const WhatifArgs& args);
int RunWhatif(const WhatifArgs& args);

struct ExplainSimArgs {
  std::string job;
  std::string scenario;
  std::string at;   // a duration from the start of the simulation
  std::string run;  // configuration; empty: the first
  std::optional<std::uint64_t> seed;
};

struct FillArgs {
  std::string nodes;                    // openb node list
  std::string pods;                     // openb pod list
  std::vector<std::string> placements;  // policies; empty: all
  std::vector<std::string> variants;    // workload variants applied in order, e.g. "gpuspec=33"
  int seeds = 10;
  std::uint64_t seed = 42;  // the first seed
  double inflate = 1.3;
  std::string json;  // file, or "-" for stdout
  int threads = 0;   // 0: one per processor
  bool quiet = false;
};

// `arbiter fill`: the fill experiment of "Beware of Fragmentation" for placement policies
// (docs/placement.md). Returns the exit status.
int RunFill(const FillArgs& args);

// `arbiter explain JOB --scenario S --at T`: simulates up to T and says what the job is doing
// and, when it is pending, why.
int RunExplainSim(const ExplainSimArgs& args);

// `arbiter lint --scenario S`: lints every configuration of a scenario, with its workload's jobs
// (an inference service counts with the replicas its base rate asks for).
int RunLintScenario(const std::string& scenario, bool strict);

// `arbiter sim`: runs a scenario's configurations on the same workload and reports them side by
// side. Returns the exit status.
int RunSim(const SimArgs& args);

}  // namespace arbiter::cli
