// One scheduling cycle: the stages in order (stages.h), in a transaction on the cluster state that
// the cycle discards, and the plan they decided.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/engine/finish_time_fairness.h"
#include "core/engine/gavel.h"
#include "core/engine/las.h"
#include "core/engine/stages.h"

namespace arbiter {
namespace {

using engine::JobFilter;
using engine::PlacedJob;

// Accumulates the calls and time of the cycle's stages; time only when a clock was injected.
class StageTimer {
 public:
  explicit StageTimer(const std::function<std::int64_t()>& clock) : clock_(clock) {}

  template <typename F>
  auto Run(Stage stage, F&& f) {
    const auto id = static_cast<std::size_t>(stage);
    ++calls_[id];
    const std::int64_t start = clock_ ? clock_() : 0;
    struct Stop {
      StageTimer* t;
      std::size_t id;
      std::int64_t start;
      ~Stop() {
        if (t->clock_) t->micros_[id] += t->clock_() - start;
      }
    } stop{this, id, start};
    return f();
  }

  // Every stage in the order they run, but filter, which runs within place and explain.
  std::vector<StageTiming> Timings() const {
    std::vector<StageTiming> out;
    out.reserve(kStageCount - 1);
    for (Stage stage : kStages) {
      if (stage == Stage::kFilter) continue;
      const auto id = static_cast<std::size_t>(stage);
      out.push_back({stage, calls_[id], micros_[id]});
    }
    return out;
  }

 private:
  const std::function<std::int64_t()>& clock_;
  std::int64_t calls_[kStageCount] = {};
  std::int64_t micros_[kStageCount] = {};
};

// The placement-relevant shape of a job: its task groups, topology, node selector and
// tolerations. Jobs of equal shape fit or fail alike on a GPU type, and within one cycle capacity
// only shrinks, so a shape that failed fails again.
bool SameShape(const Job& a, const Job& b) {
  auto same_group = [](const TaskGroup& x, const TaskGroup& y) {
    return x.count == y.count && x.request.gpu == y.request.gpu &&
           x.request.gpu_memory == y.request.gpu_memory && x.request.cpu == y.request.cpu &&
           x.request.memory == y.request.memory;
  };
  auto same_toleration = [](const Toleration& x, const Toleration& y) {
    return x.key == y.key && x.op == y.op && x.value == y.value && x.effect == y.effect;
  };
  return a.topology.level == b.topology.level && a.topology.mode == b.topology.mode &&
         std::equal(a.groups.begin(), a.groups.end(), b.groups.begin(), b.groups.end(),
                    same_group) &&
         a.node_selector == b.node_selector &&
         std::equal(a.tolerations.begin(), a.tolerations.end(), b.tolerations.begin(),
                    b.tolerations.end(), same_toleration);
}

// A hash of what SameShape compares.
std::uint64_t ShapeHash(const Job& job) {
  std::uint64_t h = 0x9e3779b97f4a7c15;
  auto mix = [&h](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2); };
  const std::hash<std::string_view> text;
  mix(static_cast<std::uint64_t>(job.topology.level));
  mix(static_cast<std::uint64_t>(job.topology.mode));
  for (const TaskGroup& g : job.groups) {
    mix(static_cast<std::uint64_t>(g.count));
    mix(static_cast<std::uint64_t>(g.request.gpu.value()));
    mix(static_cast<std::uint64_t>(g.request.gpu_memory.value()));
    mix(static_cast<std::uint64_t>(g.request.cpu.value()));
    mix(static_cast<std::uint64_t>(g.request.memory.value()));
  }
  for (const auto& [k, v] : job.node_selector) {
    mix(text(k));
    mix(text(v));
  }
  for (const Toleration& t : job.tolerations) {
    mix(text(t.key));
    mix(text(t.value));
  }
  return h;
}

// A key of a cycle's caches: the id of a job's shape (Cycle::ShapeOf), a GPU type or a set of
// them, and two words of what else the cached answer reads.
struct ShapeKey {
  std::uint32_t shape = 0;
  GpuTypeId type = kNone;
  std::uint64_t types = 0;  // a set of GPU types, one bit each (kMaxGpuTypes)
  std::uint64_t more = 0;
  std::uint64_t more2 = 0;
  bool operator==(const ShapeKey&) const = default;
};

struct ShapeKeyHash {
  std::size_t operator()(const ShapeKey& k) const {
    std::uint64_t h = (std::uint64_t{k.shape} << 32 | k.type) * 0x9e3779b97f4a7c15;
    for (std::uint64_t v : {k.types, k.more, k.more2}) h = (h ^ v ^ (h >> 29)) * 0xbf58476d1ce4e5b9;
    return static_cast<std::size_t>(h ^ (h >> 32));
  }
};

// A cache of a cycle keyed by ShapeKey: per shape id, its few entries (a type or a set of them,
// strict or not...), searched in turn. A job's lookup is an index and a short scan, not a hash.
// (For answers per shape, type and a few flags; the victim searches', per queue and class too,
// are hashed: a cluster may have a thousand queues.)
template <typename V>
class ShapeCache {
 public:
  V* Find(const ShapeKey& key) {
    if (key.shape >= slots_.size()) return nullptr;
    for (auto& [k, v] : slots_[key.shape]) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  bool Contains(const ShapeKey& key) { return Find(key) != nullptr; }
  // The entry of `key`, added with `value` if there was none (and whether it was added). The
  // pointer holds until the next entry of the same shape is added.
  std::pair<V*, bool> Emplace(const ShapeKey& key, V value) {
    if (V* found = Find(key)) return {found, false};
    if (key.shape >= slots_.size()) slots_.resize(key.shape + 1);
    auto& slot = slots_[key.shape];
    if (slot.empty()) used_.push_back(key.shape);
    slot.emplace_back(key, std::move(value));
    return {&slot.back().second, true};
  }
  bool empty() const { return used_.empty(); }
  // (The shapes used only: a cycle of thousands of shapes clears this often.)
  void clear() {
    for (std::uint32_t shape : used_) slots_[shape].clear();
    used_.clear();
  }

 private:
  std::vector<std::vector<std::pair<ShapeKey, V>>> slots_;
  std::vector<std::uint32_t> used_;  // the shapes with entries
};

// A list of GPU types held in place (a cluster has at most kMaxGpuTypes; kNone is one more): a
// cycle makes two for each job, and a heap buffer each would cost more than the lists' use.
class TypeList {
 public:
  void push_back(GpuTypeId t) { ids_[size_++] = t; }
  const GpuTypeId* begin() const { return ids_.data(); }
  const GpuTypeId* end() const { return ids_.data() + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  GpuTypeId front() const { return ids_[0]; }

 private:
  std::array<GpuTypeId, kMaxGpuTypes + 1> ids_;  // the first size_ are set
  std::size_t size_ = 0;
};

// The GPU types a job may run on ({kNone} for a job without GPUs), in the cluster's order.
TypeList AcceptedTypes(const ClusterState& state, const Job& job) {
  TypeList types;
  if (job.total_gpu().value() == 0) {
    types.push_back(kNone);
    return types;
  }
  for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) {
    if (job.gpu_types.Accepts(t)) types.push_back(t);
  }
  return types;
}

// Whether no GPU type the (valid) job accepts can ever take it: on each, a static quota limit
// refuses it or `ever_fits(t)` (EverFitOn, or the cycle's cache of it) says no.
template <typename EverFitsOn>
bool NoTypeCanEverRun(const ClusterState& state, const Job& job, EverFitsOn ever_fits) {
  const std::int64_t milli = job.total_gpu().value();
  for (GpuTypeId t : AcceptedTypes(state, job)) {
    if ((t == kNone || !engine::QuotaNeverFits(state, job.queue, t, milli)) && ever_fits(t))
      return false;
  }
  return true;
}

// What the validation needs to know of the pending list's ids: whether one occurs twice, and
// whether one is also a running job's. None repeats when the ids ascend (a driver that appends
// arrivals); ids within a range of 64 times the list's length (a driver's that counts them, in
// whatever order it keeps the list) are marked in a bitmap, no larger than the list of ids a sort
// would take; others are sorted. When fewer jobs run than wait (a backlog), the running ones are
// then looked up among them, so that no pending job need be looked up among the running ones.
struct PendingIds {
  bool repeated = false;
  bool running = false;
};
PendingIds CheckPendingIds(const ClusterState& state, std::span<const Job> pending) {
  PendingIds out;
  if (pending.empty()) return out;
  JobId low = pending[0].id, high = pending[0].id;
  bool ascending = true;
  for (std::size_t i = 1; i < pending.size(); ++i) {
    ascending = ascending && pending[i - 1].id < pending[i].id;
    low = std::min(low, pending[i].id);
    high = std::max(high, pending[i].id);
  }
  // (With more running jobs than pending ones, each pending job is looked up instead.)
  const std::unordered_map<JobId, RunningJob>& running = state.running();
  auto any_running = [&](auto&& contains) {
    if (running.size() > pending.size()) return true;
    for (const auto& [id, job] : running) {
      if (id >= low && id <= high && contains(id)) return true;
    }
    return false;
  };
  if (ascending) {
    out.running = any_running([&](JobId id) {
      auto it = std::lower_bound(pending.begin(), pending.end(), id,
                                 [](const Job& job, JobId key) { return job.id < key; });
      return it != pending.end() && it->id == id;
    });
    return out;
  }
  if (high - low < 64 * pending.size()) {
    std::vector<bool> seen(high - low + 1, false);
    for (const Job& job : pending) {
      out.repeated = out.repeated || seen[job.id - low];
      seen[job.id - low] = true;
    }
    out.running = any_running([&](JobId id) { return static_cast<bool>(seen[id - low]); });
    return out;
  }
  std::vector<JobId> ids;
  ids.reserve(pending.size());
  for (const Job& job : pending) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  out.repeated = std::adjacent_find(ids.begin(), ids.end()) != ids.end();
  out.running =
      any_running([&](JobId id) { return std::binary_search(ids.begin(), ids.end(), id); });
  return out;
}

// One scheduling cycle: the stages in order over the scratch state, and what they decided.
class Cycle {
 public:
  Cycle(ClusterState& state, std::span<const Job> pending, Millis now,
        const engine::CycleOptions& options)
      : cycle_(state),
        state_(state),
        pending_(pending),
        now_(now),
        options_(options),
        timer_(options.clock_micros) {
    plan_.now = now;
    if (options.ordering.policy == OrderPolicy::kFinishTimeFairness && options.preemption.enabled)
      lease_ = &ftf_.emplace(state, pending, options.backfill.default_runtime,
                             options.ordering.ftf_lease);
    if (options.ordering.policy == OrderPolicy::kGavel) {
      gavel_.emplace(state, pending, options.ordering);
      if (options.preemption.enabled) lease_ = &*gavel_;
    }
    plan_.binds.reserve(pending.size());  // PlacedJob points into it
    plan_.unplaced.reserve(pending.size());
    // A job id repeated in the pending list is refused after its first occurrence in order; the
    // set of ids seen is kept only when some id repeats (usually none does).
    const PendingIds ids = CheckPendingIds(state, pending);
    repeated_ids_ = ids.repeated;
    running_ids_ = ids.running;
    if (repeated_ids_) seen_.reserve(pending.size());
    // Only tainted (unusual) nodes can have a PreferNoSchedule taint.
    const NodeId nodes = static_cast<NodeId>(state.node_count());
    const IndexSet& unusual = state.UnusualNodes();
    for (NodeId n = unusual.Next(0, nodes); n < nodes && !soft_taints_;
         n = unusual.Next(n + 1, nodes)) {
      for (const Taint& t : state.node(n).taints) {
        soft_taints_ = soft_taints_ || t.effect == TaintEffect::kPreferNoSchedule;
      }
    }
  }

