// The stages of one scheduling cycle (Stage, plan.h), one file each, run by the cycle (cycle.cc):
//   order (order.cc) the pending jobs; then for each job in order
//   validate (validate.cc), admit by quota (quota.cc), place (place.cc, scoring nodes with
//   score.cc and passing each node through filter.cc), explain (explain.cc) when it was not
//   placed, and block and reserve (backfill.cc) for the first blocked jobs; last,
//   preempt (preempt.cc) for the jobs still blocked.
// The stages read the cluster state; those that change it (place, backfill's holds and
// reservations, preempt) do so in a Transaction of the cycle's, which the cycle discards before it
// returns: the state leaves the cycle as it came in.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/plan.h"
#include "core/engine/ordering.h"
#include "core/engine/victim_policy.h"
#include "core/state/cluster_state.h"

namespace arbiter::engine {

// ---- the cycle ----

class FragModel;

// The options a cycle runs under: the engine's, and the fragmentation model the engine keeps for
// the state at hand (the policies that score by expected fragmentation; else null).
struct CycleOptions : EngineOptions {
  std::shared_ptr<const FragModel> model;
};

// Runs the stages of one cycle over `state` and returns their plan (Engine::Schedule).
Plan RunCycle(ClusterState& state, std::span<const Job> pending, Millis now,
              const CycleOptions& options, std::span<const std::uint32_t> order_hint = {});

// ---- validate ----

// Why the job is malformed or refers to what does not exist (its groups, requests, queue, class,
// topology and affinity levels), or nullopt when it is well formed.
std::optional<std::string> ValidateJob(const ClusterState& state, const Job& job);

// ---- order ----

// The multifactor key of one job; larger is scheduled first.
double OrderingKey(const ClusterState& state, const Job& job, Millis now, const OrderingWeights& w);
// Indices into `pending`, in scheduling order: key descending, then submit time, then id (after
// the service queues of the least-attained-service orders, or the rho of the finish-time fairness
// order, which counts a job without an estimate as running `default_runtime`). `hint`: indices
// into `pending` in an order a driver kept (Plan::order), taken first, the others after them in
// the list's order: the order is then checked and the others merged in. Any hint gives the same
// order; one that names an index twice or out of range is ignored. `gavel`: under kGavel, the
// cycle's allocation (made from the same state and jobs), so that it is solved once; without it
// the order solves its own.
class GavelScope;
std::vector<std::uint32_t> OrderPending(const ClusterState& state, std::span<const Job> pending,
                                        Millis now, const OrderingWeights& w,
                                        Millis default_runtime = BackfillOptions{}.default_runtime,
                                        std::span<const std::uint32_t> hint = {},
                                        const GavelScope* gavel = nullptr);

// ---- heterogeneity ----

// OrderingWeights::heterogeneity on the throughput matrix: for each pending job (by index), the GPU
// model it tries first, shared out by comparative advantage as Gavel's maximum total throughput
// would. Every (job, accepted model) pair is valued by the job's normalised throughput on the
// model (ClusterState::NormalizedThroughput); the most valued pairs take the models' GPUs first,
// each job once, the earlier in `order` first among equal values. A job that gains most from a
// model over an equal share gets it, the others a model they lose least on. kNone: a job without
// a row of the matrix (or a cluster of one model); kNoModelLeft: one that every model's GPUs were
// given out before it.
inline constexpr GpuTypeId kNoModelLeft = kNone - 1;
std::vector<GpuTypeId> PreferredModels(const ClusterState& state, std::span<const Job> pending,
                                       std::span<const std::uint32_t> order);

// ---- quota ----

// Milli-GPU as GPUs, as the reasons write them: "2", "1.5", "0.25".
std::string FormatGpus(std::int64_t milli);

struct QuotaCheck {
  bool ok = true;
  bool borrows = false;  // the queue would use more than its nominal quota
  Cause cause = Cause::kQuotaMax;
  std::string detail;  // which queue and resource said no
};
// Can `queue` take `milli` more of GPU type `type`? Walks from the queue towards the root: a queue
// within its nominal quota is never refused (whatever others borrow); above it, it borrows from
// its parent within its borrowing limit and max, from quota its siblings lend.
QuotaCheck CheckQuota(const ClusterState& state, QueueId queue, GpuTypeId type, std::int64_t milli);
// Whether a request of `milli` can never pass the static limits of the queue and those above it
// (max; nominal plus borrowing limit; a tree's nominal quota).
bool QuotaNeverFits(const ClusterState& state, QueueId queue, GpuTypeId type, std::int64_t milli);

// ---- filter ----

// A job's view of the nodes during one cycle: its GPU type, whether preferences are held as
// requirements (the first, strict, attempt), and its affinity terms resolved to node sets.
struct JobFilter {
  const Job* job = nullptr;
  GpuTypeId type = kNone;  // kNone for a job without GPUs
  bool strict = true;      // hold preferred terms and PreferNoSchedule taints as required
  struct Term {
    int level = 0;
    bool anti = false;
    std::unordered_set<std::uint32_t> keys;  // node ids (node level) or domain ids holding a match
  };
  std::vector<Term> terms;
};

// A job placed earlier in the same cycle (not yet in the state's running jobs).
struct PlacedJob {
  const Job* job = nullptr;
  const Allocation* allocation = nullptr;
};

// Resolves the job's affinity terms against running jobs and the jobs placed so far this cycle.
JobFilter MakeJobFilter(const ClusterState& state, const Job& job, GpuTypeId type, bool strict,
                        std::span<const PlacedJob> placed_this_cycle);

// The first cause for which `node` cannot host one task of `request` now, or nullopt if it can.
std::optional<Cause> FilterNode(const ClusterState& state, NodeId node, const TaskRequest& request,
                                const JobFilter& filter);
// The same against the node's total capacity, ignoring what is in use, cordons and affinity:
// nullopt when the node could host the task on an empty cluster.
std::optional<Cause> FilterNodeEver(const ClusterState& state, NodeId node,
                                    const TaskRequest& request, const Job& job, GpuTypeId type);

// ---- place ----

// How a placement under a scoring policy (PlacementOptions::policy other than kArbiter) ranks:
// smaller score first, then the seeded tie-break. Comparable across GPU types.
struct PlacementKey {
  double score = 0;
  std::uint64_t tie = 0;
  friend bool operator<(const PlacementKey& a, const PlacementKey& b) {
    return a.score < b.score || (a.score == b.score && a.tie < b.tie);
  }
};

// Finds devices for every task of the job on GPU type filter.type, packing the gang into the
// smallest topology domain that holds it (NVLink group, node, then each operator level), never
// beyond a required level. On success the tasks are taken in `tx` and their allocation returned;
// on failure `tx` is unchanged. Under a scoring policy, `key` (when given) receives the rank of
// the node chosen for the job's first task.
std::optional<Allocation> PlaceJob(Transaction& tx, const JobFilter& filter,
                                   const CycleOptions& options, PlacementKey* key = nullptr);
// The same, using only the nodes [begin, end) (a node, or a domain's range).
std::optional<Allocation> PlaceJobIn(Transaction& tx, const JobFilter& filter, NodeId begin,
                                     NodeId end, const CycleOptions& options,
                                     PlacementKey* key = nullptr);

// ---- score (how the placement policies rank nodes, score.cc) ----

// The tie-break of a scoring policy: a seeded random rank of the node, the same for every job (as
// the published simulator prefers, among equal scores, the first node of a seeded random order).
std::uint64_t TieBreak(std::uint64_t seed, NodeId node);
// A uniform 64-bit draw for `job` and `what` (a node or a device), from the seed.
std::uint64_t RandomDraw(std::uint64_t seed, JobId job, std::uint64_t what);
// The expected fragmentation of a node under a distribution of task shapes (GPU request, CPU,
// accepted GPU types): the weighted sum, over the shapes, of the node's free milli-GPU that tasks
// of the shape could not use there (docs/design/placement.md).
// - One task (FGD's measure, Weng et al. 2023): all of the free GPU when a task of the shape
//   cannot land on the node (CPU, too few devices with room; a shape without GPUs uses no GPU),
//   else the free share of the devices too small for it.
// - Tasks arriving one after another (kArbiter and kFrag add this): the free GPU left once as
//   many tasks of the shape as the devices and the CPU allow have landed. It sees what one task
//   does not: four free GPUs next to twelve free cores host one 11-core task, not four.
// A shape that does not accept the node's GPU type counts all of the node's free GPU under FGD,
// and has no say otherwise: counting a rare type's GPUs as lost for every shape bound elsewhere
// would fill that type first and starve the tasks bound to it. Memory is a filter, not part of
// the measure. Only the most frequent shapes that cover 95% of the tasks count (FGD's "typical
// pods"). With `fgd`, the measure is FGD's own: one task only.
// Given the cluster (not with `fgd`), each shape's say is also weighed by how scarce its hosts
// are: (the GPUs of the types it accepts / the GPUs its tasks could take on the empty cluster,
// devices and CPU permitting)^2, the weights then scaled back to their sum.
// A model keeps scratch space and remembered measures: one engine cycle uses it at a time.
class FragModel {
 public:
  // Shapes empty: every task one GPU. `max_shapes` (0: no limit): shapes of equal GPU request
  // beyond about that many are merged (CPU averaged), which bounds the cost of Expected.
  // `cluster`: the nodes whose capacity weighs the shapes by scarcity (nullptr: not weighed).
  FragModel(std::span<const TaskShape> shapes, bool fgd, std::size_t max_shapes = 0,
            const ClusterState* cluster = nullptr);
  // `frees`: the free milli-GPU of each device of `type` on the node; `cpu`: free there.
  double Expected(std::span<const std::int64_t> frees, std::int64_t cpu, GpuTypeId type) const;
  // The same for node n of `state` as it is now (`frees` and `cpu` read from it), remembered
  // until the node's capacity changes: the nodes a placement looks at are mostly the ones the
  // placements before it looked at.
  double ExpectedNow(const ClusterState& state, NodeId n, std::span<const std::int64_t> frees,
                     std::int64_t cpu, GpuTypeId type) const;

