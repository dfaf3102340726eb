// The arbiter command. Subcommands that exercise the engine: `plan` (one scheduling cycle over a
// cluster file and a jobs file) and `lint` (check configuration files). Exit status: 0 on success,
// 1 on bad input (with a one-line error naming the file and field) and on lint warnings with
// --strict, 2 on usage errors.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "arbiter/engine.h"
#include "cli/commands.h"
#include "config/config.h"
#include "config/lint.h"
#include "config/snapshot.h"
#include "core/state/cluster_state.h"
#include "crypto/crypto.h"
#include "job/limits.h"
#include "report/plan.h"
#include "server/server.h"
#include "store/copy_store.h"
#include "store/store.h"
#include "version.h"

namespace arbiter::cli {
namespace {

std::string Gpus(std::int64_t milli) { return FormatGpus(milli); }

void PrintClusterSummary(const ClusterState& state) {
  std::map<std::string, int> gpus;
  for (NodeId n = 0; n < state.node_count(); ++n) {
    for (const DeviceState& d : state.node(n).devices) ++gpus[state.gpu_type_name(d.type)];
  }
  std::string types;
  for (const auto& [type, count] : gpus)
    types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, type);
  std::string levels;
  for (const std::string& l : state.topology().levels) levels += (levels.empty() ? "" : " > ") + l;
  fmt::print("cluster: {} nodes, {} GPUs ({}); topology {}\n", state.node_count(),
             state.device_count(), types.empty() ? "none" : types, levels);
  fmt::print("queues:");
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    const QueueInfo& info = state.queue(q);
    fmt::print(" {}{}", std::string(static_cast<std::size_t>(info.depth) * 2, '.'), info.spec.name);
  }
  fmt::print("\n");
}

// How the cycle's moments print (FormatTime): the time since the epoch of the files
// (`1m30s`), or a snapshot's calendar time (`2026-05-01T10:00:00Z`).
struct Clock {
  bool calendar = false;
  TimeStyle style() const { return calendar ? TimeStyle::kCalendar : TimeStyle::kElapsed; }
  std::string At(Millis t) const { return FormatTime(t, style()); }
};

// `victims`: the names of the jobs the plan evicts, taken before it was applied.
void PrintPlanText(const ClusterState& state, const std::vector<Job>& jobs, const Plan& plan,
                   const std::map<JobId, std::string>& victims, const Clock& clock) {
  fmt::print("cycle at {}: {} pending, {} placed, {} not placed\n\n", clock.At(plan.now),
             jobs.size(), plan.binds.size(), plan.unplaced.size());
  if (!plan.binds.empty()) {
    fmt::print("PLACED (in scheduling order)\n");
    fmt::print("  {:<24} {:<12} {:<6} {:>6} {:<10} {}\n", "JOB", "QUEUE", "CLASS", "GPUS", "TYPE",
               "TASKS -> NODE[DEVICES]");
    for (const Bind& b : plan.binds) {
      const Job& job = jobs[b.pending_index];
      std::string tasks;
      for (const TaskAllocation& t : b.allocation.tasks)
        tasks += (tasks.empty() ? "" : " ") + state.Describe(t);
      fmt::print(
          "  {:<24} {:<12} {:<6} {:>6} {:<10} {}\n", job.name, state.queue(job.queue).spec.name,
          state.priority_class(job.priority_class).name, Gpus(job.total_gpu().value()),
          b.allocation.gpu_type == kNone ? "-" : state.gpu_type_name(b.allocation.gpu_type), tasks);
    }
    fmt::print("\n");
  }
  if (!plan.evictions.empty()) {
    fmt::print("EVICTED (signalled now, stopped after their grace period)\n");
    fmt::print("  {:<24} {:<10} {:<12} {:<9} {:>8} {:>10}\n", "JOB", "FOR", "KIND", "SIGNAL",
               "STOP AT", "LOST GPU-H");
    for (const Eviction& e : plan.evictions) {
      auto victim = victims.find(e.job);
      std::string preemptor = std::to_string(e.preemptor);
      for (const Job& j : jobs) {
        if (j.id == e.preemptor) preemptor = j.name;
      }
      fmt::print("  {:<24} {:<10} {:<12} {:<9} {:>8} {:>10.2f}\n",
                 victim != victims.end() ? victim->second : std::to_string(e.job), preemptor,
                 EvictionKindName(e.kind), e.signal, clock.At(e.stop_at), e.lost_gpu_hours);
    }
    fmt::print("\n");
  }
  if (!plan.unplaced.empty()) {
    fmt::print("NOT PLACED (in scheduling order)\n");
    fmt::print("  {:<24} {:<12} {:<6} {:>6} {}\n", "JOB", "QUEUE", "CLASS", "GPUS", "REASON");
    for (const Unplaced& u : plan.unplaced) {
      const Job& job = jobs[u.pending_index];
      fmt::print("  {:<24} {:<12} {:<6} {:>6} {}\n", job.name, state.queue(job.queue).spec.name,
                 state.priority_class(job.priority_class).name, Gpus(job.total_gpu().value()),
                 u.reason.Describe(clock.style()));
    }
    fmt::print("\n");
  }
  std::string stages;
  for (const StageTiming& t : plan.timings)
    stages += fmt::format("{}{} {}x {}us", stages.empty() ? "" : ", ", StageName(t.stage), t.calls,
                          t.micros);
  fmt::print("stages: {}\n", stages);
}

