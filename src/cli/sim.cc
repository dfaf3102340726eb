// `arbiter sim`: load a scenario, run its configurations (in parallel threads, each on its own
// copy of the cluster), print the comparison and write the reports asked for.
#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arbiter/sim.h"
#include "cli/commands.h"
#include "config/scenario.h"
#include "report/report.h"

namespace arbiter::cli {
namespace {

std::string Clock(Millis t) {
  const Millis minutes = t / (60 * kMillisPerSecond);
  return fmt::format("{}d {:02}h{:02}", minutes / 1440, minutes / 60 % 24, minutes % 60);
}

// A one-line progress bar on stderr, redrawn as the runs advance.
class Progress {
 public:
  Progress(std::size_t runs, Millis horizon, bool enabled)
      : now_(runs), horizon_(horizon), enabled_(enabled) {
    for (auto& n : now_) n = 0;
  }
  void Update(std::size_t run, Millis now) {
    if (!enabled_) return;
    now_[run] = now;
    std::lock_guard<std::mutex> lock(mu_);
    Millis least = now_[0];
    for (const auto& n : now_) least = std::min<Millis>(least, n);
    if (horizon_ > 0) {
      const double f = std::min(1.0, static_cast<double>(least) / static_cast<double>(horizon_));
      const int filled = static_cast<int>(f * 30);
      fmt::print(stderr, "\r  simulating [{}{}] {:3.0f}%  {} of {}", std::string(filled, '#'),
                 std::string(30 - filled, '.'), f * 100, Clock(least), Clock(horizon_));
    } else {
      fmt::print(stderr, "\r  simulating: {} simulated", Clock(least));
    }
    std::fflush(stderr);
  }
  void Done() {
    if (enabled_) fmt::print(stderr, "\r{}\r", std::string(70, ' '));
  }

 private:
  std::vector<std::atomic<Millis>> now_;
  Millis horizon_;
  bool enabled_;
  std::mutex mu_;
};

bool WriteText(const std::string& path, const std::string& text) {
  if (path == "-") {
    fmt::print("{}", text);
    return true;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    fmt::print(stderr, "error: {}: cannot write\n", path);
    return false;
  }
  return true;
}

}  // namespace

int RunSim(const SimArgs& args) {
  Result<config::Scenario> scenario = config::LoadScenarioFile(args.scenario, args.seed);
  if (!scenario.ok()) {
    fmt::print(stderr, "error: {}\n", scenario.status().message());
    return 1;
  }
  std::vector<const config::SimConfiguration*> chosen;
  for (const std::string& name : args.runs) {
    const config::SimConfiguration* found = nullptr;
    std::string known;
    for (const config::SimConfiguration& c : scenario->configurations) {
      if (c.name == name) found = &c;
      known += (known.empty() ? "" : ", ") + c.name;
    }
    if (!found) {
      fmt::print(stderr, "error: --run: unknown configuration '{}' (known: {})\n", name, known);
      return 1;
    }
    chosen.push_back(found);
  }
  if (chosen.empty()) {
    for (const config::SimConfiguration& c : scenario->configurations) chosen.push_back(&c);
  }
  if (!scenario->skipped_rows.empty()) {
    fmt::print(stderr, "warning: {} trace rows skipped, the first: {}\n",
               scenario->skipped_rows.size(), scenario->skipped_rows.front());
  }

  const bool show = !args.quiet && isatty(fileno(stderr)) != 0;
  Progress progress(chosen.size(), scenario->options.horizon, show);
  std::vector<std::optional<Result<sim::RunResult>>> results(chosen.size());
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    threads.emplace_back([&, i] {
      sim::SimOptions options = scenario->options;
      options.progress = [&progress, i](Millis now) { progress.Update(i, now); };
      const config::SimConfiguration& c = *chosen[i];
      results[i] = sim::Simulate(c.cluster, c.engine, c.workload, options, c.name);
    });
  }
  for (std::thread& t : threads) t.join();
  progress.Done();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<sim::RunResult> runs;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (!results[i]->ok()) {
      fmt::print(stderr, "error: {}: {}\n", chosen[i]->name, results[i]->status().message());
      return 1;
    }
    runs.push_back(std::move(**results[i]));
  }
  std::int64_t events = 0;
  for (const sim::RunResult& r : runs) events += r.events;

  if (args.json != "-") {
    fmt::print("scenario {} (seed {}): {} configuration(s), {} events in {:.2f} s\n\n",
               scenario->name, scenario->seed, runs.size(), events, seconds);
    fmt::print("{}", report::Table(runs));
  }
  if (!args.json.empty() && !WriteText(args.json, report::Json(runs, scenario->name))) return 1;
  if (!args.html.empty()) {
    if (!WriteText(args.html, report::Html(runs, scenario->name))) return 1;
    if (args.json != "-") fmt::print("\nreport: {}\n", args.html);
  }
  if (!args.csv.empty()) {
    if (Status st = report::WriteCsv(runs, args.csv); !st.ok()) {
      fmt::print(stderr, "error: {}\n", st.message());
      return 1;
    }
    if (args.json != "-") fmt::print("time series and jobs: {}/\n", args.csv);
  }
  return 0;
}

}  // namespace arbiter::cli
