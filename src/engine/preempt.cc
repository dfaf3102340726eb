// Preemption and reclaim: the cheapest set of victims whose eviction lets a blocked job fit.
//
// The search is a transaction on the cycle's scratch state. For each candidate scope (one node,
// then one domain of each operator level from the innermost out, then the cluster, never past the
// preemptor's required level) it evicts the scope's eligible victims cheapest first until the
// preemptor fits, quota and placement both, then reprieves every victim it can do without, most
// expensive first, and undoes everything. Scopes are visited in order of a lower bound on their
// cost, so the search stops as soon as no unvisited scope can beat the best set found.
#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "engine/stages.h"

namespace arbiter::engine {
namespace {

constexpr const char* kClassNotPreemptible = "priority class not preemptible";
constexpr const char* kQueueNotPreemptable = "queue not preemptable";

std::int64_t GpusOf(const RunningJob& r) { return r.job.total_gpu().value(); }

QueueId RootOf(const ClusterState& state, QueueId q) {
  while (state.queue(q).parent != kNone) q = state.queue(q).parent;
  return q;
}

// Quota resources of `type` that limit queue q (the type itself, and "gpu" for all types).
std::vector<std::size_t> LimitedResources(const ClusterState& state, QueueId q, GpuTypeId type) {
  std::vector<std::size_t> out;
  if (type == kNone) return out;
  for (std::size_t r : {std::size_t{1} + type, std::size_t{0}}) {
    if (state.quota(q, r).limited) out.push_back(r);
  }
  return out;
}

// Whether the victim runs on quota its queue borrowed: evicting it leaves the queue at or above
// its nominal quota in every limited resource (so reclaim never takes a queue below its own
// guarantee, and the reclaimed queue has no claim to take it back).
bool RunsOnBorrowedQuota(const ClusterState& state, const RunningJob& r) {
  const std::vector<std::size_t> resources =
      LimitedResources(state, r.job.queue, r.allocation.gpu_type);
  if (resources.empty()) return false;
  for (std::size_t res : resources) {
    if (state.usage(r.job.queue, res) - GpusOf(r) < state.quota(r.job.queue, res).nominal)
      return false;
  }
  return true;
}

struct Candidate {
  std::vector<const Victim*> victims;
  std::int64_t lost = 0;
  double cost = 0;
  Millis youngest = 0;  // latest start among the victims
  NodeId begin = 0;
  NodeId end = 0;
};

// Better: cheaper, then fewer victims, then younger victims.
bool Better(const Candidate& a, const Candidate& b) {
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.victims.size() != b.victims.size()) return a.victims.size() < b.victims.size();
  return a.youngest > b.youngest;
}

class Search {
 public:
  Search(Transaction& tx, const JobFilter& filter, Millis now, std::int64_t gpu_budget,
         const std::unordered_set<JobId>& excluded, const EngineOptions& options,
         PreemptionRefusals* refusals)
      : refusals_(refusals),
        tx_(tx),
        state_(tx.state()),
        filter_(filter),
        job_(*filter.job),
        now_(now),
        budget_(gpu_budget),
        excluded_(excluded),
        options_(options) {
    const QuotaCheck quota = CheckQuota(state_, job_.queue, filter.type, job_.total_gpu().value());
    can_reclaim_ = state_.queue(job_.queue).spec.reclaim && quota.ok && !quota.borrows &&
                   !LimitedResources(state_, job_.queue, filter.type).empty();
    root_ = RootOf(state_, job_.queue);
    within_queue_ = state_.queue(job_.queue).spec.preempt_within_queue;
    across_queues_ = state_.queue(job_.queue).spec.preempt_lower_priority;
    queue_priority_ = state_.queue(job_.queue).spec.priority;
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      roots_.push_back(RootOf(state_, q));
      queue_priorities_.push_back(state_.queue(q).spec.priority);
    }
    // The queues whose work this preemptor may evict at all, as NodeState::resident_queues bits.
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      if (roots_[q] != root_) continue;
      const bool may = q == job_.queue ? within_queue_ : (OutranksQueue(q) || can_reclaim_);
      if (may) victim_queues_ |= std::uint64_t{1} << (q % 64);
    }
    value_ = state_.priority_class(job_.priority_class).value;
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c) {
      max_class_value_ = std::max(max_class_value_, state_.priority_class(c).value);
    }
    for (const TaskGroup& g : job_.groups) {
      milli_ += g.count * g.request.gpu.value();
      const TaskRequest& r = g.request;
      if (!largest_ || std::tie(r.gpu, r.cpu, r.memory) >
                           std::tie(largest_->gpu, largest_->cpu, largest_->memory))
        largest_ = &r;
    }
  }

  std::optional<PreemptionResult> Run() {
    std::optional<PreemptionResult> result = Find();
    if (refusals_) {
      for (const auto& [guard, n] : guard_counts_) refusals_->guards[guard] += n;
    }
    return result;
  }

 private:
  std::optional<PreemptionResult> Find() {
    const Topology& topo = state_.topology();
    const bool required = job_.topology.mode == ConstraintMode::kRequired;
    const int max_level = required ? job_.topology.level : -1;
    const NodeId all = static_cast<NodeId>(state_.node_count());

    std::optional<Candidate> best;
    // One node (an NVLink-level requirement is enforced by the placement inside the node).
    std::vector<std::pair<NodeId, NodeId>> scopes;
    if (filter_.type == kNone) {
      for (NodeId n = 0; n < all; ++n) scopes.emplace_back(n, n + 1);
      best = BestIn(scopes);
    } else {
      // Nodes that run something, the latest checkpoint first, visited lazily: on a node whose
      // residents last checkpointed at `since`, freeing m milli-GPU loses at least
      // m x (now - since), so the search stops as soon as no later node can beat the best.
      const std::int64_t missing = MissingOnAnyNode();
      const ClusterState::NodesBySinceSet& by_since = state_.NodesBySince(filter_.type);
      auto it = by_since.begin();
      best = BestIn(
          [&](std::pair<NodeId, NodeId>& scope, double& floor) {
            if (it == by_since.end()) return false;
            scope = {it->second, it->second + 1};
            floor = static_cast<double>(LostWork(missing, it->first, 0, now_));
            ++it;
            return true;
          },
          true);
    }
    for (int level = topo.node_level() - 1; !best && level >= std::max(0, max_level); --level) {
      scopes.clear();
      for (DomainId d : state_.domains_at(level))
        scopes.emplace_back(state_.domain(d).first_node, state_.domain(d).end_node);
      best = BestIn(scopes);
    }
    if (!best && max_level < 0) best = BestIn({{0, all}});
    if (!best) return std::nullopt;

    // The chosen set, evicted again and the preemptor placed, committed to the caller's
    // transaction (the placement is the one TryScope found on the same state).
    Transaction chosen(tx_);
    PreemptionResult result;
    for (const Victim* v : best->victims) {
      chosen.Evict(*v->running);
      result.victims.push_back(*v);
    }
    std::optional<Allocation> allocation =
        PlaceJobIn(chosen, filter_, best->begin, best->end, options_);
    if (!allocation) return std::nullopt;
    chosen.Charge(job_.queue, allocation->gpu_type, job_.total_gpu().value());
    chosen.Commit();
    result.allocation = std::move(*allocation);
    result.lost = best->lost;
    result.cost = best->cost;
    return result;
  }

  // The victim entry of a running job, or nullptr when this preemptor may not evict it; stable
  // for the search.
  const Victim* Eligible(const RunningJob* r) {
    auto it = victims_.find(r);
    if (it != victims_.end()) return it->second ? &*it->second : nullptr;
    std::optional<Victim>& slot = victims_[r];
    slot = Evaluate(r);
    return slot ? &*slot : nullptr;
  }

  // Whether this preemptor may evict `r`, and at what cost.
  std::optional<Victim> Evaluate(const RunningJob* r) {
    // The relation first (cheap), then the guards, then the cost.
    Eviction::Kind kind;
    if (r->job.queue == job_.queue) {
      if (!within_queue_ || state_.priority_class(r->job.priority_class).value >= value_)
        return std::nullopt;
      kind = Eviction::Kind::kWithinQueue;
    } else if (roots_[r->job.queue] != root_) {
      return std::nullopt;
    } else if (OutranksQueue(r->job.queue)) {
      // Quotas protect guarantees here too: only work above its queue's nominal quota.
      if (!LimitedResources(state_, r->job.queue, r->allocation.gpu_type).empty() &&
          !RunsOnBorrowedQuota(state_, *r))
        return std::nullopt;
      kind = Eviction::Kind::kQueuePriority;
    } else {
      if (!can_reclaim_) return std::nullopt;
      kind = Eviction::Kind::kReclaim;
    }
    if (!excluded_.empty() && excluded_.count(r->job.id)) return std::nullopt;
    Millis until = -1;
    if (const char* guard = EvictionGuard(state_, *r, now_, &until)) {
      if (refusals_ && refused_.insert(r).second) Refused(guard, until);
      return std::nullopt;
    }
    if (kind == Eviction::Kind::kReclaim && !RunsOnBorrowedQuota(state_, *r)) return std::nullopt;
    Victim v = CostOf(state_, *r, now_, max_class_value_);
    v.kind = kind;
    return v;
  }

  // Whether node n could host the largest task on an empty cluster; the common case (no taints, no
  // selector, no GPU memory floor) without the general filter.
  bool MayHost(NodeId n) const {
    const NodeState& node = state_.node(n);
    if (!node.taints.empty() || !job_.node_selector.empty() || largest_->gpu_memory.value() > 0) {
      return !FilterNodeEver(state_, n, *largest_, job_, filter_.type);
    }
    if (node.cpu < largest_->cpu || node.memory < largest_->memory) return false;
    if (filter_.type == kNone || largest_->gpu.value() == 0) return true;
    return state_.NodeDevices(n, filter_.type) >= std::max<std::int64_t>(1, largest_->whole_gpus());
  }

  // The cost of evicting a resident, or nullopt when this preemptor may not evict it. Reads only
  // the resident, unless a guard or reclaim needs the running job itself.
  std::optional<double> QuickCost(const Resident& res) {
    bool reclaim = false;
    if (res.queue == job_.queue) {
      if (!within_queue_ || res.class_value >= value_) return std::nullopt;
    } else if (roots_[res.queue] != root_) {
      return std::nullopt;
    } else if (OutranksQueue(res.queue)) {
      // The guarantee check needs the running job; take the full path.
      if (!res.class_preemptible || !res.queue_preemptable) return std::nullopt;
      std::optional<Victim> v = Evaluate(res.job);
      if (!v) return std::nullopt;
      return v->cost;
    } else {
      if (!can_reclaim_) return std::nullopt;
      reclaim = true;
    }
    if (!res.class_preemptible ||
        !res.queue_preemptable) {  // never evicted: no need to look further
      // A job with all its GPUs on this node is met once; others are deduplicated.
      if (refusals_ && (res.held == res.gpus || refused_.insert(res.job).second)) {
        Refused(res.class_preemptible ? kQueueNotPreemptable : kClassNotPreemptible, -1);
      }
      return std::nullopt;
    }
    if (!res.evictable || !excluded_.empty()) {
      std::optional<Victim> v = Evaluate(res.job);
      if (!v) return std::nullopt;
      return v->cost;
    }
    // Reclaim takes only work its queue runs on borrowed quota (the search re-checks as it goes).
    if (reclaim && (res.gpu_type == kNone || res.gpus > Slack(res.queue, res.gpu_type)))
      return std::nullopt;
    return WeightedCost(LostWork(res.gpus, res.since, res.restart_overhead, now_), res.class_value,
                        max_class_value_);
  }

  // The least milli-GPU the preemptor lacks on any single node: whole devices it needs beyond the
  // most any node has free (0 when it asks for shares, which partly used devices may hold).
  std::int64_t MissingOnAnyNode() const {
    std::int64_t whole = 0;
    for (const TaskGroup& g : job_.groups) {
      if (g.request.shared()) return 0;
      whole += g.count * g.request.whole_gpus();
    }
    std::int64_t most_free = 0;
    for (std::uint32_t c = state_.max_devices_per_node(); c >= 1 && most_free == 0; --c) {
      const IndexSet& set = state_.NodesWithFreeDevices(filter_.type, c);
      const NodeId end = static_cast<NodeId>(state_.node_count());
      if (set.Next(0, end) < end) most_free = c;
    }
    return std::max<std::int64_t>(0, whole - most_free) * kMilliPerGpu;
  }

  // How far queue q is above its nominal quota for GPU type t (the least over its limited
  // resources; a queue that no resource limits has no borrowed work), as the search started.
  std::int64_t Slack(QueueId q, GpuTypeId t) {
    const std::size_t key = q * state_.gpu_type_count() + t;
    if (slack_.empty())
      slack_.assign(state_.queue_count() * state_.gpu_type_count(), kUnknownSlack);
    std::int64_t& slack = slack_[key];
    if (slack == kUnknownSlack) {
      const std::vector<std::size_t> resources = LimitedResources(state_, q, t);
      slack = resources.empty() ? -1 : INT64_MAX;
      for (std::size_t r : resources)
        slack = std::min(slack, state_.usage(q, r) - state_.quota(q, r).nominal);
    }
    return slack;
  }
  static constexpr std::int64_t kUnknownSlack = INT64_MIN;

  // Counts a victim a guard protected (flushed into refusals_ when the search ends).
  void Refused(const char* guard, Millis until) {
    auto it = std::find_if(guard_counts_.begin(), guard_counts_.end(),
                           [&](const auto& g) { return g.first == guard; });
    if (it == guard_counts_.end()) {
      guard_counts_.emplace_back(guard, 1);
    } else {
      ++it->second;
    }
    if (until >= 0 && (refusals_->lifts_at < 0 || until < refusals_->lifts_at))
      refusals_->lifts_at = until;
  }

  // Whether a victim that may only be taken above its queue's guarantee still is, with the
  // victims chosen so far gone.
  bool StillAboveGuarantee(const Victim& v) const {
    if (v.kind == Eviction::Kind::kWithinQueue) return true;
    if (v.kind == Eviction::Kind::kQueuePriority &&
        LimitedResources(state_, v.running->job.queue, v.running->allocation.gpu_type).empty())
      return true;
    return RunsOnBorrowedQuota(state_, *v.running);
  }

  // Whether the preemptor may evict work of queue q by queue priority.
  bool OutranksQueue(QueueId q) const {
    return across_queues_ && queue_priorities_[q] < queue_priority_;
  }

  // Eligible victims with a task in [begin, end), each once, into `out`.
  void VictimsIn(NodeId begin, NodeId end, std::vector<const Victim*>& out) {
    out.clear();
    for (NodeId n = begin; n < end; ++n) {
      for (const Resident& res : state_.node(n).residents) {
        const Victim* v = Eligible(res.job);
        if (v && (end == begin + 1 || std::find(out.begin(), out.end(), v) == out.end()))
          out.push_back(v);
      }
    }
  }

  // The order victims are tried in: within-queue victims cheapest first; reclaim victims lowest
  // priority first, then cheapest; younger first among equals.
  void SortForEviction(std::vector<const Victim*>& victims) const {
    auto key = [&](const Victim* v) {
      const std::int32_t value = v->kind == Eviction::Kind::kReclaim
                                     ? state_.priority_class(v->running->job.priority_class).value
                                     : INT32_MIN;
      return std::make_tuple(value, v->cost, -v->running->start_time, v->running->job.id);
    };
    std::sort(victims.begin(), victims.end(),
              [&](const Victim* a, const Victim* b) { return key(a) < key(b); });
  }

  // Free milli-GPU of the preemptor's type on the nodes [begin, end): the sums the state keeps for
  // each domain inside the range (the outermost one at each step), node by node elsewhere. A
  // scope's check costs its number of domains, not of devices.
  std::int64_t FreeMilliIn(NodeId begin, NodeId end) const {
    if (filter_.type == kNone) return 0;
    std::int64_t milli = 0;
    for (NodeId n = begin; n < end;) {
      const NodeState& node = state_.node(n);
      auto whole = std::find_if(node.domains.begin(), node.domains.end(), [&](DomainId d) {
        return state_.domain(d).first_node == n && state_.domain(d).end_node <= end;
      });
      if (whole != node.domains.end()) {
        milli += state_.DomainFreeMilli(*whole, filter_.type);
        n = state_.domain(*whole).end_node;
        continue;
      }
      for (const DeviceState& d : node.devices)
        milli += d.type == filter_.type ? d.free.value() : 0;
      ++n;
    }
    return milli;
  }

  // A lower bound on the cost of a scope (the cheapest victims per GPU that free the missing GPUs,
  // taken fractionally), or nullopt when evicting everything there could not make room. A job on
  // several nodes contributes its cost per milli-GPU for what it holds on each node of the scope,
  // so the sum stays a lower bound.
  std::optional<double> Bound(NodeId begin, NodeId end) {
    if (end == begin + 1) {
      // Nothing here it may evict, or not even an empty node would host it.
      if ((state_.node(begin).resident_queues & victim_queues_) == 0) return std::nullopt;
      if (!MayHost(begin)) return std::nullopt;
    }
    per_gpu_.clear();
    std::int64_t held = 0;
    bool any = false;
    for (NodeId n = begin; n < end; ++n) {
      for (const Resident& res : state_.node(n).residents) {
        const std::optional<double> cost = QuickCost(res);
        if (!cost) continue;
        any = true;
        if (res.gpu_type == filter_.type && res.held > 0 && res.gpus > 0) {
          held += res.held;
          per_gpu_.emplace_back(*cost / static_cast<double>(res.gpus), res.held);
        }
      }
    }
    if (!any) return std::nullopt;
    double bound = 0;
    if (filter_.type != kNone) {
      std::int64_t missing = milli_ - FreeMilliIn(begin, end);
      if (held < missing) return std::nullopt;  // evicting everything here would not free enough
      std::sort(per_gpu_.begin(), per_gpu_.end());
      for (const auto& [unit, m] : per_gpu_) {
        if (missing <= 0) break;
        bound += unit * static_cast<double>(std::min(m, missing));
        missing -= m;
      }
    }
    return bound;
  }

  std::optional<Candidate> BestIn(const std::vector<std::pair<NodeId, NodeId>>& scopes) {
    std::size_t next = 0;
    return BestIn(
        [&](std::pair<NodeId, NodeId>& scope, double& floor) {
          if (next == scopes.size()) return false;
          scope = scopes[next++];
          floor = 0;
          return true;
        },
        false);
  }

  // The best candidate among scopes, tried in order of their bounds; a scope is tried only while
  // its bound can beat the best found. `next(scope, floor)` gives the scopes one by one (false at
  // the end). With `floored`, each comes with a lower bound of its bound known without visiting
  // it, nondecreasing along the order: a scope's bound is computed only once every unvisited
  // scope's floor is below the cheapest bound at hand, so the search can stop without looking at
  // most scopes (or even listing them).
  template <typename Next>
  std::optional<Candidate> BestIn(Next next, bool floored) {
    struct Entry {
      double bound;
      std::size_t order;  // ties: the order the scopes came in
      std::pair<NodeId, NodeId> scope;
      bool operator>(const Entry& o) const {
        return bound != o.bound ? bound > o.bound : order > o.order;
      }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
    std::vector<const Victim*> victims;
    std::optional<Candidate> best;
    std::pair<NodeId, NodeId> scope;
    double floor = 0;
    bool held = false;  // `scope` was taken from `next` and not yet bounded
    bool more = true;
    std::size_t order = 0;
    while (true) {
      while (more) {
        if (!held && !(more = next(scope, floor))) break;
        held = true;
        if (floored && !heap.empty() && floor >= heap.top().bound) break;
        if (best && floor >= best->cost) {
          more = false;  // nothing left can beat it
          break;
        }
        if (std::optional<double> bound = Bound(scope.first, scope.second))
          heap.push(Entry{*bound, order, scope});
        ++order;
        held = false;
      }
      if (heap.empty()) break;
      const Entry top = heap.top();
      heap.pop();
      if (best && best->cost <= top.bound) break;
      const auto [begin, end] = top.scope;
      VictimsIn(begin, end, victims);
      SortForEviction(victims);
      std::optional<Candidate> c = TryScope(begin, end, victims);
      if (c && (!best || Better(*c, *best))) best = std::move(c);
    }
    return best;
  }

  // Whether the preemptor fits [begin, end), quota and placement, with the victims evicted in
  // `scope` (the placement is tried in a transaction of its own and undone).
  bool Fits(Transaction& scope, NodeId begin, NodeId end, int reclaim_victims) {
    if (milli_ > FreeMilliIn(begin, end)) return false;
    const QuotaCheck quota = CheckQuota(state_, job_.queue, filter_.type, job_.total_gpu().value());
    if (!quota.ok || (reclaim_victims > 0 && quota.borrows)) return false;
    Transaction trial(scope);
    return PlaceJobIn(trial, filter_, begin, end, options_).has_value();
  }

  // Evicts victims of the scope in order until the preemptor fits, then reprieves those it can do
  // without; everything is undone on return (the scope's transaction is discarded).
  std::optional<Candidate> TryScope(NodeId begin, NodeId end,
                                    const std::vector<const Victim*>& victims) {
    Transaction scope(tx_);
    std::vector<const Victim*> removed;
    std::int64_t gpus = 0;
    int reclaim = 0;
    bool fits = false;
    for (const Victim* v : victims) {
      const std::int64_t g = GpusOf(*v->running);
      if (budget_ >= 0 && gpus + g > budget_) {
        if (refusals_) refusals_->cap = true;
        continue;
      }
      if (!StillAboveGuarantee(*v)) continue;
      scope.Evict(*v->running);
      removed.push_back(v);
      gpus += g;
      reclaim += v->kind == Eviction::Kind::kReclaim;
      if ((fits = Fits(scope, begin, end, reclaim))) break;
    }
    if (!fits) return std::nullopt;
    // Reprieve: give back every victim the preemptor can do without, most expensive first.
    std::vector<const Victim*> order = removed;
    std::stable_sort(order.begin(), order.end(),
                     [](const Victim* a, const Victim* b) { return a->cost > b->cost; });
    Candidate c;
    c.begin = begin;
    c.end = end;
    for (const Victim* v : order) {
      scope.Readmit(*v->running);
      reclaim -= v->kind == Eviction::Kind::kReclaim;
      if (Fits(scope, begin, end, reclaim)) continue;
      scope.Evict(*v->running);
      reclaim += v->kind == Eviction::Kind::kReclaim;
      c.victims.push_back(v);
    }
    for (const Victim* v : c.victims) {
      c.lost += v->lost;
      c.cost += v->cost;
      c.youngest = std::max(c.youngest, v->running->start_time);
    }
    // The minimum benefit: what the victims lose per GPU the preemptor gains.
    const std::int64_t threshold = options_.preemption.max_loss_per_gpu;
    if (threshold >= 0 && milli_ > 0 && c.lost * kMilliPerGpu > threshold * milli_) {
      if (refusals_) refusals_->benefit = true;
      return std::nullopt;
    }
    return c;
  }

  PreemptionRefusals* refusals_;
  Transaction& tx_;  // the caller's: the chosen set is committed to it
  const ClusterState& state_;
  const JobFilter& filter_;
  const Job& job_;
  Millis now_;
  std::int64_t budget_;
  const std::unordered_set<JobId>& excluded_;
  const EngineOptions& options_;
  bool can_reclaim_ = false;
  QueueId root_ = 0;
  std::int64_t milli_ = 0;
  const TaskRequest* largest_ = nullptr;
  std::unordered_map<const RunningJob*, std::optional<Victim>> victims_;
  std::unordered_set<const RunningJob*> refused_;  // counted once in the refusals
  std::vector<std::pair<const char*, int>> guard_counts_;
  std::int32_t max_class_value_ = 1;
  bool within_queue_ = true;
  bool across_queues_ = false;
  std::uint64_t victim_queues_ = 0;
  std::int32_t queue_priority_ = 0;
  std::vector<std::int32_t> queue_priorities_;
  std::vector<QueueId> roots_;  // per queue
  std::vector<std::pair<double, std::int64_t>>
      per_gpu_;                      // Bound's scratch: cost per milli-GPU, milli held
  std::vector<std::int64_t> slack_;  // per queue and GPU type, computed when first needed
  std::int32_t value_ = 0;           // the preemptor's priority-class value
};

}  // namespace

