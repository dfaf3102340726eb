// Backfill with reservations: how much a cycle computes for its blocked jobs. A shape whose
// reservation failed fails again while the cycle's state is the same, so it is computed once per
// shape until a job is placed or reserved.
#include <gtest/gtest.h>

#include <algorithm>

#include "arbiter/engine.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

constexpr Millis kHour = 3600 * kMillisPerSecond;

std::int64_t BackfillCalls(const Plan& plan) {
  auto it = std::find_if(plan.timings.begin(), plan.timings.end(),
                         [](const StageTiming& t) { return t.stage == Stage::kBackfill; });
  return it == plan.timings.end() ? 0 : it->calls;
}

// Two nodes of 4 GPUs: three 1-GPU jobs on n-0 (ending at 5, 6 and 7 hours, one GPU free), four on
// n-1 (ending at 1 to 4 hours). A job of one 4-GPU task is blocked; with one attempt allowed, its
// reservation fails: at 3 hours four GPUs are free, but on two nodes.
ClusterState Busy() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 2, "H800", 4));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org")};
  ClusterState state = MakeState(spec);
  JobId id = 100;
  for (int node = 0; node < 2; ++node) {
    const int jobs = node == 0 ? 3 : 4;
    for (int i = 0; i < jobs; ++i) {
      Job j = GpuJob(id++, 1, 1000);
      j.queue = *state.FindQueue("a");
      j.runtime_estimate = (node == 0 ? 5 + i : 1 + i) * kHour;
      testing::StartOn(state, j, "n-" + std::to_string(node), static_cast<std::uint32_t>(i), 0);
    }
  }
  return state;
}

Job Pending(const ClusterState& state, JobId id, std::int64_t milli, Millis submit) {
  Job j = testing::QueuedJob(state, id, "a", milli, submit);
  j.runtime_estimate = kHour;
  return j;
}

EngineOptions OneAttempt() {
  EngineOptions o;
  o.backfill.reservations = 1;
  o.backfill.max_attempts = 1;
  o.preemption.enabled = false;
  return o;
}

TEST(Backfill, AFailedReservationIsComputedOncePerShapeUntilAJobIsPlaced) {
  ClusterState state = Busy();
  // Two blocked 4-GPU jobs: the second's reservation is known to fail.
  const std::vector<Job> two = {Pending(state, 1, 4000, 1), Pending(state, 2, 4000, 2)};
  Plan plan = Engine(OneAttempt()).Schedule(state, two, 10);
  EXPECT_TRUE(plan.binds.empty());
  EXPECT_TRUE(plan.reservations.empty());
  EXPECT_EQ(BackfillCalls(plan), 1);

  // A 1-GPU job placed between them changes the state: the second is computed again.
  const std::vector<Job> placed_between = {Pending(state, 1, 4000, 1), Pending(state, 3, 1000, 2),
                                           Pending(state, 2, 4000, 3)};
  plan = Engine(OneAttempt()).Schedule(state, placed_between, 10);
  ASSERT_EQ(plan.binds.size(), 1u);
  EXPECT_EQ(plan.binds[0].job, 3u);
  EXPECT_TRUE(plan.reservations.empty());
  EXPECT_EQ(BackfillCalls(plan), 2);

  // With the attempts to find it, the first gets its reservation (n-1 empties at 4 hours) and the
  // second, with one reservation per cycle, none.
  EngineOptions more = OneAttempt();
  more.backfill.max_attempts = 64;
  plan = Engine(more).Schedule(state, two, 10);
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].job, 1u);
  EXPECT_EQ(plan.reservations[0].start, 4 * kHour);
}

}  // namespace
}  // namespace arbiter