  Plan Run(std::span<const std::uint32_t> order_hint) {
    // One job is its own order (the usual cycle of a driver that runs one per arrival): no list.
    std::vector<std::uint32_t> ordered;
    timer_.Run(Stage::kOrder, [&] {
      if (pending_.size() > 1)
        ordered = engine::OrderPending(state_, pending_, now_, options_.ordering,
                                       options_.backfill.default_runtime, order_hint,
                                       gavel_ ? &*gavel_ : nullptr);
    });
    const std::uint32_t first = 0;
    const std::span<const std::uint32_t> order =
        pending_.size() > 1 ? std::span<const std::uint32_t>(ordered)
                            : std::span<const std::uint32_t>(&first, pending_.size());
    if (gavel_) {
      // Gavel: the model of the job's highest priority; none with no share anywhere.
      timer_.Run(Stage::kOrder, [&] {
        preferred_.assign(pending_.size(), kNone);
        for (std::size_t i = 0; i < pending_.size(); ++i) {
          if (pending_[i].total_gpu().value() <= 0) continue;
          const GpuTypeId type = gavel_->BestOf(pending_[i], now_).type;
          preferred_[i] = type == kNone ? engine::kNoModelLeft : type;
        }
      });
    } else if (options_.ordering.heterogeneity != HeterogeneityPolicy::kOff &&
               state_.has_throughput() && pending_.size() > 1) {
      timer_.Run(Stage::kOrder,
                 [&] { preferred_ = engine::PreferredModels(state_, pending_, order); });
    }
    const bool may_stop = MayStopEarly();
    // Jobs within their queue's guarantee first, in order; then, in order, those that must borrow.
    std::vector<std::uint32_t> deferred;
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (may_stop && k > 0 && NoneOfTheRestCanChange(order, k)) {
        rest_ = order.subspan(k);
        plan_.unexplained = rest_.size();
        break;
      }
      const std::uint32_t index = order[k];
      const std::size_t before = plan_.unplaced.size();
      if (!ScheduleJob(index, /*allow_borrow=*/false)) {
        deferred.push_back(index);
        // (A deferred head holds its queue until its turn in the second pass, unless it can
        // never run: then it holds nothing, there as here.)
        if (state_.queue(pending_[index].queue).spec.strict_fifo && !NeverRuns(index))
          fifo_blocked_.emplace(pending_[index].queue, index);
      } else if (plan_.unplaced.size() > before) {
        BlockStep(index);
      }
    }
    for (std::uint32_t index : deferred) {
      fifo_blocked_.erase(pending_[index].queue);  // its head is now taken in its turn
      const std::size_t before = plan_.unplaced.size();
      (void)ScheduleJob(index, /*allow_borrow=*/true);
      if (plan_.unplaced.size() > before) BlockStep(index);
    }
    holds_.Release(cycle_);  // reservations hold devices from this cycle's later jobs only
    // (Only jobs left unplaced may preempt: a cycle that placed every job has nothing to do here.)
    // (When the cycle may stop early, no waiting job may ever evict: the searches could only say
    // why, which the driver does not read.)
    if (options_.preemption.enabled && !plan_.unplaced.empty() && !may_stop) PreemptStep();
    cycle_.Discard();  // the state leaves as it came in, stamps included
    plan_.stable_until = StableUntil();
    plan_.capacity = Capacity();
    plan_.timings = timer_.Timings();
    if (ordered.empty() && pending_.size() == 1) ordered.push_back(0);
    plan_.order = std::move(ordered);
    return std::move(plan_);
  }

