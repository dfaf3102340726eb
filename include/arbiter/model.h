// The scheduling model: what a cluster, a queue, a priority class and a job are. Plain values,
// no behaviour beyond small helpers; the cluster's state (Cluster, state.h) interns names into the
// ids used here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arbiter/quantity.h"

namespace arbiter {

using NodeId = std::uint32_t;
using DomainId = std::uint32_t;
using QueueId = std::uint32_t;
using PriorityClassId = std::uint32_t;
using GpuTypeId = std::uint32_t;
using JobId = std::uint64_t;

inline constexpr std::uint32_t kNone = ~std::uint32_t{0};
inline constexpr GpuTypeId kMaxGpuTypes = 64;

// Label maps are ordered so that output and comparisons are deterministic.
using Labels = std::map<std::string, std::string>;

// A set of GPU types as a bit mask over GpuTypeId. Empty means "any type".
class GpuTypeSet {
 public:
  constexpr GpuTypeSet() = default;
  constexpr explicit GpuTypeSet(std::uint64_t bits) : bits_(bits) {}
  static constexpr GpuTypeSet Of(GpuTypeId type) { return GpuTypeSet(std::uint64_t{1} << type); }

  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool Contains(GpuTypeId type) const { return (bits_ >> type) & 1u; }
  // True when a job with this set accepts `type` (an empty set accepts every type).
  constexpr bool Accepts(GpuTypeId type) const { return empty() || Contains(type); }
  constexpr void Add(GpuTypeId type) { bits_ |= std::uint64_t{1} << type; }
  constexpr std::uint64_t bits() const { return bits_; }
  friend constexpr bool operator==(GpuTypeSet, GpuTypeSet) = default;

 private:
  std::uint64_t bits_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Nodes and topology.

enum class TaintEffect : std::uint8_t {
  kNoSchedule,        // tasks without a matching toleration never land here
  kPreferNoSchedule,  // tasks without a toleration land here only when nothing else fits
};

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
};

struct Toleration {
  enum class Op : std::uint8_t { kEqual, kExists };
  std::string key;  // empty key with kExists tolerates every taint
  Op op = Op::kEqual;
  std::string value;
  std::optional<TaintEffect> effect;  // unset: tolerates every effect

  bool Tolerates(const Taint& taint) const;
};

struct DeviceSpec {
  std::string type;  // GPU model name, e.g. "A100-80G"
  GpuMemMiB memory{0};
  std::uint32_t nvlink_group = 0;  // devices of a node with the same group share NVLink
};

struct NodeSpec {
  std::string name;
  std::vector<DeviceSpec> devices;
  MilliCpu cpu{0};
  MemMiB memory{0};
  Labels labels;
  std::vector<Taint> taints;
  // Name of the node's domain at each topology level above "node", outermost first
  // (e.g. {"spine-0", "leaf-3"} for levels spine > leaf > node > nvlink).
  std::vector<std::string> domains;
  bool cordoned = false;
};

// Topology levels, outermost first. The last two are always "node" and "nvlink" (a group of
// devices inside a node that share NVLink); levels above them are the operator's (spine, leaf,
// rack, block ...). Level indices grow towards the devices.
struct Topology {
  std::vector<std::string> levels{"node", "nvlink"};

  int node_level() const { return static_cast<int>(levels.size()) - 2; }
  int nvlink_level() const { return static_cast<int>(levels.size()) - 1; }
  // Index of a level by name, or -1.
  int LevelIndex(const std::string& name) const;
};

// ---------------------------------------------------------------------------------------------
// Queues and priority classes.

// Limits of one quota resource, in milli-GPU. The resource is either a GPU type name or "gpu"
// (all GPU types together). A resource that no queue of the tree declares is not limited.
struct QuotaSpec {
  MilliGpu nominal{0};                      // guaranteed to this queue (its subtree)
  std::optional<MilliGpu> borrowing_limit;  // most it may use above nominal; unset: unlimited
  std::optional<MilliGpu> lending_limit;    // most of its unused nominal others may use; unset: all
  std::optional<MilliGpu> max;              // hard cap on its usage; unset: none
};

inline constexpr const char* kAllGpusResource = "gpu";

struct QueueSpec {
  std::string name;
  std::string parent;  // empty: a root of the queue tree
  std::map<std::string, QuotaSpec> quota;
  std::int32_t weight = 1;    // share of the parent's capacity for fair share
  std::int32_t priority = 0;  // queue priority, an ordering factor
  bool preemptable = true;    // may work in this queue be evicted at all
  // Whether a job of this queue may evict lower-priority work of the same queue (Kueue's
  // withinClusterQueue: LowerPriority), and whether this queue, below its nominal quota, may
  // evict work other queues run on borrowed quota (reclaimWithinCohort).
  bool preempt_within_queue = true;
  bool reclaim = true;
  // Whether a job of this queue may evict preemptible work of queues of its tree with a lower
  // `priority`, whatever their quota (Slurm's partition_prio, KAI's queue priority). Off by
  // default: across queues, only reclaim.
  bool preempt_lower_priority = false;
  // No job of this queue starts ahead of an earlier blocked job of the same queue (Kueue's
  // StrictFIFO); otherwise later jobs may start when they fit (BestEffortFIFO, with backfill).
  bool strict_fifo = false;
};

// A priority class: its value orders jobs; the rest protects its jobs when they are victims.
struct PriorityClassSpec {
  std::string name;
  std::int32_t value = 0;
  bool preemptible = true;
  Millis min_runtime = 0;  // not evicted before it has run this long since it (re)started
  Millis grace_period = 30 * kMillisPerSecond;  // from the checkpoint signal to the stop
  std::string checkpoint_signal = "SIGUSR1";
  std::int32_t max_evictions = 0;  // per eviction_window; 0: no budget
  Millis eviction_window = 24 * 3600 * kMillisPerSecond;
  Millis eviction_cooldown = 0;  // not evicted again this long after its last eviction
};

// ---------------------------------------------------------------------------------------------
// Jobs.

// What one task asks for. `gpu` is either 0, a share of one device (1..999), or whole devices
// (a multiple of 1000). `gpu_memory` is per device: the least memory a whole device must have, or
// the memory a shared task takes from its device.
struct TaskRequest {
  MilliGpu gpu{0};
  GpuMemMiB gpu_memory{0};
  MilliCpu cpu{0};
  MemMiB memory{0};

