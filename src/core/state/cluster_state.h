// ClusterState: the resource-management layer, as the engine and the project's drivers see it
// (users of the library see it through Cluster, include/arbiter/state.h). Nodes, devices,
// topology domains, running jobs, queue usage, and the indexes that answer "where does a task of
// this shape fit" without a scan of every node. It changes for real only through Bind / Unbind
// (applying a plan, a job ending) and driver events (cordon, health); the engine's tentative work
// happens in a Transaction (end of this file), which leaves it as it was. CheckInvariants()
// verifies that every count matches the allocations and the open transactions' log.
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/state.h"
#include "arbiter/status.h"
#include "core/state/quota_tree.h"

namespace arbiter {

// A fixed-size set of small integers (node or device indices) with ordered iteration, so that
// every search over it visits candidates in index order, whatever the history of the set.
class IndexSet {
 public:
  IndexSet() = default;
  explicit IndexSet(std::size_t size)
      : words_((size + 63) / 64, 0),
        summary_((words_.size() + 63) / 64, 0),
        top_((summary_.size() + 63) / 64, 0) {}

  void Insert(std::uint32_t i) {
    std::uint64_t& w = words_[i >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (w & bit) return;
    if (w == 0) {
      summary_[i >> 12] |= std::uint64_t{1} << ((i >> 6) & 63);
      top_[i >> 18] |= std::uint64_t{1} << ((i >> 12) & 63);
    }
    w |= bit;
    ++size_;
  }
  void Erase(std::uint32_t i) {
    std::uint64_t& w = words_[i >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (!(w & bit)) return;
    w &= ~bit;
    --size_;
    if (w != 0) return;
    std::uint64_t& s = summary_[i >> 12];
    s &= ~(std::uint64_t{1} << ((i >> 6) & 63));
    if (s == 0) top_[i >> 18] &= ~(std::uint64_t{1} << ((i >> 12) & 63));
  }
  bool Contains(std::uint32_t i) const { return (words_[i >> 6] >> (i & 63)) & 1u; }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // The smallest member in [from, end), or `end` when there is none.
  std::uint32_t Next(std::uint32_t from, std::uint32_t end) const;
  // Calls visit(i) for the members i in [from, end) in order, until it returns false. Cheaper per
  // member than Next (the bits of a word are read once). The set must not change meanwhile.
  template <typename Visit>
  void ForEach(std::uint32_t from, std::uint32_t end, Visit&& visit) const {
    if (from >= end || size_ == 0) return;
    const std::size_t last_word = (end - 1) >> 6;
    std::size_t w = from >> 6;
    std::uint64_t word = words_[w] & (~std::uint64_t{0} << (from & 63));
    while (true) {
      for (; word != 0; word &= word - 1) {
        const auto i =
            static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(word)));
        if (i >= end || !visit(i)) return;
      }
      w = NextWord(w + 1, last_word);
      if (w > last_word) return;
      word = words_[w];
    }
  }

 private:
  // The first non-zero word at or after w and not after `last`; a value above `last` if none.
  std::size_t NextWord(std::size_t w, std::size_t last) const;