  // NodeScorer's last score of a node, for one request, kept until the node's capacity changes:
  // a placement scores mostly the nodes the placements before it scored, and a workload's tasks
  // come in few shapes. What the score depends on besides the node:
  struct ScoreRequest {
    std::int64_t gpu = 0;
    std::int64_t cpu = 0;
    std::int64_t gpu_memory = 0;
    GpuTypeId type = kNone;
    PlacementPolicy policy = PlacementPolicy::kArbiter;
    bool allow_span = false;
    double type_cost = 0;  // TypeCost for the task's GPUs (it depends on the job's types)
    bool operator==(const ScoreRequest&) const = default;
  };
  struct Scored {
    bool fits = false;
    double score = 0;
    std::uint64_t devices = 0;  // bit d: the task gets device d (nodes of at most 64 devices)
  };
  // The score kept for node n of `state` as it is now and `request`, or nullptr.
  const Scored* Recall(const ClusterState& state, NodeId n, const ScoreRequest& request) const;
  void Keep(const ClusterState& state, NodeId n, const ScoreRequest& request,
            const Scored& scored) const;

  // What a GPU of `type` costs a task that accepts the types `accepted` (empty: any), in GPUs of
  // expected fragmentation per GPU it takes, in [0, 1]. Were the shapes' whole GPU demand the
  // cluster's GPUs, the shapes bound to fewer types than the task (a strict subset of its types)
  // would take a share of this type's GPUs (each spreading its demand over its types by their
  // GPUs) and a share of all the task's types' GPUs: the cost is how much the first exceeds the
  // second. Every node of the type costs the same, so it only steers a task between the types it
  // accepts: away from those that tasks with fewer choices need more than the rest. 0 for a model
  // built without the cluster, and where the bound tasks' demand is spread evenly.
  double TypeCost(GpuTypeSet accepted, GpuTypeId type) const;

