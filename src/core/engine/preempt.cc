// Preemption and reclaim: the cheapest set of victims whose eviction lets a blocked job fit.
//
// Who may be a victim and at what cost is the VictimPolicy's (victim_policy.h); this file searches.
// The steps of a search (Search):
//   1. scopes (Find): one node, then one domain of each operator level from the innermost out,
//      then the cluster, never past the preemptor's required level; single nodes come lazily in
//      the state's order of their residents' latest checkpoint;
//   2. bound (Bound, BestIn): a lower bound on each scope's cost orders the scopes, and the search
//      stops as soon as no unvisited scope can beat the best set found;
//   3. try a scope (TryScope), in a transaction that is discarded: evict its eligible victims
//      cheapest first until the preemptor fits, quota and placement both (EvictUntilFits), give
//      back every victim it can do without, most expensive first (Reprieve), and check the
//      minimum benefit (WorthIt);
//   4. commit (Find): the best set is evicted and the preemptor placed in a transaction committed
//      to the caller's.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "core/engine/lease_order.h"
#include "core/engine/stages.h"

namespace arbiter::engine {
namespace {

std::int64_t GpusOf(const RunningJob& r) { return r.job.total_gpu().value(); }

// Whether the victim runs on quota its queue borrowed (QuotaTree::RunsOnBorrowed).
bool RunsOnBorrowedQuota(const ClusterState& state, const RunningJob& r) {
  return state.quota_tree().RunsOnBorrowed(r.job.queue, r.allocation.gpu_type, GpusOf(r));
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
  Search(Transaction& tx, const VictimPolicy& policy, const JobFilter& filter, Millis now,
         std::int64_t gpu_budget, const std::unordered_set<JobId>& excluded,
         const CycleOptions& options, const LeaseOrder* lease, PreemptionRefusals* refusals)
      : refusals_(refusals),
        tx_(tx),
        policy_(policy),
        state_(tx.state()),
        filter_(filter),
        job_(*filter.job),
        now_(now),
        budget_(gpu_budget),
        excluded_(excluded),
        options_(options),
        lease_(lease) {
    const QuotaCheck quota = CheckQuota(state_, job_.queue, filter.type, job_.total_gpu().value());
    can_reclaim_ = state_.queue(job_.queue).spec.reclaim && quota.ok && !quota.borrows &&
                   !state_.quota_tree().Limiting(job_.queue, filter.type).empty();
    relations_ = policy_.RelationsOf(job_.queue, job_.priority_class, can_reclaim_);
    // Least attained service: a job of a higher service queue may be evicted from any queue of
    // the preemptor's tree (the search asks each running job).
    // The lease orders likewise: running work of its tree past its lease and of a lower standing
    // (the preemptor's, for the GPU model it would take).
    if (IsLas(options_.ordering.policy))
      las_queue_ = PendingLasQueue(job_, now_, options_.ordering);
    if (lease_) standing_ = lease_->Pending(job_, now_, filter.type);
    if (ServiceOrder()) {
      for (QueueId q = 0; q < state_.queue_count(); ++q) {
        if (policy_.SameTree(q, job_.queue)) victim_queues_ |= std::uint64_t{1} << (q % 64);
      }
    }
    // The queues whose work this preemptor may evict at all (of some class), as
    // NodeState::resident_queues bits.
    // And, per (queue, class) it may evict from, whether the order may protect such a victim
    // (only then is the victim's start read).
    const std::size_t classes = state_.priority_class_count();
    order_may_protect_.assign(state_.queue_count() * classes, 0);
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      for (PriorityClassId c = 0; c < classes; ++c) {
        const std::optional<Eviction::Kind> kind = relations_.Kind(q, c);
        if (!kind) continue;
        victim_queues_ |= std::uint64_t{1} << (q % 64);
        order_may_protect_[q * classes + c] =
            *kind != Eviction::Kind::kReclaim && policy_.OrderMayProtect(job_, q, c);
      }
    }
    // Quota of all GPU models together bounds the preemptor (limited in its tree, or a max on
    // its queue or one above): then evicting work of any model may make it fit quota.
    all_gpus_bound_ = filter.type != kNone && state_.quota_tree().Bounded(job_.queue, 0);
    for (const TaskGroup& g : job_.groups) {
      milli_ += g.count * g.request.gpu.value();
      const TaskRequest& r = g.request;
      if (!largest_ || std::tie(r.gpu, r.cpu, r.memory) >
                           std::tie(largest_->gpu, largest_->cpu, largest_->memory))
        largest_ = &r;
    }
  }