  // Three levels: a bit per member; a bit per non-zero word; a bit per non-zero summary word. An
  // empty or sparse set is passed over in a few reads.
  std::vector<std::uint64_t> words_;
  std::vector<std::uint64_t> summary_;
  std::vector<std::uint64_t> top_;
  std::size_t size_ = 0;
};

// (The 8-byte fields first: 32 bytes, no padding, two devices to a cache line.)
struct DeviceState {
  MilliGpu free{kMilliPerGpu};
  GpuMemMiB memory_free{0};
  GpuMemMiB memory{0};
  GpuTypeId type = 0;
  std::uint32_t nvlink_group = 0;
};

// The fields a placement reads of every candidate node come first, in one cache line.
struct alignas(64) NodeState {
  MilliCpu cpu_free{0};
  MemMiB memory_free{0};
  std::vector<DeviceState> devices;
  std::vector<Taint> taints;
  GpuTypeSet gpu_types;
  std::uint32_t first_device = 0;   // global index of devices[0]
  std::uint32_t nvlink_groups = 0;  // groups are numbered 0 .. nvlink_groups-1
  bool cordoned = false;
  bool healthy = true;
  std::uint32_t tasks = 0;  // tasks running here
  std::string name;
  Labels labels;
  MilliCpu cpu{0};
  MemMiB memory{0};
  std::vector<DomainId> domains;  // the node's domain at each level above "node"
  // Running jobs with a task here, each once, with what the victim search reads of them.
  std::vector<struct Resident> residents;
  // The queues of the residents, as bits (queue id modulo 64): a search for victims of some
  // queues skips a node without reading its residents.
  std::uint64_t resident_queues = 0;
};

// A running job as its nodes see it: the facts the victim search reads, stored with the node so
// that scanning a node reads nothing else (the rules that read them are the engine's
// VictimPolicy). `job` points into the state's running jobs, which never move while they run (the
// state cannot be copied, only moved).
struct Resident {
  const struct RunningJob* job = nullptr;
  QueueId queue = 0;
  PriorityClassId priority_class = 0;
  GpuTypeId gpu_type = kNone;
  std::int64_t gpus = 0;  // the job's milli-GPU in all
  std::int64_t held = 0;  // milli-GPU of its devices on this node
  Millis since = 0;       // its start or last checkpoint, the later
  Millis restart_overhead = 0;
  bool evicted_before = false;  // the job has an eviction history (RunningJob::evictions)
};

// A topology domain above the node level. Nodes are stored so that every domain is a contiguous
// range of node ids.
struct Domain {
  int level = 0;
  std::string name;
  DomainId parent = kNone;
  NodeId first_node = 0;
  NodeId end_node = 0;
};

struct QueueInfo {
  QueueSpec spec;
  QueueId id = 0;
  QueueId parent = kNone;
  std::vector<QueueId> children;
  int depth = 0;
};

// The shape of a task as fragmentation-aware placement sees it: its GPU (milli), CPU (milli-cores)
// and memory (MiB), and the GPU types its job accepts.
struct TaskShapeKey {
  std::int64_t gpu = 0;
  std::int64_t cpu = 0;
  std::int64_t memory = 0;
  std::uint64_t gpu_types = 0;  // GpuTypeSet bits
  friend auto operator<=>(const TaskShapeKey&, const TaskShapeKey&) = default;
};

// The most devices a node may have (placement keeps per-NVLink-group counts in fixed arrays).
// The configuration loader refuses more.
inline constexpr std::size_t kMaxDevicesPerNode = 256;
inline constexpr Millis kNoSince = INT64_MIN;

class ClusterState {
 public:
  ClusterState(ClusterState&&) = default;
  ClusterState& operator=(ClusterState&&) = default;
  ClusterState(const ClusterState&) = delete;  // residents point into the running jobs
  ClusterState& operator=(const ClusterState&) = delete;

  // Builds the state from a configuration, checking it: unique names, known parents and GPU
  // types, no cycles in the queue tree, topology paths that match the levels.
  static Result<ClusterState> Create(const ClusterSpec& spec);

  // ---- Configuration, interned ----
  const Topology& topology() const { return topology_; }
  std::size_t gpu_type_count() const { return gpu_types_.size(); }
  const std::string& gpu_type_name(GpuTypeId type) const { return gpu_types_[type]; }
  // A quota resource's name: "gpu" (0) or the GPU model's (1 + t).
  std::string quota_resource_name(std::size_t r) const {
    return r == 0 ? std::string(kAllGpusResource) : gpu_types_[r - 1];
  }
  std::optional<GpuTypeId> FindGpuType(const std::string& name) const;
  std::size_t queue_count() const { return queues_.size(); }
  const QueueInfo& queue(QueueId id) const { return queues_[id]; }
  std::optional<QueueId> FindQueue(const std::string& name) const;
  std::size_t priority_class_count() const { return classes_.size(); }
  const PriorityClassSpec& priority_class(PriorityClassId id) const { return classes_[id]; }
  std::optional<PriorityClassId> FindPriorityClass(const std::string& name) const;
  Millis fair_share_half_life() const { return fair_share_half_life_; }

  // ---- Nodes and topology ----
  std::size_t node_count() const { return nodes_.size(); }
  const NodeState& node(NodeId id) const { return nodes_[id]; }
  std::optional<NodeId> FindNode(const std::string& name) const;
  // Where a task runs: "h800-0[0-3]" for whole devices, "l40s-2[1]:0.5" for a share of one.
  std::string Describe(const TaskAllocation& task) const;
  std::size_t device_count() const { return device_count_; }
  std::uint32_t max_devices_per_node() const { return max_devices_; }
  std::size_t domain_count() const { return domains_.size(); }
  const Domain& domain(DomainId id) const { return domains_[id]; }
  // Domains of one level (a level above "node"), in node order.
  const std::vector<DomainId>& domains_at(int level) const { return domains_by_level_[level]; }

