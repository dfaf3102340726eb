// `arbiter plan --snapshot` and `arbiter explain --snapshot`: one cycle on the state a snapshot was
// taken from, at its taken_at; explain says why a pending job does or does not preempt a running
// one, and what becomes of a running job.
#include <gtest/gtest.h>

#include <string>

#include "server/server_process.h"

namespace arbiter::testing {
namespace {

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// At 10:00: `old` (low, started at 9:00, its minimum runtime of 30m over) on g-0; `young` (low,
// started at 9:50, still protected) on g-1; `urgent` (high, 4 GPUs) pending.
constexpr const char* kSnapshot = R"(snapshot_version: 1
taken_at: "2026-05-01T10:00:00Z"
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, min_runtime: 30m, grace_period: 1m}
queues:
  - name: main
nodes:
  - {name: g-0, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
  - {name: g-1, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
running:
  - id: 1
    name: old
    queue: main
    priority_class: low
    submit_time: "2026-05-01T08:00:00Z"
    checkpoint_interval: 30m
    gpus: 4
    evictions: ["2026-05-01T08:30:00Z"]
    start_time: "2026-05-01T09:00:00Z"
    last_checkpoint: "2026-05-01T09:30:00Z"
    allocation:
      gpu_type: G
      tasks:
        - {node: g-0, devices: [0, 1, 2, 3]}
  - id: 2
    name: young
    queue: main
    priority_class: low
    submit_time: "2026-05-01T09:40:00Z"
    gpus: 4
    start_time: "2026-05-01T09:50:00Z"
    allocation:
      gpu_type: G
      tasks:
        - {node: g-1, devices: [0, 1, 2, 3]}
pending:
  - {id: 3, name: urgent, queue: main, priority_class: high, submit_time: "2026-05-01T09:59:00Z",
     gpus: 4}
)";

class SnapshotCli : public ::testing::Test {
 protected:
  void SetUp() override { file_ = dir_.Write("now.yaml", kSnapshot); }
  CommandResult Run(const std::string& args) { return RunCli("127.0.0.1:1", "t", args); }

  TempDir dir_;
  std::string file_;
};

TEST_F(SnapshotCli, PlanRunsOneCycleAtTakenAt) {
  CommandResult plan = Run("plan --snapshot " + file_);
  ASSERT_EQ(plan.status, 0) << plan.output;
  EXPECT_TRUE(HasSubstr(plan.output, "cycle at 2026-05-01T10:00:00Z: 1 pending, 1 placed"))
      << plan.output;
  EXPECT_TRUE(HasSubstr(plan.output, "urgent")) << plan.output;
  EXPECT_TRUE(HasSubstr(plan.output, "old ")) << plan.output;                  // evicted
  EXPECT_TRUE(HasSubstr(plan.output, "2026-05-01T10:01:00Z")) << plan.output;  // its stop
  CommandResult json = Run("plan --json --snapshot " + file_ + " --now +10m");
  ASSERT_EQ(json.status, 0) << json.output;
  const Json j = Json::parse(json.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.output;
  EXPECT_EQ(j["now_ms"], 1777629600000 + 600000);
  EXPECT_EQ(j["binds"][0]["name"], "urgent");
}

TEST_F(SnapshotCli, ExplainSaysWhoIsEvictedAndWhoIsProtected) {
  CommandResult urgent = Run("explain --snapshot " + file_ + " urgent");
  ASSERT_EQ(urgent.status, 0) << urgent.output;
  EXPECT_TRUE(HasSubstr(urgent.output,
                        "job urgent (queue main, class high, 4 GPUs) at "
                        "2026-05-01T10:00:00Z:"))
      << urgent.output;
  EXPECT_TRUE(HasSubstr(urgent.output, "placed on G: g-0[0-3]")) << urgent.output;
  EXPECT_TRUE(HasSubstr(urgent.output,
                        "preempting old (within_queue): SIGUSR1 now, stopped at "
                        "2026-05-01T10:01:00Z"))
      << urgent.output;

  CommandResult old = Run("explain --snapshot " + file_ + " old");
  ASSERT_EQ(old.status, 0) << old.output;
  EXPECT_TRUE(HasSubstr(old.output, "running since 2026-05-01T09:00:00Z on g-0[0-3]"))
      << old.output;
  EXPECT_TRUE(HasSubstr(old.output, "last checkpoint at 2026-05-01T09:30:00Z")) << old.output;
  EXPECT_TRUE(HasSubstr(old.output, "evicted 1 time before")) << old.output;
  EXPECT_TRUE(HasSubstr(old.output, "evicted by this cycle for urgent (within_queue)"))
      << old.output;

  CommandResult young = Run("explain --snapshot " + file_ + " 2");  // by id
  ASSERT_EQ(young.status, 0) << young.output;
  EXPECT_TRUE(HasSubstr(young.output, "job young")) << young.output;
  EXPECT_TRUE(HasSubstr(young.output, "this cycle leaves it running")) << young.output;

  // At 10:40 `young` is past its minimum runtime too, and the cheaper victim goes: 50 minutes of
  // work since its start, against 70 since `old`'s checkpoint.
  CommandResult later = Run("explain --snapshot " + file_ + " --now 2026-05-01T10:40:00Z young");
  ASSERT_EQ(later.status, 0) << later.output;
  EXPECT_TRUE(HasSubstr(later.output, "at 2026-05-01T10:40:00Z")) << later.output;
  EXPECT_TRUE(HasSubstr(later.output, "evicted by this cycle for urgent")) << later.output;
}

// Issue 42, item 8: a job being evicted (a snapshot's `stopping`) is explained, not "no job
// named"; a 1-GPU job reads "1 GPU"; --at, which only --scenario reads, is refused elsewhere
// rather than ignored.
TEST_F(SnapshotCli, ExplainsAJobBeingEvictedAndRefusesAtWithoutAScenario) {
  std::string text = kSnapshot;
  text += R"(stopping:
  - {id: 4, name: leaving, queue: main, priority_class: low, submit_time: "2026-05-01T09:00:00Z",
     gpus: 1, stop_time: "2026-05-01T10:00:30Z"}
)";
  const std::string file = dir_.Write("stopping.yaml", text);
  CommandResult leaving = Run("explain --snapshot " + file + " leaving");
  ASSERT_EQ(leaving.status, 0) << leaving.output;
  EXPECT_TRUE(HasSubstr(leaving.output, "job leaving (queue main, class low) at"))
      << leaving.output;
  EXPECT_TRUE(HasSubstr(leaving.output, "being evicted: told to stop by 2026-05-01T10:00:30Z"))
      << leaving.output;
  CommandResult by_id = Run("explain --snapshot " + file + " 4");
  EXPECT_EQ(by_id.status, 0) << by_id.output;

  std::string one = kSnapshot;
  one.replace(one.find("     gpus: 4}"), 13, "     gpus: 1}");
  const std::string one_file = dir_.Write("one.yaml", one);
  CommandResult urgent = Run("explain --snapshot " + one_file + " urgent");
  ASSERT_EQ(urgent.status, 0) << urgent.output;
  EXPECT_TRUE(HasSubstr(urgent.output, "class high, 1 GPU) at")) << urgent.output;

  CommandResult at = Run("explain --snapshot " + file_ + " --at 1h urgent");
  EXPECT_NE(at.status, 0);
  EXPECT_TRUE(HasSubstr(at.output, "--at requires --scenario")) << at.output;
}

TEST_F(SnapshotCli, BadInputIsRefused) {
  CommandResult unknown = Run("explain --snapshot " + file_ + " nosuch");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_TRUE(HasSubstr(unknown.output, "no job named 'nosuch'")) << unknown.output;
  CommandResult both = Run("plan --snapshot " + file_ + " --config " + file_);
  EXPECT_EQ(both.status, 2) << both.output;
  CommandResult before = Run("plan --snapshot " + file_ + " --now 2026-05-01T09:00:00Z");
  EXPECT_EQ(before.status, 2) << before.output;
  EXPECT_TRUE(HasSubstr(before.output, "before the snapshot was taken")) << before.output;
  const std::string broken = dir_.Write(
      "broken.yaml",
      std::string(kSnapshot).replace(std::string(kSnapshot).find("node: g-1"), 9, "node: g-7"));
  CommandResult bad = Run("plan --snapshot " + broken);
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(HasSubstr(bad.output, "broken.yaml:")) << bad.output;
  EXPECT_TRUE(HasSubstr(bad.output, "running[1].allocation.tasks[0].node: unknown node 'g-7'"))
      << bad.output;
}

}  // namespace
}  // namespace arbiter::testing
