#include "config/lint.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/engine/stages.h"
#include "core/engine/victim_policy.h"

namespace arbiter::config {
namespace {

// "8", "0.5", "0.125".
std::string Gpus(std::int64_t milli) {
  std::string s = std::to_string(milli / kMilliPerGpu);
  if (milli % kMilliPerGpu != 0) {
    std::string frac = std::to_string(milli % kMilliPerGpu + kMilliPerGpu).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s;
}

// "a, b, c" with at most `most` names, then ", and N more".
std::string NameList(const std::vector<std::string>& names, std::size_t most = 6) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += fmt::format(", and {} more", names.size() - most);
  return out;
}

std::string Percent(std::int64_t part, std::int64_t whole) {
  return fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// A weight as a configuration writes it: "1000", "0.5", "11111.1".
std::string Number(double x) { return fmt::format("{:g}", x); }

// A bare memory number below this many MiB (1 GiB) is taken for a missing unit.
constexpr std::int64_t kBareMemoryFloorMiB = 1024;

// What the engine's preemption stage can do, from the configuration alone: the engine's own
// rules (engine::VictimPolicy, which the victim search asks too) applied to every pair of leaf
// queues and classes. Jobs name leaf queues only, so preemptors and victims are leaf queues. Where
// the configuration alone cannot tell (which classes a queue's jobs use, how much is borrowed at a
// given time, whether a queue is within its guarantee when it would reclaim), the analysis answers
// "can evict", so that the rules built on it stay quiet.
class Analysis {
 public:
  Analysis(const ClusterConfig& config, const ClusterState& state)
      : preemption_(config.engine.preemption.enabled),
        las_(IsLas(config.engine.ordering.policy) || IsLeaseOrder(config.engine.ordering.policy)),
        state_(state),
        policy_(state, config.engine.ordering) {
    const std::size_t n = state.queue_count();
    for (PriorityClassId c = 0; c < state.priority_class_count(); ++c)
      any_preemptible_ = any_preemptible_ || state.priority_class(c).preemptible;
    root_.resize(n);
    for (QueueId q = 0; q < n; ++q) {
      QueueId r = q;
      while (state.queue(r).parent != kNone) r = state.queue(r).parent;
      root_[q] = r;
    }
    // Per tree (indexed by root): the highest leaf priority.
    constexpr std::int64_t kNoPriority = std::numeric_limits<std::int64_t>::min();
    top_leaf_priority_.assign(n, kNoPriority);
    for (QueueId q = 0; q < n; ++q) {
      if (!leaf(q)) continue;
      top_leaf_priority_[root_[q]] =
          std::max<std::int64_t>(top_leaf_priority_[root_[q]], spec(q).priority);
    }
    evictable_.resize(n);
    evictable_leaves_.assign(n, 0);
    for (QueueId q = 0; q < n; ++q) {
      if (!leaf(q)) continue;
      evictable_[q] = preemption_ && any_preemptible_ && spec(q).preemptable &&
                      EvictableByRule(q, std::nullopt);
      if (evictable_[q]) ++evictable_leaves_[root_[q]];
    }
  }

  bool preemption() const { return preemption_; }
  const engine::VictimPolicy& policy() const { return policy_; }
  bool any_preemptible_class() const { return any_preemptible_; }
  bool leaf(QueueId q) const { return state_.queue(q).children.empty(); }
  bool same_tree(QueueId a, QueueId b) const { return root_[a] == root_[b]; }
  const QueueSpec& spec(QueueId q) const { return state_.queue(q).spec; }
  // Whether leaf queue q may use more than its nominal quota in some resource limited in its tree
  // (its own limits only: borrowing_limit not 0, and max, when given, above nominal).
  bool can_borrow(QueueId q) const { return policy_.MayEverBorrow(q); }

  // Whether work of leaf queue v in class `cls` (any preemptible class when unset) can be evicted
  // by some rule: some leaf queue's jobs, of some class, may evict it (VictimPolicy::Relation,
  // reclaim assumed possible for every queue that may ever reclaim), on some GPU type where the
  // eviction does not need borrowed work that v can never have. Assumes preemption is enabled, v
  // preemptable and the class preemptible.
  bool EvictableByRule(QueueId v, std::optional<PriorityClassId> cls) const {
    // Under a least-attained-service order, a job of the same tree in a lower service queue may
    // evict any preemptible work (Eviction kind attained_service); under finish-time fairness, one
    // of a higher rho (finish_time_fairness); under Gavel's rounds, one of a higher priority on
    // the victim's model (allocation_round).
    if (las_ && (cls ? state_.priority_class(*cls).preemptible : any_preemptible_)) return true;
    const std::size_t classes = state_.priority_class_count();
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      if (!leaf(q) || !same_tree(q, v)) continue;
      for (PriorityClassId by = 0; by < classes; ++by) {
        const engine::VictimPolicy::Relations relations =
            policy_.RelationsOf(q, by, policy_.MayEverReclaim(q));
        for (PriorityClassId victim = 0; victim < classes; ++victim) {
          if (cls ? victim != *cls : !state_.priority_class(victim).preemptible) continue;
          const std::optional<Eviction::Kind> kind = relations.Kind(v, victim);
          if (kind && (policy_.MayEverBorrow(v) || !NeedsBorrowedWork(*kind, v))) return true;
        }
      }
    }
    return false;
  }
  // Whether work of leaf queue v, in some class, can ever be evicted.
  bool Evictable(QueueId v) const { return evictable_[v]; }
  // Whether another leaf queue of v's tree can be evicted, or has a higher priority than v.
  bool TreeMeansEviction(QueueId v) const {
    return evictable_leaves_[root_[v]] - (evictable_[v] ? 1 : 0) > 0 ||
           top_leaf_priority_[root_[v]] > spec(v).priority;
  }

 private:
  // Whether an eviction of `kind` of v's work needs it to run above v's guarantee on every GPU
  // type of the cluster.
  bool NeedsBorrowedWork(Eviction::Kind kind, QueueId v) const {
    for (GpuTypeId t = 0; t < state_.gpu_type_count(); ++t) {
      if (!policy_.OnlyAboveGuarantee(kind, v, t)) return false;
    }
    return state_.gpu_type_count() > 0 || kind == Eviction::Kind::kReclaim;
  }

  bool preemption_;
  // A least-attained-service or lease order: its own evictions (kAttainedService,
  // kFinishTimeFairness, kAllocationRound), of any preemptible work of the tree.
  bool las_;
  const ClusterState& state_;
  engine::VictimPolicy policy_;
  bool any_preemptible_ = false;
  std::vector<QueueId> root_;
  std::vector<bool> evictable_;
  std::vector<int> evictable_leaves_;            // per root
  std::vector<std::int64_t> top_leaf_priority_;  // per root
};

class Linter {
 public:
  Linter(const ClusterConfig& config, const ClusterState& state, std::span<const Job> jobs,
         std::span<const BareMemory> job_memory)
      : config_(config), state_(state), jobs_(jobs), job_memory_(job_memory), a_(config, state) {
    for (std::size_t i = 0; i < config.cluster.queues.size(); ++i)
      queue_index_[config.cluster.queues[i].name] = i;
    for (std::size_t i = 0; i < config.cluster.priority_classes.size(); ++i)
      class_index_[config.cluster.priority_classes[i].name] = i;
  }