void PrintPlanJson(const ClusterState& state, const std::vector<Job>& jobs, const Plan& plan,
                   const Clock& clock) {
  fmt::print("{}", report::PlanJson(state, jobs, plan, clock.style()));
}

struct Loaded {
  config::ClusterConfig config;
  std::optional<ClusterState> state;
};

// Loads a cluster file into a state; prints the error and returns nullopt on failure.
std::optional<Loaded> LoadCluster(const std::string& path) {
  Result<config::ClusterConfig> cfg = config::LoadClusterFile(path);
  if (!cfg.ok()) {
    fmt::print(stderr, "error: {}\n", cfg.status().message());
    return std::nullopt;
  }
  Result<ClusterState> state = ClusterState::Create(cfg->cluster);
  if (!state.ok()) {
    fmt::print(stderr, "error: {}: {}\n", path, state.status().message());
    return std::nullopt;
  }
  Loaded loaded{std::move(*cfg), std::nullopt};
  loaded.state.emplace(std::move(state).value());
  return loaded;
}

// A running job as it was before the cycle: what explain says of it.
struct RunningBefore {
  JobId id = 0;
  Job job;
  Millis start_time = 0;
  Millis last_checkpoint = 0;
  std::size_t evictions = 0;
  std::string where;
};

std::vector<RunningBefore> RunningJobs(const ClusterState& state) {
  std::vector<RunningBefore> out;
  for (const auto& [id, r] : state.running()) {
    RunningBefore b{id, r.job, r.start_time, r.last_checkpoint, state.EvictionTimes(id).size(), {}};
    for (const TaskAllocation& t : r.allocation.tasks)
      b.where += (b.where.empty() ? "" : " ") + state.Describe(t);
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end(),
            [](const RunningBefore& a, const RunningBefore& b) { return a.id < b.id; });
  return out;
}

