// `arbiter whatif`: recorded history replayed in the simulator under the configuration it ran
// under and under a proposed one, per-queue deltas, and how closely the replay of the recorded
// configuration reproduces what happened (docs/whatif.md).
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/history.h"
#include "config/config.h"
#include "config/reader.h"
#include "config/snapshot.h"
#include "core/state/cluster_state.h"
#include "report/report.h"
#include "sim/sim.h"

namespace arbiter::cli {
namespace {

struct Configured {
  std::string name;
  ClusterSpec cluster;
  EngineOptions engine;
};

// `proposed`'s queues, classes, scheduler options and fair-share half-life on `recorded`'s nodes
// and topology.
Configured WithNodesOf(const Configured& recorded, config::ClusterConfig proposed,
                       std::string name) {
  Configured c{std::move(name), std::move(proposed.cluster), std::move(proposed.engine)};
  c.cluster.nodes = recorded.cluster.nodes;
  c.cluster.topology = recorded.cluster.topology;
  return c;
}

// A proposed cluster file: its nodes and topology need not be given (they are the recorded ones):
// when left out, the snapshot's are appended to its text, so that its errors keep their lines.
Result<config::ClusterConfig> LoadProposed(const std::string& path,
                                           const std::string& snapshot_text) {
  Result<std::string> text = config::internal::ReadFile(path);
  if (!text.ok()) return text.status();
  std::string yaml = *text;
  try {
    const YAML::Node proposed = YAML::Load(yaml);
    const YAML::Node snapshot = YAML::Load(snapshot_text);
    for (const char* key : {"topology", "nodes"}) {
      if ((proposed.IsMap() && proposed[key]) || !snapshot[key]) continue;
      YAML::Node section(YAML::NodeType::Map);
      section[key] = snapshot[key];
      YAML::Emitter e;
      e << section;
      yaml += fmt::format("\n{}\n", e.c_str());
    }
  } catch (const YAML::Exception&) {
    // The reader says what is wrong with it.
  }
  return config::ParseCluster(yaml, path);
}

std::string Seconds(double s) {
  if (s < 0) return "-";
  return FormatDuration(static_cast<Millis>(std::llround(s * kMillisPerSecond)));
}

std::string Signed(double d, const char* unit, int digits) {
  return fmt::format("{}{:.{}f}{}", d >= 0 ? "+" : "", d, digits, unit);
}

std::string DeltaSeconds(double a, double b) {
  const double d = b - a;
  const std::string text = FormatDuration(static_cast<Millis>(std::llround(std::abs(d) * 1000)));
  return (d < 0 ? "-" : "+") + text;
}

}  // namespace

Result<WhatifResult> Whatif(const WhatifArgs& args) {
  Result<History> history = LoadHistoryFile(args.history);
  if (!history.ok()) return history.status();
  ReplayWindow window = WholeHistory(*history);
  // The times as whatif prints them (milliseconds and all), or as a snapshot writes them.
  if (!args.since.empty()) {
    Result<Millis> t = config::ParseSnapshotTime(args.since, "--since");
    if (!t.ok()) return t.status();
    window.since = *t;
  }
  if (!args.until.empty()) {
    Result<Millis> t = config::ParseSnapshotTime(args.until, "--until");
    if (!t.ok()) return t.status();
    window.until = std::min(*t, history->taken_at);
  }
  if (window.until <= window.since) {
    return Status::InvalidArgument("the window is empty (--until must be after --since)");
  }

  sim::SimOptions options;
  config::ServerConfig server;  // the server's cycle timing: its defaults unless --config says
  Configured recorded{"current", history->snapshot.config.cluster, history->snapshot.config.engine};
  if (!args.config.empty()) {
    Result<config::ClusterConfig> c = config::LoadClusterFile(args.config);
    if (!c.ok()) return c.status();
    server = c->server;
    recorded = WithNodesOf(recorded, std::move(c).value(), "current");
  }
  // The nodes' cordons of the moment the history was taken say nothing of the window.
  for (NodeSpec& n : recorded.cluster.nodes) n.cordoned = false;
  options.min_cycle_interval = server.cycle_min_interval;
  options.cycle_period = server.cycle_period;

  std::vector<Configured> runs{recorded};
  if (!args.proposed.empty()) {
    Result<config::ClusterConfig> c = LoadProposed(args.proposed, history->snapshot_text);
    if (!c.ok()) return c.status();
    runs.push_back(WithNodesOf(recorded, std::move(c).value(), "proposed"));
  }

  WhatifResult out;
  out.since = window.since;
  out.until = window.until;
  for (const Configured& c : runs) {
    Result<ClusterState> state = ClusterState::Create(c.cluster);
    if (!state.ok()) return Status::InvalidArgument(c.name + ": " + state.status().message());
    Result<Replay> replay = BuildReplay(*history, window, *state, c.engine);
    if (!replay.ok()) return Status::InvalidArgument(c.name + ": " + replay.status().message());
    out.replays.push_back(std::move(replay).value());
  }
  std::vector<std::optional<Result<sim::RunResult>>> results(runs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = sim::Simulate(runs[i].cluster, runs[i].engine, out.replays[i].workload, options,
                                 runs[i].name);
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!results[i]->ok()) {
      return Status::InvalidArgument(runs[i].name + ": " + results[i]->status().message());
    }
    out.runs.push_back(std::move(**results[i]));
  }

