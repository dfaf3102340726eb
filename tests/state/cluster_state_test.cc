// Cluster state: construction checks, domains, indexes, binds and the invariant checker.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

std::string CreateError(const ClusterSpec& spec) {
  Result<ClusterState> s = ClusterState::Create(spec);
  return s.ok() ? "" : s.status().message();
}

TEST(ClusterState, CreateRejectsBadConfigurationNamingTheField) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("n", 1, "H800", 8, 0, {"leaf-0"}));
  ClusterSpec dup = spec;
  Add(dup, Nodes("n", 1, "H800", 8, 0, {"leaf-0"}));
  EXPECT_NE(CreateError(dup).find("nodes: duplicate name 'n-0'"), std::string::npos);

  ClusterSpec parent = spec;
  parent.queues.push_back(testing::Queue("a", "nowhere"));
  EXPECT_NE(CreateError(parent).find("queues.a.parent: unknown queue 'nowhere'"),
            std::string::npos);

  ClusterSpec cycle = spec;
  cycle.queues = {testing::Queue("a", "b"), testing::Queue("b", "a")};
  EXPECT_NE(CreateError(cycle).find("cycle"), std::string::npos);

  ClusterSpec type = spec;
  type.queues[0].quota["B200"].nominal = MilliGpu(1000);
  EXPECT_NE(CreateError(type).find("queues.default.quota: 'B200'"), std::string::npos);

  ClusterSpec levels = spec;
  levels.nodes[0].domains.clear();
  EXPECT_NE(CreateError(levels).find("nodes.n-0.topology"), std::string::npos);
}

TEST(ClusterState, DomainsAreContiguousNodeRanges) {
  ClusterSpec spec = Cluster({"spine", "leaf"});
  // Interleaved in the configuration; stored grouped by path.
  Add(spec, Nodes("x", 1, "H800", 8, 0, {"s0", "l0"}));
  Add(spec, Nodes("y", 1, "H800", 8, 0, {"s1", "l2"}));
  Add(spec, Nodes("z", 1, "H800", 8, 0, {"s0", "l1"}));
  Add(spec, Nodes("w", 1, "H800", 8, 0, {"s0", "l0"}));
  ClusterState state = MakeState(spec);
  ASSERT_EQ(state.domains_at(0).size(), 2u);
  ASSERT_EQ(state.domains_at(1).size(), 3u);
  for (int level = 0; level < 2; ++level) {
    for (DomainId d : state.domains_at(level)) {
      const Domain& dom = state.domain(d);
      for (NodeId n = 0; n < state.node_count(); ++n) {
        const bool inside = n >= dom.first_node && n < dom.end_node;
        EXPECT_EQ(state.node(n).domains[static_cast<std::size_t>(level)] == d, inside)
            << dom.name << " " << state.node(n).name;
      }
    }
  }
  EXPECT_EQ(state.node(0).name, "x-0");
  EXPECT_EQ(state.node(1).name, "w-0");  // same leaf as x-0
}