 private:
  // A shape while the model is built.
  struct Shape {
    std::uint32_t threshold = 0;  // index into thresholds_ of the free share one device needs
    bool whole = false;           // whole devices (else a share of one)
    double count = 1;             // devices it needs
    std::int64_t cpu = 0;
    double per_device = 0;  // thresholds_[threshold]
    GpuTypeSet types;
    double weight = 0;  // normalised
  };
  // A shape as the measure reads it: 32 bytes, the rest in small tables (a node's score reads
  // every term, and after other work they are not in the cache: fewer bytes, fewer misses).
  struct Term {
    double weight = 0;
    double cpu_inverse = 0;  // 1 / cpu (0 when 0)
    std::int64_t cpu = 0;
    std::uint32_t threshold = 0;  // index into thresholds_
    std::uint32_t count = 0;      // index into counts_
  };
  Term MakeTerm(const Shape& shape);
  // Expected, from the node's fully free devices, its partly used ones' free shares and their sum.
  double Measure(std::int64_t whole, std::span<const std::int64_t> partial, std::int64_t total,
                 std::int64_t cpu, GpuTypeId type) const;
  double AddShapes(std::span<const Term> terms, std::span<const GpuTypeSet> types, GpuTypeId type,
                   double total, std::int64_t cpu) const;
  static void WeighByScarcity(std::vector<Shape>& shapes, const ClusterState& cluster);
  void BindDemand(std::span<const Shape> shapes, const ClusterState& cluster);
  double GpusOf(std::uint64_t types) const;  // of the cluster, types as GpuTypeSet bits

