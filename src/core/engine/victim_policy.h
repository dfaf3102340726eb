// The preemption rules, written once: who may evict whom, which running jobs are protected, and
// what an eviction costs. The victim search (preempt.cc), its quick cost bound and `arbiter lint`
// all ask this one object; the cluster state keeps only facts (each resident's queue, class, and
// whether it was ever evicted), never a rule's result.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "arbiter/plan.h"
#include "core/engine/ordering.h"
#include "core/state/cluster_state.h"

namespace arbiter::engine {

// A running job a preemptor may evict, with what evicting it costs.
struct Victim {
  const RunningJob* running = nullptr;
  Eviction::Kind kind = Eviction::Kind::kWithinQueue;
  std::int64_t lost = 0;  // GPU-milliseconds: work since its last checkpoint plus restart overhead
  double cost = 0;        // `lost` weighted by the victim's priority
};

// What keeps a running job from eviction by a preemptor: a standing protection of its queue or
// class, a guard of its class that lifts with time, the order that started it ahead, or its
// queue's guarantee. GuardName gives the words reasons use ("3 protected by minimum runtime").
enum class Guard : std::uint8_t {
  kClassNotPreemptible,
  kQueueNotPreemptible,
  kMinRuntime,
  kEvictionCooldown,
  kEvictionBudget,
  kStartedAhead,     // the order started the victim ahead of the preemptor
  kWithinGuarantee,  // the victim runs within its queue's guarantee (reclaim takes only borrowed)
};
const char* GuardName(Guard guard);

class VictimPolicy {
 public:
  // Reads the state's queues and priority classes (which never change), not its running jobs,
  // and the cycle's ordering (its weights, and the queues' fair share as of the state).
  VictimPolicy(const ClusterState& state, const OrderingWeights& ordering);

  // ---- Who may evict whom ----
  // The kind of eviction a job of queue `by` and class `by_class` may make of work of queue `of` in
  // class `of_class`, or nullopt when it may not:
  // - within its queue (kWithinQueue) when the queue has preempt_within_queue, only work of a
  //   strictly lower class value (equal priorities never preempt each other: no ping-pong);
  // - across queues of its tree by queue priority (kQueuePriority), when its queue has
  //   preempt_lower_priority, work of queues of a lower priority;
  // - otherwise, within its tree, by reclaim (kReclaim) when `reclaim` says its queue may reclaim
  //   now (reclaim on, within its nominal quota, some resource of the type limited: MayReclaim).
  // Queues of other trees are never touched. The per-job protections (below) come on top.
  std::optional<Eviction::Kind> Relation(QueueId by, PriorityClassId by_class, QueueId of,
                                         PriorityClassId of_class, bool reclaim) const {
    return RelationsOf(by, by_class, reclaim).Kind(of, of_class);
  }
  // The same relation of one preemptor to every queue and class, for a search that asks it of
  // many residents: Kind(of, of_class) is Relation(by, by_class, of, of_class, reclaim).
  class Relations {
   public:
    std::optional<Eviction::Kind> Kind(QueueId of, PriorityClassId of_class) const {
      if (of == by_) {
        if (!within_ || (*class_value_)[of_class] >= value_) return std::nullopt;
        return Eviction::Kind::kWithinQueue;
      }
      const std::int8_t k = across_[of];
      if (k < 0) return std::nullopt;
      return static_cast<Eviction::Kind>(k);
    }

   private:
    friend class VictimPolicy;
    QueueId by_ = 0;
    bool within_ = false;  // the preemptor's queue evicts within itself
    std::int32_t value_ = 0;
    const std::vector<std::int32_t>* class_value_ = nullptr;  // the policy's
    std::vector<std::int8_t> across_;  // per other queue: the Eviction::Kind, or -1 for none
  };
  Relations RelationsOf(QueueId by, PriorityClassId by_class, bool reclaim) const;
  // Whether an eviction of `kind` may take work of queue `of` on GPU type `type` only while that
  // work runs above its queue's nominal quota (reclaim always; queue priority where quota limits
  // the victim's queue, so that guarantees protect in both directions).
  bool OnlyAboveGuarantee(Eviction::Kind kind, QueueId of, GpuTypeId type) const;
  // Whether a queue may reclaim at all: reclaim on, and a nominal quota in some resource limited
  // in its tree (whether it may now depends on its usage: the search checks that).
  bool MayEverReclaim(QueueId q) const { return may_reclaim_[q]; }
  // Whether queue q's work runs on borrowed quota can ever exist: it may go above its nominal in
  // some limited resource (borrowing_limit not 0, and max, when given, above nominal).
  bool MayEverBorrow(QueueId q) const { return may_borrow_[q]; }
  // Whether two queues belong to one tree (no rule evicts across trees).
  bool SameTree(QueueId a, QueueId b) const { return root_[a] == root_[b]; }
  // Whether a job of queue `by` and class `by_class` may ever evict anything, whatever runs, the
  // usage and the time: some relation above may hold for a queue and class of its tree, or the
  // order evicts by service (least attained service, finish-time fairness). When not, a victim
  // search of such a job always fails, and its failure depends on nothing that changes.
  bool MayEverEvict(QueueId by, PriorityClassId by_class) const;
  // Whether a job of some queue and class may ever evict anything.
  bool AnyMayEverEvict() const;