  // ---- Free-capacity indexes (all over healthy and unhealthy nodes alike) ----
  // Nodes with exactly `count` fully free devices of `type` (count >= 1).
  const IndexSet& NodesWithFreeDevices(GpuTypeId type, std::uint32_t count) const {
    return whole_index_[type * (max_devices_ + 1) + count];
  }
  // Devices (global index) of `type` partly used, whose free share lies in bucket `bucket`.
  static constexpr int kShareBuckets = 16;
  static int ShareBucket(std::int64_t free_milli) {
    return static_cast<int>((free_milli - 1) * kShareBuckets / kMilliPerGpu);
  }
  const IndexSet& DevicesWithFreeShare(GpuTypeId type, int bucket) const {
    return share_index_[type * kShareBuckets + bucket];
  }
  // Node owning a global device index.
  NodeId DeviceNode(std::uint32_t global_device) const { return device_node_[global_device]; }
  // The free milli-GPU of a device (global index) and whether a node has `cpu` and `memory` free:
  // the same as the node's own fields, kept in arrays of their own so that a search can pass over
  // many devices and nodes without reading each node.
  std::int64_t DeviceFreeMilli(std::uint32_t global_device) const {
    return device_free_[global_device];
  }
  bool NodeHasRoom(NodeId n, MilliCpu cpu, MemMiB memory) const {
    return node_room_[n].cpu >= cpu.value() && node_room_[n].memory >= memory.value();
  }
  // A value that changes whenever the node's free capacity does, and names that capacity: the
  // node has the same capacity whenever it has the same stamp (a discarded transaction gives the
  // stamps back too, Transaction). With id(), which no other state has, a key
  // under which what was computed from that capacity may be remembered.
  std::uint64_t NodeStamp(NodeId n) const { return node_stamp_[n]; }
  std::uint64_t id() const { return id_; }
  // A digest of every node's capacity (CPU, memory, devices with their type, memory and NVLink
  // group, in node order), which never changes: states of the same nodes have the same digest,
  // others (but for a 2^-64 chance) not. What is computed from the capacity alone may be kept
  // under it across states.
  std::uint64_t capacity_digest() const { return capacity_digest_; }
  // Fully free devices and free milli-GPU of `type` within a domain.
  std::int64_t DomainFreeDevices(DomainId d, GpuTypeId type) const {
    return domain_free_devices_[d * gpu_types_.size() + type];
  }
  std::int64_t DomainFreeMilli(DomainId d, GpuTypeId type) const {
    return domain_free_milli_[d * gpu_types_.size() + type];
  }
  // Nodes with at least one device of `type`, in id order.
  const std::vector<NodeId>& NodesOfType(GpuTypeId type) const { return nodes_of_type_[type]; }
  // The least and the most memory of a device of `type` in the cluster (devices never change;
  // a type without devices: the least is the largest value, the most 0).
  GpuMemMiB TypeMinMemory(GpuTypeId type) const { return type_min_memory_[type]; }
  GpuMemMiB TypeMaxMemory(GpuTypeId type) const { return type_max_memory_[type]; }
  // The most devices of `type` one NVLink group of a node has (devices never change).
  std::uint32_t TypeLargestNvlinkGroup(GpuTypeId type) const { return type_max_group_[type]; }
  // Whether some node has devices of more than one GPU type.
  bool has_mixed_type_nodes() const { return mixed_type_nodes_; }
  // Nodes that are unhealthy, cordoned or tainted: the only ones a job without a node selector
  // can fail for a reason other than its GPU type and the free capacity.
  const IndexSet& UnusualNodes() const { return unusual_; }
  // Nodes where no GPU is free: those without GPUs, and those whose every device is taken. A task
  // without GPUs costs the GPUs nothing there.
  const IndexSet& NodesWithoutFreeGpu() const { return no_free_gpu_; }
  // The milli-GPU free in the whole cluster, every type, on every node (healthy or not), and the
  // most whole GPUs' worth free on one node (its free milli-GPU / 1000, rounded down).
  std::int64_t FreeGpuMilli() const { return free_gpu_milli_; }
  std::int32_t MaxNodeFreeGpus() const {
    auto k = static_cast<std::int32_t>(nodes_by_free_gpus_.size()) - 1;
    while (k > 0 && nodes_by_free_gpus_[static_cast<std::size_t>(k)] == 0) --k;
    return k;
  }
  // Nodes with devices of `type` that run something, ordered by the latest time one of their
  // residents started or checkpointed, latest first: an eviction on the first ones loses least per
  // GPU. The victim search visits nodes in this order and stops when no further node can be
  // cheaper.
  using NodesBySinceSet = std::set<std::pair<Millis, NodeId>, std::greater<>>;
  const NodesBySinceSet& NodesBySince(GpuTypeId type) const { return by_since_[type]; }
  // Devices of `type` on a node, free or not.
  std::uint32_t NodeDevices(NodeId n, GpuTypeId type) const {
    return node_devices_[n * gpu_types_.size() + type];
  }
  // Fully free devices of `type` on a node.
  std::uint32_t NodeFreeDevices(NodeId n, GpuTypeId type) const {
    return node_free_devices_[n * gpu_types_.size() + type];
  }