  std::vector<LintWarning> Run() {
    ClassProtection();
    AgingWithoutMinRuntime();
    AgingOvertakesEvictingClass();
    AgedJobPassedAgain();
    HeterogeneityWithoutThroughput();
    HighPriorityQueueWithoutQuota();
    NothingEvicts();
    GuaranteesExceedCapacity();
    LimitsAboveCluster();
    TopClassesAlike();
    PreemptionCapZero();
    MemoryWithoutUnit(config_.bare_memory);
    MemoryWithoutUnit(job_memory_);
    if (!jobs_.empty()) {
      TopClassMajority();
      JobsWithoutCheckpoints();
    }
    ExampleTokens();
    AliasSpelling();
    return std::move(out_);
  }

 private:
  std::string QueueField(QueueId q) const {
    auto it = queue_index_.find(state_.queue(q).spec.name);
    return it == queue_index_.end() ? "queues" : fmt::format("queues[{}]", it->second);
  }
  std::string ClassField(PriorityClassId c) const {
    auto it = class_index_.find(state_.priority_class(c).name);
    return it == class_index_.end() ? "priority_classes"
                                    : fmt::format("priority_classes[{}]", it->second);
  }
  std::string QueueNames(const std::vector<QueueId>& queues) const {
    std::vector<std::string> names;
    for (QueueId q : queues) names.push_back(state_.queue(q).spec.name);
    return NameList(names);
  }
  void Warn(const char* code, std::string field, std::string message) {
    out_.push_back({code, std::move(field), std::move(message)});
  }