const char* EvictionGuard(const ClusterState& state, const RunningJob& running, Millis now,
                          Millis* until) {
  const PriorityClassSpec& pc = state.priority_class(running.job.priority_class);
  auto lifts = [&](Millis t) {
    if (until) *until = t;
  };
  lifts(-1);
  if (!pc.preemptible) return kClassNotPreemptible;
  if (!state.queue(running.job.queue).spec.preemptable) return kQueueNotPreemptable;
  if (now - running.start_time < pc.min_runtime) {
    lifts(running.start_time + pc.min_runtime);
    return "minimum runtime";
  }
  const std::vector<Millis>& times = running.evictions;
  if (!times.empty() && now - times.back() < pc.eviction_cooldown) {
    lifts(times.back() + pc.eviction_cooldown);
    return "eviction cooldown";
  }
  if (pc.max_evictions > 0) {
    auto first_in_window = std::find_if(times.begin(), times.end(),
                                        [&](Millis t) { return t > now - pc.eviction_window; });
    if (times.end() - first_in_window >= pc.max_evictions) {
      lifts(*first_in_window + pc.eviction_window);
      return "eviction budget";
    }
  }
  return nullptr;
}

std::string PreemptionRefusals::Describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  for (const auto& [guard, jobs] : guards) add(std::to_string(jobs) + " protected by " + guard);
  if (lifts_at >= 0)
    add("the first protection lifts at t=" + std::to_string(lifts_at / kMillisPerSecond) + "s");
  if (benefit) add("victims would lose more than max_loss_per_gpu");
  if (cap) add("the cycle's eviction cap is reached");
  return out.empty() ? "" : "no preemption: " + out;
}