// Why one job is where it is after the cycle: its placement, its evictions and start, or its
// reason (with its reservation) when it was not placed; a job that was running: where, since
// when, and whether the cycle evicts it. `name` is a job's name, or its id.
int PrintExplain(const ClusterState& state, const std::vector<Job>& jobs, const Plan& plan,
                 const std::map<JobId, std::string>& victims, const std::string& name,
                 const std::vector<RunningBefore>& running,
                 std::span<const config::SnapshotJob> stopping, const Clock& clock) {
  const Job* job = nullptr;
  for (const Job& j : jobs) {
    if (j.name == name) job = &j;
  }
  const RunningBefore* was_running = nullptr;
  for (const RunningBefore& r : running) {
    if (!job && !was_running && r.job.name == name) was_running = &r;
  }
  if (!job && !was_running && !name.empty() &&
      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    for (const Job& j : jobs) {
      if (std::to_string(j.id) == name) job = &j;
    }
    for (const RunningBefore& r : running) {
      if (!job && std::to_string(r.id) == name) was_running = &r;
    }
  }
  if (was_running) {
    const RunningBefore& r = *was_running;
    fmt::print("job {} (queue {}, class {}, {}) at {}:\n", r.job.name,
               state.queue(r.job.queue).spec.name, state.priority_class(r.job.priority_class).name,
               limits::FormatGpuCount(r.job.total_gpu().value()), clock.At(plan.now));
    fmt::print("  running since {} on {}\n", clock.At(r.start_time), r.where);
    if (r.last_checkpoint > r.start_time)
      fmt::print("  last checkpoint at {}\n", clock.At(r.last_checkpoint));
    if (r.evictions > 0)
      fmt::print("  evicted {} time{} before\n", r.evictions, r.evictions == 1 ? "" : "s");
    if (r.job.runtime_estimate > 0) {
      const Millis end = r.start_time + r.job.runtime_estimate;
      fmt::print("  {} {} by its runtime estimate\n",
                 end > plan.now ? "expected to end at" : "past its end at", clock.At(end));
    }
    for (const Eviction& e : plan.evictions) {
      if (e.job != r.id) continue;
      std::string preemptor = std::to_string(e.preemptor);
      for (const Job& j : jobs) {
        if (j.id == e.preemptor) preemptor = j.name;
      }
      fmt::print(
          "  evicted by this cycle for {} ({}): {} now, stopped at {}, losing {:.2f} "
          "GPU-hours\n",
          preemptor, EvictionKindName(e.kind), e.signal, clock.At(e.stop_at), e.lost_gpu_hours);
      return 0;
    }
    fmt::print("  this cycle leaves it running\n");
    return 0;
  }
  // A job being evicted (a snapshot's `stopping`): neither running for the engine (its devices
  // are its preemptor's) nor pending yet.
  for (const config::SnapshotJob& s : stopping) {
    if (job || was_running || (s.spec.name != name && std::to_string(s.id) != name)) continue;
    fmt::print("job {} (queue {}, class {}) at {}:\n", s.spec.name, s.spec.queue,
               s.spec.priority_class, clock.At(plan.now));
    if (s.stop_time > plan.now) {
      fmt::print(
          "  being evicted: told to stop by {}; its devices are its preemptor's already, "
          "and it waits again as a pending job from then\n",
          clock.At(s.stop_time));
    } else {
      fmt::print(
          "  evicted: stopped at {}; pending again from then (a snapshot taken later "
          "lists it under pending)\n",
          clock.At(s.stop_time));
    }
    return 0;
  }
  if (!job) {
    std::string known;
    for (std::size_t i = 0; i < jobs.size() && i < 20; ++i) known += (i ? ", " : "") + jobs[i].name;
    fmt::print(stderr, "error: explain: no job named '{}' (jobs: {}{})\n", name, known,
               jobs.size() > 20 ? ", ..." : "");
    return 1;
  }
  fmt::print("job {} (queue {}, class {}, {}) at {}:\n", job->name,
             state.queue(job->queue).spec.name, state.priority_class(job->priority_class).name,
             limits::FormatGpuCount(job->total_gpu().value()), clock.At(plan.now));
  for (const Bind& b : plan.binds) {
    if (b.job != job->id) continue;
    std::string tasks;
    for (const TaskAllocation& t : b.allocation.tasks)
      tasks += (tasks.empty() ? "" : " ") + state.Describe(t);
    fmt::print("  placed on {}: {}\n",
               b.allocation.gpu_type == kNone ? "CPU" : state.gpu_type_name(b.allocation.gpu_type),
               tasks);
    for (const Eviction& e : plan.evictions) {
      if (e.preemptor != job->id) continue;
      auto v = victims.find(e.job);
      fmt::print("  preempting {} ({}): {} now, stopped at {}, losing {:.2f} GPU-hours\n",
                 v != victims.end() ? v->second : std::to_string(e.job), EvictionKindName(e.kind),
                 e.signal, clock.At(e.stop_at), e.lost_gpu_hours);
    }
    if (b.start_after > plan.now)
      fmt::print("  starts at {}, when its last victim has stopped\n", clock.At(b.start_after));
    return 0;
  }
  for (const Unplaced& u : plan.unplaced) {
    if (u.job == job->id) fmt::print("  pending: {}\n", u.reason.Describe(clock.style()));
  }
  return 0;
}

// One cycle over `state` and `jobs` at `now`, applied and checked; prints the plan, or explains
// the job named `explain`.
int RunCycle(const config::ClusterConfig& config, ClusterState& state, const std::vector<Job>& jobs,
             Millis now, bool json, const std::string& explain, const Clock& clock,
             std::span<const config::SnapshotJob> stopping = {}) {
  EngineOptions options = config.engine;
  options.clock_micros = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  Engine engine(options);
  const std::vector<RunningBefore> running = RunningJobs(state);
  Plan plan = engine.Schedule(state, jobs, now);
  std::map<JobId, std::string> victims;
  for (const Eviction& e : plan.evictions) victims[e.job] = state.FindRunning(e.job)->job.name;
  if (Status st = state.Apply(plan, jobs); !st.ok()) {
    fmt::print(stderr, "internal error: the plan does not apply: {}\n", st.message());
    return 3;
  }
  if (Status st = state.CheckInvariants(); !st.ok()) {
    fmt::print(stderr, "internal error: {}\n", st.message());
    return 3;
  }
  if (!explain.empty())
    return PrintExplain(state, jobs, plan, victims, explain, running, stopping, clock);
  if (json) {
    PrintPlanJson(state, jobs, plan, clock);
  } else {
    PrintClusterSummary(state);
    PrintPlanText(state, jobs, plan, victims, clock);
  }
  return 0;
}