TEST(ClusterState, BindTakesAndUnbindGivesBackExactly) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("n", 2, "H800", 8, 4, {"leaf-0"}));
  ClusterState state = MakeState(spec);
  Job job = GpuJob(1, 2, 500);
  Allocation a;
  a.gpu_type = 0;
  for (std::uint32_t i = 0; i < 2; ++i) {
    TaskAllocation t;
    t.index = i;
    t.node = 0;
    t.cpu = job.groups[0].request.cpu;
    t.memory = job.groups[0].request.memory;
    t.devices.push_back({3, MilliGpu(500), GpuMemMiB(0)});
    a.tasks.push_back(t);
  }
  ASSERT_TRUE(state.Bind(job, a, 0).ok());
  EXPECT_TRUE(state.CheckInvariants().ok());
  EXPECT_EQ(state.node(0).devices[3].free, MilliGpu(0));
  EXPECT_EQ(state.NodeFreeDevices(0, 0), 7u);
  EXPECT_TRUE(state.NodesWithFreeDevices(0, 7).Contains(0));
  EXPECT_FALSE(state.NodesWithFreeDevices(0, 8).Contains(0));
  EXPECT_EQ(state.DomainFreeDevices(state.node(0).domains[0], 0), 15);
  EXPECT_EQ(state.DomainFreeMilli(state.node(0).domains[0], 0), 15000);
  EXPECT_EQ(state.usage(0, 0), 1000);

  // A third share on the same device would over-allocate it: refused, nothing changes.
  Job more = GpuJob(2, 1, 500);
  Allocation b;
  b.gpu_type = 0;
  b.tasks.push_back(a.tasks[0]);
  b.tasks[0].index = 0;
  Status st = state.Bind(more, b, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not fit"), std::string::npos);
  EXPECT_TRUE(state.CheckInvariants().ok());

  ASSERT_TRUE(state.Unbind(1, 10).ok());
  EXPECT_TRUE(state.CheckInvariants().ok());
  EXPECT_EQ(state.NodeFreeDevices(0, 0), 8u);
  EXPECT_EQ(state.usage(0, 0), 0);
  EXPECT_FALSE(state.Unbind(1, 10).ok());
}

TEST(ClusterState, BindRejectsAllocationsThatDoNotMatchTheJob) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  Add(spec, Nodes("a", 1, "A100", 8));
  ClusterState state = MakeState(spec);
  Job job = GpuJob(1, 1, 2000);
  job.gpu_types = GpuTypeSet::Of(*state.FindGpuType("H800"));
  auto alloc = [&](GpuTypeId type, NodeId node, std::vector<std::uint32_t> devices) {
    Allocation a;
    a.gpu_type = type;
    TaskAllocation t;
    t.node = node;
    t.cpu = job.groups[0].request.cpu;
    t.memory = job.groups[0].request.memory;
    for (std::uint32_t d : devices) t.devices.push_back({d, kWholeGpu, GpuMemMiB(81920)});
    a.tasks.push_back(t);
    return a;
  };
  const NodeId h = *state.FindNode("n-0");
  const NodeId a100 = *state.FindNode("a-0");
  EXPECT_FALSE(state.Bind(job, alloc(0, h, {0}), 0).ok());        // one device short
  EXPECT_FALSE(state.Bind(job, alloc(0, h, {0, 0}), 0).ok());     // the same device twice
  EXPECT_FALSE(state.Bind(job, alloc(1, a100, {0, 1}), 0).ok());  // a type the job does not accept
  EXPECT_FALSE(state.Bind(job, alloc(0, h, {0, 9}), 0).ok());     // no such device
  EXPECT_TRUE(state.Bind(job, alloc(0, h, {0, 1}), 0).ok());
  EXPECT_FALSE(state.Bind(job, alloc(0, h, {2, 3}), 0).ok());  // already running
  EXPECT_TRUE(state.CheckInvariants().ok());
}

// Each task of a job is placed once: a small job's tasks and a large gang's (checked in two ways).
TEST(ClusterState, BindRejectsATaskPlacedTwice) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 8, "H800", 8));
  ClusterState state = MakeState(spec);
  for (std::int32_t tasks : {3, 40}) {
    Job job = GpuJob(1, tasks, 1000);
    Allocation a;
    a.gpu_type = 0;
    for (std::int32_t i = 0; i < tasks; ++i) {
      TaskAllocation t;
      t.index = static_cast<std::uint32_t>(i);
      t.node = static_cast<NodeId>(i / 8);
      t.cpu = job.groups[0].request.cpu;
      t.memory = job.groups[0].request.memory;
      t.devices.push_back({static_cast<std::uint32_t>(i % 8), kWholeGpu, GpuMemMiB(81920)});
      a.tasks.push_back(t);
    }
    Allocation repeated = a;
    repeated.tasks.back().index = 1;
    Status st = state.Bind(job, repeated, 0);
    EXPECT_FALSE(st.ok()) << tasks;
    EXPECT_NE(st.message().find("task 0/1: no such task, or placed twice"), std::string::npos)
        << st.message();
    Allocation beyond = a;
    beyond.tasks.back().index = static_cast<std::uint32_t>(tasks);
    EXPECT_FALSE(state.Bind(job, beyond, 0).ok()) << tasks;
    EXPECT_TRUE(state.CheckInvariants().ok());
    ASSERT_TRUE(state.Bind(job, a, 0).ok()) << tasks;
    ASSERT_TRUE(state.Unbind(1, 0).ok());
  }
}

