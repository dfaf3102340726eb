// The engine: the decision layer. One cycle takes the cluster state and the pending jobs and
// returns a Plan. It performs no I/O, reads no clock (time is passed in; a clock for stage timings
// may be injected) and draws no unseeded random number: the same inputs give the same plan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/state.h"

namespace arbiter {

// How pending jobs are ordered (docs/simulator.md, "Policies of the field").
enum class OrderPolicy : std::uint8_t {
  kMultifactor,  // the weighted key below alone
  // Least attained service, discretised into queues as Tiresias's (Gu et al., NSDI 2019): a job's
  // service queue is the number of `las_thresholds` its service has reached; lower queues first,
  // within a queue the jobs that ran in it (the most recently stopped first), then the weighted
  // key. kLas counts the time a job has run (Tiresias's "dlas"), kLas2d the time times its GPUs
  // (its "dlas-gpu", two-dimensional). A job of a lower service queue may evict work of a higher
  // one (Eviction::Kind::kAttainedService).
  kLas,
  kLas2d,
  // Tiresias's discretised Gittins index ("dlas-gpu-gittins"): the service queues of kLas2d, and
  // within a queue the higher Gittins index first (ClusterState::GittinsIndex, on the service of
  // the last `gittins_window` finished jobs, for `gittins_quantum`), then the weighted key. Until
  // a job has finished, the order of kLas2d.
  kGittins,
  // Finish-time fairness as Themis's (Mahajan et al., NSDI 2020): the pending job whose finish
  // time compares worst with its fair one first, then the weighted key. Its rho is its finish
  // time in the shared cluster if it started now (its wait plus its remaining work) over its
  // finish time alone on 1/N of the cluster, N the queues with jobs pending or running (its work,
  // times its GPUs over the GPUs of 1/N of the cluster where it needs more). The work is the
  // runtime estimate (BackfillOptions::default_runtime without one), the remaining work that less
  // the time it has run. FinishTimeFairness gives the rho. A waiting job may evict running work
  // of its tree that has run `ftf_lease` since its start and whose rho (as if it ran on) is below
  // its own (Eviction::Kind::kFinishTimeFairness): Themis's leases, at whose end the GPUs go to
  // the jobs furthest from their fair finish.
  kFinishTimeFairness,
  // Gavel's round-based scheduling (Narayanan et al., OSDI 2020) of the allocation its linear
  // program gives on the cluster's throughput matrix (engine GavelScope): for each job, the share
  // of its time it should run on each GPU model, to maximise the objective `heterogeneity` names
  // (kMaxMinFairness: the least normalised effective throughput of any job; kMaxThroughput: their
  // sum). A job's priority on a model is that share over the share of its time since its
  // submission that it has run there (Job::time_on_model); the pending job of highest priority
  // goes first, on the model of its highest priority, then the weighted key. A waiting job may
  // evict running work of its tree that has run `gavel_round` since its start and whose priority
  // on its model is below the waiting job's there (Eviction::Kind::kAllocationRound): the rounds
  // at whose ends Gavel hands the GPUs out again.
  kGavel,
};
// "multifactor", "las", "las-2d", "gittins", "ftf", "gavel".
const char* OrderPolicyName(OrderPolicy policy);

// How a job's GPU model is chosen where it may take several, and what its service counts, on the
// cluster's throughput matrix (ClusterSpec::throughput), after Gavel (Narayanan et al., OSDI 2020).
// Under OrderPolicy::kGavel, instead, the objective of Gavel's linear program (kMaxThroughput, or
// kMaxMinFairness; the engine reads kOff as kMaxMinFairness, which the configuration refuses).
enum class HeterogeneityPolicy : std::uint8_t {
  kOff,  // the model whose placement scores best (the matrix only speeds runs up or down)
  // The models shared out among the pending jobs by comparative advantage (engine
  // PreferredModels): a job runs first on the model it was given; in the cycle's second pass, if
  // it still waits, on any it fits on, the fastest for it first (then the best placement). The
  // greedy form of Gavel's maximum total effective throughput.
  kMaxThroughput,
  // The same choice, and a least-attained-service order (kLas, kLas2d, kGittins) counts a job's
  // service in normalised effective throughput (its time run times its throughput over its
  // throughput with an equal share of the cluster): Gavel's max-min fairness ("LAS") over
  // heterogeneous GPUs, where an hour on a slow model counts less than one on a fast model.
  kMaxMinFairness,
};
// "none", "max-throughput", "max-min-fairness".
const char* HeterogeneityPolicyName(HeterogeneityPolicy policy);

// Weights of the multifactor ordering key (as in Slurm's priority/multifactor). Each factor lies
// in [0, 1]; a job's key is the weighted sum, and jobs are taken in descending key order, ties by
// submit time then id.
struct OrderingWeights {
  OrderPolicy policy = OrderPolicy::kMultifactor;
  // kLas, kLas2d, kGittins: the service at which a job moves to the next queue, ascending:
  // milliseconds run (kLas) or GPU-milliseconds (kLas2d, kGittins). Tiresias's simulator: 3,250 s
  // and 7,200 s (three queues).
  std::vector<Millis> las_thresholds{3250 * kMillisPerSecond, 7200 * kMillisPerSecond};
  // Tiresias's starvation promotion: a pending job out of the first queue that has waited, since
  // it first ran, `starvation_factor` times as long as it has run goes back to the first queue,
  // its service counted from 0 again. 0: never.
  double starvation_factor = 0;
  // kGittins: the service quantum the index looks ahead (GPU-milliseconds; Tiresias's static
  // delta, 3,250 s), and how many finished jobs the distribution of job sizes is learned from.
  Millis gittins_quantum = 3250 * kMillisPerSecond;
  std::int32_t gittins_window = 1000;
  // kFinishTimeFairness: the least a job runs, from its start, before a job of higher rho may
  // evict it (Themis's lease).
  Millis ftf_lease = 10 * 60 * kMillisPerSecond;
  // kGavel: the least a job runs, from its start, before a job of higher priority on its model
  // may evict it (Gavel's round, 6 minutes in its paper).
  Millis gavel_round = 6 * 60 * kMillisPerSecond;
  HeterogeneityPolicy heterogeneity = HeterogeneityPolicy::kOff;

