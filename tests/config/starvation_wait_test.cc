// ordering.starvation_wait: several aged low-class jobs behind a steady stream of high-class jobs
// on one node. Aging alone lets the first run and no other (a high-class job that has waited
// 24 minutes passes an aged one again, and the stream keeps one waiting that long); lint says so.
// With starvation_wait each aged job runs in turn, oldest first, and none is evicted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/lint.h"
#include "scenario/scenario.h"
#include "sim/sim.h"

namespace arbiter::config {
namespace {

constexpr Millis kMinute = 60 * kMillisPerSecond;

// A P1 job every 30 minutes, 30 minutes of work each, fills the node; four P2 jobs arrive at 10,
// 20, 30 and 40 minutes. P2 is preemptible and P1 may evict it within the queue.
constexpr const char* kScenario = R"(name: aged-jobs
cycle: {min_interval: 1s, period: 30s}
horizon: 16h
cluster:
  priority_classes:
    - {name: P1, value: 100, preemptible: false}
    - {name: P2, value: 10, min_runtime: 10m}
  queues: [{name: default}]
  nodes:
    - {name: node-a, gpus: {model: H800, count: 8, memory: 80Gi}, cpu: 128, memory: 1Ti}
workloads:
  - {name: hi, arrivals: {every: 30m}, work: 30m, job: {queue: default, priority_class: P1, gpus: 8}}
  - {name: L, arrivals: {at: [10m, 20m, 30m, 40m]}, work: 30m,
     job: {queue: default, priority_class: P2, gpus: 8, checkpoint_interval: 10m}}
configurations:
  - name: aging
    scheduler: {ordering: {age_weight: 10000, max_age: 4h}}
  - name: starving
    scheduler: {ordering: {age_weight: 10000, max_age: 4h, starvation_wait: 4h}}
)";

struct Outcome {
  sim::RunResult result;
  std::vector<LintWarning> lint;
};

std::vector<Outcome> Simulate() {
  Result<Scenario> scenario = ParseScenario(kScenario, "aged-jobs.yaml", ".");
  EXPECT_TRUE(scenario.ok()) << scenario.status().message();
  if (!scenario.ok()) return {};
  Result<std::vector<const SimConfiguration*>> chosen = ChooseConfigurations(*scenario, {});
  EXPECT_TRUE(chosen.ok());
  Result<std::vector<sim::RunResult>> results = SimulateConfigurations(*scenario, *chosen);
  EXPECT_TRUE(results.ok()) << results.status().message();
  if (!results.ok()) return {};
  std::vector<Outcome> runs;
  for (std::size_t i = 0; i < results->size(); ++i) {
    Result<ClusterState> state = ClusterState::Create((*chosen)[i]->cluster);
    EXPECT_TRUE(state.ok());
    runs.push_back({std::move((*results)[i]), LintConfiguration(*scenario, *(*chosen)[i], *state)});
  }
  return runs;
}

// The P2 jobs' records, in submission order.
std::vector<sim::JobRecord> Aged(const sim::RunResult& result) {
  std::vector<sim::JobRecord> out;
  for (const sim::JobRecord& j : result.jobs)
    if (j.priority_class == "P2") out.push_back(j);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.submit < b.submit; });
  return out;
}

bool Warns(const std::vector<LintWarning>& warnings, const std::string& code) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const LintWarning& w) { return w.code == code; });
}

TEST(StarvationWait, AgingAloneRunsOneAgedJobAndLintSaysWhy) {
  const std::vector<Outcome> runs = Simulate();
  ASSERT_EQ(runs.size(), 2u);
  const std::vector<sim::JobRecord> aged = Aged(runs[0].result);
  ASSERT_EQ(aged.size(), 4u);
  EXPECT_GE(aged[0].first_start, 0);
  for (std::size_t i = 1; i < aged.size(); ++i) EXPECT_EQ(aged[i].first_start, -1) << i;
  auto warning = std::find_if(runs[0].lint.begin(), runs[0].lint.end(), [](const LintWarning& w) {
    return w.code == kLintAgedJobPassedAgain;
  });
  ASSERT_NE(warning, runs[0].lint.end());
  // P1 leads P2 by 9000; a P1 job that has waited 4h x 1000 / 10000 has an aged P2 job's key.
  EXPECT_NE(warning->message.find("has waited 24m"), std::string::npos) << warning->message;
  EXPECT_NE(warning->message.find("ordering.starvation_wait"), std::string::npos);
}

TEST(StarvationWait, EachStarvingJobRunsInTurnAndNoneIsEvicted) {
  const std::vector<Outcome> runs = Simulate();
  ASSERT_EQ(runs.size(), 2u);
  const sim::RunResult& result = runs[1].result;
  const std::vector<sim::JobRecord> aged = Aged(result);
  ASSERT_EQ(aged.size(), 4u);
  for (std::size_t i = 0; i < aged.size(); ++i) {
    SCOPED_TRACE(aged[i].name);
    ASSERT_GE(aged[i].first_start, 0);
    EXPECT_GE(aged[i].end, 0);
    // Starving from 4h after its submission (the first starts by aging just before), it waits at
    // most one running job's 30 minutes, plus the aged jobs before it.
    if (i > 0) {
      EXPECT_GE(aged[i].first_start, aged[i - 1].end);
    }
    EXPECT_LE(aged[i].first_start - aged[i].submit,
              4 * 60 * kMinute + 30 * kMinute * static_cast<Millis>(i + 1));
  }
  EXPECT_EQ(result.overall.evictions, 0);
  EXPECT_FALSE(Warns(runs[1].lint, kLintAgedJobPassedAgain));
}

TEST(StarvationWait, BelongsToTheMultifactorOrder) {
  std::string yaml = kScenario;
  const std::string from = "starvation_wait: 4h";
  yaml.replace(yaml.find(from), from.size(), "starvation_wait: 4h, policy: las");
  Result<Scenario> scenario = ParseScenario(yaml, "aged-jobs.yaml", ".");
  ASSERT_FALSE(scenario.ok());
  EXPECT_NE(scenario.status().message().find("starvation_wait"), std::string::npos)
      << scenario.status().message();
  EXPECT_NE(scenario.status().message().find("starvation_factor"), std::string::npos)
      << scenario.status().message();
}

}  // namespace
}  // namespace arbiter::config