int RunPlan(const std::string& cluster_path, const std::string& jobs_path,
            const std::string& now_text, bool json, const std::string& explain = "") {
  std::optional<Loaded> loaded = LoadCluster(cluster_path);
  if (!loaded) return 1;
  ClusterState& state = *loaded->state;
  Result<std::vector<Job>> jobs = config::LoadJobsFile(jobs_path, state);
  if (!jobs.ok()) {
    fmt::print(stderr, "error: {}\n", jobs.status().message());
    return 1;
  }
  Millis now = 0;
  if (!now_text.empty()) {
    Result<Millis> parsed = config::ParseDuration(now_text, "--now");
    if (!parsed.ok()) {
      fmt::print(stderr, "error: {}\n", parsed.status().message());
      return 2;
    }
    now = *parsed;
  } else {
    for (const Job& j : *jobs) now = std::max(now, j.submit_time);
  }
  return RunCycle(loaded->config, state, *jobs, now, json, explain, Clock{});
}

// `plan --snapshot` and `explain --snapshot`: one cycle on the state a snapshot was taken from,
// at its taken_at, or at `now_text`: a time as the snapshot writes them, or `+DURATION` after
// taken_at.
int RunPlanSnapshot(const std::string& path, const std::string& now_text, bool json,
                    const std::string& explain = "") {
  Result<config::LoadedSnapshot> loaded = config::LoadSnapshotFile(path);
  if (!loaded.ok()) {
    fmt::print(stderr, "error: {}\n", loaded.status().message());
    return 1;
  }
  const config::Snapshot& snapshot = loaded->snapshot;
  Millis now = snapshot.taken_at;
  if (!now_text.empty()) {
    Result<Millis> parsed =
        now_text.front() == '+'
            ? config::ParseDuration(std::string_view(now_text).substr(1), "--now")
            : config::ParseSnapshotTime(now_text, "--now");
    if (!parsed.ok()) {
      fmt::print(stderr, "error: {}\n", parsed.status().message());
      return 2;
    }
    now = now_text.front() == '+' ? snapshot.taken_at + *parsed : *parsed;
  }
  if (now < snapshot.taken_at) {
    fmt::print(stderr, "error: --now: before the snapshot was taken ({})\n",
               Clock{snapshot.calendar}.At(snapshot.taken_at));
    return 2;
  }
  return RunCycle(snapshot.config, loaded->state, loaded->pending, now, json, explain,
                  Clock{snapshot.calendar}, snapshot.stopping);
}

// Loads the files (exit 1 when one is invalid), prints a summary and the lint warnings
// (src/config/lint.h), one a line, then their count or "ok". Warnings exit 1 only with `strict`.
int RunLint(const std::string& cluster_path, const std::string& jobs_path, bool strict) {
  std::optional<Loaded> loaded = LoadCluster(cluster_path);
  if (!loaded) return 1;
  PrintClusterSummary(*loaded->state);
  std::vector<Job> jobs;
  std::vector<config::BareMemory> job_memory;
  if (!jobs_path.empty()) {
    Result<std::vector<Job>> loaded_jobs =
        config::LoadJobsFile(jobs_path, *loaded->state, 1, &job_memory);
    if (!loaded_jobs.ok()) {
      fmt::print(stderr, "error: {}\n", loaded_jobs.status().message());
      return 1;
    }
    jobs = std::move(loaded_jobs).value();
    fmt::print("jobs: {} in {}\n", jobs.size(), jobs_path);
  }
  const std::vector<config::LintWarning> warnings =
      config::Lint(loaded->config, *loaded->state, jobs, job_memory);
  for (const config::LintWarning& w : warnings)
    fmt::print("warning: {}: {} [{}]\n", w.field, w.message, w.code);
  if (warnings.empty()) {
    fmt::print("ok\n");
    return 0;
  }
  fmt::print("{} warning{}\n", warnings.size(), warnings.size() == 1 ? "" : "s");
  return strict ? 1 : 0;
}

}  // namespace
}  // namespace arbiter::cli