  double priority_class = 10000;  // class value / largest class value
  double queue_priority = 1000;   // queue priority / largest queue priority
  double fair_share = 2000;       // 2^(-recent usage share / target share) of the job's queue
  double age = 1000;              // waiting time / max_age, capped at 1
  Millis max_age = 7 * 24 * 3600 * kMillisPerSecond;
  // kMultifactor (the other orders ignore it): a job that has waited this long is starving and goes
  // ahead of every job that is not, the longest-waiting first, whatever the weights: each starving
  // job runs in turn. 0: never.
  Millis starvation_wait = 0;
};

// Least attained service (OrderPolicy kLas, kLas2d, kGittins). A job's service as the order counts
// it.
struct AttainedService {
  Millis attained = 0;  // Job::attained
  Millis starved = 0;   // Job::starved
};
// The service of a pending job at `now` (its waiting since `service_time` added to `starved`), with
// the starvation promotion applied (both 0 once it applies). A driver stores this in the job when
// it starts it (the engine then adds the running time to `attained` itself).
AttainedService ServiceAtStart(const Job& job, Millis now, const OrderingWeights& w);
// The service queue (0 first) of a job of `milli` GPUs in all that has run `attained` ms.
int LasQueue(const OrderingWeights& w, Millis attained, std::int64_t milli);
// The service a job gains per millisecond run on GPU model `type`: 1, or under
// HeterogeneityPolicy::kMaxMinFairness its normalised throughput there.
double ServiceRate(const ClusterState& state, const Job& job, GpuTypeId type,
                   const OrderingWeights& w);
// The service queue of a pending job at `now`, and of a running job.
int PendingLasQueue(const Job& job, Millis now, const OrderingWeights& w);
int RunningLasQueue(const ClusterState& state, const RunningJob& running, Millis now,
                    const OrderingWeights& w);
inline bool IsLas(OrderPolicy p) {
  return p == OrderPolicy::kLas || p == OrderPolicy::kLas2d || p == OrderPolicy::kGittins;
}
// Job::time_on_model for GPU model `type` (0 beyond the vector, and for kNone).
inline Millis TimeOnModel(const Job& job, GpuTypeId type) {
  return type < job.time_on_model.size() ? job.time_on_model[type] : 0;
}
// The orders that hand the GPUs out in leases (finish-time fairness, Gavel's rounds).
inline bool IsLeaseOrder(OrderPolicy p) {
  return p == OrderPolicy::kFinishTimeFairness || p == OrderPolicy::kGavel;
}
// OrderPolicy::kFinishTimeFairness: the rho of a pending `job` at `now`, with `work` its work (its
// estimate, or the default), `queues` the queues with jobs pending or running and `cluster_milli`
// the cluster's GPUs. Above 1: it finishes later than on its fair share alone.
double FinishTimeFairness(const Job& job, Millis now, Millis work, std::size_t queues,
                          std::int64_t cluster_milli);
// The rho of the same job running since `start`, as if it runs on to its end.
double RunningFinishTimeFairness(const Job& job, Millis start, Millis now, Millis work,
                                 std::size_t queues, std::int64_t cluster_milli);
// Whether the service counts GPU-time (kLas2d, kGittins) rather than time run (kLas).
inline bool ServiceInGpuTime(OrderPolicy p) {
  return p == OrderPolicy::kLas2d || p == OrderPolicy::kGittins;
}
// The service of `attained` ms run by `milli` GPUs as the order counts it (ms or GPU-ms).
inline Millis LasService(const OrderingWeights& w, Millis attained, std::int64_t milli) {
  return ServiceInGpuTime(w.policy) ? attained * milli / kMilliPerGpu : attained;
}

// Preemption and reclaim, and the guards that keep them from thrashing. The per-victim guards
// (minimum runtime, eviction budget, cooldown, grace period) belong to priority classes.
struct PreemptionOptions {
  bool enabled = true;
  // Cluster-wide cap on the GPUs evicted in one cycle, in milli-GPU; -1: no cap (as YARN's
  // total_preemption_per_round).
  std::int64_t max_gpus_per_cycle = -1;
  // Minimum benefit: do not evict when the victims would lose more than this much GPU-time (work
  // since their last checkpoint plus restart overhead, in GPU-milliseconds) per GPU the preemptor
  // gains; -1: no threshold.
  std::int64_t max_loss_per_gpu = -1;
  // Preemption searches per cycle (each is bounded; a cycle with thousands of blocked jobs tries
  // the first ones in order only).
  int max_attempts_per_cycle = 32;
};

// Backfill with reservations (as Slurm's sched/backfill): the first blocked jobs in order get a
// reservation computed from the running jobs' runtime estimates; later jobs may start ahead only
// if, by their own estimate, they end before the earliest reservation, or if they stay off every
// reserved device.
struct BackfillOptions {
  int reservations = 1;  // blocked jobs per cycle that get a reservation; 0 disables backfill
  // A running job past its estimate is assumed to end this long from now (re-evaluated every
  // cycle, so the reservation slides while the job overruns, and nothing new lands on the
  // reserved devices meanwhile).
  Millis overrun_grace = 5 * 60 * kMillisPerSecond;
  // Assumed runtime of a job without an estimate (running, or pending for backfill purposes and
  // for the finish-time fairness order).
  Millis default_runtime = 24 * 3600 * kMillisPerSecond;
  // Placement attempts when computing one reservation.
  int max_attempts = 64;
};

// How the placement stage chooses a node (and devices) among those that can host a task.
// `kArbiter` is the engine's own placement (candidates from the free-capacity buckets, ranked by
// the growth of expected fragmentation weighed by scarcity: docs/design/placement.md); the others
// are the published baselines of Weng et al., "Beware of Fragmentation" (ATC 2023), scored as their
// simulator scores them (docs/placement.md), FGD itself, and kFrag. Under these every feasible node
// of every accepted GPU type is scored and the best taken; equal scores go to the node first in a
// random order of the nodes drawn from the seed (as in the published simulator).
enum class PlacementPolicy : std::uint8_t {
  kArbiter,     // the default
  kRandom,      // a uniformly random feasible node (and, for a share, device)
  kBestFit,     // least leftover: 0.5 CPU / 128 cores + 0.5 GPU / 8 GPUs after placement
  kPacking,     // partly used GPUs first, then partly used nodes, then the fewest free GPUs
  kDotProduct,  // smallest dot product of free and requested (CPU, GPU), normalised by the max
  kClustering,  // nodes already hosting tasks of the same GPU-request class first
  kFgd,         // FGD: least growth of expected fragmentation (one task) under the task shapes
  kFrag,        // FGD's measure plus the fragmentation left by repeated tasks, then consolidation
};
inline constexpr PlacementPolicy kAllPlacementPolicies[] = {
    PlacementPolicy::kArbiter, PlacementPolicy::kRandom,     PlacementPolicy::kBestFit,
    PlacementPolicy::kPacking, PlacementPolicy::kDotProduct, PlacementPolicy::kClustering,
    PlacementPolicy::kFgd,     PlacementPolicy::kFrag};
// "arbiter", "random", "best-fit", "packing", "dot-product", "clustering", "fgd", "frag".
const char* PlacementPolicyName(PlacementPolicy policy);
// The policy of a name above; false when there is none.
bool ParsePlacementPolicy(std::string_view name, PlacementPolicy& policy);

// A task shape with its share of the workload, for fragmentation-aware placement.
struct TaskShape {
  std::int64_t gpu = 0;     // milli-GPU per task: 0, a share (1..999) or whole GPUs (k x 1000)
  std::int64_t cpu = 0;     // milli-cores
  std::int64_t memory = 0;  // MiB (a filter only: not part of the fragmentation measure)
  GpuTypeSet gpu_types;     // accepted GPU types; empty: any
  double weight = 0;        // share of tasks (the weights need not sum to 1)
};

struct PlacementOptions {
  PlacementPolicy policy = PlacementPolicy::kArbiter;
  std::uint64_t seed = 0;  // kRandom's draws (with the job id) and the order of equal scores
  // kFgd, kFrag: the shapes expected to arrive (e.g. those of a trace). Empty: the shapes of the
  // running and pending jobs of the cycle.
  std::vector<TaskShape> shapes;
  // kArbiter: shapes beyond about this many are merged (those of one GPU request, CPU and memory
  // averaged), which bounds the cost of scoring a node; 0: no limit.
  std::size_t max_shapes = 64;
};

struct EngineOptions {
  OrderingWeights ordering;
  PreemptionOptions preemption;
  BackfillOptions backfill;
  PlacementOptions placement;
  // kArbiter: feasible candidate nodes scored per bucket of the free-capacity indexes.
  int score_candidates = 2;
  // Optional monotonic clock in microseconds, used only to time the stages of a cycle.
  std::function<std::int64_t()> clock_micros;
  // false: a cycle stops taking the jobs in order once none of the rest could be placed (the GPUs
  // each needs are not free: CapacityNeed), no reservation is left to give, and no waiting job
  // may ever evict, under the multifactor order without a share-out of GPU models. The rest get
  // no entry in Plan::unplaced (Plan::unexplained counts them); the plan's decisions are those of
  // the whole list, and its promises count them as waiting. No victim search runs either (none
  // could evict; it would only say why). For a driver that reads no reasons (the simulator, but
  // when it explains a job); docs/design/engine.md.
  bool explain_every_job = true;
};

// What no cycle may ever decide, checked on `plan` against the state and pending jobs it was made
// on (before it is applied): no GPU device given beyond its capacity, no job evicted that is not
// preemptible (its class or its queue), none evicted twice, and no job started that the quota
// tree would not admit at its place in the plan (its victims gone first): none above a max, none
// borrowing beyond a limit or above a tree's nominal quota. An error lists every violation. The
// simulator's and the server's tests run it after every cycle (SimOptions::check_invariants,
// CoreOptions::check_invariants).
Status CheckPlan(const ClusterState& state, std::span<const Job> pending, const Plan& plan);

// One engine schedules one cycle at a time: it keeps caches (the fragmentation models it built,
// with the scratch space and remembered measures inside them, behind its pimpl) that its cycles
// change, without locks. It cannot be copied, so that no two engines share them; a program that
// schedules on several threads gives each its own engine.
class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // One scheduling cycle. `state` serves as scratch space during the cycle (a Transaction that is
  // discarded) and is returned exactly as it was given; the driver applies the plan afterwards
  // (ClusterState::Apply). The plan depends only on the state, the pending jobs, `now` and the
  // options, never on the cycles this engine ran before or on other states it scheduled.
  // `order_hint`: indices into `pending` in the order of an earlier plan (Plan::order, as the
  // driver keeps it), which spares the cycle a sort; the plan is the same with any hint.
  Plan Schedule(ClusterState& state, std::span<const Job> pending, Millis now,
                std::span<const std::uint32_t> order_hint = {}) const;
  // The same on a library user's Cluster (include/arbiter/state.h).
  Plan Schedule(Cluster& cluster, std::span<const Job> pending, Millis now) const {
    return Schedule(cluster.state(), pending, now);
  }

