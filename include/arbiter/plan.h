// The Plan: what one scheduling cycle decided. Binds name node and device indices; every job
// not placed carries a structured reason saying which stage said no and why.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "arbiter/model.h"

namespace arbiter {

// A share of one device given to a task: the whole device (1000 milli) or part of it.
struct DeviceShare {
  std::uint32_t device = 0;  // index into the node's devices
  MilliGpu gpu{0};
  GpuMemMiB memory{0};
};

struct TaskAllocation {
  std::uint32_t group = 0;  // index into Job::groups
  std::uint32_t index = 0;  // task index within the group
  NodeId node = 0;
  MilliCpu cpu{0};
  MemMiB memory{0};
  std::vector<DeviceShare> devices;
};

// Where every task of a job runs. A job's GPU tasks all use one GPU type.
struct Allocation {
  GpuTypeId gpu_type = kNone;  // kNone for a job without GPUs
  std::vector<TaskAllocation> tasks;
};

// The stages of a cycle, in the order they run: order the pending jobs; then, for each job in
// order, validate it, admit it by quota, place it (each node passing the filter first), explain
// why not when it was not placed, and give the first blocked jobs a backfill reservation; last,
// let blocked jobs preempt. A Reason names the stage that said no (validate, quota, filter or
// place); Plan::timings counts and times every stage. The values are stable (plans' fingerprints
// read them): new stages take new values.
enum class Stage : std::uint8_t {
  kOrder = 4,
  kValidate = 0,
  kQuota = 1,
  kFilter = 2,
  kPlace = 3,
  kExplain = 5,
  kBackfill = 6,
  kPreempt = 7,
};
inline constexpr int kStageCount = 8;
// Every stage, in the order a cycle runs them.
inline constexpr Stage kStages[kStageCount] = {Stage::kOrder,    Stage::kValidate, Stage::kQuota,
                                               Stage::kFilter,   Stage::kPlace,    Stage::kExplain,
                                               Stage::kBackfill, Stage::kPreempt};

// Why a node, a queue or the topology could not take a job. Node causes come first, in the order
// the filter checks them; a node is counted under the first cause it fails.
enum class Cause : std::uint8_t {
  kNodeUnhealthy,
  kNodeCordoned,
  kUntoleratedTaint,
  kNodeSelector,
  kGpuType,
  kGpuMemory,
  kInsufficientGpu,
  kInsufficientCpu,
  kInsufficientMemory,
  kAffinity,
  kAntiAffinity,
  // Beyond single nodes.
  kTopology,  // nodes fit tasks one by one but no domain of the required level holds the gang
  kGang,      // nodes fit tasks one by one but not all of the gang's tasks at once
  kQuotaMax,
  kQuotaBorrowingLimit,
  kQuotaCohort,  // the queue would borrow, and its cohort has no unused quota to lend
  kQueueOrder,   // an earlier job of its strict-FIFO queue is blocked
  kInvalid,      // the job itself is malformed
  // The devices it would fit on are held for an earlier blocked job's backfill reservation, which
  // starts at the Reason's lifts_at; a job that ends before then by its estimate may use them.
  kReserved,
};
inline constexpr int kCauseCount = static_cast<int>(Cause::kReserved) + 1;

const char* CauseName(Cause cause);
const char* StageName(Stage stage);

// Whether waiting can help. Mirrors Kubernetes' Unschedulable / UnschedulableAndUnresolvable:
// kWait may fit once capacity or quota frees up; kNever cannot fit on the cluster as configured.
enum class Verdict : std::uint8_t { kWait, kNever };

struct CauseCount {
  Cause cause;
  std::int32_t nodes = 0;
};

struct Reason {
  Stage stage = Stage::kPlace;
  Verdict verdict = Verdict::kWait;
  Cause cause = Cause::kInsufficientGpu;  // the main cause
  std::int32_t nodes_total = 0;           // nodes the filter considered (filter / place stages)
  std::vector<CauseCount> node_counts;    // nodes per first failing cause, largest first
  std::string detail;                     // names the queue, level or field concerned
  // When the job holds a backfill reservation: the time it is expected to start (-1: none).
  Millis reserved_start = -1;
  // When the binding constraint is expected to lift, if known (-1: unknown): the start of the
  // reservation that holds the devices back, or the end of the guard that protects the victims.
  Millis lifts_at = -1;