TEST(ClusterState, ShareBucketsCoverOneToNineHundredNinetyNine) {
  EXPECT_EQ(ClusterState::ShareBucket(1), 0);
  EXPECT_EQ(ClusterState::ShareBucket(62), 0);
  EXPECT_EQ(ClusterState::ShareBucket(63), 0);
  EXPECT_EQ(ClusterState::ShareBucket(64), 1);
  EXPECT_EQ(ClusterState::ShareBucket(999), ClusterState::kShareBuckets - 1);
}

TEST(IndexSet, NextFindsMembersInOrderWithinARange) {
  IndexSet set(300);
  for (std::uint32_t i : {3u, 64u, 65u, 199u, 299u}) set.Insert(i);
  EXPECT_EQ(set.Next(0, 300), 3u);
  EXPECT_EQ(set.Next(4, 300), 64u);
  EXPECT_EQ(set.Next(66, 300), 199u);
  EXPECT_EQ(set.Next(66, 199), 199u);  // none in [66, 199): returns end
  EXPECT_EQ(set.Next(200, 300), 299u);
  set.Erase(299);
  EXPECT_EQ(set.Next(200, 300), 300u);
  EXPECT_EQ(set.Next(5, 5), 5u);
}

TEST(IndexSet, ForEachVisitsWhatNextFindsAndStopsWhenAsked) {
  IndexSet set(10000);
  std::vector<std::uint32_t> members;
  for (std::uint32_t i = 0; i < 10000; i += 1 + (i * 7919) % 613) {
    set.Insert(i);
    members.push_back(i);
  }
  for (const auto& [from, end] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{
           {0, 10000}, {1, 64}, {63, 4097}, {4095, 4096}, {5000, 9999}, {7, 7}}) {
    std::vector<std::uint32_t> next, each;
    for (std::uint32_t i = set.Next(from, end); i < end; i = set.Next(i + 1, end))
      next.push_back(i);
    set.ForEach(from, end, [&](std::uint32_t i) {
      each.push_back(i);
      return true;
    });
    EXPECT_EQ(each, next) << "[" << from << ", " << end << ")";
  }
  // A large sparse set (members across several words of each level), and an empty one.
  IndexSet large(600000);
  std::vector<std::uint32_t> sparse = {5, 4095, 4096, 262143, 262144, 300000, 599999};
  for (std::uint32_t i : sparse) large.Insert(i);
  large.Insert(300000);  // again: no change
  EXPECT_EQ(large.size(), sparse.size());
  std::vector<std::uint32_t> seen;
  for (std::uint32_t i = large.Next(0, 600000); i < 600000; i = large.Next(i + 1, 600000))
    seen.push_back(i);
  EXPECT_EQ(seen, sparse);
  seen.clear();
  large.ForEach(6, 600000, [&](std::uint32_t i) {
    seen.push_back(i);
    return true;
  });
  EXPECT_EQ(seen, std::vector<std::uint32_t>(sparse.begin() + 1, sparse.end()));
  EXPECT_EQ(large.Next(262145, 299999), 299999u);
  large.Erase(262143);
  large.Erase(262144);
  large.Erase(262144);  // again: no change
  EXPECT_EQ(large.Next(4097, 600000), 300000u);
  EXPECT_EQ(large.size(), sparse.size() - 2);
  const IndexSet empty(600000);
  EXPECT_EQ(empty.Next(0, 600000), 600000u);
  EXPECT_TRUE(empty.empty());

  std::vector<std::uint32_t> first;
  set.ForEach(0, 10000, [&](std::uint32_t i) {
    first.push_back(i);
    return first.size() < 3;
  });
  EXPECT_EQ(first, std::vector<std::uint32_t>(members.begin(), members.begin() + 3));
}

