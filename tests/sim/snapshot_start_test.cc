// A scenario that starts from a cluster snapshot (`start: {snapshot: FILE}`, docs/simulator.md):
// the snapshot's running jobs run at time 0 on their devices and end when their estimates say,
// its pending jobs are pending at 0 with their ages, and its usage seeds the fair share.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "sim/sim.h"
#include "testing/builders.h"

namespace arbiter::config {
namespace {

constexpr Millis kMinute = 60 * kMillisPerSecond;

// At 10:00: a (4 GPUs, 2h of work, started at 9:00, checkpointed at 9:30) on g-0; b (4 GPUs, 20m,
// started at 9:50) on g-1; c (4 GPUs, 1h) pending since 9:55, in the same class (no preemption).
constexpr const char* kSnapshot = R"(snapshot_version: 1
taken_at: "2026-05-01T10:00:00Z"
priority_classes:
  - {name: low, value: 10}
queues:
  - name: main
  - name: other
nodes:
  - {name: g-0, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
  - {name: g-1, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
  - {name: g-2, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
node_states:
  - {node: g-2, state: draining, reason: disk}
queue_usage:
  main: 7200
running:
  - id: 1
    name: a
    queue: main
    priority_class: low
    submit_time: "2026-05-01T08:00:00Z"
    runtime_estimate: 2h
    checkpoint_interval: 30m
    tasks: 2
    gpus: 2
    evictions: ["2026-05-01T08:30:00Z"]
    start_time: "2026-05-01T09:00:00Z"
    last_checkpoint: "2026-05-01T09:30:00Z"
    allocation:
      gpu_type: G
      tasks:
        - {group: main, index: 0, node: g-0, devices: [0, 1]}
        - {group: main, index: 1, node: g-0, devices: [2, 3]}
  - id: 2
    name: b
    queue: other
    priority_class: low
    submit_time: "2026-05-01T09:40:00Z"
    runtime_estimate: 20m
    gpus: 4
    start_time: "2026-05-01T09:50:00Z"
    allocation:
      gpu_type: G
      tasks:
        - {node: g-1, devices: [0, 1, 2, 3]}
pending:
  - {id: 3, name: c, queue: main, priority_class: low, submit_time: "2026-05-01T09:55:00Z",
     runtime_estimate: 1h, gpus: 4}
  - {id: 4, name: held, queue: main, priority_class: low, submit_time: "2026-05-01T09:55:00Z",
     gpus: 1, held: true}
)";

class SnapshotStart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("arbiter-snapshot-start-" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "now.yaml") << kSnapshot;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<Scenario> Load(const std::string& yaml) {
    std::ofstream(dir_ / "scenario.yaml") << yaml;
    return LoadScenarioFile((dir_ / "scenario.yaml").string());
  }

  std::filesystem::path dir_;
};

TEST_F(SnapshotStart, RunningJobsKeepTheirDevicesAndEndWhenTheirEstimatesSay) {
  Result<Scenario> scenario = Load("name: from-now\nstart: {snapshot: now.yaml}\n");
  ASSERT_TRUE(scenario.ok()) << scenario.status().message();
  const SimConfiguration& c = scenario->configurations.at(0);
  ASSERT_EQ(c.workload.initial_running.size(), 2u);
  EXPECT_EQ(c.workload.initial_running[0].start_time, -60 * kMinute);
  EXPECT_EQ(c.workload.initial_running[0].last_checkpoint, -30 * kMinute);
  EXPECT_EQ(c.workload.initial_running[0].job.evictions, std::vector<Millis>{-90 * kMinute});
  ASSERT_EQ(c.workload.jobs.size(), 1u);  // the held job waits for a release that never comes
  EXPECT_EQ(c.workload.jobs[0].job.submit_time, -5 * kMinute);
  EXPECT_EQ(c.workload.initial_usage.at(0), 7200e6);
  EXPECT_TRUE(c.cluster.nodes.at(2).cordoned);  // drained when the snapshot was taken

  // At time 0 the running jobs are where they were.
  Result<sim::JobStatusAt> a =
      sim::Inspect(c.cluster, c.engine, c.workload, scenario->options, "a", 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->state, sim::JobStatusAt::State::kRunning);
  EXPECT_EQ(a->nodes, (std::vector<std::string>{"g-0[0-1]", "g-0[2-3]"}));
  Result<sim::JobStatusAt> b =
      sim::Inspect(c.cluster, c.engine, c.workload, scenario->options, "b", 0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->nodes, std::vector<std::string>{"g-1[0-3]"});

  Result<sim::RunResult> run =
      sim::Simulate(c.cluster, c.engine, c.workload, testing::Checked(scenario->options), c.name);
  ASSERT_TRUE(run.ok()) << run.status().message();
  std::map<std::string, sim::JobRecord> jobs;
  for (const sim::JobRecord& r : run->jobs) jobs[r.name] = r;
  // a: 2h of work from 9:00, 30m of it kept by its checkpoint at 9:30: it ends at 11:00.
  EXPECT_EQ(jobs.at("a").first_start, -60 * kMinute);
  EXPECT_EQ(jobs.at("a").end, 60 * kMinute);
  EXPECT_EQ(jobs.at("b").end, 10 * kMinute);
  // c waits for b's devices (g-2 is drained), 15 minutes after it was submitted.
  EXPECT_EQ(jobs.at("c").first_start, 10 * kMinute);
  EXPECT_EQ(jobs.at("c").submit, -5 * kMinute);
  EXPECT_EQ(jobs.at("c").end, 70 * kMinute);
  EXPECT_EQ(run->overall.evictions, 0);
}

TEST_F(SnapshotStart, ARunningJobEvictedAndRestartedKeepsItsFirstStartAndItsCheckpoint) {
  // c is of a higher class than a, in a's queue: it evicts a at the first cycle.
  std::string text = kSnapshot;
  text.replace(text.find("  - {name: low, value: 10}"), 26,
               "  - {name: low, value: 10}\n  - {name: high, value: 100}");
  text.replace(text.find("name: c, queue: main, priority_class: low"), 41,
               "name: c, queue: main, priority_class: high");
  std::ofstream(dir_ / "now.yaml") << text;
  Result<Scenario> scenario = Load("name: from-now\nstart: {snapshot: now.yaml}\n");
  ASSERT_TRUE(scenario.ok()) << scenario.status().message();
  const SimConfiguration& c = scenario->configurations.at(0);
  Result<sim::RunResult> run =
      sim::Simulate(c.cluster, c.engine, c.workload, testing::Checked(scenario->options), c.name);
  ASSERT_TRUE(run.ok()) << run.status().message();
  std::map<std::string, sim::JobRecord> jobs;
  for (const sim::JobRecord& r : run->jobs) jobs[r.name] = r;
  EXPECT_EQ(jobs.at("c").first_start, 30 * kMillisPerSecond);  // after a's grace period
  EXPECT_EQ(jobs.at("a").evictions, 1);
  EXPECT_EQ(jobs.at("a").first_start, -60 * kMinute);
  // a saved its hour of work on the signal, and restarts on g-1 when b ends, at 10m.
  EXPECT_EQ(jobs.at("a").end, 70 * kMinute);
}

TEST_F(SnapshotStart, ConfigurationsMayReplaceTheQueuesAndErrorsNameTheSnapshotsJob) {
  Result<Scenario> scenario = Load(R"(name: from-now
start: {snapshot: now.yaml}
workloads:
  - {name: more, job: {queue: main, priority_class: low, gpus: 1}, arrivals: {at: [1m]}, work: 1m}
configurations:
  - name: same
  - name: weighted
    queues: [{name: main, weight: 3}, {name: other}]
)");
  ASSERT_TRUE(scenario.ok()) << scenario.status().message();
  ASSERT_EQ(scenario->configurations.size(), 2u);
  EXPECT_EQ(scenario->configurations[1].workload.initial_running.size(), 2u);
  EXPECT_EQ(scenario->configurations[1].workload.jobs.size(), 2u);

  Result<Scenario> missing = Load(R"(name: from-now
start: {snapshot: now.yaml}
configurations:
  - name: renamed
    queues: [{name: main}]
)");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("configurations[0]: running job 'b' (id 2) of the "
                                            "snapshot: queue: unknown leaf queue 'other'"),
            std::string::npos)
      << missing.status().message();

  Result<Scenario> both = Load("name: x\nstart: {snapshot: now.yaml}\ncluster: {}\n");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("cluster: the cluster is the snapshot's"),
            std::string::npos)
      << both.status().message();

  std::ofstream(dir_ / "broken.yaml") << std::string(kSnapshot).replace(
      std::string(kSnapshot).find("devices: [0, 1]"), 15, "devices: [0, 9]");
  Result<Scenario> broken = Load("name: x\nstart: {snapshot: broken.yaml}\n");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(
                "start.snapshot: " + (dir_ / "broken.yaml").string() +
                ":32:59: running[0].allocation.tasks[0].devices[1]: must be at most 3, got 9"),
            std::string::npos)
      << broken.status().message();
}

}  // namespace
}  // namespace arbiter::config