  // Whether the cycle may stop taking jobs before the end of the order (explain_every_job false):
  // only when none of the jobs it leaves could evict, take a share of the GPU models or read the
  // others' rhos, so that their entries would have changed nothing but their own.
  bool MayStopEarly() const {
    if (options_.explain_every_job || pending_.size() < 2) return false;
    if (options_.ordering.policy != OrderPolicy::kMultifactor ||
        (options_.ordering.heterogeneity != HeterogeneityPolicy::kOff && state_.has_throughput()))
      return false;
    return !options_.preemption.enabled || !Policy().AnyMayEverEvict();
  }

  // The least GPUs in all, and the least GPUs of a largest task, of the jobs from each position of
  // the order on (two necessary conditions for placing any of them).
  void RestNeeds(std::span<const std::uint32_t> order) {
    rest_milli_.assign(order.size() + 1, std::numeric_limits<std::int64_t>::max());
    rest_node_gpus_.assign(order.size() + 1, std::numeric_limits<std::int32_t>::max());
    for (std::size_t k = order.size(); k-- > 0;) {
      const CapacityNeed need = CapacityNeed::Of(pending_[order[k]]);
      rest_milli_[k] = std::min(rest_milli_[k + 1], need.milli);
      rest_node_gpus_[k] = std::min(rest_node_gpus_[k + 1], need.node_gpus);
    }
  }

  // Whether the jobs from position k of the order on would all be left unplaced, and change
  // nothing else: no reservation is left to give, and the free GPUs (those the reservations hold
  // too: a job that ends before them may use them) meet none of their needs. Capacity only
  // shrinks within a cycle, so the second pass cannot place them either.
  bool NoneOfTheRestCanChange(std::span<const std::uint32_t> order, std::size_t k) {
    if (static_cast<int>(plan_.reservations.size()) < options_.backfill.reservations) return false;
    if (rest_milli_.empty()) RestNeeds(order);  // (a cycle that gives no reservation needs none)
    // The free capacity changes only with a job placed or a reservation made.
    const std::size_t stamp = placed_.size() + plan_.reservations.size();
    if (stamp != free_stamp_) {
      free_stamp_ = stamp;
      holds_.Release(cycle_);
      free_milli_ = state_.FreeGpuMilli();
      free_node_gpus_ = state_.MaxNodeFreeGpus();
      holds_.Apply(cycle_);
    }
    return free_milli_ < rest_milli_[k] || free_node_gpus_ < rest_node_gpus_[k];
  }

  // Plan::stable_until: the first time after now at which an input this plan's decisions read
  // changes by the passage of time alone (on the state as it came in).
  Millis StableUntil() const {
    if (!plan_.binds.empty() || !plan_.evictions.empty()) return now_;
    // Only a job that waits can be decided otherwise later; one that can never run cannot. (The
    // jobs not taken are counted as waiting.)
    const bool waiting = !rest_.empty() || std::any_of(plan_.unplaced.begin(), plan_.unplaced.end(),
                                                       [](const Unplaced& u) {
                                                         return u.reason.verdict == Verdict::kWait;
                                                       });
    if (!waiting) return kForever;
    Millis until = kForever;
    auto upto = [&](Millis t) {
      if (t > now_ && t < until) until = t;
    };
    const OrderingWeights& w = options_.ordering;
    // Finish-time fairness: every waiting job's rho grows with its wait, each at its own rate, so
    // the order, and whom a waiting job may evict, may change at any time. Gavel's priorities
    // likewise, and with them the model a waiting job tries first.
    if (w.policy == OrderPolicy::kFinishTimeFairness &&
        (pending_.size() > 1 || options_.preemption.enabled))
      return now_;
    if (w.policy == OrderPolicy::kGavel) return now_;
    // The order. Fair share reads the usage of the last refresh; it matters only between queues:
    // among the pending jobs, or to the rule of who may evict whom when a queue may evict
    // lower-priority queues.
    if (pending_.size() > 1 && ((w.age > 0 && w.max_age > 0) || w.starvation_wait > 0)) {
      const Millis reorder = AgesReorderAt();
      if (reorder <= now_) return now_;
      upto(reorder);
    }
    if (w.fair_share != 0 && FairShareMatters()) {
      const Millis refresh = state_.NextFairShareRefresh(now_);
      if (refresh < 0) return now_;
      upto(refresh);
    }
    // Reservations: the running jobs' expected ends, fixed until a job passes its estimate, from
    // when its end slides with the time. Only a cycle that computed a reservation read them (one
    // that failed too: the order of the ends decides which trials its attempts reach).
    if (reserve_tried_) {
      for (const auto& [id, r] : state_.running()) {
        const Millis end = engine::EstimatedEnd(r.job, r.start_time, options_.backfill);
        if (end <= now_) return now_;
        upto(end);
      }
    }
    // Least attained service: a waiting job's starvation promotion, and a running job's service
    // reaching the next threshold (it may then be evicted by the waiting jobs of lower queues).
    if (IsLas(w.policy)) {
      if (w.starvation_factor > 0) {
        for (const Job& job : pending_) upto(engine::LasPromotionAt(job, w));
      }
      if (options_.preemption.enabled) {
        for (const auto& [id, r] : state_.running()) upto(NextThresholdAt(r));
      }
    }
    // Preemption: a victim's guard (minimum runtime, cooldown, eviction budget) lifts. A search
    // that found victims it could take but no set that served (the cap, the benefit, the bounded
    // search) read their costs, which move apart with the time: no promise then. (A refusal for
    // the loss alone only hardens with time, until a checkpoint, a change the driver sees.)
    // The guards that matter are those of the victims the searches met (a failed search meets
    // every running job it could evict but for a guard), so the earliest lift among them is the
    // next change, not that of every running job.
    if (costs_decided_) return now_;
    if (guard_lifts_ >= 0) upto(guard_lifts_);
    return until;
  }