  // preemptible-class-without-protection: a preemptible class whose jobs something can evict,
  // with no minimum runtime, no eviction budget and no cooldown.
  void ClassProtection() {
    if (!a_.preemption()) return;
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c) {
      const PriorityClassSpec& pc = state_.priority_class(c);
      if (!pc.preemptible || pc.min_runtime != 0 || pc.max_evictions != 0 ||
          pc.eviction_cooldown != 0)
        continue;
      bool evictable = false;
      for (QueueId v = 0; v < state_.queue_count() && !evictable; ++v) {
        evictable = a_.leaf(v) && a_.spec(v).preemptable && a_.EvictableByRule(v, c);
      }
      if (!evictable) continue;
      Warn(kLintPreemptibleClassWithoutProtection, ClassField(c),
           fmt::format(
               "priority class '{}' is preemptible with no min_runtime, no max_evictions and no "
               "eviction_cooldown: nothing bounds how often one of its jobs is evicted, and a job "
               "that has just (re)started has lost the least work, so it is the cheapest victim "
               "again and again and may never reach its first checkpoint; set min_runtime (e.g. "
               "the checkpoint interval of its jobs), or max_evictions with eviction_window, or "
               "eviction_cooldown",
               pc.name));
    }
  }

  // ---- The order's aging ----

  const OrderingWeights& ordering() const { return config_.engine.ordering; }
  bool Aging() const { return ordering().age > 0 && ordering().max_age > 0; }
  std::string AgingText() const {
    return fmt::format("ordering.age_weight {} over ordering.max_age {}", Number(ordering().age),
                       DurationText(ordering().max_age));
  }

  // Whether the engine's order, by its weights alone (no starvation_wait), puts a job of class
  // `low` in queue q that has waited max_age ahead of a job of class `high` of the same queue that
  // has just arrived.
  bool AgedAhead(QueueId q, PriorityClassId low, PriorityClassId high) const {
    OrderingWeights weights = ordering();
    weights.starvation_wait = 0;
    std::vector<Job> two(2);
    two[0].id = 1;
    two[0].queue = q;
    two[0].priority_class = low;
    two[0].submit_time = 0;
    two[1].id = 2;
    two[1].queue = q;
    two[1].priority_class = high;
    two[1].submit_time = ordering().max_age;
    return engine::OrderPending(state_, two, ordering().max_age, weights).front() == 0;
  }
  // Pairs (low, high) of classes, each with the leaf queues where jobs of both classes may be
  // (with jobs, where some are), `keep` holds and AgedAhead.
  using ClassPairs = std::map<std::pair<PriorityClassId, PriorityClassId>, std::vector<QueueId>>;
  template <class Keep>
  ClassPairs AgedAheadPairs(Keep keep) const {
    std::set<std::pair<QueueId, PriorityClassId>> used;  // (queue, class) of some job
    for (const Job& j : jobs_) used.emplace(j.queue, j.priority_class);
    auto may_have = [&](QueueId q, PriorityClassId c) {
      return jobs_.empty() || used.count({q, c}) > 0;
    };
    ClassPairs pairs;
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      if (!a_.leaf(q)) continue;
      for (PriorityClassId high = 0; high < state_.priority_class_count(); ++high) {
        if (!may_have(q, high)) continue;
        for (PriorityClassId low = 0; low < state_.priority_class_count(); ++low) {
          if (low == high || !may_have(q, low) || !keep(q, low, high)) continue;
          if (AgedAhead(q, low, high)) pairs[{low, high}].push_back(q);
        }
      }
    }
    return pairs;
  }
  // What the order gives a job of class `high` over one of class `low` in queue q that waited as
  // long.
  double ClassLead(QueueId q, PriorityClassId low, PriorityClassId high) const {
    Job job;
    job.queue = q;
    job.priority_class = high;
    const double key_high = engine::OrderingKey(state_, job, 0, ordering());
    job.priority_class = low;
    return key_high - engine::OrderingKey(state_, job, 0, ordering());
  }