// The digest of the running shapes is a function of their rounded counts alone.
TEST(ClusterState, TheShapeDigestFollowsTheRoundedCounts) {
  EXPECT_EQ(ClusterState::RoundedShapeCount(15), 15);
  EXPECT_EQ(ClusterState::RoundedShapeCount(17), 16);
  EXPECT_EQ(ClusterState::RoundedShapeCount(18), 18);
  EXPECT_EQ(ClusterState::RoundedShapeCount(100), 96);
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 4, "H800", 8));
  // A state running `jobs` one-GPU jobs (one task each).
  auto running = [&](int jobs) {
    ClusterState state = MakeState(spec);
    for (int j = 0; j < jobs; ++j) {
      const Job job = GpuJob(static_cast<JobId>(j + 1), 1, 1000);
      Allocation a;
      a.gpu_type = 0;
      TaskAllocation t;
      t.node = static_cast<NodeId>(j / 8);
      t.cpu = job.groups[0].request.cpu;
      t.memory = job.groups[0].request.memory;
      const auto d = static_cast<std::uint32_t>(j % 8);
      t.devices.push_back({d, kWholeGpu, state.node(t.node).devices[d].memory});
      a.tasks.push_back(t);
      const Status st = state.Bind(job, a, 0);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    EXPECT_TRUE(state.CheckInvariants().ok());  // which checks the digest against the shapes
    return state;
  };
  const std::uint64_t none = running(0).running_task_shapes_digest();
  ClusterState sixteen = running(16);
  EXPECT_NE(sixteen.running_task_shapes_digest(), none);
  EXPECT_EQ(running(17).running_task_shapes_digest(), sixteen.running_task_shapes_digest());
  EXPECT_NE(running(18).running_task_shapes_digest(), sixteen.running_task_shapes_digest());
  for (JobId id = 1; id <= 16; ++id) ASSERT_TRUE(sixteen.Unbind(id, 0).ok());
  EXPECT_EQ(sixteen.running_task_shapes_digest(), none);
}

// ---- Transactions ----

// Everything a reader of the state can see of its capacity, usage and stamps, as one value.
std::vector<std::int64_t> Observed(const ClusterState& state) {
  std::vector<std::int64_t> out;
  for (NodeId n = 0; n < state.node_count(); ++n) {
    const NodeState& node = state.node(n);
    out.insert(out.end(), {node.cpu_free.value(), node.memory_free.value(),
                           static_cast<std::int64_t>(node.tasks),
                           static_cast<std::int64_t>(state.NodeStamp(n))});
    for (const DeviceState& d : node.devices)
      out.insert(out.end(), {d.free.value(), d.memory_free.value()});
    for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t)
      out.push_back(state.NodeFreeDevices(n, t));
    out.push_back(state.NodesWithoutFreeGpu().Contains(n));
  }
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    for (std::size_t r = 0; r < state.quota_resource_count(); ++r) out.push_back(state.usage(q, r));
  }
  for (DomainId d = 0; d < state.domain_count(); ++d) {
    for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t)
      out.insert(out.end(), {state.DomainFreeDevices(d, t), state.DomainFreeMilli(d, t)});
  }
  return out;
}