  // Plan::capacity: the needs of the jobs that wait and could start before the next change.
  // Jobs behind the blocked head of a strict-FIFO queue start after it, unless the order within
  // the queue reads what an end changes (the Gittins index learns from finished jobs; finish-time
  // fairness and Gavel's allocation read the running jobs). Whether a victim search succeeds is not
  // a matter of the free capacity alone (an end also lowers its queue's usage): no promise when a
  // waiting job may ever evict.
  CapacityHold Capacity() const {
    CapacityHold hold;
    if (!plan_.binds.empty() || !plan_.evictions.empty() || may_evict_) return hold;
    hold.given = true;
    hold.timeless = true;
    const OrderPolicy policy = options_.ordering.policy;
    const bool heads_hold = policy != OrderPolicy::kGittins && !IsLeaseOrder(policy);
    for (const Unplaced& u : plan_.unplaced) {
      if (u.reason.verdict != Verdict::kWait) continue;
      if (heads_hold && u.reason.cause == Cause::kQueueOrder) {
        hold.timeless = false;  // the ages may yet put it ahead of its head (stable_until)
        continue;
      }
      hold.Add(CapacityNeed::Of(pending_[u.pending_index]));
    }
    // The jobs not taken: each as waiting, with its need (behind a blocked head, it would not
    // count; the time might then reorder it).
    for (std::uint32_t index : rest_) {
      const Job& job = pending_[index];
      if (job.queue < state_.queue_count() && state_.queue(job.queue).spec.strict_fifo)
        hold.timeless = false;
      hold.Add(CapacityNeed::Of(job));
    }
    // (Gavel's allocation is over every job: an arrival changes the models the others try.)
    hold.arrivals = (!options_.preemption.enabled || !Policy().AnyMayEverEvict()) &&
                    policy != OrderPolicy::kGavel;
    // (The heterogeneity policy shares the GPU models out among every waiting job, those behind
    // a blocked head too: there, an arrival may change whom the models go to.)
    const bool shares_models =
        options_.ordering.heterogeneity != HeterogeneityPolicy::kOff && state_.has_throughput();
    if (policy == OrderPolicy::kMultifactor && !shares_models) {
      for (const auto& [queue, index] : fifo_blocked_)
        hold.blocked_heads.push_back(pending_[index]);
      std::sort(hold.blocked_heads.begin(), hold.blocked_heads.end(),
                [](const Job& a, const Job& b) { return a.queue < b.queue; });
    }
    return hold;
  }

  // The victim policy, made once a cycle needs it (it reads the state as it came in).
  const engine::VictimPolicy& Policy() const {
    if (!policy_) policy_.emplace(state_, options_.ordering);
    return *policy_;
  }

  // When a running job's service reaches the next of the service thresholds, or -1.
  Millis NextThresholdAt(const RunningJob& r) const {
    const OrderingWeights& w = options_.ordering;
    const std::int64_t milli = r.job.total_gpu().value();
    const int queue = RunningLasQueue(state_, r, now_, w);
    if (queue >= static_cast<int>(w.las_thresholds.size()) || milli <= 0) return -1;
    const Millis threshold = w.las_thresholds[static_cast<std::size_t>(queue)];
    const Millis run = engine::LasRunToReach(w, threshold, milli);
    const Millis left = std::max<Millis>(0, run - r.job.attained);
    // (Service at another rate than the time is rounded to the millisecond: it reaches `left`
    // after more than (left - 1) / rate.)
    const double rate = ServiceRate(state_, r.job, r.allocation.gpu_type, w);
    if (rate == 1.0 || left == 0) return r.start_time + left;
    return r.start_time + static_cast<Millis>(static_cast<double>(left - 1) / rate);
  }

  // The first time the ages alone may reorder the pending jobs. Ages grow alike while they are
  // below max_age, so jobs that all age keep their order; a job whose age reaches max_age (or, not
  // yet submitted, starts to age) stops keeping pace, and an aging job then overtakes a capped one
  // whose key it reaches; a job that starts to starve goes ahead of those that do not. (Times are
  // taken a millisecond early: keys are floating point.)
  Millis AgesReorderAt() const {
    const OrderingWeights& w = options_.ordering;
    // A promoted job ages from its promotion, not its submission: no promise from the ages then.
    if (IsLas(w.policy)) {
      for (const Job& job : pending_) {
        if (engine::LasQueueEntry(job, now_, w) != job.submit_time) return now_;
      }
    }
    const engine::OrderingKeys keys(state_, w);
    Millis at = kForever;
    if (keys.starves()) {
      for (const Job& job : pending_) {
        if (!keys.Starving(job, now_)) at = std::min(at, job.submit_time + w.starvation_wait);
      }
    }
    if (!keys.ages()) return at;
    std::vector<double> capped;  // keys of the jobs whose age no longer grows
    for (const Job& job : pending_) {
      if (job.submit_time > now_) at = std::min(at, job.submit_time);
      if (job.submit_time + w.max_age > now_) {
        at = std::min(at, job.submit_time + w.max_age);
      } else {
        capped.push_back(keys.Key(job, now_));
      }
    }
    if (capped.empty()) return at;
    std::sort(capped.begin(), capped.end());
    const double per_ms = w.age / static_cast<double>(w.max_age);
    for (const Job& job : pending_) {
      if (job.submit_time > now_ || job.submit_time + w.max_age <= now_) continue;
      const double key = keys.Key(job, now_);
      // (A capped job of an equal key is ahead by its earlier submission: it is overtaken next.)
      auto above = std::lower_bound(capped.begin(), capped.end(), key);
      if (above == capped.end()) continue;
      const double reach = std::floor((*above - key) / per_ms);
      if (reach < static_cast<double>(at - now_)) at = now_ + static_cast<Millis>(reach) - 1;
    }
    return at;
  }

  // Whether the fair-share factor can change a decision: pending jobs of several queues, or a
  // queue that may evict lower-priority queues (the rule reads today's fair share).
  bool FairShareMatters() const {
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      if (state_.queue(q).spec.preempt_lower_priority && options_.preemption.enabled) return true;
    }
    for (const Job& job : pending_) {
      if (job.queue != pending_.front().queue) return true;
    }
    return false;
  }

 private:
  void NotPlaced(std::uint32_t index, Reason reason) {
    plan_.unplaced.push_back({pending_[index].id, index, std::move(reason)});
  }

  // One job through the per-job stages: validate, admit (queue order, GPU types, quota), place
  // across its GPU types, else explain. Returns false when the job fits (or, not placed on the
  // types its guarantee allows, may fit) only by borrowing and borrowing is not yet allowed.
  bool ScheduleJob(std::uint32_t index, bool allow_borrow) {
    // A job deferred from the first pass was validated there.
    if (!allow_borrow && !ValidateStep(index)) return true;
    if (BehindBlockedHead(index)) return true;
    const Admission admission = Admit(index, allow_borrow);
    if (admission.deferred) return false;
    if (admission.allowed.empty()) return true;  // refused, and said why
    // Heterogeneity, first pass: a job of several allowed models takes the one its comparative
    // advantage gives it, or none when every model's GPUs were given to others; on any other
    // model it waits for the second pass, after the jobs that the model suits better.
    if (!allow_borrow && !preferred_.empty() && admission.allowed.size() > 1 &&
        preferred_[index] != kNone) {
      const GpuTypeId model = preferred_[index];
      if (std::find(admission.allowed.begin(), admission.allowed.end(), model) !=
          admission.allowed.end()) {
        TypeList only;
        only.push_back(model);
        return PlaceStep(index, only);  // not placed: deferred to the second pass
      }
      if (model == engine::kNoModelLeft) return false;
    }
    if (PlaceStep(index, admission.allowed)) return true;
    // Other types it may take by borrowing: the second pass tries them all.
    if (!allow_borrow && admission.borrow_needed) return false;
    ExplainStep(index, admission);
    return true;
  }