  bool fgd_ = false;
  std::vector<std::int64_t> thresholds_;   // distinct per-device shares, ascending
  std::vector<double> inverse_;            // 1 / thresholds_
  std::vector<double> per_device_;         // thresholds_ as doubles
  std::uint32_t whole_threshold_ = kNone;  // index of a whole device's threshold (1000), if any
  std::vector<std::int64_t> whole_slots_;  // tasks of each threshold's share one free device holds
  std::vector<double> counts_;             // distinct device counts of the shapes
  std::vector<double> inverse_counts_;     // 1 / counts_
  std::vector<Term> any_type_;             // shapes with GPUs that accept every type
  std::vector<Term> typed_;                // shapes with GPUs that name types
  std::vector<GpuTypeSet> typed_types_;    // the types each of typed_ accepts
  // Per GPU type, the shapes of typed_ that accept it, in the same order (kFrag and kArbiter,
  // where the others add nothing: they are not read).
  std::vector<std::vector<Term>> typed_accepting_;
  double always_ = 0;  // weight of the shapes without GPUs
  // TypeCost's terms: each shape bound to some of the cluster's types.
  struct Bound {
    std::uint64_t types = 0;  // GpuTypeSet bits, the cluster's types only
    double share = 0;         // of the shapes' GPU demand
    double gpus = 0;          // the cluster's GPUs of its types
  };
  std::vector<Bound> bound_;
  std::vector<double> type_gpus_;    // the cluster's GPUs, per type (the first 64)
  std::uint64_t cluster_types_ = 0;  // the types the cluster has GPUs of
  // Scratch, per threshold.
  mutable std::vector<double> fit_, small_, slots_;
  // ExpectedNow's memory, per node id.
  struct Remembered {
    std::uint64_t state = 0;  // ClusterState::id() (0: none)
    std::uint64_t stamp = 0;  // ClusterState::NodeStamp()
    GpuTypeId type = kNone;
    double value = 0;
  };
  mutable std::vector<Remembered> remembered_;
  // Expected's memory, by what it reads: the GPU type, the free CPU, the fully free devices and
  // the free shares of the partly used ones (sorted; nodes with at most 12 of them). Nodes alike
  // (a cluster has few kinds, and a node's state before a task is another's after one) share it.
  // Direct-mapped: a slot holds the last capacity that hashed to it.
  struct Capacity {
    std::int64_t cpu = 0;
    GpuTypeId type = kNone;
    std::uint16_t whole = 0;
    std::uint16_t partials = 0;
    std::array<std::int16_t, 12> partial{};
    bool operator==(const Capacity&) const = default;
  };
  struct Measured {
    Capacity capacity;  // (empty: no free GPU, which no measured capacity has)
    double value = 0;
  };
  static constexpr std::size_t kMeasuredSlots = 1024;
  mutable std::vector<Measured> measured_;
  // Recall's memory, per node id.
  struct Kept {
    std::uint64_t state = 0;  // ClusterState::id() (0: none)
    std::uint64_t stamp = 0;
    ScoreRequest request;
    Scored scored;
  };
  mutable std::vector<Kept> kept_;
};

// Scores nodes for one task under `options.policy`: the devices of the node the policy gives the
// task, and the node's score (smaller is better; kArbiter, kFgd and kFrag: from the growth of the
// node's expected fragmentation under `model`). The caller has checked the filter
// (FilterNode); Score is false when the node's devices cannot hold the task.
class NodeScorer {
 public:
  NodeScorer(const ClusterState& state, const Job& job, const TaskRequest& req, GpuTypeId type,
             const PlacementOptions& options, const FragModel* model);
  bool Score(NodeId n, bool allow_span, std::vector<DeviceShare>& devices, double& score);

