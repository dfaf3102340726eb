// Running a scenario's configurations side by side: what `arbiter sim` and the Python module
// both call.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "scenario/scenario.h"

namespace arbiter::config {

Result<std::vector<const SimConfiguration*>> ChooseConfigurations(
    const Scenario& scenario, std::span<const std::string> names) {
  std::vector<const SimConfiguration*> chosen;
  for (const std::string& name : names) {
    const SimConfiguration* found = nullptr;
    std::string known;
    for (const SimConfiguration& c : scenario.configurations) {
      if (c.name == name) found = &c;
      known += (known.empty() ? "" : ", ") + c.name;
    }
    if (!found) {
      return Status::NotFound(fmt::format("unknown configuration '{}' (known: {})", name, known));
    }
    chosen.push_back(found);
  }
  if (chosen.empty()) {
    for (const SimConfiguration& c : scenario.configurations) chosen.push_back(&c);
  }
  return chosen;
}

Result<std::vector<sim::RunResult>> SimulateConfigurations(
    const Scenario& scenario, std::span<const SimConfiguration* const> chosen,
    const std::function<void(std::size_t run, Millis now)>& progress) {
  std::vector<std::optional<Result<sim::RunResult>>> results(chosen.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    threads.emplace_back([&, i] {
      sim::SimOptions options = scenario.options;
      if (progress) options.progress = [&progress, i](Millis now) { progress(i, now); };
      const SimConfiguration& c = *chosen[i];
      results[i] = sim::Simulate(c.cluster, c.engine, c.workload, options, c.name);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<sim::RunResult> runs;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (!results[i]->ok()) {
      const Status& failed = results[i]->status();
      return Status::FromCode(failed.code(), chosen[i]->name + ": " + failed.message());
    }
    runs.push_back(std::move(**results[i]));
  }
  return runs;
}

}  // namespace arbiter::config