  std::optional<PreemptionResult> Run() { return Find(); }
  // Whether the order evicts by its own rule (least attained service, a lease order), which reads
  // each running job.
  bool ServiceOrder() const { return las_queue_ >= 0 || lease_ != nullptr; }

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
            floor = static_cast<double>(VictimPolicy::LostWork(missing, it->first, 0, now_));
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
    std::optional<Eviction::Kind> kind = relations_.Kind(r->job.queue, r->job.priority_class);
    if (las_queue_ >= 0 && policy_.SameTree(r->job.queue, job_.queue) &&
        RunningLasQueue(state_, *r, now_, options_.ordering) > las_queue_) {
      kind = Eviction::Kind::kAttainedService;
    }
    if (lease_ && policy_.SameTree(r->job.queue, job_.queue) &&
        now_ - r->start_time >= lease_->lease() && lease_->Running(*r, now_) < standing_) {
      kind = lease_->kind();
    }
    if (!kind) return std::nullopt;
    if (*kind == Eviction::Kind::kQueuePriority &&
        policy_.OnlyAboveGuarantee(*kind, r->job.queue, r->allocation.gpu_type) &&
        !RunsOnBorrowedQuota(state_, *r)) {
      Refused(Guard::kWithinGuarantee, -1, r->job.id);
      return std::nullopt;
    }
    if (!excluded_.empty() && excluded_.count(r->job.id)) return std::nullopt;
    Millis until = -1;
    if (std::optional<Guard> guard = policy_.GuardOf(*r, now_, &until)) {
      Refused(*guard, until, r->job.id);
      return std::nullopt;
    }
    if (*kind != Eviction::Kind::kAttainedService && (!lease_ || *kind != lease_->kind()) &&
        OrderMayProtect(r->job.queue, r->job.priority_class) && policy_.StartedAhead(job_, *r)) {
      Refused(Guard::kStartedAhead, -1, r->job.id);
      return std::nullopt;
    }
    if (*kind == Eviction::Kind::kReclaim && !RunsOnBorrowedQuota(state_, *r)) {
      Refused(Guard::kWithinGuarantee, -1, r->job.id);
      return std::nullopt;
    }
    if (refusals_) refusals_->eligible = true;
    Victim v = policy_.CostOf(*r, now_);
    v.kind = *kind;
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
  // the resident, unless a guard, a guarantee or an exclusion needs the running job itself.
  std::optional<double> QuickCost(const Resident& res) {
    if (ServiceOrder()) {  // (the service queue, or the rho, reads the running job)
      std::optional<Victim> v = Evaluate(res.job);
      if (!v) return std::nullopt;
      return v->cost;
    }
    const std::optional<Eviction::Kind> kind = relations_.Kind(res.queue, res.priority_class);
    if (!kind) return std::nullopt;
    const std::optional<Guard> protection = policy_.Protection(res.queue, res.priority_class);
    if (*kind == Eviction::Kind::kQueuePriority) {
      // The guarantee check needs the running job; take the full path.
      if (protection) {
        Refused(*protection, -1, res.job->job.id);
        return std::nullopt;
      }
      std::optional<Victim> v = Evaluate(res.job);
      if (!v) return std::nullopt;
      return v->cost;
    }
    if (protection) {  // never evicted: no need to look further
      Refused(*protection, -1, res.job->job.id);
      return std::nullopt;
    }
    if (!policy_.Unguarded(res.queue, res.priority_class) || res.evicted_before ||
        !excluded_.empty()) {
      std::optional<Victim> v = Evaluate(res.job);
      if (!v) return std::nullopt;
      return v->cost;
    }
    // Reclaim takes only work its queue runs on borrowed quota (the search re-checks as it goes).
    if (*kind == Eviction::Kind::kReclaim &&
        (res.gpu_type == kNone || res.gpus > Slack(res.queue, res.gpu_type)))
      return std::nullopt;
    if (OrderMayProtect(res.queue, res.priority_class) && policy_.StartedAhead(job_, *res.job)) {
      Refused(Guard::kStartedAhead, -1, res.job->job.id);
      return std::nullopt;
    }
    return policy_.Cost(VictimPolicy::LostWork(res.gpus, res.since, res.restart_overhead, now_),
                        res.priority_class);
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

  // How far queue q is above its nominal quota for GPU type t (QuotaTree::AboveNominal), as the
  // search started.
  std::int64_t Slack(QueueId q, GpuTypeId t) {
    const std::size_t key = q * state_.gpu_type_count() + t;
    if (slack_.empty())
      slack_.assign(state_.queue_count() * state_.gpu_type_count(), kUnknownSlack);
    std::int64_t& slack = slack_[key];
    if (slack == kUnknownSlack) slack = state_.quota_tree().AboveNominal(q, t);
    return slack;
  }
  static constexpr std::int64_t kUnknownSlack = INT64_MIN;

  bool OrderMayProtect(QueueId q, PriorityClassId c) const {
    return order_may_protect_[q * state_.priority_class_count() + c] != 0;
  }

  // Counts a job a guard protected from this preemptor (once, however often it is met).
  void Refused(Guard guard, Millis until, JobId job) {
    if (!refusals_) return;
    refusals_->Add(guard, job);
    if (until >= 0 && (refusals_->lifts_at < 0 || until < refusals_->lifts_at))
      refusals_->lifts_at = until;
  }

  // Whether a victim that may only be taken above its queue's guarantee still is, with the
  // victims chosen so far gone.
  bool StillAboveGuarantee(const Victim& v) const {
    if (!policy_.OnlyAboveGuarantee(v.kind, v.running->job.queue, v.running->allocation.gpu_type))
      return true;
    return RunsOnBorrowedQuota(state_, *v.running);
  }

  // Whether evicting work on node n may help the preemptor: the node has devices of its GPU
  // model (what they free, devices, CPU or memory, it may use), or quota of all models together
  // bounds it. Elsewhere an eviction frees neither capacity it can use nor quota it is refused
  // by: such jobs are no candidates, and are not counted among those a guard protected (a
  // gang of one model was told that jobs of another were "protected by their queue's
  // guarantee").
  bool MayHelpOn(NodeId n) const {
    return filter_.type == kNone || all_gpus_bound_ || state_.NodeDevices(n, filter_.type) > 0;
  }

  // Eligible victims with a task in [begin, end), each once, into `out` (in no particular order:
  // SortForEviction orders them). A job on several nodes of the scope is met once per node.
  void VictimsIn(NodeId begin, NodeId end, std::vector<const Victim*>& out) {
    out.clear();
    for (NodeId n = begin; n < end; ++n) {
      if (!MayHelpOn(n)) continue;
      for (const Resident& res : state_.node(n).residents) {
        if (const Victim* v = Eligible(res.job)) out.push_back(v);
      }
    }
    if (end > begin + 1) {
      std::sort(out.begin(), out.end(), std::less<>());
      out.erase(std::unique(out.begin(), out.end()), out.end());
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
      if (!MayHelpOn(n)) continue;
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

  // Tries one scope: evicts its victims in order until the preemptor fits, reprieves those it can
  // do without, and checks the minimum benefit. Everything is undone on return (the scope's
  // transaction is discarded).
  std::optional<Candidate> TryScope(NodeId begin, NodeId end,
                                    const std::vector<const Victim*>& victims) {
    Transaction scope(tx_);
    int reclaim = 0;  // reclaim victims evicted: the preemptor may then not borrow
    std::vector<const Victim*> evicted = EvictUntilFits(scope, begin, end, victims, reclaim);
    if (evicted.empty()) return std::nullopt;
    Candidate c = Reprieve(scope, begin, end, std::move(evicted), reclaim);
    if (!WorthIt(c)) return std::nullopt;
    return c;
  }

  // Evicts the victims in order (within the cycle's eviction budget, each still above its
  // queue's guarantee where it must be) until the preemptor fits; those evicted, or none when it
  // never fits.
  std::vector<const Victim*> EvictUntilFits(Transaction& scope, NodeId begin, NodeId end,
                                            const std::vector<const Victim*>& victims,
                                            int& reclaim) {
    std::vector<const Victim*> evicted;
    std::int64_t gpus = 0;
    for (const Victim* v : victims) {
      const std::int64_t g = GpusOf(*v->running);
      if (budget_ >= 0 && gpus + g > budget_) {
        if (refusals_) refusals_->cap = true;
        continue;
      }
      if (!StillAboveGuarantee(*v)) continue;
      scope.Evict(*v->running);
      evicted.push_back(v);
      gpus += g;
      reclaim += v->kind == Eviction::Kind::kReclaim;
      if (Fits(scope, begin, end, reclaim)) return evicted;
    }
    return {};
  }

  // Gives back every evicted victim the preemptor can do without, most expensive first: the
  // candidate set is those it cannot.
  Candidate Reprieve(Transaction& scope, NodeId begin, NodeId end,
                     std::vector<const Victim*> evicted, int reclaim) {
    std::stable_sort(evicted.begin(), evicted.end(),
                     [](const Victim* a, const Victim* b) { return a->cost > b->cost; });
    Candidate c;
    c.begin = begin;
    c.end = end;
    for (const Victim* v : evicted) {
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
    return c;
  }

  // The minimum benefit: what the victims lose per GPU the preemptor gains.
  bool WorthIt(const Candidate& c) {
    const std::int64_t threshold = options_.preemption.max_loss_per_gpu;
    if (threshold >= 0 && milli_ > 0 && c.lost * kMilliPerGpu > threshold * milli_) {
      if (refusals_) refusals_->benefit = true;
      return false;
    }
    return true;
  }

  PreemptionRefusals* refusals_;
  Transaction& tx_;  // the caller's: the chosen set is committed to it
  const VictimPolicy& policy_;
  VictimPolicy::Relations relations_;  // the preemptor's, to every queue and class
  const ClusterState& state_;
  const JobFilter& filter_;
  const Job& job_;
  Millis now_;
  std::int64_t budget_;
  const std::unordered_set<JobId>& excluded_;
  const CycleOptions& options_;
  bool can_reclaim_ = false;
  bool all_gpus_bound_ = false;  // quota of all models together bounds the preemptor (MayHelpOn)
  int las_queue_ = -1;       // the preemptor's service queue under least attained service; else -1
  const LeaseOrder* lease_;  // under a lease order; else nullptr
  double standing_ = 0;      // the preemptor's standing under a lease order
  std::int64_t milli_ = 0;
  const TaskRequest* largest_ = nullptr;
  std::unordered_map<const RunningJob*, std::optional<Victim>> victims_;
  std::uint64_t victim_queues_ = 0;
  std::vector<std::uint8_t> order_may_protect_;  // per queue x class: see the constructor
  // Bound's scratch: cost per milli-GPU, milli held.
  std::vector<std::pair<double, std::int64_t>> per_gpu_;
  std::vector<std::int64_t> slack_;  // per queue and GPU type, computed when first needed
};

}  // namespace

void PreemptionRefusals::Add(Guard guard, JobId job) {
  // A few guards at most; met once per resident a search bounds.
  auto it = std::find_if(guards.begin(), guards.end(),
                         [&](const Guarded& g) { return g.guard == guard; });
  if (it == guards.end()) it = guards.insert(guards.end(), Guarded{guard, {}});
  it->jobs.push_back(job);
}

std::string PreemptionRefusals::Describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  std::vector<const Guarded*> by_name;
  for (const Guarded& g : guards) by_name.push_back(&g);
  std::sort(by_name.begin(), by_name.end(), [](const Guarded* a, const Guarded* b) {
    return std::strcmp(GuardName(a->guard), GuardName(b->guard)) < 0;
  });
  for (const Guarded* g : by_name) {
    std::vector<JobId> jobs = g->jobs;
    std::sort(jobs.begin(), jobs.end());
    const auto distinct = std::unique(jobs.begin(), jobs.end()) - jobs.begin();
    add(std::to_string(distinct) + " protected by " + GuardName(g->guard));
  }
  if (benefit) add("victims would lose more than max_loss_per_gpu");
  if (cap) add("the cycle's eviction cap is reached");
  return out.empty() ? "" : "no preemption: " + out;
}

std::optional<PreemptionResult> Preempt(Transaction& tx, const VictimPolicy& policy,
                                        const JobFilter& filter, Millis now,
                                        std::int64_t gpu_budget,
                                        const std::unordered_set<JobId>& excluded,
                                        const CycleOptions& options, const LeaseOrder* lease,
                                        PreemptionRefusals* refusals) {
  Search search(tx, policy, filter, now, gpu_budget, excluded, options, lease, refusals);
  return search.Run();
}

}  // namespace arbiter::engine