  // Whether a job arriving at `now`, when nothing else changed since the plan whose promise
  // `hold` is (Plan::capacity), leaves that plan's decisions standing: no job can evict, and it
  // stays behind the blocked head of its strict-FIFO queue whatever the ages, or the hold holds
  // and the free capacity does not meet its need either (it is then added to `hold`). A driver
  // that skips cycles need not run one for it.
  bool ArrivalChangesNothing(CapacityHold& hold, const ClusterState& state, const Job& job,
                             Millis now) const;

  // Whether `job` waits behind `ahead`, a job of the same strict-FIFO queue, in every cycle at
  // or after `now` whose plan leaves `ahead` unplaced, and changes no other decision of it: the
  // order is the multifactor one without a share-out of GPU models, `job` is valid and stays
  // after `ahead` whatever the ages (OrderingKeys::StaysBefore), and no waiting job may ever
  // evict (its entry would be a search). A driver may then leave `job` out of the pending list
  // while `ahead` waits (the simulator's parked jobs, SimOptions::skip_unchanged_cycles); the
  // relation is transitive, and holds while the options and the state's queues, priority classes
  // and topology do.
  bool StaysBehind(const ClusterState& state, const Job& ahead, const Job& job, Millis now) const;

  const EngineOptions& options() const;

 private:
  struct Impl;  // src/core/engine/engine.cc
  std::unique_ptr<Impl> impl_;
};

}  // namespace arbiter