  // Fidelity: the replay of the recorded configuration against what happened.
  const Replay& replay = out.replays.front();
  std::vector<double> errors;
  for (const sim::JobRecord& rec : out.runs.front().jobs) {
    const std::size_t index = rec.id - 1;
    if (index >= replay.jobs.size()) continue;
    const ReplayJob& rj = replay.jobs[index];
    if (rj.recorded_start < 0) {
      ++out.fidelity.pending_in_record;
      continue;
    }
    if (rec.first_start < 0) {
      ++out.fidelity.not_started;
      continue;
    }
    const Millis submit = replay.workload.jobs[index].job.submit_time;
    for (const std::string& q : {rec.queue, std::string("(all)")}) {
      out.fidelity.recorded_wait_s[q].push_back(static_cast<double>(rj.recorded_start - submit) /
                                                kMillisPerSecond);
      out.fidelity.replayed_wait_s[q].push_back(static_cast<double>(rec.first_start - submit) /
                                                kMillisPerSecond);
    }
    const double e = static_cast<double>(rec.first_start - rj.recorded_start) / kMillisPerSecond;
    errors.push_back(std::abs(e));
    out.fidelity.starts.push_back({rj.id, rj.recorded_start, rec.first_start});
  }
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    double sum = 0;
    for (double e : errors) sum += e;
    out.fidelity.mean_error_s = sum / static_cast<double>(errors.size());
    out.fidelity.max_error_s = errors.back();
    out.fidelity.p99_error_s = errors[std::min(
        errors.size() - 1,
        static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(errors.size()))) - 1)];
  }
  return out;
}