int main(int argc, char** argv) {
  CLI::App app{"arbiter: a GPU-cluster job scheduler"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("arbiter {}", arbiter::Version()),
                       "Print the version and exit");

  std::string cluster, jobs, now, plan_snapshot;
  bool json = false;
  CLI::App* plan = app.add_subcommand(
      "plan", "Run one scheduling cycle over a cluster and its pending jobs; print the plan");
  CLI::Option* plan_config = plan->add_option("--config", cluster, "Cluster configuration (YAML)")
                                 ->check(CLI::ExistingFile);
  CLI::Option* plan_jobs =
      plan->add_option("--jobs", jobs, "Pending jobs (YAML)")->check(CLI::ExistingFile);
  plan->add_option("--snapshot", plan_snapshot,
                   "A cluster snapshot (arbiter snapshot; docs/snapshot.md) instead of --config "
                   "and --jobs")
      ->check(CLI::ExistingFile)
      ->excludes(plan_config)
      ->excludes(plan_jobs);
  plan->add_option("--now", now,
                   "Time of the cycle (e.g. 90s, 2h); default: the latest submit time (with "
                   "--snapshot: its taken_at; a time as it writes them, or +DURATION after it)");
  plan->add_flag("--json", json, "Print the plan as JSON");

  std::string explain_cluster, explain_jobs, explain_now, explain_job, explain_snapshot;
  arbiter::cli::ExplainSimArgs explain_sim;
  std::uint64_t explain_seed = 0;
  CLI::App* explain = app.add_subcommand(
      "explain",
      "Why a job is pending, or where it goes: after one cycle over a cluster and its jobs, or at "
      "a moment of a simulated scenario");
  explain
      ->add_option("JOB", explain_job,
                   "The job's name (with --config or --scenario), or its id on the server")
      ->required();
  CLI::Option* explain_config =
      explain->add_option("--config", explain_cluster, "Cluster configuration (YAML)")
          ->check(CLI::ExistingFile);
  CLI::Option* explain_jobs_option =
      explain->add_option("--jobs", explain_jobs, "Pending jobs (YAML)")->check(CLI::ExistingFile);
  CLI::Option* explain_snapshot_option =
      explain
          ->add_option("--snapshot", explain_snapshot,
                       "A cluster snapshot (arbiter snapshot; docs/snapshot.md): JOB is a pending "
                       "or running job's name (or id) there")
          ->check(CLI::ExistingFile)
          ->excludes(explain_config)
          ->excludes(explain_jobs_option);
  CLI::Option* explain_now_option = explain->add_option(
      "--now", explain_now,
      "Time of the cycle (e.g. 90s, 2h); default: the latest submit time (with "
      "--snapshot: its taken_at, a time as it writes them, or +DURATION after it)");
  CLI::Option* explain_scenario =
      explain->add_option("--scenario", explain_sim.scenario, "Simulator scenario (YAML)")
          ->check(CLI::ExistingFile)
          ->excludes(explain_now_option)
          ->excludes(explain_config)
          ->excludes(explain_jobs_option)
          ->excludes(explain_snapshot_option);
  // (Each of these is refused without --scenario, rather than ignored: the time of a cycle over
  // --config/--jobs or --snapshot is --now.)
  explain->add_option("--at", explain_sim.at, "With --scenario: the moment (e.g. 1d10h)")
      ->needs(explain_scenario);
  explain
      ->add_option("--run", explain_sim.run,
                   "With --scenario: the configuration (default: the first)")
      ->needs(explain_scenario);
  CLI::Option* explain_seed_option =
      explain->add_option("--seed", explain_seed, "With --scenario: replaces the file's seed")
          ->needs(explain_scenario);

  std::string lint_cluster, lint_jobs, lint_scenario;
  bool lint_strict = false;
  CLI::App* lint = app.add_subcommand(
      "lint",
      "Check a cluster configuration (and optionally a jobs file), or every configuration of a "
      "simulator scenario; warn about known pitfalls");
  CLI::Option* lint_config =
      lint->add_option("--config", lint_cluster, "Cluster configuration (YAML)")
          ->check(CLI::ExistingFile);
  lint->add_option("--jobs", lint_jobs, "Jobs file (YAML)")->check(CLI::ExistingFile);
  lint->add_option("--scenario", lint_scenario, "Simulator scenario (YAML)")
      ->check(CLI::ExistingFile)
      ->excludes(lint_config);
  lint->add_flag("--strict", lint_strict, "Exit with status 1 when there are warnings");

  arbiter::cli::SimArgs sim_args;
  bool compare = false;
  std::uint64_t seed = 0;
  CLI::App* sim = app.add_subcommand(
      "sim", "Simulate a scenario: its configurations on the same workload, side by side");
  sim->add_option("SCENARIO", sim_args.scenario, "Scenario (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  CLI::Option* seed_option =
      sim->add_option("--seed", seed, "Seed of the workload generators (replaces the file's)");
  sim->add_flag("--compare", compare,
                "Run every configuration side by side (the default when --run is not given)");
  sim->add_option("--run", sim_args.runs, "Run only this configuration (repeatable)");
  sim->add_option("--json", sim_args.json, "Write every metric as JSON to FILE ('-': stdout)");
  sim->add_option("--html", sim_args.html, "Write a self-contained HTML report to FILE");
  sim->add_option("--csv", sim_args.csv, "Write time series and per-job CSV files into DIR");
  sim->add_flag("--quiet", sim_args.quiet, "No progress bar");
  sim->add_flag("--check-invariants", sim_args.check_invariants,
                "Check every cycle's plan against what no cycle may decide (a device given "
                "twice, non-preemptible work evicted, a job started beyond its quota); a "
                "violation ends the run with an error naming it and the cycle's time");

  arbiter::cli::WhatifArgs whatif_args;
  CLI::App* whatif = app.add_subcommand(
      "whatif",
      "Replay recorded history (arbiter history -o FILE) under the current and a proposed "
      "configuration; per-queue deltas and the replay's fidelity (docs/whatif.md)");
  whatif->add_option("--history", whatif_args.history, "History file (arbiter history -o FILE)")
      ->required()
      ->check(CLI::ExistingFile);
  whatif
      ->add_option("--proposed", whatif_args.proposed,
                   "Cluster file whose queues, classes and scheduler replace the current ones")
      ->check(CLI::ExistingFile);
  whatif
      ->add_option("--config", whatif_args.config,
                   "The server's cluster file: replaces the recorded configuration, and its "
                   "server section gives the cycle timing")
      ->check(CLI::ExistingFile);
  whatif->add_option("--since", whatif_args.since,
                     "Replay jobs submitted from this time (ISO 8601 UTC)");
  whatif->add_option("--until", whatif_args.until, "... up to this time (ISO 8601 UTC)");
  whatif->add_option("--html", whatif_args.html, "Write the HTML report of both runs to FILE");

  arbiter::cli::FillArgs fill_args;
  CLI::App* fill = app.add_subcommand(
      "fill", "Fill an openb cluster with pods that never leave; compare placement policies");
  fill->add_option("--nodes", fill_args.nodes, "openb node list (CSV)")
      ->required()
      ->check(CLI::ExistingFile);
  fill->add_option("--pods", fill_args.pods, "openb pod list (CSV)")
      ->required()
      ->check(CLI::ExistingFile);
  fill->add_option("--placement", fill_args.placements,
                   "Placement policy (repeatable; default: all): arbiter, random, best-fit, "
                   "packing, dot-product, clustering, fgd, frag");
  fill->add_option("--variant", fill_args.variants,
                   "Derive the workload from the list: gpuspec=P (P% of GPU pods constrained to "
                   "one GPU model), multigpu=P (P% replaced by multi-GPU pods of the list), "
                   "gpushare=P (P% replaced by GPU-sharing pods of the list); repeatable: a "
                   "mix, applied in order, each variant drawing its own pods");
  fill->add_option("--seeds", fill_args.seeds,
                   "Seeds per policy (default 10); each draws the pods' arrival order and the "
                   "nodes' order");
  fill->add_option("--seed", fill_args.seed, "First seed (default 42)");
  fill->add_option("--inflate", fill_args.inflate,
                   "Total GPU request of the workload / cluster GPUs (default 1.3)");
  fill->add_option("--json", fill_args.json, "Write the results as JSON to FILE ('-': stdout)");
  fill->add_option("--threads", fill_args.threads, "Runs in parallel (default: one per processor)");
  fill->add_flag("--quiet", fill_args.quiet, "No progress count");

  arbiter::server::ServerArgs server_args;
  CLI::App* server = app.add_subcommand(
      "server",
      "Run the control-plane server: the HTTP/JSON API (docs/api.md), the scheduling "
      "loop and the durable store");
  server->add_option("--config", server_args.config, "Cluster configuration (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  server->add_option("--data", server_args.data,
                     "Directory of the durable store (default: arbiter-data)");
  server->add_option("--listen", server_args.listen,
                     "HOST:PORT to serve on (default 127.0.0.1:8642; port 0: any free port)");
  server->add_flag("--virtual-nodes", server_args.virtual_nodes,
                   "Run the configured nodes inside the server: a job runs for its runtime "
                   "estimate");
  server->add_flag("--check-invariants", server_args.check_invariants,
                   "Check every cycle's plan against what no cycle may decide (a device given "
                   "twice, non-preemptible work evicted, a queue raised above its quota); a "
                   "violation is printed and stops the server with exit status 70 (for tests)");
  server->add_option(
      "--threads", server_args.threads,
      "Threads for the API's handlers (default: processors + 2); connections hold none");
  server->add_option("--tls-cert", server_args.tls_cert,
                     "The server's certificate (PEM): serve HTTPS (docs/security.md)");
  server->add_option("--tls-key", server_args.tls_key, "The certificate's private key (PEM)");
  server->add_option("--tls-client-ca", server_args.tls_client_ca,
                     "Ask every client for a certificate this CA (PEM) signs");
  server->add_option("--agent-ca", server_args.agent_ca,
                     "The CA (PEM) that signs the agents' log servers' certificates");
  server->add_flag("--insecure-http", server_args.insecure_http,
                   "Serve plain HTTP on an address other than loopback (tokens in the clear)");
  server->add_flag("--dev", server_args.dev,
                   "Development: take tokens written in the configuration file (token:)");
  server->add_option("--store", server_args.store,
                     "A PostgreSQL store several servers share, one leading "
                     "(postgresql://USER@HOST/DB; docs/operations.md). Default: SQLite in --data");
  server->add_option("--advertise", server_args.advertise,
                     "With --store: the URL clients reach this server at, which standbys send "
                     "them to (default: from --listen and the host name)");
  std::string lease = "5s";
  server
      ->add_option("--lease", lease,
                   "With --store: a leader silent this long is replaced (default 5s; renewed "
                   "every fifth of it)")
      ->check([&server_args](const std::string& text) -> std::string {
        arbiter::Result<arbiter::Millis> ms = arbiter::config::ParseDuration(text, "--lease");
        if (!ms.ok()) return ms.status().message();
        if (*ms < 1000) return "--lease: must be at least 1s";
        server_args.lease_ms = *ms;
        return {};
      });

  arbiter::agent::AgentArgs agent_args;
  CLI::App* agent = app.add_subcommand(
      "agent",
      "Run the node agent: report the node's devices, run the tasks the server binds to "
      "it, carry out evictions (docs/design/agent.md)");
  agent
      ->add_option("--server", agent_args.server,
                   "The server (http://HOST:PORT), or several separated by commas (servers "
                   "sharing one store: the agent follows the leader among them)")
      ->required();
  agent->add_option("--token", agent_args.token,
                    "The join token (visible in ps: prefer --token-file or ARBITER_AGENT_TOKEN)");
  agent->add_option("--token-file", agent_args.token_file, "A file holding the join token");
  agent->add_option("--ca-file", agent_args.ca_file,
                    "The CA (PEM) that signs the server's certificate (an https server)");
  agent->add_option("--tls-cert", agent_args.tls_cert,
                    "This node's certificate (PEM): shown to the server, served by the log "
                    "server (https)");
  agent->add_option("--tls-key", agent_args.tls_key, "Its private key (PEM)");
  agent->add_option("--name", agent_args.name, "This node's name in the configuration")->required();
  agent->add_option("--devices", agent_args.devices,
                    "auto (NVML) or declared, e.g. 8xH800-80G or 2xA100-40G,4xL40S-48G "
                    "(default auto)");
  agent->add_option("--labels", agent_args.labels, "k=v,k=v reported with the devices");
  agent->add_option("--work-dir", agent_args.work_dir,
                    "Tasks' records, logs and checkpoints (default arbiter-agent)");
  agent->add_option("--listen", agent_args.listen,
                    "HOST:PORT of the log server (default ADDRESS:0: the node's address, any "
                    "free port)");
  agent->add_option("--address", agent_args.address,
                    "Where others reach this node: MASTER_ADDR, the log server (default: the "
                    "host name)");
  CLI::App* checkpoint =
      app.add_subcommand("checkpoint",
                         "Run by a task: say that its checkpoint is complete (its agent tells the "
                         "server, whose victim search then loses less of it)");

  CLI::App* token = app.add_subcommand(
      "token", "Make a token for the server's configuration, or the digest of one");
  token->require_subcommand(1);
  CLI::App* token_new = token->add_subcommand(
      "new", "Print a new random token and the token_sha256 line of the configuration");
  CLI::App* token_hash = token->add_subcommand(
      "hash", "Print the SHA-256 of the token on standard input (its first line)");

  CLI::App* admin = app.add_subcommand("admin", "Operations on a server's store");
  admin->require_subcommand(1);
  std::string migrate_from, migrate_to;
  CLI::App* migrate = admin->add_subcommand(
      "migrate-store",
      "Copy a stopped server's SQLite store into an empty PostgreSQL database: every job, event, "
      "quota, node state and the node key (docs/operations.md)");
  migrate->add_option("--from", migrate_from, "The SQLite store's directory (the server's --data)")
      ->required();
  migrate->add_option("--to", migrate_to, "The PostgreSQL database (postgresql://...)")->required();

  arbiter::cli::ClientCommands client = arbiter::cli::AddClientCommands(app, explain);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*sim) {
    if (*seed_option) sim_args.seed = seed;
    if (compare && !sim_args.runs.empty()) {
      fmt::print(stderr, "error: --compare runs every configuration; leave out --run\n");
      return 2;
    }
    return arbiter::cli::RunSim(sim_args);
  }
  if (*fill) return arbiter::cli::RunFill(fill_args);
  if (*whatif) return arbiter::cli::RunWhatif(whatif_args);
  if (*server) return arbiter::server::RunServer(server_args);
  if (*agent) return arbiter::agent::RunAgent(agent_args);
  if (*checkpoint) return arbiter::agent::RunCheckpoint();
  if (*migrate) {
    if (!arbiter::store::IsPostgresUrl(migrate_to)) {
      fmt::print(stderr, "error: --to: expected postgresql://..., got '{}'\n", migrate_to);
      return 2;
    }
    arbiter::Result<arbiter::store::CopyCounts> copied =
        arbiter::store::CopySqliteToPostgres(migrate_from, migrate_to, [](std::string_view table) {
          fmt::print("copying {}\n", table);
          std::fflush(stdout);
        });
    if (!copied.ok()) {
      fmt::print(stderr, "error: {}\n", copied.status().message());
      return 1;
    }
    fmt::print(
        "copied {} jobs, {} events, {} queue quotas, {} node states, {} queue usages; start the "
        "servers with --store and this database\n",
        copied->jobs, copied->events, copied->queue_quotas, copied->node_states,
        copied->queue_usage);
    return 0;
  }
  if (*token_new) {
    const std::string secret = arbiter::crypto::RandomHex(32);
    if (secret.empty()) {
      fmt::print(stderr, "error: the system's random generator failed\n");
      return 1;
    }
    fmt::print("token:        {}\ntoken_sha256: {}\n", secret, arbiter::crypto::Sha256Hex(secret));
    return 0;
  }
  if (*token_hash) {
    std::string secret;
    std::getline(std::cin, secret);
    while (!secret.empty() && (secret.back() == '\r' || secret.back() == ' ')) secret.pop_back();
    if (secret.empty()) {
      fmt::print(stderr, "error: give the token on standard input\n");
      return 2;
    }
    fmt::print("{}\n", arbiter::crypto::Sha256Hex(secret));
    return 0;
  }
  if (std::optional<int> status = arbiter::cli::RunClientCommand(client)) return *status;
  if (*plan) {
    if (!plan_snapshot.empty()) return arbiter::cli::RunPlanSnapshot(plan_snapshot, now, json);
    if (cluster.empty() || jobs.empty()) {
      fmt::print(stderr, "error: plan needs --config and --jobs, or --snapshot\n");
      return 2;
    }
    return arbiter::cli::RunPlan(cluster, jobs, now, json);
  }
  if (*lint) {
    if (!lint_scenario.empty()) {
      if (!lint_jobs.empty()) {
        fmt::print(stderr,
                   "error: lint --scenario takes its jobs from the scenario; leave out --jobs\n");
        return 2;
      }
      return arbiter::cli::RunLintScenario(lint_scenario, lint_strict);
    }
    if (lint_cluster.empty()) {
      fmt::print(stderr, "error: lint needs --config (or --scenario)\n");
      return 2;
    }
    return arbiter::cli::RunLint(lint_cluster, lint_jobs, lint_strict);
  }
  if (*explain) {
    if (*explain_scenario) {
      if (explain_sim.at.empty()) {
        fmt::print(stderr, "error: explain --scenario needs --at (e.g. --at 1d10h)\n");
        return 2;
      }
      if (*explain_seed_option) explain_sim.seed = explain_seed;
      explain_sim.job = explain_job;
      return arbiter::cli::RunExplainSim(explain_sim);
    }
    if (!explain_snapshot.empty()) {
      return arbiter::cli::RunPlanSnapshot(explain_snapshot, explain_now, false, explain_job);
    }
    if (explain_cluster.empty() && explain_jobs.empty()) {
      // A job of the running server, by id.
      return arbiter::cli::RunExplainServer(client, explain_job);
    }
    if (explain_cluster.empty() || explain_jobs.empty()) {
      fmt::print(stderr,
                 "error: explain needs --config and --jobs, --snapshot, --scenario and --at, "
                 "or none of them (a job of the server, by id)\n");
      return 2;
    }
    return arbiter::cli::RunPlan(explain_cluster, explain_jobs, explain_now, false, explain_job);
  }
  return 2;
}
