// Plans depend on their inputs only: an engine that scheduled other clusters, or other cycles,
// before gives the plan a new engine gives, and engines share nothing.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::MakeState;
using testing::Nodes;

static_assert(!std::is_copy_constructible_v<Engine> && !std::is_copy_assignable_v<Engine>,
              "engines keep caches their cycles change: no two may share them");

// Every decision of a plan, as text.
std::string Decisions(const Plan& plan) {
  std::string out;
  for (const Bind& b : plan.binds) {
    out += "bind " + std::to_string(b.job) + ":";
    for (const TaskAllocation& t : b.allocation.tasks) {
      out += " " + std::to_string(t.node) + "[";
      for (const DeviceShare& d : t.devices)
        out += std::to_string(d.device) + "=" + std::to_string(d.gpu.value()) + ",";
      out += "]";
    }
    out += "\n";
  }
  for (const Unplaced& u : plan.unplaced)
    out += "unplaced " + std::to_string(u.job) + ": " + u.reason.Describe() + "\n";
  return out;
}

// A cluster of 6 nodes of 8 GPUs (4 H800, 2 A100) whose CPUs per node are `cores`, running the
// same jobs whatever `cores` (at least 24): tasks of one GPU and 2 cores, and of one GPU and 20
// cores, in numbers drawn from `seed`. The fragmentation model of the running shapes weighs the
// 20-core shape by how scarce its hosts are, which depends on the CPUs.
ClusterState Running(std::int64_t cores, std::uint64_t seed) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 4, "H800", 8, /*group_size=*/4));
  Add(spec, Nodes("a", 2, "A100", 8, /*group_size=*/4));
  for (NodeSpec& n : spec.nodes) n.cpu = MilliCpu(cores * 1000);
  ClusterState state = MakeState(spec);
  std::mt19937_64 random(seed);
  std::vector<Job> jobs;
  const auto small = static_cast<JobId>(2 + random() % 8);
  const auto large = static_cast<JobId>(1 + random() % 5);
  for (JobId id = 1; id <= small + large; ++id) {
    Job job = testing::GpuJob(id, 1, 1000);
    job.groups[0].request.cpu = MilliCpu(id <= small ? 2000 : 20000);
    jobs.push_back(job);
  }
  Plan plan = Engine().Schedule(state, jobs, 0);
  EXPECT_EQ(plan.binds.size(), jobs.size());
  EXPECT_TRUE(state.Apply(plan, jobs).ok());
  return state;
}

std::vector<Job> Pending(std::uint64_t seed) {
  std::mt19937_64 random(seed * 7 + 1);
  std::vector<Job> jobs;
  for (JobId id = 100; id < 120; ++id) {
    const std::int64_t gpu = std::vector<std::int64_t>{500, 1000, 2000}[random() % 3];
    Job job = testing::GpuJob(id, 1, gpu);
    job.groups[0].request.cpu = MilliCpu(static_cast<std::int64_t>(1 + random() % 12) * 1000);
    job.submit_time = static_cast<Millis>(id);
    jobs.push_back(job);
  }
  return jobs;
}

// Two clusters of equal counts (nodes, devices, nodes of each GPU type) but other CPUs: one engine
// scheduling both, in turns, gives the plans that two new engines give.
TEST(Engine, PlansDependOnTheClusterNotOnTheClustersTheEngineScheduledBefore) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    ClusterState few = Running(24, seed);
    ClusterState many = Running(48, seed);
    ASSERT_EQ(few.running_task_shapes_digest(), many.running_task_shapes_digest());
    const std::vector<Job> pending = Pending(seed);
    const Engine shared;
    std::vector<std::string> by_shared;
    for (int round = 0; round < 2; ++round) {
      by_shared.push_back(Decisions(shared.Schedule(few, pending, 1000)));
      by_shared.push_back(Decisions(shared.Schedule(many, pending, 1000)));
    }
    const std::string alone_few = Decisions(Engine().Schedule(few, pending, 1000));
    const std::string alone_many = Decisions(Engine().Schedule(many, pending, 1000));
    for (int round = 0; round < 2; ++round) {
      EXPECT_EQ(by_shared[2 * round], alone_few) << "seed " << seed << " round " << round;
      EXPECT_EQ(by_shared[2 * round + 1], alone_many) << "seed " << seed << " round " << round;
    }
  }
}

