// The cluster's state as a user of the library sees it: Cluster, built from a ClusterSpec, read
// through plain values (nodes, queues, running jobs) and changed only by applying plans and by
// the events a driver reports (a job ending or evicted, a checkpoint, a node cordoned or lost).
// The engine's own view, with its capacity indexes and its transactions, is ClusterState
// (src/core/state/cluster_state.h), which this header names and never shows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/status.h"

namespace arbiter {

class ClusterState;

// A job while it runs: the job, where it runs, since when, and its eviction history.
struct RunningJob {
  Job job;
  Allocation allocation;
  Millis start_time = 0;
  Millis last_checkpoint = 0;     // start_time until the job reports a checkpoint
  std::vector<Millis> evictions;  // when the job was evicted before this run, oldest first
};

// One GPU of a node, as it is now.
struct DeviceView {
  std::string gpu_type;
  MilliGpu free{0};  // of kMilliPerGpu
  GpuMemMiB memory{0};
  GpuMemMiB memory_free{0};
  std::uint32_t nvlink_group = 0;  // devices of one group share an NVLink domain
};

// One node, as it is now.
struct NodeView {
  NodeId id = 0;
  std::string name;
  bool cordoned = false;
  bool healthy = true;
  MilliCpu cpu{0};
  MilliCpu cpu_free{0};
  MemMiB memory{0};
  MemMiB memory_free{0};
  std::vector<DeviceView> devices;
  std::uint32_t tasks = 0;  // tasks running here
};

// One queue, as it is now: its place in the tree and the GPUs its subtree uses.
struct QueueView {
  QueueId id = 0;
  std::string name;
  std::string parent;               // "" for a root
  bool leaf = true;                 // jobs are submitted to leaves
  std::int64_t gpu_milli_used = 0;  // by the subtree, every GPU type
  // The tree's quota of all GPUs together (resource `gpu`; quota of one GPU model is not shown):
  std::int64_t gpu_milli_nominal = 0;  // the subtree's guarantee (0: none declared)
  std::int64_t gpu_milli_max = -1;     // -1: no maximum
  double recent_usage = 0;             // GPU-milli-milliseconds, decayed (the fair-share input)
};

// The cluster's state, owned. Jobs name queues, priority classes, GPU types and nodes by the ids
// the Find functions give. Every change checks its input and, on an error, changes nothing.
class Cluster {
 public:
  // Builds the state from a configuration, checking it (unique names, known parents and GPU
  // types, no cycles in the queue tree, topology paths that match the levels); errors name the
  // field.
  static Result<Cluster> Create(const ClusterSpec& spec);
  ~Cluster();
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // ---- Names to ids ----
  std::optional<QueueId> FindQueue(const std::string& name) const;
  std::optional<PriorityClassId> FindPriorityClass(const std::string& name) const;
  std::optional<GpuTypeId> FindGpuType(const std::string& name) const;
  std::optional<NodeId> FindNode(const std::string& name) const;

  // ---- Reading ----
  std::size_t node_count() const;
  NodeView node(NodeId id) const;  // id < node_count()
  std::vector<NodeView> nodes() const;
  std::vector<QueueView> queues() const;
  // Running jobs in the order of their ids.
  std::vector<RunningJob> running() const;
  const RunningJob* FindRunning(JobId id) const;
  // Where a task runs: "h800-0[0-3]" for whole devices, "l40s-2[1]:0.5" for a share of one.
  std::string Describe(const TaskAllocation& task) const;

  // ---- Changing ----
  // Applies a plan made for `pending` (Engine::Schedule): its evictions, then its binds.
  Status Apply(const Plan& plan, std::span<const Job> pending);
  // Starts a job on an allocation made elsewhere, checked against its request and the free
  // capacity.
  Status Bind(Job job, Allocation allocation, Millis now);
  // A running job ended (finished, failed) / was evicted (the anti-thrash guards remember it).
  Status Unbind(JobId job, Millis now);
  Status Evict(JobId job, Millis now);
  Status RecordCheckpoint(JobId job, Millis at);
  Status SetCordoned(NodeId node, bool cordoned);
  Status SetHealthy(NodeId node, bool healthy);
  // Folds the GPU use since the last call into the queues' decayed usage (fair share).
  void AccrueUsage(Millis now);
  // Every derived count recomputed and compared with the kept one.
  Status CheckInvariants() const;

  // The engine's view of this state (an incomplete type to users of the library), for
  // Engine::Schedule and the project's drivers.
  ClusterState& state() { return *state_; }
  const ClusterState& state() const { return *state_; }

 private:
  explicit Cluster(std::unique_ptr<ClusterState> state);
  std::unique_ptr<ClusterState> state_;
};

}  // namespace arbiter
