#include "core/engine/victim_policy.h"

#include <algorithm>

namespace arbiter::engine {

VictimPolicy::VictimPolicy(const ClusterState& state, const OrderingWeights& ordering)
    : state_(state), ordering_(state, ordering) {
  const std::size_t queues = state.queue_count();
  root_.resize(queues);
  may_reclaim_.resize(queues);
  may_borrow_.resize(queues);
  for (QueueId q = 0; q < queues; ++q) {
    QueueId r = q;
    while (state.queue(r).parent != kNone) r = state.queue(r).parent;
    root_[q] = r;
    queue_preemptable_.push_back(state.queue(q).spec.preemptable ? 1 : 0);
    may_reclaim_[q] = state.queue(q).spec.reclaim && state.quota_tree().HasGuarantee(q);
    may_borrow_[q] = state.quota_tree().MayBorrow(q);
  }
  for (PriorityClassId c = 0; c < state.priority_class_count(); ++c) {
    const PriorityClassSpec& pc = state.priority_class(c);
    class_value_.push_back(pc.value);
    has_min_runtime_.push_back(pc.min_runtime > 0 ? 1 : 0);
    class_preemptible_.push_back(pc.preemptible ? 1 : 0);
    max_class_value_ = std::max(max_class_value_, pc.value);
    min_class_value_ = c == 0 ? pc.value : std::min(min_class_value_, pc.value);
  }
  evicts_by_service_ = IsLas(ordering.policy) || IsLeaseOrder(ordering.policy);
  std::vector<std::int32_t> tree_size(queues, 0);
  for (QueueId q = 0; q < queues; ++q) ++tree_size[root_[q]];
  for (QueueId q = 0; q < queues; ++q) tree_has_others_.push_back(tree_size[root_[q]] > 1 ? 1 : 0);
}

bool VictimPolicy::MayEverEvict(QueueId by, PriorityClassId by_class) const {
  if (evicts_by_service_) return true;
  const QueueSpec& spec = state_.queue(by).spec;
  if (spec.preempt_within_queue && class_value_[by_class] > min_class_value_) return true;
  if (!tree_has_others_[by]) return false;
  if (may_reclaim_[by]) return true;
  if (!spec.preempt_lower_priority) return false;
  for (QueueId of = 0; of < state_.queue_count(); ++of) {
    if (of != by && root_[of] == root_[by] && state_.queue(of).spec.priority < spec.priority)
      return true;
  }
  return false;
}

bool VictimPolicy::AnyMayEverEvict() const {
  for (QueueId q = 0; q < state_.queue_count(); ++q) {
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c) {
      if (MayEverEvict(q, c)) return true;
    }
  }
  return false;
}

VictimPolicy::Relations VictimPolicy::RelationsOf(QueueId by, PriorityClassId by_class,
                                                  bool reclaim) const {
  const QueueSpec& preemptor = state_.queue(by).spec;
  Relations r;
  r.by_ = by;
  r.within_ = preemptor.preempt_within_queue;
  r.value_ = class_value_[by_class];
  r.class_value_ = &class_value_;
  r.across_.assign(state_.queue_count(), -1);
  for (QueueId of = 0; of < state_.queue_count(); ++of) {
    if (of == by || root_[of] != root_[by]) continue;  // (other trees: never)
    if (preemptor.preempt_lower_priority && state_.queue(of).spec.priority < preemptor.priority) {
      r.across_[of] = static_cast<std::int8_t>(Eviction::Kind::kQueuePriority);
    } else if (reclaim) {
      r.across_[of] = static_cast<std::int8_t>(Eviction::Kind::kReclaim);
    }
  }
  return r;
}

bool VictimPolicy::OnlyAboveGuarantee(Eviction::Kind kind, QueueId of, GpuTypeId type) const {
  switch (kind) {
    case Eviction::Kind::kWithinQueue:
    case Eviction::Kind::kAttainedService:
    case Eviction::Kind::kFinishTimeFairness:
    case Eviction::Kind::kAllocationRound:
      return false;
    case Eviction::Kind::kReclaim:
      return true;
    case Eviction::Kind::kQueuePriority:
      if (type == kNone) return false;
      return !state_.quota_tree().Limiting(of, type).empty();
  }
  return true;
}

const char* GuardName(Guard guard) {
  switch (guard) {
    case Guard::kClassNotPreemptible:
      return "priority class not preemptible";
    case Guard::kQueueNotPreemptible:
      return "queue not preemptible";
    case Guard::kMinRuntime:
      return "minimum runtime";
    case Guard::kEvictionCooldown:
      return "eviction cooldown";
    case Guard::kEvictionBudget:
      return "eviction budget";
    case Guard::kStartedAhead:
      return "the order, which started them ahead of it";
    case Guard::kWithinGuarantee:
      return "their queue's guarantee";
  }
  return "";
}

std::optional<Guard> VictimPolicy::GuardOf(const RunningJob& running, Millis now,
                                           Millis* until) const {
  auto lifts = [&](Millis t) {
    if (until) *until = t;
  };
  lifts(-1);
  if (std::optional<Guard> protection = Protection(running.job.queue, running.job.priority_class))
    return protection;
  const PriorityClassSpec& pc = state_.priority_class(running.job.priority_class);
  if (now - running.start_time < pc.min_runtime) {
    lifts(running.start_time + pc.min_runtime);
    return Guard::kMinRuntime;
  }
  const std::vector<Millis>& times = running.evictions;
  if (!times.empty() && now - times.back() < pc.eviction_cooldown) {
    lifts(times.back() + pc.eviction_cooldown);
    return Guard::kEvictionCooldown;
  }
  if (pc.max_evictions > 0) {
    auto first_in_window = std::find_if(times.begin(), times.end(),
                                        [&](Millis t) { return t > now - pc.eviction_window; });
    if (times.end() - first_in_window >= pc.max_evictions) {
      lifts(*first_in_window + pc.eviction_window);
      return Guard::kEvictionBudget;
    }
  }
  return std::nullopt;
}

std::int64_t VictimPolicy::LostWork(std::int64_t gpus, Millis since, Millis restart_overhead,
                                    Millis now) {
  return gpus * (std::max<Millis>(0, now - since) + restart_overhead) / kMilliPerGpu;
}

double VictimPolicy::Cost(std::int64_t lost, PriorityClassId cls) const {
  return static_cast<double>(lost) * (1.0 + std::max(0, class_value_[cls]) /
                                                static_cast<double>(std::max(1, max_class_value_)));
}

Victim VictimPolicy::CostOf(const RunningJob& running, Millis now) const {
  Victim v;
  v.running = &running;
  v.lost = LostWork(running.job.total_gpu().value(),
                    std::max(running.start_time, running.last_checkpoint),
                    running.job.restart_overhead, now);
  v.cost = Cost(v.lost, running.job.priority_class);
  return v;
}

}  // namespace arbiter::engine