// An engine made from another's options builds its own caches (the options carry none): under
// FGD with given shapes, the two give the same plans whichever schedules first.
TEST(Engine, EnginesMadeFromTheSameOptionsGiveTheSamePlans) {
  EngineOptions options;
  options.placement.policy = PlacementPolicy::kFgd;
  options.placement.shapes = {{1000, 4000, 0, {}, 1}, {500, 2000, 0, {}, 2}};
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    ClusterState state = Running(24, seed);
    const std::vector<Job> pending = Pending(seed);
    const Engine first(options);
    const Engine second(first.options());
    const std::string a = Decisions(first.Schedule(state, pending, 1000));
    EXPECT_EQ(Decisions(second.Schedule(state, pending, 1000)), a) << "seed " << seed;
    EXPECT_EQ(Decisions(first.Schedule(state, pending, 1000)), a) << "seed " << seed;
  }
}

// A job id that the pending list repeats is refused after its first occurrence in the order,
// however the list holds its ids: ascending, close together out of order, or far apart.
TEST(EngineInputs, ARepeatedJobIdIsRefusedAfterItsFirstOccurrence) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  const Engine engine;
  for (JobId base : {JobId{1}, JobId{1} << 40}) {
    for (JobId step : {JobId{1}, JobId{1} << 30}) {
      std::vector<Job> pending;
      for (JobId k : {3, 1, 2, 1}) {
        Job j = testing::GpuJob(base + k * step, 1, 1000);
        j.submit_time = static_cast<Millis>(k * 10);
        pending.push_back(j);
      }
      const Plan plan = engine.Schedule(state, pending, 100);
      EXPECT_EQ(plan.binds.size(), 3u);
      ASSERT_EQ(plan.unplaced.size(), 1u);
      EXPECT_EQ(plan.unplaced[0].job, base + step);
      EXPECT_EQ(plan.unplaced[0].reason.cause, Cause::kInvalid);
      EXPECT_NE(plan.unplaced[0].reason.detail.find("already pending"), std::string::npos)
          << plan.unplaced[0].reason.detail;
      // Unique ids, out of order: all placed.
      pending.pop_back();
      EXPECT_EQ(engine.Schedule(state, pending, 100).binds.size(), 3u);
    }
  }
}

// A pending job whose id is a running job's is refused, however the list holds its ids
// (ascending, close together out of order, far apart), with fewer running jobs than pending ones
// (the running ones are looked up among the pending) or more (each pending one is looked up).
TEST(EngineInputs, AJobIdThatIsRunningIsRefused) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 4, "H800", 8));
  const Engine engine;
  for (JobId step : {JobId{1}, JobId{1} << 30}) {
    for (std::size_t running_jobs : {std::size_t{1}, std::size_t{6}}) {
      ClusterState state = MakeState(spec);
      std::vector<Job> started;
      for (std::size_t k = 0; k < running_jobs; ++k)
        started.push_back(testing::GpuJob(100 * step + k * step, 1, 1000));
      ASSERT_TRUE(state.Apply(engine.Schedule(state, started, 0), started).ok());
      ASSERT_EQ(state.running().size(), running_jobs);
      const JobId taken = started.back().id;
      for (bool ascending : {true, false}) {
        std::vector<Job> pending;
        for (JobId k : {1, 2, 3}) pending.push_back(testing::GpuJob(k * step, 1, 1000));
        pending.push_back(testing::GpuJob(taken, 1, 1000));
        if (!ascending) std::swap(pending[0], pending[3]);
        SCOPED_TRACE(::testing::Message() << "step " << step << ", running " << running_jobs
                                          << (ascending ? ", ascending" : ", out of order"));
        const Plan plan = engine.Schedule(state, pending, 100);
        EXPECT_EQ(plan.binds.size(), 3u);
        ASSERT_EQ(plan.unplaced.size(), 1u);
        EXPECT_EQ(plan.unplaced[0].job, taken);
        EXPECT_EQ(plan.unplaced[0].reason.cause, Cause::kInvalid);
        EXPECT_NE(plan.unplaced[0].reason.detail.find("already pending or running"),
                  std::string::npos)
            << plan.unplaced[0].reason.detail;
      }
    }
  }
}

}  // namespace
}  // namespace arbiter