  // ---- Queues ----
  // Quota resources: 0 is "all GPUs", 1 + t is GPU type t.
  std::size_t quota_resource_count() const { return 1 + gpu_types_.size(); }
  // The queues' quota: limits, usage and the arithmetic over them (quota_tree.h).
  const QuotaTree& quota_tree() const { return quota_; }
  const QuotaLimits& quota(QueueId q, std::size_t resource) const {
    return quota_.limits(q, resource);
  }
  // Milli-GPU in use by the queue's subtree.
  std::int64_t usage(QueueId q, std::size_t resource) const { return quota_.usage(q, resource); }
  // GPU-milli-milliseconds of recent use, decayed with the fair-share half-life, as of the last
  // call to AccrueUsage.
  double recent_usage(QueueId q) const { return recent_usage_[q]; }
  // The recent usage the fair-share factor reads: as of the last multiple of the fair-share
  // period that AccrueUsage passed (ClusterSpec::fair_share_period), or recent_usage without one.
  double fair_share_usage(QueueId q) const {
    return fair_share_period_ > 0 ? period_usage_[q] : recent_usage_[q];
  }
  Millis fair_share_period() const { return fair_share_period_; }
  // The first time after `now` at which fair_share_usage changes by the passage of time alone
  // (the next multiple of the period); -1 without a period (it changes with every accrual).
  Millis NextFairShareRefresh(Millis now) const;

  // ---- Running jobs ----
  const std::unordered_map<JobId, RunningJob>& running() const { return running_; }
  const RunningJob* FindRunning(JobId id) const;
  // How many running tasks have each shape.
  const std::map<TaskShapeKey, std::int64_t>& running_task_shapes() const {
    return running_shapes_;
  }
  // A count rounded down to its three leading bits (exact up to 15, then steps of at most an
  // eighth): how the observed distribution of shapes is read, so that it changes only when some
  // shape's count moves by about that much.
  static std::int64_t RoundedShapeCount(std::int64_t count);
  // A digest of running_task_shapes() with each count rounded (RoundedShapeCount), kept as tasks
  // start and end: states whose rounded distributions are equal have the same digest, and
  // others, but for a 2^-64 chance, not.
  std::uint64_t running_task_shapes_digest() const { return running_shapes_digest_; }