  // aging-without-min-runtime: with aging on, a preemptible class whose jobs something can evict,
  // with no min_runtime but with max_evictions or eviction_cooldown (without any of the three,
  // preemptible-class-without-protection says it).
  void AgingWithoutMinRuntime() {
    if (!a_.preemption() || !Aging()) return;
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c) {
      const PriorityClassSpec& pc = state_.priority_class(c);
      if (!pc.preemptible || pc.min_runtime != 0) continue;
      if (pc.max_evictions == 0 && pc.eviction_cooldown == 0) continue;
      bool evictable = false;
      for (QueueId v = 0; v < state_.queue_count() && !evictable; ++v) {
        evictable = a_.leaf(v) && a_.spec(v).preemptable && a_.EvictableByRule(v, c);
      }
      if (!evictable) continue;
      const std::string guards = pc.max_evictions == 0 ? "eviction_cooldown"
                                 : pc.eviction_cooldown == 0
                                     ? "max_evictions"
                                     : "max_evictions and eviction_cooldown";
      Warn(kLintAgingWithoutMinRuntime, ClassField(c),
           fmt::format(
               "priority class '{}' is preemptible with no min_runtime while aging is on ({}): "
               "a job of the class that waited until aging brought it to the front can be evicted "
               "as soon as it has started, before it has made any progress, and then waits "
               "again; its {} act{} only once it has been evicted, so a started job has no "
               "protected time to make progress; set min_runtime (e.g. the checkpoint interval "
               "of its jobs)",
               pc.name, AgingText(), guards, guards.find(" and ") == std::string::npos ? "s" : ""));
    }
  }

  // heterogeneity-without-throughput: ordering.heterogeneity is on, and it has nothing to choose
  // between: no gpu_throughput matrix, fewer than two GPU models with devices, or (with jobs) no
  // job whose label names a row of the matrix. Every job then runs alike on every model.
  void HeterogeneityWithoutThroughput() {
    if (ordering().heterogeneity == HeterogeneityPolicy::kOff) return;
    const std::string policy = HeterogeneityPolicyName(ordering().heterogeneity);
    std::string why;
    std::size_t models = 0;
    for (GpuTypeId t = 0; t < state_.gpu_type_count(); ++t) models += state_.TypeDevices(t) > 0;
    if (!state_.has_throughput()) {
      why = "the configuration has no gpu_throughput matrix";
    } else if (models < 2) {
      why = fmt::format("the cluster has {} GPU model{} with devices", models,
                        models == 1 ? "" : "s");
    } else if (!jobs_.empty() && std::none_of(jobs_.begin(), jobs_.end(), [&](const Job& j) {
                 return state_.HasThroughputRow(j);
               })) {
      why = "no job's label names a workload of gpu_throughput";
    } else {
      return;
    }
    Warn(kLintHeterogeneityWithoutThroughput, "scheduler.ordering.heterogeneity",
         fmt::format("heterogeneity is '{}' but {}: every job runs alike on every GPU model, so "
                     "the policy has nothing to choose between{}; add gpu_throughput with a row "
                     "for each kind of job (labelled with its `label`, default `model`) and a "
                     "cluster of several GPU models, or set heterogeneity: none",
                     policy, why,
                     ordering().heterogeneity == HeterogeneityPolicy::kMaxMinFairness
                         ? " and max-min fairness counts plain GPU time, as las does"
                         : ""));
  }

  // aging-overtakes-evicting-class: with aging on, a class `low` whose jobs a class `high` may
  // evict within some leaf queue (engine::VictimPolicy), where the engine's order puts a `low` job
  // that has waited max_age ahead of a `high` job that has just arrived. With jobs, only the
  // queues where jobs of both classes are. One warning per pair.
  void AgingOvertakesEvictingClass() {
    if (!a_.preemption() || !Aging()) return;
    const engine::VictimPolicy& policy = a_.policy();
    const ClassPairs pairs =
        AgedAheadPairs([&](QueueId q, PriorityClassId low, PriorityClassId high) {
          return !policy.Protection(q, low) &&
                 policy.RelationsOf(q, high, false).Kind(q, low) == Eviction::Kind::kWithinQueue;
        });
    const OrderingWeights& w = ordering();
    for (const auto& [pair, queues] : pairs) {
      const auto [low, high] = pair;
      const std::string& low_name = state_.priority_class(low).name;
      const std::string& high_name = state_.priority_class(high).name;
      const std::string where =
          fmt::format("within queue{} {}", queues.size() == 1 ? "" : "s", QueueNames(queues));
      const double lead = ClassLead(queues.front(), low, high);
      if (lead <= 0) {
        Warn(kLintAgingOvertakesEvictingClass, "scheduler.ordering",
             fmt::format(
                 "aging ({}) can order class '{}' ahead of class '{}', which may evict it ({}): "
                 "the order gives '{}' no lead over '{}' (ordering.priority_class_weight {}, "
                 "values {} and {}), so a {} job is ordered ahead of any {} job that has waited "
                 "less; a {} job then waits for such a job instead of evicting it: set "
                 "ordering.age_weight to 0, or give '{}' a lead (a positive "
                 "ordering.priority_class_weight and class values above 0)",
                 AgingText(), low_name, high_name, where, high_name, low_name,
                 Number(w.priority_class), state_.priority_class(high).value,
                 state_.priority_class(low).value, low_name, high_name, high_name, high_name));
        continue;
      }
      const double wait = std::ceil(static_cast<double>(w.max_age) * lead / w.age);
      const Millis after = std::min<Millis>(w.max_age, static_cast<Millis>(wait));
      Warn(kLintAgingOvertakesEvictingClass, "scheduler.ordering",
           fmt::format(
               "aging ({}) can order class '{}' ahead of class '{}', which may evict it ({}): a "
               "{} job that has waited {} or more is ordered ahead of a {} job that has just "
               "arrived, so it can start first; a {} job then waits for such a job instead of "
               "evicting it: lower ordering.age_weight below {} or raise "
               "ordering.priority_class_weight above {}",
               AgingText(), low_name, high_name, where, low_name, DurationText(after), high_name,
               high_name, Number(lead), Number(w.priority_class * w.age / lead)));
    }
  }

  // aged-job-passed-again: with aging on under the multifactor order and no starvation_wait, a
  // class `low` whose job that has waited max_age the order puts ahead of a `high` job that has
  // just arrived (in some leaf queue; with jobs, one where jobs of both classes are), while `high`
  // leads `low`: a `high` job that has waited long enough passes the aged job again. One warning
  // per pair.
  void AgedJobPassedAgain() {
    const OrderingWeights& w = ordering();
    if (!Aging() || w.policy != OrderPolicy::kMultifactor || w.starvation_wait > 0) return;
    const ClassPairs pairs =
        AgedAheadPairs([&](QueueId q, PriorityClassId low, PriorityClassId high) {
          return ClassLead(q, low, high) > 0;
        });
    for (const auto& [pair, queues] : pairs) {
      const auto [low, high] = pair;
      const std::string& low_name = state_.priority_class(low).name;
      const std::string& high_name = state_.priority_class(high).name;
      // A high job that has waited d has the key of an aged low job when
      // lead + age_weight x d / max_age = age_weight.
      const double lead = ClassLead(queues.front(), low, high);
      const Millis after =
          static_cast<Millis>(std::ceil(static_cast<double>(w.max_age) * (w.age - lead) / w.age));
      Warn(kLintAgedJobPassedAgain, "scheduler.ordering",
           fmt::format(
               "aging ({}) orders a class '{}' job that has waited {} ahead of a class '{}' job "
               "that has just arrived (within queue{} {}), but a '{}' job that has waited {} "
               "passes it again: while '{}' jobs keep the devices busy and wait that long, aged "
               "'{}' jobs after the first may never start; set ordering.starvation_wait (a job "
               "that has waited that long goes ahead of every job that has not, the "
               "longest-waiting first)",
               AgingText(), low_name, DurationText(w.max_age), high_name,
               queues.size() == 1 ? "" : "s", QueueNames(queues), high_name, DurationText(after),
               high_name, low_name));
    }
  }

  // high-priority-queue-without-quota: a leaf queue that evicts lower-priority queues of its tree
  // (preempt_lower_priority, with some preemptable lower-priority leaf queue there) while some GPU
  // model of the cluster is bounded by no quota for it (neither the model nor "gpu": no nominal
  // quota in its tree, no max on it or above it).
  void HighPriorityQueueWithoutQuota() {
    if (!a_.preemption() || !a_.any_preemptible_class()) return;
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      const QueueSpec& s = a_.spec(q);
      if (!a_.leaf(q) || !s.preempt_lower_priority) continue;
      std::vector<std::string> unbounded;
      for (GpuTypeId t = 0; t < state_.gpu_type_count(); ++t) {
        const QuotaTree& quota = state_.quota_tree();
        if (!quota.Bounded(q, 0) && !quota.Bounded(q, 1 + t))
          unbounded.push_back(state_.gpu_type_name(t));
      }
      if (unbounded.empty()) continue;
      std::vector<QueueId> victims;
      for (QueueId v = 0; v < state_.queue_count(); ++v) {
        if (v != q && a_.leaf(v) && a_.same_tree(v, q) && a_.spec(v).preemptable &&
            a_.spec(v).priority < s.priority)
          victims.push_back(v);
      }
      if (victims.empty()) continue;
      Warn(
          kLintHighPriorityQueueWithoutQuota, QueueField(q),
          fmt::format(
              "queue '{}' (priority {}) evicts work of lower-priority queues ({}) through "
              "preempt_lower_priority, but no queue of its tree declares quota for {} (neither "
              "the model nor '{}'): nothing caps what it takes and no guarantee protects its "
              "victims, so it can take every such GPU and starve the other queues; give it a "
              "max (e.g. quota: {{{}: {{max: N}}}}) or declare nominal quota for these GPUs in its "
              "tree",
              s.name, s.priority, QueueNames(victims), NameList(unbounded), kAllGpusResource,
              kAllGpusResource));
    }
  }

  // preemptible-queue-nothing-evicts: a preemptable leaf queue whose work no rule can evict, in a
  // tree where eviction is evidently meant (another leaf queue of the tree is evictable, or has a
  // higher priority). Quiet when preemption is disabled or no class is preemptible.
  void NothingEvicts() {
    if (!a_.preemption() || !a_.any_preemptible_class()) return;
    for (QueueId v = 0; v < state_.queue_count(); ++v) {
      const QueueSpec& s = a_.spec(v);
      if (!a_.leaf(v) || !s.preemptable || a_.Evictable(v) || !a_.TreeMeansEviction(v)) continue;
      std::vector<QueueId> higher;
      for (QueueId w = 0; w < state_.queue_count(); ++w) {
        if (w != v && a_.leaf(w) && a_.same_tree(w, v) && a_.spec(w).priority > s.priority)
          higher.push_back(w);
      }
      const std::string within =
          s.preempt_within_queue
              ? "no preemptible priority class has a class of higher value above it"
              : "preempt_within_queue is false";
      const std::string across =
          higher.empty() ? "no queue of its tree has a higher priority"
                         : fmt::format(
                               "none of the higher-priority queues of its tree ({}) has "
                               "preempt_lower_priority",
                               QueueNames(higher));
      const std::string reclaim =
          a_.can_borrow(v)
              ? "no other queue of its tree can reclaim (reclaim with nominal quota)"
              : "it never runs on borrowed quota, so there is nothing to reclaim from it";
      Warn(kLintPreemptibleQueueNothingEvicts, QueueField(v),
           fmt::format(
               "queue '{}' is preemptible, but no rule can evict its work: {}; {}; {}. Blocked "
               "jobs of other queues wait until its jobs end, however important they are; set "
               "preempt_lower_priority on the queues that should take its GPUs, or give them "
               "nominal quota to reclaim, or mark this queue preemptible: false to say what it is",
               s.name, within, across, reclaim));
    }
  }

  // guarantees-exceed-capacity: per quota resource, the nominal quota of the root queues (each
  // the sum over its tree) adds up to more GPUs than the cluster has.
  // The GPUs (milli) of each quota resource in the cluster: all nodes, cordoned ones included.
  std::vector<std::int64_t> Capacity() const {
    std::vector<std::int64_t> capacity(state_.quota_resource_count(), 0);
    for (NodeId n = 0; n < state_.node_count(); ++n) {
      for (const DeviceState& d : state_.node(n).devices) {
        capacity[0] += kMilliPerGpu;
        capacity[1 + d.type] += kMilliPerGpu;
      }
    }
    return capacity;
  }

  // limit-above-cluster: a queue's max or borrowing limit for a quota resource above the
  // cluster's GPUs of that resource: it can never bind, and reads as a limit that does.
  void LimitsAboveCluster() {
    const std::vector<std::int64_t> capacity = Capacity();
    for (QueueId q = 0; q < state_.queue_count(); ++q) {
      for (const auto& [resource, quota] : state_.queue(q).spec.quota) {
        std::size_t r = 0;
        if (resource != kAllGpusResource) r = 1 + *state_.FindGpuType(resource);
        const std::pair<const char*, const std::optional<MilliGpu>*> limits[] = {
            {"max", &quota.max}, {"borrowing_limit", &quota.borrowing_limit}};
        for (const auto& [name, limit] : limits) {
          if (!*limit || (*limit)->value() <= capacity[r]) continue;
          Warn(kLintLimitAboveCluster, fmt::format("{}.quota.{}.{}", QueueField(q), resource, name),
               fmt::format("queue '{}': {} {} is more than the cluster's {} {}: it can never "
                           "bind; give the {} the cluster can reach, or leave it out",
                           state_.queue(q).spec.name, name, Gpus((*limit)->value()),
                           Gpus(capacity[r]),
                           r == 0 ? std::string("GPUs of all models") : resource + " GPUs", name));
        }
      }
    }
  }

  // top-classes-alike: two or more priority classes share the highest value: their names differ,
  // their rank does not (no order among them, and none evicts another).
  void TopClassesAlike() {
    std::int32_t top = std::numeric_limits<std::int32_t>::min();
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c)
      top = std::max(top, state_.priority_class(c).value);
    std::vector<std::string> names;
    PriorityClassId first = 0;
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c) {
      if (state_.priority_class(c).value != top) continue;
      if (names.empty()) first = c;
      names.push_back(state_.priority_class(c).name);
    }
    if (names.size() < 2) return;
    Warn(kLintTopClassesAlike, ClassField(first),
         fmt::format("the priority classes {} all have the top value {}: the names differ but "
                     "the classes do not (none goes first or evicts another); give each the "
                     "value that ranks it, or merge them",
                     NameList(names), top));
  }

  // preemption-cap-zero: preemption is on, but a cycle may evict no GPUs or try no search.
  void PreemptionCapZero() {
    const PreemptionOptions& p = config_.engine.preemption;
    if (!p.enabled) return;
    if (p.max_gpus_per_cycle == 0 || p.max_attempts_per_cycle == 0) {
      const char* field = p.max_gpus_per_cycle == 0 ? "scheduler.preemption.max_gpus_per_cycle"
                                                    : "scheduler.preemption.max_attempts_per_cycle";
      Warn(kLintPreemptionCapZero, field,
           fmt::format("preemption is on but {} is 0: nothing is ever evicted, while every "
                       "waiting job's reason says preemption was tried; set "
                       "scheduler.preemption.enabled: false to say so, or raise the cap",
                       field));
    }
  }

  void GuaranteesExceedCapacity() {
    const std::vector<std::int64_t> capacity = Capacity();
    for (std::size_t r = 0; r < state_.quota_resource_count(); ++r) {
      std::int64_t total = 0;
      std::vector<std::string> parts;
      for (QueueId q = 0; q < state_.queue_count(); ++q) {
        if (state_.queue(q).parent != kNone) continue;
        const std::int64_t nominal = state_.quota(q, r).nominal;
        if (nominal == 0) continue;
        total += nominal;
        parts.push_back(fmt::format("{} {}", state_.queue(q).spec.name, Gpus(nominal)));
      }
      if (total <= capacity[r]) continue;
      const std::string resource = state_.quota_resource_name(r);
      const std::string what = r == 0 ? "GPUs of all models" : resource + " GPUs";
      Warn(kLintGuaranteesExceedCapacity, "queues",
           fmt::format(
               "the queue trees guarantee {} {} in nominal quota ({}) but the cluster has {}: "
               "the guarantees cannot all be honoured; a queue within its guarantee is admitted "
               "by quota yet can wait forever, since reclaim only takes borrowed work and there "
               "is none to take when every queue is within its own; lower the nominal quota for "
               "'{}' to add up to at most {} (let queues borrow the rest)",
               Gpus(total), what, NameList(parts), Gpus(capacity[r]), resource, Gpus(capacity[r])));
    }
  }

  // memory-without-unit: a memory field written as a bare number (MiB) below 1 GiB.
  void MemoryWithoutUnit(std::span<const BareMemory> fields) {
    for (const BareMemory& m : fields) {
      if (m.mib <= 0 || m.mib >= kBareMemoryFloorMiB) continue;
      std::string effect;
      switch (m.kind) {
        case BareMemory::Kind::kNode:
          effect = fmt::format(
              "the node offers its tasks {} MiB of host memory in all, so a task that asks for "
              "more never lands on it",
              m.text);
          break;
        case BareMemory::Kind::kDevice:
          effect = fmt::format(
              "each device has {} MiB, so a job whose gpu_memory asks for more never lands on "
              "these GPUs, and few shared tasks fit on one",
              m.text);
          break;
        case BareMemory::Kind::kTaskGpu:
          effect = fmt::format(
              "a whole device needs only {} MiB, so the job may land on GPUs too small for it, "
              "and a shared task takes only {} MiB of its device, so more tasks share it than "
              "its memory holds",
              m.text, m.text);
          break;
        case BareMemory::Kind::kTask:
          effect = fmt::format(
              "each task reserves only {} MiB of its node's memory, so more tasks land on a node "
              "than its memory holds",
              m.text);
          break;
      }
      Warn(kLintMemoryWithoutUnit, m.field,
           fmt::format(
               "{} is {} without a unit, which reads as {} MiB: {}; write the unit: {}Gi for {} "
               "GiB ({}Mi if MiB is meant)",
               m.field, m.text, m.text, effect, m.text, m.text, m.text));
    }
  }

  // alias-spelling: a field written in an accepted alias spelling (`preemptable`).
  void AliasSpelling() {
    for (const SpellingAlias& a : config_.aliases) {
      const std::size_t dot = a.field.rfind('.');
      const std::string given = dot == std::string::npos ? a.field : a.field.substr(dot + 1);
      Warn(kLintAliasSpelling, a.field,
           fmt::format("{} is the alias of {}, the one spelling of \"may be evicted\" for queues "
                       "and priority classes alike; write {}",
                       given, a.canonical, a.canonical));
    }
  }

  // example-token: a token of server.tokens that is one of the shipped examples' (kExampleTokens).
  void ExampleTokens() {
    const std::vector<TokenSpec>& tokens = config_.server.tokens;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view example = ExampleToken(tokens[i]);
      if (example.empty()) continue;
      const char* may = "";
      switch (tokens[i].role) {
        case TokenSpec::Role::kAdmin:
          may = "everything: cancel, hold and change any job, cordon and drain nodes";
          break;
        case TokenSpec::Role::kUser:
          may = "submit jobs to its queues and cancel its own";
          break;
        case TokenSpec::Role::kAgent:
          may = "register a node as its agent and take the node's work";
          break;
        case TokenSpec::Role::kViewer:
          may = "read every job, queue, node, event and log";
          break;
      }
      Warn(kLintExampleToken, fmt::format("server.tokens[{}]", i),
           fmt::format(
               "token '{}' ({}) is the example token '{}', published with the examples and the "
               "docs: anyone who has read them can call the server as '{}' and do what its role "
               "allows ({}); give it a secret of its own, as token_sha256 (from `arbiter token "
               "new`) or token_file, and keep the examples' tokens for `arbiter server --dev`",
               tokens[i].name, RoleName(tokens[i].role), example, tokens[i].name, may));
    }
  }

  // top-class-majority: more than half of the jobs' GPUs are in the highest priority class (when
  // the classes have at least two values and the jobs ask for GPUs).
  void TopClassMajority() {
    std::int32_t top = std::numeric_limits<std::int32_t>::min();
    std::int32_t bottom = std::numeric_limits<std::int32_t>::max();
    for (PriorityClassId c = 0; c < state_.priority_class_count(); ++c) {
      top = std::max(top, state_.priority_class(c).value);
      bottom = std::min(bottom, state_.priority_class(c).value);
    }
    if (top == bottom) return;
    std::int64_t total = 0, in_top = 0;
    std::vector<PriorityClassId> top_classes;
    for (const Job& j : jobs_) {
      const std::int64_t gpus = j.total_gpu().value();
      total += gpus;
      if (state_.priority_class(j.priority_class).value != top || gpus == 0) continue;
      in_top += gpus;
      if (std::find(top_classes.begin(), top_classes.end(), j.priority_class) == top_classes.end())
        top_classes.push_back(j.priority_class);
    }
    if (total == 0 || 2 * in_top <= total) return;
    std::sort(top_classes.begin(), top_classes.end());
    std::vector<std::string> names;
    for (PriorityClassId c : top_classes) names.push_back(state_.priority_class(c).name);
    Warn(kLintTopClassMajority, ClassField(top_classes.front()),
         fmt::format(
             "{} of the jobs' GPUs ({} of {}) are in the top priority class ({}, value {}): "
             "when most work is top priority, priority orders nothing among it, and every "
             "top-priority job may evict the little lower-priority work there is, so that work "
             "is evicted over and over (a preemption storm); keep the top class for the few jobs "
             "that must not wait (e.g. serving) and put the bulk in lower classes",
             Percent(in_top, total), Gpus(in_top), Gpus(total), NameList(names), top));
  }

  // preemptible-jobs-without-checkpoints: GPU jobs that some rule can evict (preemptible class,
  // preemptable queue, a rule that reaches them) and that never checkpoint, unless their runtime
  // estimate is within their class's min_runtime. One warning per class.
  void JobsWithoutCheckpoints() {
    if (!a_.preemption()) return;
    std::map<PriorityClassId, std::vector<std::string>> by_class;
    for (const Job& j : jobs_) {
      const PriorityClassSpec& pc = state_.priority_class(j.priority_class);
      if (!pc.preemptible || !a_.spec(j.queue).preemptable) continue;
      if (j.checkpoint_interval > 0 || j.total_gpu().value() == 0) continue;
      if (j.runtime_estimate > 0 && j.runtime_estimate <= pc.min_runtime) continue;
      if (!a_.EvictableByRule(j.queue, j.priority_class)) continue;
      by_class[j.priority_class].push_back(j.name);
    }
    for (const auto& [c, names] : by_class) {
      const PriorityClassSpec& pc = state_.priority_class(c);
      Warn(kLintPreemptibleJobsWithoutCheckpoints, "jobs",
           fmt::format(
               "{} GPU job{} of preemptible class '{}' set{} no checkpoint_interval ({}): an "
               "eviction throws away all the work since the job started, which then starts over "
               "from zero, and a job evicted more than once may never finish; set "
               "checkpoint_interval to how often the job checkpoints, or run jobs that cannot "
               "checkpoint in a non-preemptible class (or give the class a min_runtime longer "
               "than their runtime_estimate)",
               names.size(), names.size() == 1 ? "" : "s", pc.name, names.size() == 1 ? "s" : "",
               NameList(names)));
    }
  }

  const ClusterConfig& config_;
  const ClusterState& state_;
  std::span<const Job> jobs_;
  std::span<const BareMemory> job_memory_;
  Analysis a_;
  std::map<std::string, std::size_t> queue_index_;
  std::map<std::string, std::size_t> class_index_;
  std::vector<LintWarning> out_;
};

}  // namespace

std::vector<LintWarning> Lint(const ClusterConfig& config, const ClusterState& state,
                              std::span<const Job> jobs, std::span<const BareMemory> job_memory) {
  return Linter(config, state, jobs, job_memory).Run();
}

}  // namespace arbiter::config