 private:
  bool ScoreFrag(NodeId n, const NodeState& node, bool allow_span,
                 std::vector<DeviceShare>& devices, double& score);
  bool MeasureFrag(NodeId n, const NodeState& node, bool allow_span,
                   std::vector<DeviceShare>& devices, double& score);

  const ClusterState& state_;
  const Job& job_;
  const TaskRequest& req_;
  GpuTypeId type_;
  const PlacementOptions& options_;
  const FragModel* frag_ = nullptr;  // the fragmentation-aware policies
  FragModel::ScoreRequest request_;
  double type_cost_ = 0;  // kArbiter, kFrag: FragModel::TypeCost times the task's milli-GPU
  // The node's devices of the task's type: free milli-GPU and index (MeasureFrag).
  std::array<std::int64_t, kMaxDevicesPerNode> frees_;
  std::array<std::uint32_t, kMaxDevicesPerNode> index_;
  std::size_t count_ = 0;
};

// ---- explain ----

// Whether a job could ever be placed on GPU type t (kNone: a job without GPUs) under the current
// configuration, whatever runs: some node that could ever host its largest task, and a domain of
// the level its gang must stay in with enough devices of the type.
struct EverFit {
  GpuTypeId type = kNone;
  bool ever = false;         // some node could ever host its largest task
  std::int64_t largest = 0;  // devices of the type in the largest such domain
  std::int64_t devices = 0;  // devices the gang needs
  bool fits() const { return ever && (type == kNone || largest >= devices); }
};
EverFit EverFitOn(const ClusterState& state, const Job& job, GpuTypeId t);
// Whether the job can never run on the cluster as configured, whatever runs: it is invalid, or on
// every GPU type it accepts a static quota limit refuses it or it never fits (EverFitOn). A
// strict-FIFO head the cycle finds never-fit, and for which this holds, does not block its queue.
bool CanNeverRun(const ClusterState& state, const Job& job);

// Why the job cannot be placed now on any of `types` (the GPU types quota allows; {kNone} for a
// job without GPUs): per node, the first failing cause for the job's largest task, or the
// gang/topology cause when nodes fit its tasks one by one; Verdict::kNever when no node could ever
// host it or no domain it may use is large enough. filter.type is ignored.
Reason ExplainPlacement(const ClusterState& state, const JobFilter& filter,
                        std::span<const GpuTypeId> types);

}  // namespace arbiter::engine