  // validate: the job is well formed, refers to what exists, and its id is new.
  bool ValidateStep(std::uint32_t index) {
    const Job& job = pending_[index];
    std::optional<std::string> invalid =
        timer_.Run(Stage::kValidate, [&]() -> std::optional<std::string> {
          // (One pending job cannot repeat an id.)
          if ((repeated_ids_ && !seen_.insert(job.id).second) ||
              (running_ids_ && state_.FindRunning(job.id))) {
            return "job id " + std::to_string(job.id) + " is already pending or running";
          }
          return engine::ValidateJob(state_, job);
        });
    if (!invalid) return true;
    NotPlaced(index, Reason{Stage::kValidate, Verdict::kNever, Cause::kInvalid, 0, {}, *invalid});
    return false;
  }

  // The GPU types a job may be placed on this cycle, or why none.
  struct Admission {
    TypeList allowed;            // empty: refused (the reason is recorded) or deferred
    bool deferred = false;       // it fits only by borrowing, which waits for the second pass
    bool borrow_needed = false;  // some type its queue could take only by borrowing (first pass)
    // Types quota refuses for now (not by a static limit), and the first such refusal: a job
    // that can never be placed on the allowed types may still run on these once quota frees.
    TypeList quota_waits;
    engine::QuotaCheck wait_refusal;
  };

  // admit, first: a job of a strict-FIFO queue whose head is blocked waits behind it. (The cause
  // says it all, the queue being the job's own: no text is built for each of the many jobs behind
  // a blocked head.)
  bool BehindBlockedHead(std::uint32_t index) {
    if (fifo_blocked_.empty() || !fifo_blocked_.count(pending_[index].queue)) return false;
    // One that can never run waits for nothing: admit says why (and it blocks nothing).
    if (NeverRuns(index)) return false;
    NotPlaced(index, Reason{Stage::kPlace, Verdict::kWait, Cause::kQueueOrder, 0, {}, {}});
    return true;
  }

  // admit: some node has a GPU type the job accepts, and quota lets its queue take it on each
  // such type (in the first pass, within its guarantee).
  Admission Admit(std::uint32_t index, bool allow_borrow) {
    const Job& job = pending_[index];
    Admission out;
    const TypeList types = AcceptedTypes(state_, job);
    if (types.empty()) {
      NotPlaced(index, Reason{Stage::kFilter,
                              Verdict::kNever,
                              Cause::kGpuType,
                              static_cast<std::int32_t>(state_.node_count()),
                              {},
                              "no node has a GPU of an accepted type"});
      return out;
    }
    const std::int64_t milli = job.total_gpu().value();
    engine::QuotaCheck first_refusal;
    bool borrow_needed = false;
    timer_.Run(Stage::kQuota, [&] {
      for (GpuTypeId t : types) {
        engine::QuotaCheck check = engine::CheckQuota(state_, job.queue, t, milli);
        const bool never = !check.ok && engine::QuotaNeverFits(state_, job.queue, t, milli);
        // A type its queue could take only by borrowing waits for the second pass, whether
        // quota then lets it borrow or not: its refusal, and any eviction for it, come after
        // the jobs within their guarantee. (One that static limits refuse for ever is refused
        // now: it waits for nothing, and blocks no strict-FIFO queue meanwhile.)
        if (check.borrows && !allow_borrow && !never) {
          borrow_needed = true;
        } else if (!check.ok) {
          if (first_refusal.ok) first_refusal = check;
          if (!never) {
            if (out.quota_waits.empty()) out.wait_refusal = check;
            out.quota_waits.push_back(t);
          }
        } else {
          out.allowed.push_back(t);
        }
      }
    });
    out.borrow_needed = borrow_needed;
    if (!out.allowed.empty()) return out;
    if (borrow_needed) {
      out.deferred = true;
      return out;
    }
    // Never only when no type can ever take it: by a static quota limit or by the cluster.
    const bool never = std::none_of(out.quota_waits.begin(), out.quota_waits.end(),
                                    [&](GpuTypeId t) { return EverFits(index, t); });
    NotPlaced(index, Reason{Stage::kQuota,
                            never ? Verdict::kNever : Verdict::kWait,
                            first_refusal.cause,
                            0,
                            {},
                            first_refusal.detail});
    return out;
  }

  // place: on each GPU type quota allows, strictly (preferences held as requirements) first, then
  // relaxed if the job has any; the placement the policy ranks best is taken in the cycle.
  bool PlaceStep(std::uint32_t index, const TypeList& allowed) {
    const Job& job = pending_[index];
    const bool has_preferences = HasPreferences(job);
    const bool cacheable = job.affinity.empty();
    // Backfill: a job that ends before the earliest reservation may use reserved devices. A job
    // without an estimate is not trusted to end in time.
    const bool ends_before_reservations = !holds_.empty() && job.runtime_estimate > 0 &&
                                          now_ + job.runtime_estimate <= holds_.earliest_start();
    for (bool strict : {true, false}) {
      if (!strict && !has_preferences) break;
      // (Each type's placement is a trial, undone, when there are several to compare.)
      const bool compare = allowed.size() > 1;
      // Under a heterogeneity policy the model on which the job runs fastest wins, then the best
      // placement; a slower model than one it fits on is not tried.
      const bool by_throughput = compare &&
                                 options_.ordering.heterogeneity != HeterogeneityPolicy::kOff &&
                                 state_.has_throughput();
      std::optional<Allocation> best;
      engine::PlacementKey best_key;
      double best_speed = 0;
      for (GpuTypeId t : allowed) {
        const double speed = by_throughput ? state_.Throughput(job, t) : 0;
        if (best && speed < best_speed) continue;
        // The shape's key, built only when there is a failed shape to look up or one to record.
        auto shape_key = [&] {
          ShapeKey key = KeyOf(index, t);
          key.more = (strict ? 1 : 0) | (ends_before_reservations ? 2 : 0);
          return key;
        };
        if (cacheable && !failed_shapes_.empty() && failed_shapes_.Contains(shape_key())) continue;
        JobFilter filter = engine::MakeJobFilter(state_, job, t, strict, placed_);
        if (ends_before_reservations) holds_.Release(cycle_);
        engine::PlacementKey rank;
        std::optional<Allocation> allocation = timer_.Run(Stage::kPlace, [&] {
          if (!compare) return engine::PlaceJob(cycle_, filter, options_);
          Transaction trial(cycle_);
          return engine::PlaceJob(trial, filter, options_, &rank);
        });
        if (ends_before_reservations) holds_.Apply(cycle_);
        if (!allocation) {
          if (cacheable) failed_shapes_.Emplace(shape_key(), true);
          continue;
        }
        if (!best || speed > best_speed || rank < best_key) {
          best = std::move(allocation);
          best_key = rank;
          best_speed = speed;
        }
      }
      if (best) {
        if (compare) {  // taken again, on the state it was found on
          if (ends_before_reservations) holds_.Release(cycle_);
          for (const TaskAllocation& task : best->tasks) cycle_.Take(task);
          if (ends_before_reservations) holds_.Apply(cycle_);
        }
        cycle_.Charge(job.queue, best->gpu_type, job.total_gpu().value());
        plan_.binds.push_back({job.id, index, std::move(*best), now_});
        placed_.push_back({&job, &plan_.binds.back().allocation});
        return true;
      }
    }
    return false;
  }