std::int64_t LostWork(std::int64_t gpus, Millis since, Millis restart_overhead, Millis now) {
  return gpus * (std::max<Millis>(0, now - since) + restart_overhead) / kMilliPerGpu;
}

double WeightedCost(std::int64_t lost, std::int32_t class_value, std::int32_t max_value) {
  return static_cast<double>(lost) *
         (1.0 + std::max(0, class_value) / static_cast<double>(std::max(1, max_value)));
}

Victim CostOf(const ClusterState& state, const RunningJob& running, Millis now,
              std::int32_t max_value) {
  Victim v;
  v.running = &running;
  v.lost = LostWork(GpusOf(running), std::max(running.start_time, running.last_checkpoint),
                    running.job.restart_overhead, now);
  v.cost = WeightedCost(v.lost, state.priority_class(running.job.priority_class).value, max_value);
  return v;
}

std::optional<PreemptionResult> Preempt(Transaction& tx, const JobFilter& filter, Millis now,
                                        std::int64_t gpu_budget,
                                        const std::unordered_set<JobId>& excluded,
                                        const EngineOptions& options,
                                        PreemptionRefusals* refusals) {
  Search search(tx, filter, now, gpu_budget, excluded, options, refusals);
  return search.Run();
}

}  // namespace arbiter::engine