namespace arbiter::engine {

// ---- preempt ----

// What kept a preemption search from finding victims, for the job's reason.
struct PreemptionRefusals {
  // What a guard protected: the jobs that could otherwise be victims, as met (a job met in several
  // scopes or GPU types' searches is listed again; Describe counts each once).
  struct Guarded {
    Guard guard = Guard::kClassNotPreemptible;
    std::vector<JobId> jobs;
  };
  std::vector<Guarded> guards;  // in the order first met (Describe sorts them by GuardName)
  // Counts `job` under `guard`.
  void Add(Guard guard, JobId job);
  Millis lifts_at = -1;  // earliest time one of those protections lifts
  bool benefit = false;  // a set was refused by the minimum benefit
  bool cap = false;      // the cycle's eviction cap was reached
  // Some running job passed every guard: its cost (which grows with the time since its last
  // checkpoint, at a rate of its own) then decided, so a later search may choose otherwise.
  bool eligible = false;
  // "" when nothing was refused; `lifts_at` is the Reason's, not in the text.
  std::string Describe() const;
};

struct PreemptionResult {
  Allocation allocation;        // the preemptor's, taken in the state
  std::vector<Victim> victims;  // given back in the state
  std::int64_t lost = 0;
  double cost = 0;
};

// Searches for the cheapest set of running jobs whose eviction lets `filter.job` fit, quota and
// placement (with its topology constraint) both. Who may be a victim, and at what cost, is the
// policy's (VictimPolicy); whether a victim that must run above its queue's guarantee still does
// is checked as victims are taken. Candidate sets are compared by cost,
// then number of victims, then the younger. The search is transactional: on success the victims
// are evicted and the preemptor's allocation taken and charged in `tx`; on failure `tx` is
// unchanged. `gpu_budget` caps the victims' GPUs (milli; -1: none); jobs in `excluded` are not
// victims (already evicted this cycle).
// `lease`: the cycle's lease order (finish-time fairness, Gavel's rounds; nullptr otherwise).
class LeaseOrder;
std::optional<PreemptionResult> Preempt(
    Transaction& tx, const VictimPolicy& policy, const JobFilter& filter, Millis now,
    std::int64_t gpu_budget, const std::unordered_set<JobId>& excluded, const CycleOptions& options,
    const LeaseOrder* lease = nullptr, PreemptionRefusals* refusals = nullptr);

}  // namespace arbiter::engine

namespace arbiter::engine {

// ---- backfill ----

// The end of a job started at `start` by its estimate (or the default runtime).
Millis EstimatedEnd(const Job& job, Millis start, const BackfillOptions& options);
// The expected end of a running job (or of one placed this cycle at `start`): its estimated end;
// past that, `now` plus the overrun grace.
Millis ExpectedEnd(const Job& job, Millis start, Millis now, const BackfillOptions& options);

// Computes a reservation for a blocked job: releases the running jobs and those placed this cycle
// on the scratch state in order of expected end until the job fits (placement only), and returns
// the devices and that time. `tx` is unchanged on return.
std::optional<Reservation> Reserve(Transaction& tx, const JobFilter& filter,
                                   std::span<const PlacedJob> placed, Millis now,
                                   const CycleOptions& options);

// Holds the currently free part of reserved devices (and the CPU and memory the reservation needs
// on their nodes) out of reach of jobs that would still run at the reservation's start.
class ReservationHolds {
 public:
  void Add(const Reservation& r);
  bool empty() const { return reservations_.empty(); }
  Millis earliest_start() const { return earliest_; }
  const std::vector<Reservation>& reservations() const { return reservations_; }
  // Holds what is free of the reserved resources now, in `tx`.
  void Apply(Transaction& tx);
  // Gives it back.
  void Release(Transaction& tx);

 private:
  std::vector<Reservation> reservations_;
  std::vector<TaskAllocation> held_;
  Millis earliest_ = 0;
};

}  // namespace arbiter::engine