  // ---- Mutation ----
  // Starts a job on the given allocation: checks that the allocation matches the job's request
  // and fits the free capacity, then takes it. On error nothing changes. The running job keeps
  // the job and allocation given (a caller done with them moves them in).
  Status Bind(Job job, Allocation allocation, Millis now);
  // Applies a plan made for `pending`: its evictions, then its binds (each job starting at its
  // start_after); stops at the first error.
  Status Apply(const Plan& plan, std::span<const Job> pending);
  // The same, moving the jobs bound out of `pending` and their allocations out of the plan, for a
  // driver that drops both next (the plan's other fields stay as they were; on an error, the job
  // that failed has been moved from too).
  Status Apply(Plan&& plan, std::span<Job> pending);
  // Ends a running job (finished, failed), freeing its allocation.
  Status Unbind(JobId job, Millis now);
  // Ends a running job because it was evicted, and records the eviction for the anti-thrash
  // guards (eviction budget, cooldown), which outlive the job's run: a requeued job keeps its id.
  Status Evict(JobId job, Millis now);
  // Times this job was evicted, oldest first.
  std::span<const Millis> EvictionTimes(JobId job) const;
  // Sets a job's eviction history (a driver rebuilding the state from its records); it applies
  // from the job's next bind on.
  void RestoreEvictions(JobId job, std::vector<Millis> times);
  Status SetCordoned(NodeId node, bool cordoned);
  Status SetHealthy(NodeId node, bool healthy);
  Status RecordCheckpoint(JobId job, Millis at);
  // Folds the usage since the last call into the decayed recent usage of every queue (with a
  // fair-share period, first up to the last multiple of the period it passes, which the
  // fair-share factor reads from then on).
  void AccrueUsage(Millis now);
  // When AccrueUsage last ran (-1: never).
  Millis last_accrual() const { return accrued_ ? last_accrual_ : -1; }
  // Sets a queue's recent usage as a driver kept it, as of `as_of` (a restart, a state rebuilt
  // after a quota change); the next AccrueUsage decays it from then. Queues restored together
  // share one `as_of`.
  void RestoreRecentUsage(QueueId q, double usage, Millis as_of);

  // The service (GPU-milliseconds run, over all its runs) of the last `window` finished jobs,
  // from which the Gittins order (OrderPolicy::kGittins) learns the distribution of job sizes.
  // Drivers record each job that completes.
  void RecordFinishedService(Millis gpu_ms, std::size_t window);
  std::size_t finished_service_count() const { return service_sorted_.size(); }
  // The recorded samples, oldest first (a driver carrying them over to a rebuilt state).
  std::vector<Millis> finished_service() const;
  // The Gittins index of a job that has received `service` GPU-ms, for a quantum of `quantum`
  // GPU-ms, on the recorded distribution S: P(S - a <= q | S > a) / E[min(S - a, q) | S > a] per
  // GPU-hour. 0 when no recorded job ran longer than `service` (or nothing is recorded).
  double GittinsIndex(Millis service, Millis quantum) const;

  // ---- Throughput by GPU model (ClusterSpec::throughput, Gavel's matrix) ----
  bool has_throughput() const { return !throughput_rows_.empty(); }
  // Whether the job's label names a row of the matrix.
  bool HasThroughputRow(const Job& job) const { return ThroughputRowOf(job) != nullptr; }
  // The devices of GPU model `type` in the cluster.
  std::int64_t TypeDevices(GpuTypeId type) const { return type_devices_[type]; }
  // The relative throughput of `job` on GPU model `type`: its workload's row; 1 for a job whose
  // label names no row, and for kNone.
  double Throughput(const Job& job, GpuTypeId type) const;
  // That over the job's throughput with an equal share of the cluster (each model weighted by its
  // GPUs; Gavel's normalisation, X / X_equal): 1 for a job whose label names no row.
  double NormalizedThroughput(const Job& job, GpuTypeId type) const;

  // ---- Tentative work ----
  // The engine decides on the state itself rather than on a copy, inside transactions
  // (Transaction, below): what it places takes capacity, what it would evict gives it back,
  // reservations hold devices, all logged and undone when the transaction is discarded. While one
  // is open the state must not be changed otherwise (Bind, Unbind, Evict, cordon, health...).
  bool in_transaction() const { return !marks_.empty(); }
  // Checks every invariant (CheckInvariants) after each discard that undid something, and aborts
  // the process on a broken one: on by default in builds with assertions, and in the tests.
  void set_check_discards(bool on) { check_discards_ = on; }
  // The default of set_check_discards for states created from now on (the test programs turn it
  // on for every state they make).
  static void SetCheckDiscardsByDefault(bool on);

  // Recomputes every derived count from the running jobs and the open transactions' log, and
  // compares: no device or node over allocated, free counts, indexes, domain sums and queue usage
  // all match. Valid at any time, inside a transaction too.
  Status CheckInvariants() const;

