// Small builders for tests: clusters from a few words ("8xH800" nodes in leaves), jobs from a
// shape, and a driver that runs one cycle, applies the plan and checks the invariants.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "core/state/cluster_state.h"
#include "sim/sim.h"

namespace arbiter::testing {

// Simulator options with every cycle's plan checked against what no cycle may decide
// (CheckPlan): the simulator's tests run with them.
inline sim::SimOptions Checked(sim::SimOptions options) {
  options.check_invariants = true;
  return options;
}

// `count` nodes named prefix-0.. with `gpus` devices of `type` in NVLink groups of `group_size`
// (0: one group), 64 cores and 512 GiB each, all in the given domains (one per operator level).
inline std::vector<NodeSpec> Nodes(const std::string& prefix, int count, const std::string& type,
                                   int gpus, int group_size = 0,
                                   std::vector<std::string> domains = {}) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < count; ++i) {
    NodeSpec n;
    n.name = prefix + "-" + std::to_string(i);
    for (int d = 0; d < gpus; ++d) {
      n.devices.push_back({type, GpuMemMiB(81920),
                           static_cast<std::uint32_t>(group_size > 0 ? d / group_size : 0)});
    }
    n.cpu = MilliCpu(64000);
    n.memory = MemMiB(512 * 1024);
    n.domains = domains;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

inline QueueSpec Queue(const std::string& name, const std::string& parent = "") {
  QueueSpec q;
  q.name = name;
  q.parent = parent;
  return q;
}

inline ClusterSpec Cluster(std::vector<std::string> levels = {}) {
  ClusterSpec spec;
  spec.topology.levels = std::move(levels);
  spec.priority_classes = {{"P0", 1000, false}, {"P1", 100, true}, {"P2", 10, true}};
  spec.queues = {Queue("default")};
  return spec;
}

inline void Add(ClusterSpec& spec, std::vector<NodeSpec> nodes) {
  for (NodeSpec& n : nodes) spec.nodes.push_back(std::move(n));
}

inline ClusterState MakeState(const ClusterSpec& spec) {
  Result<ClusterState> state = ClusterState::Create(spec);
  EXPECT_TRUE(state.ok()) << state.status().message();
  return std::move(state).value();
}

// A gang of `tasks` tasks of `gpu_milli` each (1000 = one GPU) in the first queue, class P1.
inline Job GpuJob(JobId id, std::int32_t tasks, std::int64_t gpu_milli) {
  Job job;
  job.id = id;
  job.name = "job-" + std::to_string(id);
  job.priority_class = 1;
  TaskGroup g;
  g.name = "main";
  g.count = tasks;
  g.request.gpu = MilliGpu(gpu_milli);
  g.request.cpu = MilliCpu(1000);
  g.request.memory = MemMiB(1024);
  job.groups.push_back(g);
  return job;
}

// A job of one task of `gpu_milli` in `queue`, submitted at `submit`, class P1.
inline Job QueuedJob(const ClusterState& state, JobId id, const std::string& queue,
                     std::int64_t gpu_milli, Millis submit) {
  Job j = GpuJob(id, 1, gpu_milli);
  j.queue = *state.FindQueue(queue);
  j.submit_time = submit;
  return j;
}

// `n` one-GPU jobs in `queue`, ids from `first`, submitted one millisecond apart, class `cls`.
inline std::vector<Job> OneGpuJobs(const ClusterState& state, const std::string& queue, JobId first,
                                   int n, PriorityClassId cls = 1) {
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    Job j = GpuJob(first + static_cast<JobId>(i), 1, 1000);
    j.queue = *state.FindQueue(queue);
    j.priority_class = cls;
    j.submit_time = static_cast<Millis>(first) + i;
    jobs.push_back(j);
  }
  return jobs;
}

// Starts `job` (one group of whole-GPU tasks, GPU type 0) at `start` on the named node, its
// tasks on consecutive devices from `first_device`.
inline void StartOn(ClusterState& state, const Job& job, const std::string& node,
                    std::uint32_t first_device, Millis start = 0) {
  Allocation a;
  a.gpu_type = 0;
  const NodeId n = *state.FindNode(node);
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(job.groups[0].count); ++i) {
    TaskAllocation t;
    t.index = i;
    t.node = n;
    t.cpu = job.groups[0].request.cpu;
    t.memory = job.groups[0].request.memory;
    for (std::int64_t d = 0; d < job.groups[0].request.whole_gpus(); ++d, ++first_device) {
      t.devices.push_back({first_device, kWholeGpu, state.node(n).devices[first_device].memory});
    }
    a.tasks.push_back(t);
  }
  Status st = state.Bind(job, a, start);
  ASSERT_TRUE(st.ok()) << st.message();
}

// Runs one cycle, checks the state came back unchanged in its counts, applies the plan and
// checks the invariants.
inline Plan RunCycle(ClusterState& state, const std::vector<Job>& pending, Millis now = 0,
                     EngineOptions options = {}) {
  Engine engine(std::move(options));
  Plan plan = engine.Schedule(state, pending, now);
  Status before = state.CheckInvariants();
  EXPECT_TRUE(before.ok()) << "state not restored by the cycle: " << before.message();
  Status lawful = CheckPlan(state, pending, plan);  // what no cycle may decide
  EXPECT_TRUE(lawful.ok()) << lawful.message();
  Status applied = state.Apply(plan, pending);
  EXPECT_TRUE(applied.ok()) << applied.message();
  Status after = state.CheckInvariants();
  EXPECT_TRUE(after.ok()) << after.message();
  return plan;
}

inline const Bind* FindBind(const Plan& plan, JobId id) {
  for (const Bind& b : plan.binds) {
    if (b.job == id) return &b;
  }
  return nullptr;
}

inline const Unplaced* FindUnplaced(const Plan& plan, JobId id) {
  for (const Unplaced& u : plan.unplaced) {
    if (u.job == id) return &u;
  }
  return nullptr;
}

// Distinct nodes a bind uses.
inline std::vector<NodeId> NodesOf(const Bind& bind) {
  std::vector<NodeId> nodes;
  for (const TaskAllocation& t : bind.allocation.tasks) {
    if (std::find(nodes.begin(), nodes.end(), t.node) == nodes.end()) nodes.push_back(t.node);
  }
  return nodes;
}

// Heterogeneous GPUs (the throughput matrix): four V100s and four K80s; resnet runs twice as fast
// on a V100, lstm three times as fast on a K80 (the matrix of a test, not of real models).
inline ClusterSpec V100AndK80() {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("v", 1, "V100", 4));
  Add(spec, Nodes("k", 1, "K80", 4));
  spec.throughput.rows = {{"resnet", {{"V100", 2.0}, {"K80", 1.0}}},
                          {"lstm", {{"V100", 1.0}, {"K80", 3.0}}}};
  return spec;
}

// A job of one task of `gpus` GPUs whose label `model` names its row of the matrix (none when
// empty), submitted at `submit`.
inline Job LabelledJob(JobId id, std::int64_t gpus, const std::string& model, Millis submit) {
  Job j = GpuJob(id, 1, gpus * kMilliPerGpu);
  if (!model.empty()) j.labels["model"] = model;
  j.submit_time = submit;
  return j;
}

}  // namespace arbiter::testing