// Random tentative work (take, give, charge, hold, unhold, evict, readmit, release), in
// transactions nested up to four deep, each committed or discarded at
// random: after every discard the state is exactly what it was when that transaction opened
// (capacity, indexes, usage and stamps), and the invariants hold at every step.
TEST(Transaction, ADiscardRestoresTheStateExactlyAtEveryDepth) {
  ClusterSpec spec = Cluster({"rack"});
  spec.queues = {testing::Queue("root"), testing::Queue("a", "root"), testing::Queue("b", "root")};
  spec.queues[1].quota["gpu"].nominal = MilliGpu(8000);
  spec.queues[2].quota["gpu"].nominal = MilliGpu(8000);
  Add(spec, Nodes("x", 2, "H800", 8, /*group_size=*/4, {"r0"}));
  Add(spec, Nodes("y", 2, "A100", 8, /*group_size=*/8, {"r1"}));
  ClusterState state = MakeState(spec);
  // Some running jobs to evict and readmit.
  for (JobId id = 1; id <= 6; ++id) {
    Job job = GpuJob(id, 1, 2000);
    job.queue = *state.FindQueue(id % 2 ? "a" : "b");
    testing::StartOn(state, job, id <= 3 ? "x-0" : "x-1", static_cast<std::uint32_t>(id % 3 * 2));
  }
  std::mt19937_64 random(7);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };

  // Per open transaction: what it may give back (taken by it or an enclosing one, or running),
  // what it holds, who it evicted, and the state when it opened.
  struct Level {
    std::vector<TaskAllocation> taken, held;
    std::vector<const RunningJob*> evicted, released;  // (released ones come back by discard only)
    std::vector<std::int64_t> at_open;
  };
  int discards = 0, commits = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<std::unique_ptr<Transaction>> open;
    std::vector<Level> levels;
    auto push = [&] {
      open.push_back(open.empty() ? std::make_unique<Transaction>(state)
                                  : std::make_unique<Transaction>(*open.back()));
      levels.push_back({});
      levels.back().at_open = Observed(state);
      if (levels.size() > 1) {  // what the enclosing ones took may be given back here
        levels.back().taken = levels[levels.size() - 2].taken;
        levels.back().evicted = levels[levels.size() - 2].evicted;
        levels.back().released = levels[levels.size() - 2].released;
      }
    };
    push();
    for (int step = 0; step < 60 && !open.empty(); ++step) {
      Transaction& tx = *open.back();
      Level& level = levels.back();
      auto gone = [&](const RunningJob* r) {
        return std::find(level.evicted.begin(), level.evicted.end(), r) != level.evicted.end() ||
               std::find(level.released.begin(), level.released.end(), r) != level.released.end();
      };
      switch (pick(9)) {
        case 0: {  // take one free device (or a share of a partly free one) on a random node
          const NodeId n = static_cast<NodeId>(pick(state.node_count()));
          const NodeState& node = state.node(n);
          const auto d = static_cast<std::uint32_t>(pick(node.devices.size()));
          const std::int64_t free = node.devices[d].free.value();
          if (free == 0 || node.cpu_free.value() < 1000) break;
          TaskAllocation t;
          t.node = n;
          t.cpu = MilliCpu(1000);
          t.memory = MemMiB(0);
          const std::int64_t milli =
              free == kMilliPerGpu && pick(2) ? free : std::min<std::int64_t>(free, 250);
          t.devices.push_back({d, MilliGpu(milli), GpuMemMiB(0)});
          tx.Take(t);
          level.taken.push_back(t);
          break;
        }
        case 1:  // give back something taken
          if (level.taken.empty()) break;
          {
            const std::size_t i = pick(level.taken.size());
            tx.Give(level.taken[i]);
            level.taken.erase(level.taken.begin() + static_cast<std::ptrdiff_t>(i));
          }
          break;
        case 2:
          tx.Charge(static_cast<QueueId>(1 + pick(2)), 0,
                    static_cast<std::int64_t>(pick(3000)) - 1000);
          break;
        case 3: {  // evict a running job not evicted yet
          const RunningJob* r = state.FindRunning(static_cast<JobId>(1 + pick(6)));
          if (gone(r)) break;
          tx.Evict(*r);
          level.evicted.push_back(r);
          break;
        }
        case 8: {  // release a running job (its usage stays)
          const RunningJob* r = state.FindRunning(static_cast<JobId>(1 + pick(6)));
          if (gone(r)) break;
          tx.Release(*r);
          level.released.push_back(r);
          break;
        }
        case 4: {  // readmit the last evicted, if its devices are still free
          if (level.evicted.empty()) break;
          const RunningJob& r = *level.evicted.back();
          bool fits = true;
          for (const TaskAllocation& t : r.allocation.tasks) {
            for (const DeviceShare& d : t.devices)
              fits = fits && state.node(t.node).devices[d.device].free >= d.gpu;
          }
          if (!fits) break;
          tx.Readmit(r);
          level.evicted.pop_back();
          break;
        }
        case 5: {  // hold what is free of a node's first device
          const NodeId n = static_cast<NodeId>(pick(state.node_count()));
          TaskAllocation h;
          h.node = n;
          const DeviceState& dev = state.node(n).devices[0];
          if (dev.free.value() == 0) break;
          h.devices.push_back({0, dev.free, GpuMemMiB(0)});
          tx.Hold(h);
          level.held.push_back(h);
          break;
        }
        case 6:
          if (open.size() < 4) push();
          break;
        case 7: {  // close the innermost
          const bool commit = open.size() > 1 && pick(2);
          if (commit) {
            std::vector<TaskAllocation> taken = level.taken;
            std::vector<const RunningJob*> evicted = level.evicted;
            std::vector<const RunningJob*> released = level.released;
            for (const TaskAllocation& h : level.held) open.back()->Unhold(h);
            open.back()->Commit();
            ++commits;
            open.pop_back();
            levels.pop_back();
            levels.back().taken = std::move(taken);
            levels.back().evicted = std::move(evicted);
            levels.back().released = std::move(released);
          } else {
            const std::vector<std::int64_t> at_open = level.at_open;
            open.back()->Discard();
            ++discards;
            EXPECT_EQ(Observed(state), at_open) << "round " << round << " step " << step;
            open.pop_back();
            levels.pop_back();
          }
          break;
        }
      }
      const Status st = state.CheckInvariants();
      ASSERT_TRUE(st.ok()) << st.message();
    }
    while (!open.empty()) {  // the rest discarded, innermost first (by their destructors)
      const std::vector<std::int64_t> at_open = levels.back().at_open;
      open.pop_back();
      ++discards;
      EXPECT_EQ(Observed(state), at_open);
      levels.pop_back();
    }
  }
  EXPECT_GT(discards, 40);
  EXPECT_GT(commits, 10);
  EXPECT_TRUE(state.CheckInvariants().ok());
  EXPECT_EQ(state.running().size(), 6u);
}

// The state changes for real only outside transactions: a bind or an unbind inside one is refused.
TEST(Transaction, TheStateIsNotBoundOrUnboundWhileOneIsOpen) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  ClusterState state = MakeState(spec);
  testing::StartOn(state, GpuJob(1, 1, 1000), "n-0", 0);
  {
    Transaction tx(state);
    EXPECT_TRUE(state.in_transaction());
    EXPECT_EQ(state.Unbind(1, 0).code(), StatusCode::kInternal);
    Allocation a;
    a.gpu_type = 0;
    TaskAllocation t;
    t.cpu = MilliCpu(1000);
    t.memory = MemMiB(1024);
    t.devices.push_back({1, kWholeGpu, state.node(0).devices[1].memory});
    a.tasks.push_back(t);
    EXPECT_EQ(state.Bind(GpuJob(2, 1, 1000), a, 0).code(), StatusCode::kInternal);
  }
  EXPECT_FALSE(state.in_transaction());
  EXPECT_TRUE(state.Unbind(1, 0).ok());
}

}  // namespace
}  // namespace arbiter