  // explain: why the job was not placed, once per shape (and quota-allowed types) per cycle.
  void ExplainStep(std::uint32_t index, const Admission& admission) {
    const TypeList& allowed = admission.allowed;
    const Job& job = pending_[index];
    const bool cacheable = job.affinity.empty();
    const bool ends_before_reservations = !holds_.empty() && job.runtime_estimate > 0 &&
                                          now_ + job.runtime_estimate <= holds_.earliest_start();
    ShapeKey key;
    if (cacheable) {
      key = KeyOf(index, kNone);
      for (GpuTypeId t : allowed) {
        if (t == kNone) {
          key.more2 = 1;  // a job without GPUs
        } else {
          key.types |= std::uint64_t{1} << t;
        }
      }
      key.more = ends_before_reservations ? 1 : 0;
      if (const Reason* known = explained_.Find(key)) {
        NotPlaced(index, WaitForQuota(index, admission, *known));
        return;
      }
    }
    JobFilter filter =
        engine::MakeJobFilter(state_, job, allowed.front(), !HasPreferences(job), placed_);
    const Reason reason = timer_.Run(Stage::kExplain, [&] {
      Reason r = engine::ExplainPlacement(state_, filter, allowed);
      if (r.verdict == Verdict::kWait && !holds_.empty() && !ends_before_reservations)
        HeldByReservation(job, allowed, r);
      return r;
    });
    if (cacheable) explained_.Emplace(key, reason);
    NotPlaced(index, WaitForQuota(index, admission, reason));
  }

  // A job that can never be placed on the types quota allows now, but that some type quota
  // refuses for now could take, waits for quota: the reason says which limit. One that waits on
  // the allowed types too: the nodes of the types quota refuses are counted under the quota's
  // cause, not as lacking an accepted type, and the reason names the limit. (Per job: the
  // explanation is shared by the shape, the quota is its queue's.)
  Reason WaitForQuota(std::uint32_t index, const Admission& admission, const Reason& placement) {
    if (placement.verdict == Verdict::kNever) {
      for (GpuTypeId t : admission.quota_waits) {
        if (!EverFits(index, t)) continue;
        return Reason{Stage::kQuota,
                      Verdict::kWait,
                      admission.wait_refusal.cause,
                      0,
                      {},
                      admission.wait_refusal.detail};
      }
    }
    if (admission.quota_waits.empty()) return placement;
    Reason out = placement;
    const std::int32_t refused = RefusedNodes(admission);
    for (CauseCount& c : out.node_counts) {
      if (c.cause != Cause::kGpuType || refused == 0) continue;
      const std::int32_t moved = std::min(c.nodes, refused);
      c.nodes -= moved;
      out.node_counts.push_back({admission.wait_refusal.cause, moved});
      break;
    }
    std::erase_if(out.node_counts, [](const CauseCount& c) { return c.nodes == 0; });
    std::stable_sort(out.node_counts.begin(), out.node_counts.end(),
                     [](const CauseCount& a, const CauseCount& b) { return a.nodes > b.nodes; });
    out.detail = (out.detail.empty() ? "" : out.detail + "; ") + admission.wait_refusal.detail;
    return out;
  }

  // The nodes with a GPU type quota refuses for now and none it allows (counted once a cycle
  // for each pair of type sets: the many jobs of a backlog share a few).
  std::int32_t RefusedNodes(const Admission& admission) {
    auto bits = [](const TypeList& list) {
      std::uint64_t b = 0;
      for (GpuTypeId t : list) {
        if (t != kNone) b |= std::uint64_t{1} << t;
      }
      return b;
    };
    const std::uint64_t waits = bits(admission.quota_waits), allowed = bits(admission.allowed);
    auto [it, added] = refused_nodes_.try_emplace({waits, allowed}, 0);
    if (!added) return it->second;
    std::vector<bool> seen(state_.node_count(), false);
    for (GpuTypeId t : admission.quota_waits) {
      if (t == kNone) continue;
      for (NodeId n : state_.NodesOfType(t)) {
        if (seen[n]) continue;
        seen[n] = true;
        if ((state_.node(n).gpu_types.bits() & allowed) == 0) ++it->second;
      }
    }
    return it->second;
  }