  bool shared() const { return gpu.value() > 0 && gpu.value() < kMilliPerGpu; }
  std::int64_t whole_gpus() const { return gpu.value() / kMilliPerGpu; }
};

struct TaskGroup {
  std::string name;
  std::int32_t count = 1;
  TaskRequest request;
};

enum class ConstraintMode : std::uint8_t { kUnconstrained, kPreferred, kRequired };

// Keep all tasks of the job inside one domain of `level` (an index into Topology::levels).
struct TopologyConstraint {
  int level = -1;
  ConstraintMode mode = ConstraintMode::kUnconstrained;
};

// Place this job's tasks in a domain of `level` that holds (affinity) or does not hold
// (anti-affinity) a running task of a job whose labels include all of `match`.
struct AffinityTerm {
  Labels match;
  int level = -1;
  bool anti = false;
  bool required = true;  // false: preferred, dropped when the job cannot be placed with it
};

struct Job {
  JobId id = 0;
  std::string name;
  std::string user;
  QueueId queue = 0;
  PriorityClassId priority_class = 0;
  std::vector<TaskGroup> groups;  // a gang: every task of every group is placed, or none
  GpuTypeSet gpu_types;           // acceptable GPU types, in no order; empty: any
  TopologyConstraint topology;
  Labels node_selector;
  std::vector<Toleration> tolerations;
  Labels labels;
  std::vector<AffinityTerm> affinity;
  Millis submit_time = 0;
  Millis runtime_estimate = 0;     // 0: unknown
  Millis checkpoint_interval = 0;  // 0: never checkpoints
  Millis restart_overhead = 0;     // time a restart takes before work resumes (counted as lost)
  // Least attained service (scheduler.ordering.policy las, las-2d), kept by the driver (the
  // simulator, the server): the time the job has run and the time it has waited since it first
  // ran, both since its last starvation promotion and as of `service_time` (when it was last
  // requeued). A job that never ran has 0 and 0. While the job runs, the engine adds the time
  // since its start itself; at a start the driver stores engine::ServiceAtStart.
  Millis attained = 0;
  Millis starved = 0;
  Millis service_time = 0;
  // Gavel's rounds (scheduler.ordering.policy gavel), kept by the driver: the time the job has
  // run on each GPU model (by GpuTypeId; missing entries are 0), over its runs before the current
  // one (the engine adds the current run's time itself). AddTimeOnModel adds a run.
  std::vector<Millis> time_on_model;

  std::int64_t task_count() const;
  MilliGpu total_gpu() const;
};

// ---------------------------------------------------------------------------------------------
// The cluster as configured.

// How fast each kind of work runs on each GPU model, as Gavel's throughput matrix (Narayanan et
// al., OSDI 2020): a job's workload type is the value of its label `label`; a row gives, for every
// GPU model of the cluster, the work one GPU of that model does in a second relative to the others
// (any unit; only ratios within a row and a job's share of the cluster count). A job whose label
// names no row runs alike on every model. The simulator runs a job faster or slower by the model
// it gets; OrderingWeights::heterogeneity reads it to choose among a job's GPU models.
struct ThroughputRow {
  std::string workload;
  std::map<std::string, double> by_model;  // GPU model -> relative throughput (> 0)
};
struct ThroughputSpec {
  std::string label = "model";
  std::vector<ThroughputRow> rows;
};

struct ClusterSpec {
  Topology topology;
  std::vector<NodeSpec> nodes;
  std::vector<QueueSpec> queues;
  std::vector<PriorityClassSpec> priority_classes;
  // Half-life of the recent usage that drives the fair-share factor.
  Millis fair_share_half_life = 24 * 3600 * kMillisPerSecond;
  // How often the fair-share factor reads the recent usage (Slurm's PriorityCalcPeriod): the
  // order sees the usage as of the last multiple of this period, so that it changes at known
  // times and a cycle whose other inputs did not change can be skipped until then. 0: the usage
  // as of the cycle itself.
  Millis fair_share_period = 0;
  ThroughputSpec throughput;
};

}  // namespace arbiter
