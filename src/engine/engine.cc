#include "arbiter/engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "engine/stages.h"

namespace arbiter {
namespace {

using engine::JobFilter;
using engine::PlacedJob;

// Accumulates the calls and time of the cycle's stages; time only when a clock was injected.
class StageTimer {
 public:
  enum Id { kOrder, kValidate, kQuota, kPlace, kExplain, kBackfill, kPreempt, kCount };
  explicit StageTimer(const std::function<std::int64_t()>& clock) : clock_(clock) {}

  template <typename F>
  auto Run(Id id, F&& f) {
    ++calls_[id];
    const std::int64_t start = clock_ ? clock_() : 0;
    struct Stop {
      StageTimer* t;
      Id id;
      std::int64_t start;
      ~Stop() {
        if (t->clock_) t->micros_[id] += t->clock_() - start;
      }
    } stop{this, id, start};
    return f();
  }

  std::vector<StageTiming> Timings() const {
    static constexpr const char* kNames[kCount] = {"order",   "validate", "quota",  "place",
                                                   "explain", "backfill", "preempt"};
    std::vector<StageTiming> out;
    out.reserve(kCount);
    for (int i = 0; i < kCount; ++i) out.push_back({kNames[i], calls_[i], micros_[i]});
    return out;
  }

 private:
  const std::function<std::int64_t()>& clock_;
  std::int64_t calls_[kCount] = {};
  std::int64_t micros_[kCount] = {};
};

// Checks what the state cannot: the job is well formed and refers to what exists.
std::optional<std::string> Validate(const ClusterState& state, const Job& job) {
  if (job.groups.empty()) return "the job has no task groups";
  for (const TaskGroup& g : job.groups) {
    auto where = [&g] { return "group '" + g.name + "': "; };
    if (g.count <= 0) return where() + "task count must be positive";
    const std::int64_t gpu = g.request.gpu.value();
    if (gpu < 0 || (gpu > kMilliPerGpu && gpu % kMilliPerGpu != 0))
      return where() + "GPU request must be a share of one device (1..1000 milli) or whole devices";
    if (g.request.cpu.value() < 0 || g.request.memory.value() < 0 ||
        g.request.gpu_memory.value() < 0)
      return where() + "requests must not be negative";
  }
  if (job.queue >= state.queue_count()) return "unknown queue";
  if (!state.queue(job.queue).children.empty())
    return "queue '" + state.queue(job.queue).spec.name +
           "' is a cohort; jobs go to its leaf queues";
  if (job.priority_class >= state.priority_class_count()) return "unknown priority class";
  const int levels = static_cast<int>(state.topology().levels.size());
  if (job.topology.mode != ConstraintMode::kUnconstrained &&
      (job.topology.level < 0 || job.topology.level >= levels))
    return "topology level out of range";
  for (const AffinityTerm& t : job.affinity) {
    if (t.level < 0 || t.level >= levels) return "affinity level out of range";
  }
  return std::nullopt;
}

// The placement-relevant shape of a job on one GPU type: jobs of equal shape fit or fail alike,
// and within one cycle capacity only shrinks, so a shape that failed fails again.
// Appended to `key` (a buffer reused within the cycle: looking a shape up allocates nothing).
void AppendShapeKey(std::string& key, const Job& job, GpuTypeId type, bool strict) {
  auto add = [&key](std::int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  add(type);
  add(strict);
  add(job.topology.level);
  add(static_cast<int>(job.topology.mode));
  for (const TaskGroup& g : job.groups) {
    add(g.count);
    add(g.request.gpu.value());
    add(g.request.gpu_memory.value());
    add(g.request.cpu.value());
    add(g.request.memory.value());
  }
  for (const auto& [k, v] : job.node_selector) key += k + '\0' + v + '\1';
  key += '\2';
  for (const Toleration& t : job.tolerations) {
    key += t.key + '\0' + t.value + '\0' + static_cast<char>(t.op) +
           static_cast<char>(t.effect ? static_cast<int>(*t.effect) : 9) + '\1';
  }
}

// Whether a request of `milli` can never pass the queue's static limits (max, nominal + borrowing).
bool QuotaNeverFits(const ClusterState& state, QueueId queue, GpuTypeId type, std::int64_t milli) {
  for (std::size_t r : {std::size_t{0}, std::size_t{1} + type}) {
    for (QueueId q = queue; q != kNone; q = state.queue(q).parent) {
      const QuotaLimits& l = state.quota(q, r);
      if (!l.limited) break;
      if (l.max >= 0 && milli > l.max) return true;
      if (l.borrowing_limit >= 0 && milli > l.nominal + l.borrowing_limit) return true;
      if (state.queue(q).parent == kNone && milli > l.nominal) return true;
    }
  }
  return false;
}

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
  std::array<GpuTypeId, kMaxGpuTypes + 1> ids_{};
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

// One scheduling cycle: the stages in order over the scratch state, and what they decided.
class Cycle {
 public:
  Cycle(ClusterState& state, std::span<const Job> pending, Millis now, const EngineOptions& options)
      : cycle_(state),
        state_(state),
        pending_(pending),
        now_(now),
        options_(options),
        timer_(options.clock_micros) {
    plan_.now = now;
    plan_.binds.reserve(pending.size());  // PlacedJob points into it
    // A job id repeated in the pending list is refused after its first occurrence in order; the
    // set of ids seen is kept only when some id repeats (usually none does: one sort tells).
    if (pending.size() > 1) {
      std::vector<JobId> ids;
      ids.reserve(pending.size());
      for (const Job& job : pending) ids.push_back(job.id);
      std::sort(ids.begin(), ids.end());
      repeated_ids_ = std::adjacent_find(ids.begin(), ids.end()) != ids.end();
      if (repeated_ids_) seen_.reserve(pending.size());
    }
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

  Plan Run() {
    // One job is its own order (the usual cycle of a driver that runs one per arrival): no list.
    std::vector<std::uint32_t> ordered;
    timer_.Run(StageTimer::kOrder, [&] {
      if (pending_.size() > 1)
        ordered = engine::OrderPending(state_, pending_, now_, options_.ordering);
    });
    const std::uint32_t first = 0;
    const std::span<const std::uint32_t> order =
        pending_.size() > 1 ? std::span<const std::uint32_t>(ordered)
                            : std::span<const std::uint32_t>(&first, pending_.size());
    // Jobs within their queue's guarantee first, in order; then, in order, those that must borrow.
    std::vector<std::uint32_t> deferred;
    for (std::uint32_t index : order) {
      const std::size_t before = plan_.unplaced.size();
      if (!ScheduleJob(index, /*allow_borrow=*/false)) {
        deferred.push_back(index);
        if (state_.queue(pending_[index].queue).spec.strict_fifo)
          fifo_blocked_.insert(pending_[index].queue);
      } else if (plan_.unplaced.size() > before) {
        Blocked(index);
      }
    }
    for (std::uint32_t index : deferred) {
      fifo_blocked_.erase(pending_[index].queue);  // its head is now taken in its turn
      const std::size_t before = plan_.unplaced.size();
      (void)ScheduleJob(index, /*allow_borrow=*/true);
      if (plan_.unplaced.size() > before) Blocked(index);
    }
    holds_.Release(cycle_);  // reservations hold devices from this cycle's later jobs only
    // (Only jobs left unplaced may preempt: a cycle that placed every job has nothing to do here.)
    if (options_.preemption.enabled && !plan_.unplaced.empty()) Preempt();
    cycle_.Discard();  // the state leaves as it came in, stamps included
    plan_.timings = timer_.Timings();
    return std::move(plan_);
  }

 private:
  void NotPlaced(std::uint32_t index, Reason reason) {
    plan_.unplaced.push_back({pending_[index].id, index, std::move(reason)});
  }

  // Validates, checks quota, places (or explains) one job. Returns false when the job only fits by
  // borrowing and borrowing is not yet allowed.
  bool ScheduleJob(std::uint32_t index, bool allow_borrow) {
    const Job& job = pending_[index];
    // A job deferred from the first pass was validated there.
    if (!allow_borrow) {
      std::optional<std::string> invalid =
          timer_.Run(StageTimer::kValidate, [&]() -> std::optional<std::string> {
            // (One pending job cannot repeat an id.)
            if ((repeated_ids_ && !seen_.insert(job.id).second) ||
                state_.FindRunning(job.id)) {
              return "job id " + std::to_string(job.id) + " is already pending or running";
            }
            return Validate(state_, job);
          });
      if (invalid) {
        NotPlaced(index,
                  Reason{Stage::kValidate, Verdict::kNever, Cause::kInvalid, 0, {}, *invalid});
        return true;
      }
    }
    if (fifo_blocked_.count(job.queue)) {
      NotPlaced(index, Reason{Stage::kPlace,
                              Verdict::kWait,
                              Cause::kQueueOrder,
                              0,
                              {},
                              "queue " + state_.queue(job.queue).spec.name + " is strict FIFO"});
      return true;
    }
    const TypeList types = AcceptedTypes(state_, job);
    if (types.empty()) {
      NotPlaced(index, Reason{Stage::kFilter,
                              Verdict::kNever,
                              Cause::kGpuType,
                              static_cast<std::int32_t>(state_.node_count()),
                              {},
                              "no node has a GPU of an accepted type"});
      return true;
    }

    // Quota: the GPU types the queue may take this request of.
    const std::int64_t milli = job.total_gpu().value();
    TypeList allowed;
    engine::QuotaCheck first_refusal;
    bool borrow_needed = false;
    timer_.Run(StageTimer::kQuota, [&] {
      for (GpuTypeId t : types) {
        engine::QuotaCheck check = engine::CheckQuota(state_, job.queue, t, milli);
        if (!check.ok) {
          if (first_refusal.ok) first_refusal = check;
        } else if (check.borrows && !allow_borrow) {
          borrow_needed = true;
        } else {
          allowed.push_back(t);
        }
      }
    });
    if (allowed.empty()) {
      if (borrow_needed) return false;
      const bool never = std::all_of(types.begin(), types.end(), [&](GpuTypeId t) {
        return QuotaNeverFits(state_, job.queue, t, milli);
      });
      NotPlaced(index, Reason{Stage::kQuota,
                              never ? Verdict::kNever : Verdict::kWait,
                              first_refusal.cause,
                              0,
                              {},
                              first_refusal.detail});
      return true;
    }

    // Place: strictly (preferences held as requirements) first, then relaxed if the job has any.
    const bool has_preferences = job.topology.mode == ConstraintMode::kPreferred || soft_taints_ ||
                                 std::any_of(job.affinity.begin(), job.affinity.end(),
                                             [](const AffinityTerm& t) { return !t.required; });
    const bool cacheable = job.affinity.empty();
    // Backfill: a job that ends before the earliest reservation may use reserved devices. A job
    // without an estimate is not trusted to end in time.
    const bool ends_before_reservations = !holds_.empty() && job.runtime_estimate > 0 &&
                                          now_ + job.runtime_estimate <= holds_.earliest_start();
    for (bool strict : {true, false}) {
      if (!strict && !has_preferences) break;
      // The placement on each accepted type (given back when there are several), and the best by
      // the policy's rank of the node of the job's first task.
      // (Each type's placement is a trial, undone, when there are several to compare.)
      const bool compare = allowed.size() > 1;
      std::optional<Allocation> best;
      engine::PlacementKey best_key;
      for (GpuTypeId t : allowed) {
        // The shape's key, built only when there is a failed shape to look up or one to record.
        auto shape_key = [&]() -> const std::string& {
          key_.clear();
          AppendShapeKey(key_, job, t, strict);
          key_ += ends_before_reservations ? 'S' : 'L';
          return key_;
        };
        if (cacheable && !failed_shapes_.empty() && failed_shapes_.count(shape_key())) continue;
        JobFilter filter = engine::MakeJobFilter(state_, job, t, strict, placed_);
        if (ends_before_reservations) holds_.Release(cycle_);
        engine::PlacementKey rank;
        std::optional<Allocation> allocation = timer_.Run(StageTimer::kPlace, [&] {
          if (!compare) return engine::PlaceJob(cycle_, filter, options_);
          Transaction trial(cycle_);
          return engine::PlaceJob(trial, filter, options_, &rank);
        });
        if (ends_before_reservations) holds_.Apply(cycle_);
        if (!allocation) {
          if (cacheable) failed_shapes_.insert(shape_key());
          continue;
        }
        if (!best || rank < best_key) {
          best = std::move(allocation);
          best_key = rank;
        }
      }
      if (best) {
        if (compare) {  // taken again, on the state it was found on
          if (ends_before_reservations) holds_.Release(cycle_);
          for (const TaskAllocation& task : best->tasks) cycle_.Take(task);
          if (ends_before_reservations) holds_.Apply(cycle_);
        }
        cycle_.Charge(job.queue, best->gpu_type, milli);
        plan_.binds.push_back({job.id, index, std::move(*best), now_});
        placed_.push_back({&job, &plan_.binds.back().allocation});
        return true;
      }
    }
    // Explained once per shape (and quota-allowed types) per cycle, over all allowed types.
    if (cacheable) {
      key_.clear();
      AppendShapeKey(key_, job, kNone, false);
      for (GpuTypeId t : allowed) key_ += static_cast<char>(t);
      if (auto it = explained_.find(key_); it != explained_.end()) {
        NotPlaced(index, it->second);
        return true;
      }
    }
    JobFilter filter =
        engine::MakeJobFilter(state_, job, allowed.front(), !has_preferences, placed_);
    Reason reason = timer_.Run(StageTimer::kExplain,
                               [&] { return engine::ExplainPlacement(state_, filter, allowed); });
    if (cacheable) explained_.emplace(key_, reason);
    NotPlaced(index, std::move(reason));
    return true;
  }

  // A job that was not placed blocks its queue if the queue is strict FIFO, and the first such
  // jobs (for lack of capacity) get a reservation that later jobs may not delay.
  void Blocked(std::uint32_t index) {
    const Job& job = pending_[index];
    if (state_.queue(job.queue).spec.strict_fifo) fifo_blocked_.insert(job.queue);
    Unplaced& entry = plan_.unplaced.back();
    if (static_cast<int>(plan_.reservations.size()) >= options_.backfill.reservations ||
        entry.reason.verdict == Verdict::kNever || entry.reason.stage == Stage::kValidate ||
        entry.reason.stage == Stage::kQuota || entry.reason.cause == Cause::kQueueOrder) {
      return;
    }
    for (GpuTypeId type : AcceptedTypes(state_, job)) {
      if (type != kNone && !engine::CheckQuota(state_, job.queue, type, job.total_gpu().value()).ok)
        continue;
      JobFilter filter = engine::MakeJobFilter(state_, job, type, /*strict=*/false, placed_);
      holds_.Release(cycle_);
      std::optional<Reservation> r = timer_.Run(StageTimer::kBackfill, [&] {
        return engine::Reserve(cycle_, filter, placed_, now_, options_);
      });
      if (r) {
        r->pending_index = index;
        entry.reason.reserved_start = r->start;
        holds_.Add(*r);
        plan_.reservations.push_back(std::move(*r));
      }
      holds_.Apply(cycle_);
      if (r) break;
    }
  }

  // Blocked jobs, in order, may evict cheaper work; each search is a transaction on the scratch
  // state, and nothing is evicted unless the preemptor is placed in this plan.
  void Preempt() {
    std::int64_t budget = options_.preemption.max_gpus_per_cycle;
    int attempts = 0;
    std::unordered_set<JobId> evicted;
    // Shapes of a queue and class that found no victims, with what protected them.
    std::unordered_map<std::string, std::string> hopeless;
    auto add_detail = [](Reason& reason, const std::string& more) {
      if (!more.empty()) reason.detail += (reason.detail.empty() ? "" : "; ") + more;
    };
    std::vector<bool> resolved(plan_.unplaced.size(), false);
    for (std::size_t u = 0; u < plan_.unplaced.size(); ++u) {
      if (attempts >= options_.preemption.max_attempts_per_cycle || budget == 0) break;
      Unplaced& entry = plan_.unplaced[u];
      if (entry.reason.verdict == Verdict::kNever || entry.reason.stage == Stage::kValidate)
        continue;
      const Job& job = pending_[entry.pending_index];
      std::string key;
      if (job.affinity.empty()) {
        AppendShapeKey(key, job, kNone, false);
        key += std::to_string(job.queue) + '/' +
               std::to_string(state_.priority_class(job.priority_class).value);
        if (auto it = hopeless.find(key); it != hopeless.end()) {
          add_detail(entry.reason, it->second);
          continue;
        }
      }
      ++attempts;
      engine::PreemptionRefusals refusals;
      for (GpuTypeId t : AcceptedTypes(state_, job)) {
        JobFilter filter = engine::MakeJobFilter(state_, job, t, /*strict=*/false, placed_);
        std::optional<engine::PreemptionResult> result = timer_.Run(StageTimer::kPreempt, [&] {
          return engine::Preempt(cycle_, filter, now_, budget, evicted, options_, &refusals);
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
        const std::string why = refusals.Describe();
        add_detail(entry.reason, why);
        if (!key.empty()) hopeless.emplace(std::move(key), why);
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

  // The cycle's tentative work: what it places, evicts and holds, undone when the cycle ends.
  Transaction cycle_;
  const ClusterState& state_;
  std::span<const Job> pending_;
  const Millis now_;
  const EngineOptions& options_;
  StageTimer timer_;
  Plan plan_;
  bool soft_taints_ = false;
  std::vector<PlacedJob> placed_;
  std::string key_;  // the shape key being looked up (a buffer)
  std::unordered_set<std::string> failed_shapes_;      // shapes that did not fit this cycle
  std::unordered_map<std::string, Reason> explained_;  // why, per shape and allowed types
  bool repeated_ids_ = false;        // some job id occurs more than once in the pending list
  std::unordered_set<JobId> seen_;  // the ids validated so far (only when some id repeats)
  engine::ReservationHolds holds_;            // devices reserved for blocked jobs (backfill)
  std::unordered_set<QueueId> fifo_blocked_;  // strict-FIFO queues whose head is blocked
};

// The shapes of the running tasks, each weighted by its rounded count: the distribution the
// fragmentation-aware policies assume when they are given none.
std::vector<TaskShape> ObservedShapes(const ClusterState& state) {
  std::vector<TaskShape> shapes;
  shapes.reserve(state.running_task_shapes().size());
  for (const auto& [key, count] : state.running_task_shapes()) {
    shapes.push_back({key.gpu, key.cpu, key.memory, GpuTypeSet(key.gpu_types),
                      static_cast<double>(ClusterState::RoundedShapeCount(count))});
  }
  return shapes;
}

// The identity of the cluster's capacity, which weighs the shapes by the scarcity of their hosts:
// its numbers of nodes and devices, and of nodes of each GPU type. A cluster's nodes keep their
// capacity, and this costs nothing per cycle (unlike reading every node, which for the fill
// experiment's one-pod cycles costs about a quarter of the run); another cluster with the same
// counts but other CPUs would keep the model weighed for the first.
std::uint64_t CapacityFingerprint(const ClusterState& state) {
  std::uint64_t h = 0x13198a2e03707344ull;
  auto mix = [&h](std::uint64_t v) {
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 29;
  };
  mix(state.node_count());
  mix(state.device_count());
  mix(state.max_devices_per_node());
  for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) mix(state.NodesOfType(t).size());
  return h;
}

// The models of the running shapes the engine keeps (ModelOf). The 100,000-job Philly replay of
// the simulator benchmark builds 5,300 models with one kept, 1,300 with 8 and 1,050 with 64.
constexpr std::size_t kRecentModels = 8;

}  // namespace

// Whether the policy scores placements by expected fragmentation under a shape distribution.
bool UsesShapes(PlacementPolicy policy) {
  return policy == PlacementPolicy::kArbiter || policy == PlacementPolicy::kFgd ||
         policy == PlacementPolicy::kFrag;
}

// The default policy bounds the cost of its measure; kFrag and kFgd keep every shape they use.
std::size_t MaxShapes(const PlacementOptions& placement) {
  return placement.policy == PlacementPolicy::kArbiter ? placement.max_shapes : 0;
}

// Whether the policy weighs the shapes by the scarcity of their hosts in the cluster (FragModel),
// which makes its model depend on the cluster: all but FGD's own measure.
bool WeighsScarcity(PlacementPolicy policy) {
  return UsesShapes(policy) && policy != PlacementPolicy::kFgd;
}

Engine::Engine(EngineOptions options)
    : options_(std::move(options)),
      observed_(std::make_shared<ObservedModel>()),
      cycle_options_(std::make_shared<CycleOptions>()) {
  PlacementOptions& p = options_.placement;
  // A model that weighs scarcity is built by ModelOf, with the cluster.
  if (UsesShapes(p.policy) && !WeighsScarcity(p.policy) && !p.shapes.empty() && !p.model)
    p.model = std::make_shared<engine::FragModel>(p.shapes, p.policy == PlacementPolicy::kFgd,
                                                  MaxShapes(p));
}

std::shared_ptr<const engine::FragModel> Engine::ModelOf(const ClusterState& state) const {
  const PlacementOptions& p = options_.placement;
  const bool scarcity = WeighsScarcity(p.policy);
  // Given shapes do not change; observed ones do (the state keeps their digest), and the capacity
  // weighs them too.
  const std::uint64_t fingerprint =
      (p.shapes.empty() ? state.running_task_shapes_digest() : 0) ^
      (scarcity ? CapacityFingerprint(state) : 0);
  std::lock_guard<std::mutex> lock(observed_->mutex);
  std::vector<ObservedModel::Built>& recent = observed_->recent;
  if (!recent.empty() && recent.front().fingerprint == fingerprint) return recent.front().model;
  auto it = std::find_if(recent.begin(), recent.end(), [&](const ObservedModel::Built& b) {
    return b.fingerprint == fingerprint;
  });
  if (it != recent.end()) {
    std::rotate(recent.begin(), it, it + 1);
  } else {
    const std::vector<TaskShape> observed =
        p.shapes.empty() ? ObservedShapes(state) : std::vector<TaskShape>{};
    auto model = std::make_shared<engine::FragModel>(
        p.shapes.empty() ? std::span<const TaskShape>(observed)
                         : std::span<const TaskShape>(p.shapes),
        p.policy == PlacementPolicy::kFgd, MaxShapes(p), scarcity ? &state : nullptr);
    if (recent.size() == kRecentModels) recent.pop_back();
    recent.insert(recent.begin(), {fingerprint, std::move(model)});
  }
  return recent.front().model;
}

Plan Engine::Schedule(ClusterState& state, std::span<const Job> pending, Millis now) const {
  if (UsesShapes(options_.placement.policy) && !options_.placement.model) {
    std::shared_ptr<const engine::FragModel> model = ModelOf(state);
    std::shared_ptr<const EngineOptions> options;
    {
      std::lock_guard<std::mutex> lock(cycle_options_->mutex);
      if (!cycle_options_->options || cycle_options_->options->placement.model != model) {
        auto copy = std::make_shared<EngineOptions>(options_);
        copy->placement.model = std::move(model);
        cycle_options_->options = std::move(copy);
      }
      options = cycle_options_->options;
    }
    return Cycle(state, pending, now, *options).Run();
  }
  return Cycle(state, pending, now, options_).Run();
}

}  // namespace arbiter