 private:
  friend class Transaction;
  ClusterState() = default;
  // Capacity and usage changes, unlogged: applying a plan, a job ending, undoing a transaction.
  void TakeTask(const TaskAllocation& task);
  void GiveTask(const TaskAllocation& task);
  void AdjustTask(NodeId n, MilliCpu cpu, MemMiB memory, std::span<const DeviceShare> devices,
                  bool take);
  void Charge(QueueId queue, GpuTypeId type, std::int64_t milli);
  // A transaction's change: its record in the log, then the change.
  enum class Op : std::uint8_t {
    kTake,
    kGive,
    kHold,
    kUnhold,
    kCharge,
    kEvict,
    kReadmit,
    kRelease,
  };
  struct Undo {
    Op op = Op::kTake;
    // kTake, kGive, kHold, kUnhold: the task; its devices are undo_devices_[first, first + count).
    NodeId node = 0;
    std::uint32_t first = 0;
    std::uint32_t count = 0;
    MilliCpu cpu{0};
    MemMiB memory{0};
    // kCharge: the queue tree's usage of `type` by `milli`.
    QueueId queue = 0;
    GpuTypeId type = kNone;
    std::int64_t milli = 0;
    // kEvict, kReadmit: the running job whose tasks and usage leave or come back; kRelease: the
    // running job whose tasks leave (its usage stays).
    const RunningJob* job = nullptr;
  };
  void Log(Op op, const TaskAllocation& task);
  void Redo(const Undo& u, bool forward);  // applies a logged change (forward) or its inverse
  std::size_t Open();
  void Close(std::size_t depth, bool commit);
  void UpdateUnusual(NodeId n);
  void UpdateResidents(NodeId n);
  void CountShapes(const Job& job, int sign);  // running_shapes_ += sign x the job's tasks
  void Restamp(NodeId n);                      // a new stamp for node n, whose capacity changed
  void AdjustFree(NodeId n, std::uint32_t d, MilliGpu delta, GpuMemMiB memory_delta);
  Status CheckFits(const Job& job, const Allocation& allocation) const;

  Topology topology_;
  std::vector<std::string> gpu_types_;
  std::vector<QueueInfo> queues_;
  std::vector<PriorityClassSpec> classes_;
  Millis fair_share_half_life_ = 0;
  Millis fair_share_period_ = 0;
  std::unordered_map<std::string, NodeId> node_by_name_;
  // ClusterSpec::throughput: the label, its row of each workload, the rows (row x GPU model), and
  // each row's throughput with an equal share of the cluster.
  std::string throughput_label_;
  std::unordered_map<std::string, std::uint32_t> throughput_rows_;
  std::vector<double> throughput_;
  std::vector<double> throughput_equal_;
  std::vector<std::int64_t> type_devices_;              // by GPU model
  const double* ThroughputRowOf(const Job& job) const;  // nullptr: none
  // RecordFinishedService: the samples in the order recorded (the oldest dropped first), the same
  // sorted, and the prefix sums of the sorted ones.
  std::vector<Millis> service_recorded_;
  std::size_t service_oldest_ = 0;
  std::vector<Millis> service_sorted_;
  std::vector<double> service_prefix_;

  std::vector<NodeState> nodes_;
  std::vector<NodeId> device_node_;
  std::size_t device_count_ = 0;
  std::uint32_t max_devices_ = 0;
  std::vector<Domain> domains_;
  std::vector<std::vector<DomainId>> domains_by_level_;