int RunWhatif(const WhatifArgs& args) {
  Result<WhatifResult> result = Whatif(args);
  if (!result.ok()) {
    fmt::print(stderr, "error: {}\n", result.status().message());
    return 1;
  }
  const WhatifResult& r = *result;
  const Replay& replay = r.replays.front();
  std::size_t observed = 0;
  for (const ReplayJob& j : replay.jobs) observed += j.observed ? 1 : 0;
  fmt::print(
      "window {} to {} ({}): {} jobs replayed, {} with their observed running time, {} "
      "left out (held, or ended without running)\n",
      FormatTime(r.since, TimeStyle::kCalendar), FormatTime(r.until, TimeStyle::kCalendar),
      FormatDuration(r.until - r.since), replay.jobs.size(), observed, replay.left_out);
  const Fidelity& f = r.fidelity;
  fmt::print(
      "fidelity (current configuration vs what happened): {} jobs started in both; "
      "start-time error mean {:.2f} s, p99 {:.2f} s, max {:.2f} s",
      f.starts.size(), f.mean_error_s, f.p99_error_s, f.max_error_s);
  if (f.not_started > 0) fmt::print("; {} started only in the record", f.not_started);
  // Jobs still waiting in the record when the window ends have no start to compare: say how
  // many the figures leave out (the replay runs them all).
  if (f.pending_in_record > 0) {
    fmt::print(
        "; {} still pending at the window's end in the record (no start to compare: not "
        "in these figures)",
        f.pending_in_record);
  }
  fmt::print("\n");
  std::vector<Fidelity::Start> worst = f.starts;
  std::sort(worst.begin(), worst.end(), [](const Fidelity::Start& a, const Fidelity::Start& b) {
    return std::abs(a.simulated - a.recorded) > std::abs(b.simulated - b.recorded);
  });
  for (std::size_t i = 0; i < worst.size() && i < 3; ++i) {
    if (worst[i].simulated == worst[i].recorded) break;
    fmt::print("  job {}: started at +{} in the record, +{} in the replay\n", worst[i].id,
               FormatDuration(worst[i].recorded), FormatDuration(worst[i].simulated));
  }
  fmt::print("{:<16} {:>6} {:>16} {:>16} {:>16} {:>16}\n", "queue", "jobs", "wait mean record",
             "wait mean replay", "wait p99 record", "wait p99 replay");
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  auto p99 = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const auto k = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(v.size())));
    return v[std::max<std::size_t>(k, 1) - 1];
  };
  for (const auto& [q, recorded] : f.recorded_wait_s) {
    const std::vector<double>& replayed = f.replayed_wait_s.at(q);
    fmt::print("{:<16} {:>6} {:>16} {:>16} {:>16} {:>16}\n", q, recorded.size(),
               Seconds(mean(recorded)), Seconds(mean(replayed)), Seconds(p99(recorded)),
               Seconds(p99(replayed)));
  }
  fmt::print("\n");

  if (r.runs.size() == 2) {
    const sim::RunResult& a = r.runs[0];
    const sim::RunResult& b = r.runs[1];
    // A proposal that changes no decision in the window: every job starts (and ends) at the
    // same times in both replays.
    bool same = a.jobs.size() == b.jobs.size();
    for (std::size_t i = 0; same && i < a.jobs.size(); ++i) {
      same = a.jobs[i].id == b.jobs[i].id && a.jobs[i].first_start == b.jobs[i].first_start &&
             a.jobs[i].end == b.jobs[i].end && a.jobs[i].evictions == b.jobs[i].evictions;
    }
    if (same) {
      fmt::print(
          "the proposal changes no decision in this window: every job starts and ends at the "
          "same time in both replays (is it the current configuration, or does it change only "
          "what this window never reached?)\n\n");
    }
    std::set<std::string> queues;
    for (const auto& [q, m] : a.queues) queues.insert(q);
    for (const auto& [q, m] : b.queues) queues.insert(q);
    fmt::print("{:<16} {:<18} {:>12} {:>12} {:>12}\n", "queue", "metric", "current", "proposed",
               "delta");
    auto row = [](const std::string& q, const char* metric, const std::string& x,
                  const std::string& y, const std::string& d) {
      fmt::print("{:<16} {:<18} {:>12} {:>12} {:>12}\n", q, metric, x, y, d);
    };
    const sim::GroupMetrics none;
    for (const std::string& q : queues) {
      const sim::GroupMetrics& x = a.queues.contains(q) ? a.queues.at(q) : none;
      const sim::GroupMetrics& y = b.queues.contains(q) ? b.queues.at(q) : none;
      row(q, "wait mean", Seconds(x.wait.mean), Seconds(y.wait.mean),
          DeltaSeconds(x.wait.mean, y.wait.mean));
      row("", "wait p99", Seconds(x.wait.p99), Seconds(y.wait.p99),
          DeltaSeconds(x.wait.p99, y.wait.p99));
      row("", "JCT mean", Seconds(x.jct.mean), Seconds(y.jct.mean),
          DeltaSeconds(x.jct.mean, y.jct.mean));
      row("", "evictions", fmt::to_string(x.evictions), fmt::to_string(y.evictions),
          Signed(static_cast<double>(y.evictions - x.evictions), "", 0));
      row("", "GPU-hours lost", fmt::format("{:.2f}", x.gpu_hours_lost),
          fmt::format("{:.2f}", y.gpu_hours_lost),
          Signed(y.gpu_hours_lost - x.gpu_hours_lost, "", 2));
      const double ux = a.total_gpus > 0 ? 100 * x.mean_gpus / a.total_gpus : 0;
      const double uy = b.total_gpus > 0 ? 100 * y.mean_gpus / b.total_gpus : 0;
      row("", "GPUs held (% all)", fmt::format("{:.1f}%", ux), fmt::format("{:.1f}%", uy),
          Signed(uy - ux, " pt", 1));
    }
    row("(all)", "utilisation", fmt::format("{:.1f}%", 100 * a.gpu_utilization),
        fmt::format("{:.1f}%", 100 * b.gpu_utilization),
        Signed(100 * (b.gpu_utilization - a.gpu_utilization), " pt", 1));
    fmt::print("\n");
  }
  fmt::print("{}", report::Table(r.runs));
  if (!args.html.empty()) {
    std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
    out << report::Html(r.runs, "whatif");
    out.close();
    if (!out) {
      fmt::print(stderr, "error: --html: cannot write {}\n", args.html);
      return 1;
    }
    fmt::print("\nreport: {}\n", args.html);
  }
  return 0;
}

}  // namespace arbiter::cli