  // The cycle's id of the shape of pending job `index`, the same for jobs of equal shape
  // (SameShape): the caches are keyed by it, so each job's shape is compared once a cycle.
  std::uint32_t ShapeOf(std::uint32_t index) {
    if (shape_of_.empty()) shape_of_.assign(pending_.size(), kNoShape);
    std::uint32_t& id = shape_of_[index];
    if (id != kNoShape) return id;
    const Job& job = pending_[index];
    const std::uint64_t hash = ShapeHash(job);
    auto [first, last] = shapes_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (SameShape(*shape_jobs_[it->second], job)) return id = it->second;
    }
    id = static_cast<std::uint32_t>(shape_jobs_.size());
    shape_jobs_.push_back(&job);
    shapes_.emplace(hash, id);
    return id;
  }

  // A cache key: the shape's id and the GPU type, to which the caller adds what else the cached
  // answer depends on.
  ShapeKey KeyOf(std::uint32_t index, GpuTypeId type) {
    ShapeKey key;
    key.shape = ShapeOf(index);
    key.type = type;
    return key;
  }

  // engine::CanNeverRun of a validated job, kept once a cycle per shape, accepted models and
  // queue (the jobs behind a blocked head ask it each).
  bool NeverRuns(std::uint32_t index) {
    const Job& job = pending_[index];
    auto never = [&] {
      return NoTypeCanEverRun(state_, job, [&](GpuTypeId t) { return EverFits(index, t); });
    };
    if (!job.affinity.empty()) return never();  // (a shape's key leaves the terms out)
    ShapeKey key = KeyOf(index, kNone);
    key.types = job.gpu_types.bits();  // (a shape leaves out the models it accepts)
    key.more = job.queue;
    auto [cached, added] = never_runs_.Emplace(key, false);
    if (added) *cached = never();
    return *cached;
  }

  // Whether the job could ever be placed on type t, whatever runs (once per shape and type per
  // cycle: the answer reads only the configuration).
  bool EverFits(std::uint32_t index, GpuTypeId t) {
    const Job& job = pending_[index];
    // (Its affinity terms, required or preferred, are read too: a key holds 63 of them.)
    if (job.affinity.size() >= 64) return engine::EverFitOn(state_, job, t).fits();
    ShapeKey key = KeyOf(index, t);
    key.more = job.affinity.size();
    for (std::size_t i = 0; i < job.affinity.size(); ++i) {
      if (job.affinity[i].required) key.more2 |= std::uint64_t{1} << i;
    }
    auto [fits, added] = ever_fits_.Emplace(key, false);
    if (added) *fits = engine::EverFitOn(state_, job, t).fits();
    return *fits;
  }

  // A job that would fit but for the devices held for the cycle's backfill reservations is told
  // so, with the reservation's owner and start, rather than "insufficient GPU" while GPUs are free.
  void HeldByReservation(const Job& job, const TypeList& allowed, Reason& reason) {
    holds_.Release(cycle_);
    bool fits = false;
    for (GpuTypeId t : allowed) {
      if (fits) break;
      JobFilter filter = engine::MakeJobFilter(state_, job, t, /*strict=*/false, placed_);
      Transaction trial(cycle_);
      fits = engine::PlaceJob(trial, filter, options_).has_value();
    }
    holds_.Apply(cycle_);
    if (!fits) return;
    const Reservation& first = *std::min_element(
        holds_.reservations().begin(), holds_.reservations().end(),
        [](const Reservation& a, const Reservation& b) { return a.start < b.start; });
    const Job& owner = pending_[first.pending_index];
    reason.stage = Stage::kBackfill;
    reason.cause = Cause::kReserved;
    reason.detail = "held for job " + (owner.name.empty() ? std::to_string(owner.id) : owner.name);
    reason.lifts_at = first.start;
  }

  // Whether the job has preferences that a strict placement holds as requirements.
  bool HasPreferences(const Job& job) const {
    return job.topology.mode == ConstraintMode::kPreferred || soft_taints_ ||
           std::any_of(job.affinity.begin(), job.affinity.end(),
                       [](const AffinityTerm& t) { return !t.required; });
  }

  // backfill (block and reserve): a job that was not placed blocks its queue if the queue is
  // strict FIFO, and the first such jobs (for lack of capacity) get a reservation that later jobs
  // may not delay.
  void BlockStep(std::uint32_t index) {
    const Job& job = pending_[index];
    Unplaced& entry = plan_.unplaced.back();
    if (entry.reason.cause == Cause::kQueueOrder) return;  // its queue is blocked already
    // A head that can never run blocks nothing (it would hold its queue for ever, as Kueue sets
    // an inadmissible workload aside); the jobs behind it are taken in their turn.
    if (state_.queue(job.queue).spec.strict_fifo &&
        !(entry.reason.verdict == Verdict::kNever &&
          (entry.reason.stage == Stage::kValidate || NeverRuns(index))))
      fifo_blocked_.emplace(job.queue, index);
    if (static_cast<int>(plan_.reservations.size()) >= options_.backfill.reservations ||
        entry.reason.verdict == Verdict::kNever || entry.reason.stage == Stage::kValidate ||
        entry.reason.stage == Stage::kQuota || entry.reason.cause == Cause::kQueueOrder) {
      return;
    }
    // A shape whose reservation failed fails again while the cycle's state is the same: nothing
    // placed or reserved since (Reserve reads the state, the jobs placed and the shape alone).
    if (failed_reservations_at_ != placed_.size()) {
      failed_reservations_.clear();
      failed_reservations_at_ = placed_.size();
    }
    const bool cacheable = job.affinity.empty();
    for (GpuTypeId type : AcceptedTypes(state_, job)) {
      if (type != kNone && !engine::CheckQuota(state_, job.queue, type, job.total_gpu().value()).ok)
        continue;
      reserve_tried_ = true;
      if (cacheable && failed_reservations_.Contains(KeyOf(index, type))) continue;
      JobFilter filter = engine::MakeJobFilter(state_, job, type, /*strict=*/false, placed_);
      holds_.Release(cycle_);
      std::optional<Reservation> r = timer_.Run(Stage::kBackfill, [&] {
        return engine::Reserve(cycle_, filter, placed_, now_, options_);
      });
      // A reservation is a promise only if the order still puts the job first when it starts:
      // a job whose age stops at max_age before then is overtaken by the jobs behind it that
      // still age (AgesReorderAt), and one of those would take the devices. It goes to them.
      const bool overtaken = r && OvertakenBefore(job, r->start, r->allocation.gpu_type);
      if (overtaken) r.reset();
      if (r) {
        r->pending_index = index;
        entry.reason.reserved_start = r->start;
        holds_.Add(*r);
        plan_.reservations.push_back(std::move(*r));
        failed_reservations_.clear();        // the holds changed
      } else if (cacheable && !overtaken) {  // (the shape itself may still be reserved)
        failed_reservations_.Emplace(KeyOf(index, type), true);
      }
      holds_.Apply(cycle_);
      if (r) break;
    }
  }

  // Whether a waiting job that the order now puts behind `job`, and that could take devices of
  // `type`, is ahead of it by `start` (the ages alone reorder: `job` reached max_age first, or the
  // other starts to starve first). A job of a strict-FIFO queue starts only as its queue's first
  // then: the others wait behind it.
  bool OvertakenBefore(const Job& job, Millis start, GpuTypeId type) const {
    const OrderingWeights& w = options_.ordering;
    // Ages alike reorder nothing while `job` still ages; a job behind it that starts to starve
    // first does.
    const bool capped = w.age > 0 && w.max_age > 0 && job.submit_time + w.max_age < start;
    if (w.policy != OrderPolicy::kMultifactor || (!capped && w.starvation_wait <= 0)) return false;
    const engine::OrderingKeys keys(state_, w);
    auto waits = [&](const Job& other) {
      return other.submit_time <= now_ && other.queue < state_.queue_count() &&
             other.priority_class < state_.priority_class_count();
    };
    std::unordered_map<QueueId, const Job*> first;  // strict-FIFO queue -> its first at `start`
    for (const Job& other : pending_) {
      if (!waits(other) || !state_.queue(other.queue).spec.strict_fifo) continue;
      const Job*& f = first[other.queue];
      if (f == nullptr || keys.Before(other, *f, start)) f = &other;
    }
    return std::any_of(pending_.begin(), pending_.end(), [&](const Job& other) {
      if (&other == &job || !waits(other) || (type != kNone && !other.gpu_types.Accepts(type)))
        return false;
      const auto head = first.find(other.queue);
      return (head == first.end() || head->second == &other) && !keys.Before(other, job, now_) &&
             keys.Before(other, job, start);
    });
  }

  // preempt: blocked jobs, in order, may evict cheaper work; each search is a transaction on the
  // scratch state, and nothing is evicted unless the preemptor is placed in this plan.
  void PreemptStep() {
    const engine::VictimPolicy& policy = Policy();
    std::int64_t budget = options_.preemption.max_gpus_per_cycle;
    int attempts = 0;
    std::unordered_set<JobId> evicted;
    // Shapes of a queue and class that found no victims, with what protected them and when the
    // first protection lifts.
    std::unordered_map<ShapeKey, std::pair<std::string, Millis>, ShapeKeyHash> hopeless;
    auto add_detail = [](Reason& reason, std::string_view more) {
      if (more.empty()) return;
      if (!reason.detail.empty()) reason.detail += "; ";
      reason.detail += more;
    };
    std::vector<bool> resolved(plan_.unplaced.size(), false);
    for (std::size_t u = 0; u < plan_.unplaced.size(); ++u) {
      Unplaced& entry = plan_.unplaced[u];
      if (entry.reason.verdict == Verdict::kNever || entry.reason.stage == Stage::kValidate)
        continue;
      may_evict_ = may_evict_ || policy.MayEverEvict(pending_[entry.pending_index].queue,
                                                     pending_[entry.pending_index].priority_class);
      // The cycle's guards, once used up, are named in every reason they cut short.
      if (budget == 0) {
        add_detail(entry.reason,
                   "no preemption: the cycle's eviction cap (preemption.max_gpus_per_cycle) is "
                   "used up");
        continue;
      }
      if (attempts >= options_.preemption.max_attempts_per_cycle) {
        add_detail(entry.reason,
                   "no preemption: the cycle's searches (preemption.max_attempts_per_cycle) are "
                   "used up");
        continue;
      }
      const Job& job = pending_[entry.pending_index];
      // (Under a lease order whom a job may evict depends on its own standing: no shape repeats
      // another's refusal.)
      const bool by_shape = job.affinity.empty() && !lease_;
      ShapeKey key;
      if (by_shape) {
        key = KeyOf(entry.pending_index, kNone);
        key.more = std::uint64_t{job.queue} << 32 |
                   static_cast<std::uint32_t>(state_.priority_class(job.priority_class).value);
        if (IsLas(options_.ordering.policy))
          key.more2 = static_cast<std::uint32_t>(PendingLasQueue(job, now_, options_.ordering)) + 1;
        if (auto it = hopeless.find(key); it != hopeless.end()) {
          add_detail(entry.reason, it->second.first);
          SetLifts(entry.reason, it->second.second);
          continue;
        }
      }
      ++attempts;
      engine::PreemptionRefusals refusals;
      for (GpuTypeId t : AcceptedTypes(state_, job)) {
        JobFilter filter = engine::MakeJobFilter(state_, job, t, /*strict=*/false, placed_);
        std::optional<engine::PreemptionResult> result = timer_.Run(Stage::kPreempt, [&] {
          return engine::Preempt(cycle_, policy, filter, now_, budget, evicted, options_, lease_,
                                 &refusals);
        });
        if (!result) continue;
        Millis start = now_;
        for (const engine::Victim& v : result->victims) {
          const RunningJob& r = *v.running;
          const PriorityClassSpec& pc = state_.priority_class(r.job.priority_class);
          Eviction e;
          e.job = r.job.id;
          e.preemptor = job.id;
          e.kind = v.kind;
          e.signal = pc.checkpoint_signal;
          e.signal_at = now_;
          e.stop_at = now_ + pc.grace_period;
          e.lost_gpu_hours = static_cast<double>(v.lost) / (3600.0 * kMillisPerSecond);
          start = std::max(start, e.stop_at);
          evicted.insert(r.job.id);
          if (budget > 0) budget = std::max<std::int64_t>(0, budget - r.job.total_gpu().value());
          plan_.evictions.push_back(std::move(e));
        }
        plan_.binds.push_back({job.id, entry.pending_index, std::move(result->allocation), start});
        placed_.push_back({&job, &plan_.binds.back().allocation});
        resolved[u] = true;
        break;
      }
      if (!resolved[u]) {
        costs_decided_ = costs_decided_ || refusals.eligible;
        if (refusals.lifts_at >= 0 && (guard_lifts_ < 0 || refusals.lifts_at < guard_lifts_))
          guard_lifts_ = refusals.lifts_at;
        const std::string why = refusals.Describe();
        add_detail(entry.reason, why);
        SetLifts(entry.reason, refusals.lifts_at);
        if (by_shape) hopeless.emplace(key, std::make_pair(why, refusals.lifts_at));
      }
    }
    // Preempting jobs are placed: they leave the unplaced list and drop their reservations.
    std::unordered_set<JobId> preempted;
    for (std::size_t u = 0; u < plan_.unplaced.size(); ++u) {
      if (resolved[u]) preempted.insert(plan_.unplaced[u].job);
    }
    std::erase_if(plan_.reservations,
                  [&](const Reservation& r) { return preempted.count(r.job) > 0; });
    std::erase_if(plan_.unplaced, [&](const Unplaced& u) { return preempted.count(u.job) > 0; });
  }

  // When the guards that kept a job's victims lifts, unless the reason already says when the
  // reservation that holds its devices starts.
  static void SetLifts(Reason& reason, Millis lifts_at) {
    if (lifts_at >= 0 && reason.cause != Cause::kReserved) reason.lifts_at = lifts_at;
  }

  // The cycle's tentative work: what it places, evicts and holds, undone when the cycle ends.
  Transaction cycle_;
  const ClusterState& state_;
  std::span<const Job> pending_;
  const Millis now_;
  const engine::CycleOptions& options_;
  StageTimer timer_;
  Plan plan_;
  bool soft_taints_ = false;
  bool costs_decided_ = false;  // a failed victim search read the costs of takeable victims
  Millis guard_lifts_ = -1;     // the earliest lift of a guard that refused a victim (-1: none)
  bool reserve_tried_ = false;  // a reservation was computed (found or not)
  bool may_evict_ = false;      // a waiting job may ever evict (VictimPolicy::MayEverEvict)
  std::vector<PlacedJob> placed_;
  // The shapes met (SameShape): a job of each, by id, and the ids by ShapeHash; and each pending
  // job's shape id (kNoShape: not yet asked).
  static constexpr std::uint32_t kNoShape = ~std::uint32_t{0};
  std::vector<const Job*> shape_jobs_;
  std::unordered_multimap<std::uint64_t, std::uint32_t> shapes_;
  std::vector<std::uint32_t> shape_of_;
  // Shapes (per type, strict or relaxed, before the reservations or not) that did not fit.
  ShapeCache<bool> failed_shapes_;
  // Why, per shape, allowed types, and whether it ends before the reservations.
  ShapeCache<Reason> explained_;
  ShapeCache<bool> ever_fits_;   // per shape and type: EverFits
  ShapeCache<bool> never_runs_;  // per shape, accepted models and queue: NeverRuns
  // RefusedNodes, by the bits of the types quota refuses for now and of those it allows.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::int32_t> refused_nodes_;
  // Shapes (per type) whose reservation failed, since placed_ had failed_reservations_at_ jobs
  // and the last reservation was made.
  ShapeCache<bool> failed_reservations_;
  std::size_t failed_reservations_at_ = 0;
  bool repeated_ids_ = false;       // some job id occurs more than once in the pending list
  bool running_ids_ = false;        // some pending job's id is a running job's
  std::unordered_set<JobId> seen_;  // the ids validated so far (only when some id repeats)
  engine::ReservationHolds holds_;  // devices reserved for blocked jobs (backfill)
  // Strict-FIFO queues whose head is blocked, and the head (its index in the pending list).
  std::unordered_map<QueueId, std::uint32_t> fifo_blocked_;
  // Under finish-time fairness with preemption: the rhos' shared inputs, from the state as it came.
  std::optional<engine::FinishTimeFairnessScope> ftf_;
  // Under Gavel's rounds: the allocation, from the state as it came.
  std::optional<engine::GavelScope> gavel_;
  // The lease order whose leases evict (either of the above, with preemption); else nullptr.
  const engine::LeaseOrder* lease_ = nullptr;
  mutable std::optional<engine::VictimPolicy> policy_;  // Policy()
  // Heterogeneity: the GPU model each pending job tries first (engine::PreferredModels); empty
  // when no heterogeneity policy applies.
  std::vector<GpuTypeId> preferred_;
  // Stopping early (explain_every_job false): the jobs not taken, in order; the least needs from
  // each position of the order on (RestNeeds); the free capacity as last read, and the count of
  // jobs placed and reservations made it was read at.
  std::span<const std::uint32_t> rest_;
  std::vector<std::int64_t> rest_milli_;
  std::vector<std::int32_t> rest_node_gpus_;
  std::size_t free_stamp_ = ~std::size_t{0};
  std::int64_t free_milli_ = 0;
  std::int32_t free_node_gpus_ = 0;
};

}  // namespace

namespace engine {

bool CanNeverRun(const ClusterState& state, const Job& job) {
  return ValidateJob(state, job) ||
         NoTypeCanEverRun(state, job, [&](GpuTypeId t) { return EverFitOn(state, job, t).fits(); });
}

Plan RunCycle(ClusterState& state, std::span<const Job> pending, Millis now,
              const CycleOptions& options, std::span<const std::uint32_t> order_hint) {
  return Cycle(state, pending, now, options).Run(order_hint);
}

}  // namespace engine
}  // namespace arbiter