  // E.g. "filter: 0/128 nodes fit: 96 insufficient GPU, 32 untolerated taint"; times as `style`.
  std::string Describe(TimeStyle style = TimeStyle::kElapsed) const;
};

struct Bind {
  JobId job = 0;
  std::uint32_t pending_index = 0;  // index of the job in the pending list given to the engine
  Allocation allocation;
  // When the job may start: `now`, or for a preemptor the time its last victim is stopped (the
  // devices are the preemptor's from the plan on; the victims only finish their grace period).
  Millis start_after = 0;
};

// Evict a running job: send it `signal` now so it can checkpoint, stop it at `stop_at`.
struct Eviction {
  JobId job = 0;
  JobId preemptor = 0;
  // Within the preemptor's queue by priority class; across queues by queue priority
  // (preempt_lower_priority); reclaim of quota another queue borrowed; or, under a least-
  // attained-service order, of a job in a lower service queue (kAttainedService); or, under the
  // finish-time fairness order, of a job that has held its GPUs a lease and is nearer its fair
  // finish than the preemptor (kFinishTimeFairness); or, under Gavel's rounds, of a job that has
  // held its GPUs a round and has had more of its allocation on their model than the preemptor
  // (kAllocationRound).
  enum class Kind : std::uint8_t {
    kWithinQueue,
    kQueuePriority,
    kReclaim,
    kAttainedService,
    kFinishTimeFairness,
    kAllocationRound
  } kind = Kind::kWithinQueue;
  std::string signal;
  Millis signal_at = 0;
  Millis stop_at = 0;
  double lost_gpu_hours = 0;  // work lost since the victim's last checkpoint, plus its restart
};

// The eviction's kind as the CLI, the events and the metrics name it: within_queue,
// queue_priority, reclaim, attained_service, finish_time_fairness, allocation_round.
const char* EvictionKindName(Eviction::Kind kind);

struct Unplaced {
  JobId job = 0;
  std::uint32_t pending_index = 0;
  Reason reason;
};

// Work and time of one stage of the cycle. Time is 0 when the engine was given no clock.
struct StageTiming {
  Stage stage = Stage::kOrder;
  std::int64_t calls = 0;
  std::int64_t micros = 0;
};

// A blocked job's reservation: the devices and the time at which, by the running jobs' runtime
// estimates, it will fit. Lower jobs may start ahead of it only if they end before `start` by
// their own estimate or stay off these devices.
struct Reservation {
  JobId job = 0;
  std::uint32_t pending_index = 0;
  Millis start = 0;
  Allocation allocation;
};

inline constexpr Millis kForever = std::numeric_limits<Millis>::max();

// What a job needs free before it can start, whatever else holds it: `milli` GPU in the whole
// cluster and, for its largest task, `node_gpus` whole GPUs' worth on one node (a necessary
// condition of any placement, not a sufficient one).
struct CapacityNeed {
  std::int64_t milli = 0;
  std::int32_t node_gpus = 0;

  static CapacityNeed Of(const Job& job);
  // `free_milli` free in the cluster, and at most `node_gpus_free` whole GPUs' worth on a node.
  bool Met(std::int64_t free_milli, std::int32_t node_gpus_free) const {
    return free_milli >= milli && node_gpus_free >= node_gpus;
  }
};

// Plan::capacity: a promise beyond the time. While none of `needs` is met by the free capacity,
// a cycle decides as this one did (places and evicts nothing) even after running jobs end, and,
// when `arrivals`, after jobs arrive whose needs are unmet, which a driver adds to `needs`.
// `given` false: no such promise (the plan placed or evicted, or a waiting job may evict:
// whether a victim search succeeds is not a matter of free capacity alone).
struct CapacityHold {
  bool given = false;
  bool arrivals = false;  // no job of any queue and class may evict (preemption off, or no rule)
  // The waiting jobs' needs, but those of jobs behind the blocked head of a strict-FIFO queue
  // (they start after it); only the least ones (none is met whenever another is).
  std::vector<CapacityNeed> needs;
  // Every waiting job's need is among `needs` (none was left out as behind a blocked head, an
  // order the time may change): while none is met, the time changes nothing either, and the
  // promise holds past Plan::stable_until.
  bool timeless = false;
  // Under the multifactor order without a heterogeneity policy (which shares the models out
  // among every waiting job), the blocked heads of strict-FIFO queues, by queue: a job that
  // arrives behind one (Engine::ArrivalChangesNothing) cannot start before it and changes nothing.
  std::vector<Job> blocked_heads;

  // Adds a need, keeping only the least ones.
  void Add(CapacityNeed need);
  bool Holds(std::int64_t free_milli, std::int32_t node_gpus_free) const;
};

struct Plan {
  Millis now = 0;
  // Until this time (exclusive), a cycle on the same state and pending jobs, with only time
  // passing, decides as this one did: it places and evicts nothing (its reasons' times may read
  // otherwise). `now` when the plan promises nothing: it placed or evicted, or a decision reads
  // an input that changes with time without a known next change (fair share without a period,
  // a reservation behind a job past its estimate); kForever when no decision reads the time. The
  // times it reads: a pending job's age reaching max_age, the next fair-share refresh, a running
  // job reaching its estimated end (reservations), a victim's guard lifting (preemption). A
  // driver may skip the cycles before it when nothing else changed (docs/design/engine.md).
  Millis stable_until = 0;
  // Beyond the time, ends and arrivals that leave every waiting job short of capacity (above).
  // A driver that skips a cycle must also hold to stable_until (docs/design/engine.md).
  CapacityHold capacity;
  std::vector<Reservation> reservations;
  std::vector<Eviction> evictions;  // applied before the binds
  std::vector<Bind> binds;
  std::vector<Unplaced> unplaced;  // in the order the cycle took them
  // Jobs the cycle did not take, none of which could have been placed, reserved or evict
  // (EngineOptions::explain_every_job false): they wait, without an entry in `unplaced`.
  std::size_t unexplained = 0;
  // The pending jobs (their indices) in the cycle's order. A driver that gives it back to the next
  // cycle (Engine::Schedule's order_hint, as indices into that cycle's list, less the jobs that
  // left) spares it a sort: the jobs that arrived since are merged in.
  std::vector<std::uint32_t> order;
  std::vector<StageTiming> timings;  // every stage but filter (timed within place and explain)
};

}  // namespace arbiter
