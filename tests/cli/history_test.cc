// The history file of `arbiter history` and the replay `arbiter whatif` builds from it
// (docs/whatif.md): which jobs of the window are replayed, when they arrive, for how long they run.
#include "cli/history.h"

#include <gtest/gtest.h>

#include "config/config.h"
#include "config/snapshot.h"

namespace arbiter::cli {
namespace {

constexpr Millis kSecond = 1000;
constexpr Millis kT0 = 1'800'000'000'000;  // Unix ms: the window's start

constexpr const char* kCluster = R"(
scheduler:
  backfill: {default_runtime: 1h}
priority_classes:
  - {name: low, value: 10}
queues:
  - {name: main}
nodes:
  - {name: g-0, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
)";

store::StoredJob Stored(JobId id, job::JobState state, Millis submit, Millis estimate) {
  store::StoredJob j;
  j.id = id;
  j.spec.name = "job-" + std::to_string(id);
  j.spec.user = "alice";
  j.spec.queue = "main";
  j.spec.priority_class = "low";
  TaskGroup g;
  g.name = "main";
  g.request.gpu = MilliGpu(1000);
  j.spec.groups.push_back(g);
  j.spec.submit_time = submit;
  j.spec.runtime_estimate = estimate;
  j.status.state = state;
  j.status.priority_class = "low";
  return j;
}

struct Fixture {
  config::ClusterConfig config;
  ClusterState state;
  History history;
};

Fixture Make() {
  Result<config::ClusterConfig> config = config::ParseCluster(kCluster, "cluster.yaml");
  EXPECT_TRUE(config.ok()) << config.status().message();
  Result<ClusterState> state = ClusterState::Create(config->cluster);
  EXPECT_TRUE(state.ok());
  Fixture f{*config, std::move(state).value(), {}};
  const Millis taken = kT0 + 100 * kSecond;
  f.history.taken_at = taken;
  f.history.snapshot_text =
      config::WriteSnapshot(config::MakeSnapshot(f.config, f.state, {}, taken));
  using S = job::JobState;
  // Completed after one run: its observed running time.
  store::StoredJob once = Stored(1, S::kCompleted, kT0 + 1 * kSecond, 30 * kSecond);
  once.status.first_start_time = once.status.start_time = kT0 + 2 * kSecond;
  once.status.end_time = kT0 + 12 * kSecond;
  // Evicted, then completed: the last run (5 s) or the estimate (20 s), the larger.
  store::StoredJob evicted = Stored(2, S::kCompleted, kT0 + 2 * kSecond, 20 * kSecond);
  evicted.status.first_start_time = kT0 + 3 * kSecond;
  evicted.status.evictions = {kT0 + 4 * kSecond};
  evicted.status.start_time = kT0 + 10 * kSecond;
  evicted.status.end_time = kT0 + 15 * kSecond;
  // Running at the end: the estimate, at least what it has run (90 s).
  store::StoredJob running = Stored(3, S::kRunning, kT0 + 3 * kSecond, 60 * kSecond);
  running.status.first_start_time = running.status.start_time = kT0 + 10 * kSecond;
  // Pending without an estimate: the scheduler's default runtime.
  store::StoredJob pending = Stored(4, S::kPending, kT0 + 4 * kSecond, 0);
  // Left out: held; cancelled before it ran.
  store::StoredJob held = Stored(5, S::kHeld, kT0 + 5 * kSecond, 0);
  store::StoredJob cancelled = Stored(6, S::kCancelled, kT0 + 6 * kSecond, 0);
  cancelled.status.end_time = kT0 + 7 * kSecond;
  // Before the window (when it starts at kT0).
  store::StoredJob before = Stored(7, S::kCompleted, kT0 - 1, 0);
  before.status.first_start_time = before.status.start_time = kT0;
  before.status.end_time = kT0 + kSecond;
  f.history.jobs = {once, evicted, running, pending, held, cancelled, before};
  return f;
}

TEST(History, WrittenAndReadBack) {
  Fixture f = Make();
  Result<History> back = ParseHistory(WriteHistory(f.history), "history.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->taken_at, f.history.taken_at);
  EXPECT_EQ(back->snapshot.config.cluster.nodes.size(), 1u);
  ASSERT_EQ(back->jobs.size(), f.history.jobs.size());
  for (std::size_t i = 0; i < back->jobs.size(); ++i) {
    EXPECT_EQ(back->jobs[i].id, f.history.jobs[i].id);
    EXPECT_EQ(back->jobs[i].status, f.history.jobs[i].status);
    EXPECT_EQ(back->jobs[i].spec.submit_time, f.history.jobs[i].spec.submit_time);
  }
  EXPECT_EQ(WholeHistory(*back).since, kT0 - 1);
  EXPECT_EQ(WholeHistory(*back).until, f.history.taken_at);

  Result<History> bad = ParseHistory(R"({"history_version": 2})", "h.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "h.json: history_version: expected 1");
}

TEST(History, TheWindowsJobsArriveWhenSubmittedAndRunAsObserved) {
  Fixture f = Make();
  const ReplayWindow window{kT0, kT0 + 100 * kSecond};
  Result<Replay> r = BuildReplay(f.history, window, f.state, f.config.engine);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->left_out, 2u);  // held, and cancelled before it ran
  ASSERT_EQ(r->workload.jobs.size(), 4u);
  ASSERT_EQ(r->jobs.size(), 4u);
  const auto& jobs = r->workload.jobs;
  EXPECT_EQ(r->jobs[0].id, 1u);
  EXPECT_EQ(jobs[0].job.submit_time, 1 * kSecond);
  EXPECT_EQ(jobs[0].work, 10 * kSecond);
  EXPECT_TRUE(r->jobs[0].observed);
  EXPECT_EQ(r->jobs[0].recorded_start, 2 * kSecond);
  EXPECT_EQ(jobs[1].work, 20 * kSecond);
  EXPECT_FALSE(r->jobs[1].observed);
  EXPECT_EQ(r->jobs[1].recorded_start, 3 * kSecond);
  EXPECT_EQ(jobs[2].work, 90 * kSecond);
  EXPECT_EQ(r->jobs[2].recorded_start, 10 * kSecond);
  EXPECT_EQ(jobs[3].work, 3600 * kSecond);
  EXPECT_EQ(r->jobs[3].recorded_start, -1);

  // A configuration without the job's queue names the job.
  ClusterSpec other = f.config.cluster;
  other.queues[0].name = "elsewhere";
  Result<ClusterState> state = ClusterState::Create(other);
  ASSERT_TRUE(state.ok());
  Result<Replay> refused = BuildReplay(f.history, window, *state, f.config.engine);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("job 1 ('job-1')"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace arbiter::cli