  // Whether the order put `victim` ahead of `preemptor` when the victim started: the two jobs'
  // ordering keys as of the victim's start (their ages then; a job submitted later has age 0),
  // with today's classes, queue priorities and fair share. A job the order let start ahead of
  // another is never evicted by it: aging and fair share decide who goes first, and preemption by
  // class or queue priority does not undo that decision (reclaim of borrowed quota does: the
  // cycle admits work within its guarantee before any borrowing, whatever the keys).
  bool StartedAhead(const Job& preemptor, const RunningJob& victim) const {
    return ordering_.Before(victim.job, preemptor, victim.start_time);
  }
  // Whether StartedAhead can hold for any victim of (of, of_class): false when the order puts
  // every job of the preemptor's queue and class first whatever the ages (no job to read).
  bool OrderMayProtect(const Job& preemptor, QueueId of, PriorityClassId of_class) const {
    return !ordering_.AlwaysBefore(preemptor.queue, preemptor.priority_class, of, of_class);
  }

  // ---- Protection ----
  // The protection that keeps every job of (queue, class) from eviction, whoever asks, if any.
  std::optional<Guard> Protection(QueueId queue, PriorityClassId cls) const {
    if (!class_preemptible_[cls]) return Guard::kClassNotPreemptible;
    if (!queue_preemptable_[queue]) return Guard::kQueueNotPreemptible;
    return std::nullopt;
  }
  // The protection or guard that keeps `running` from eviction at `now`, if any: the above, then
  // its class's minimum runtime, eviction cooldown and eviction budget. `until`, when given,
  // receives the time the refusing guard lifts (-1: never by itself).
  std::optional<Guard> GuardOf(const RunningJob& running, Millis now,
                               Millis* until = nullptr) const;
  // Whether a job of (queue, class) that was never evicted has no guard at all at any time: no
  // protection and no minimum runtime (the eviction cooldown and budget read its evictions).
  bool Unguarded(QueueId queue, PriorityClassId cls) const {
    return !Protection(queue, cls) && has_min_runtime_[cls] == 0;
  }

  // ---- Cost ----
  std::int32_t class_value(PriorityClassId cls) const { return class_value_[cls]; }
  // GPU-milliseconds a job of `gpus` milli-GPU loses if evicted at `now`: the work since `since`
  // (its start or last checkpoint) plus its restart overhead.
  static std::int64_t LostWork(std::int64_t gpus, Millis since, Millis restart_overhead,
                               Millis now);
  // Lost work weighted by priority: times 1 + class value / the largest class value.
  double Cost(std::int64_t lost, PriorityClassId cls) const;
  // Both for a running job.
  Victim CostOf(const RunningJob& running, Millis now) const;

 private:
  const ClusterState& state_;
  OrderingKeys ordering_;
  std::vector<QueueId> root_;                   // per queue
  std::vector<bool> may_reclaim_, may_borrow_;  // per queue
  std::vector<std::int32_t> class_value_;       // per class
  std::vector<std::uint8_t> has_min_runtime_;   // per class
  // The classes' and queues' flags, read for every resident a search meets.
  std::vector<std::uint8_t> class_preemptible_;  // per class
  std::vector<std::uint8_t> queue_preemptable_;  // per queue
  std::int32_t max_class_value_ = 1;
  std::int32_t min_class_value_ = 0;
  bool evicts_by_service_ = false;             // least attained service or finish-time fairness
  std::vector<std::uint8_t> tree_has_others_;  // per queue: its tree has another queue
};

}  // namespace arbiter::engine