  std::vector<IndexSet> whole_index_;
  std::vector<IndexSet> share_index_;
  std::vector<std::int64_t> domain_free_devices_;
  std::vector<std::int64_t> domain_free_milli_;
  std::vector<std::uint32_t> node_free_devices_;
  std::vector<std::uint32_t> node_devices_;
  std::vector<std::vector<NodeId>> nodes_of_type_;
  std::vector<GpuMemMiB> type_min_memory_;
  std::vector<GpuMemMiB> type_max_memory_;
  std::vector<std::uint32_t> type_max_group_;
  bool mixed_type_nodes_ = false;
  std::vector<Millis> node_since_;  // latest `since` of the node's residents; kNoSince if none
  std::vector<NodesBySinceSet> by_since_;
  // Each node's entry in by_since_ of each of its GPU types (node x type), while it has one: the
  // node moves without a search for it (set iterators stay valid as the state moves).
  std::vector<NodesBySinceSet::iterator> by_since_entry_;
  IndexSet unusual_;
  IndexSet no_free_gpu_;
  std::vector<std::int64_t> node_free_milli_;  // per node, every type
  std::int64_t free_gpu_milli_ = 0;            // the sum of node_free_milli_
  // Nodes by their free milli-GPU / 1000 (0 to max_devices_).
  std::vector<std::int32_t> nodes_by_free_gpus_;
  std::vector<std::int16_t> device_free_;  // per global device: DeviceState::free
  struct NodeRoom {
    std::int64_t cpu = 0;     // NodeState::cpu_free
    std::int64_t memory = 0;  // NodeState::memory_free
  };
  std::vector<NodeRoom> node_room_;
  std::vector<std::uint64_t> node_stamp_;  // per node: the stamp of its free capacity
  std::uint64_t last_stamp_ = 0;           // the last stamp given (each is given once)
  bool restamp_ = true;                    // false while a transaction is undone
  // The open transactions' log: their changes in order, the devices of their tasks, and each
  // node whose capacity changed with its stamp before, in order.
  std::vector<Undo> undo_;
  std::vector<DeviceShare> undo_devices_;
  std::vector<std::pair<NodeId, std::uint64_t>> stamps_before_;
  struct Mark {
    std::size_t undo = 0;
    std::size_t devices = 0;
    std::size_t stamps = 0;
  };
  std::vector<Mark> marks_;  // where each open transaction's changes begin, outermost first
  bool check_discards_ = DefaultCheckDiscards();
  static bool DefaultCheckDiscards();
  std::uint64_t id_ = NextStateId();
  std::uint64_t capacity_digest_ = 0;
  static std::uint64_t NextStateId();

  QuotaTree quota_;
  std::vector<double> recent_usage_;
  std::vector<double> period_usage_;  // recent_usage_ at the last period boundary passed
  Millis last_accrual_ = 0;
  bool accrued_ = false;

  std::unordered_map<JobId, RunningJob> running_;
  std::map<TaskShapeKey, std::int64_t> running_shapes_;
  std::uint64_t running_shapes_digest_ = 0;  // a sum of ShapeDigest over running_shapes_
  std::unordered_map<JobId, std::vector<Millis>> evictions_;
};

// Tentative work on a ClusterState, undone unless committed (as Volcano's Statement). A cycle
// opens one, and each trial inside it (a placement on one GPU type, a victim search and each scope
// it tries, a reservation) opens one nested in it. Commit hands a nested transaction's changes to
// the enclosing one; Discard, or the destructor of a transaction neither committed nor discarded,
// undoes them newest first, node stamps included, so that the state is bit for bit what it was
// when the transaction opened. The outermost transaction cannot commit: tentative work never
// becomes real (a driver applies the plan, ClusterState::Apply). Only the innermost open
// transaction may change the state, commit or discard.
class Transaction {
 public:
  // The outermost transaction on `state` (none may be open).
  explicit Transaction(ClusterState& state);
  // A transaction nested in `enclosing`, which must be the innermost open one.
  explicit Transaction(Transaction& enclosing);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const ClusterState& state() const { return state_; }

  // Takes a task's capacity (its node's CPU and memory, its devices' shares and memory). The
  // caller has checked the fit.
  void Take(const TaskAllocation& task);
  // Gives back capacity taken by a task (running, or taken earlier in this transaction or an
  // enclosing one).
  void Give(const TaskAllocation& task);
  // Holds capacity reserved for a blocked job, as Take; Unhold gives it back.
  void Hold(const TaskAllocation& hold);
  void Unhold(const TaskAllocation& hold);
  // Charges the queue tree of `queue` for `milli` of GPU type `type` (negative: discharges).
  void Charge(QueueId queue, GpuTypeId type, std::int64_t milli);
  // Gives back every task of a running job and discharges its queue, as its eviction would;
  // Readmit takes them again.
  void Evict(const RunningJob& job);
  void Readmit(const RunningJob& job);
  // Gives back every task of a running job, as its end would, but leaves its queue's usage (what
  // capacity a future without it has: backfill's reservations).
  void Release(const RunningJob& job);

  // Keeps the changes in the enclosing transaction (not for the outermost one).
  void Commit();
  // Undoes every change since the transaction opened.
  void Discard();

 private:
  // Logs a change and makes it.
  void Change(ClusterState::Op op, const TaskAllocation& task);  // of a task's capacity
  void Record(const ClusterState::Undo& u);                      // any other

  ClusterState& state_;
  std::size_t depth_;  // 1 for the outermost
  bool open_ = true;
};

}  // namespace arbiter
