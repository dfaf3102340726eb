#include <algorithm>
#include <cmath>
#include <optional>

#include "arbiter/attained_service.h"
#include "core/engine/finish_time_fairness.h"
#include "core/engine/gavel.h"
#include "core/engine/las.h"
#include "core/engine/stages.h"

namespace arbiter::engine {
namespace {

double Clamp01(double x) { return std::clamp(x, 0.0, 1.0); }

// The share of the whole cluster a queue is entitled to: its weight among its siblings, times its
// parent's share, down from the roots.
double TargetShare(const ClusterState& state, QueueId q) {
  double share = 1.0;
  for (; q != kNone; q = state.queue(q).parent) {
    const QueueInfo& info = state.queue(q);
    double siblings = 0;
    if (info.parent == kNone) {
      for (QueueId r = 0; r < state.queue_count(); ++r) {
        if (state.queue(r).parent == kNone) siblings += state.queue(r).spec.weight;
      }
    } else {
      for (QueueId c : state.queue(info.parent).children) siblings += state.queue(c).spec.weight;
    }
    share *= info.spec.weight / siblings;
  }
  return share;
}

}  // namespace

OrderingKeys::OrderingKeys(const ClusterState& state, const OrderingWeights& weights)
    : state_(state), weights_(weights) {
  for (PriorityClassId c = 0; c < state.priority_class_count(); ++c)
    max_class_ = std::max<double>(max_class_, state.priority_class(c).value);
  for (QueueId q = 0; q < state.queue_count(); ++q)
    max_queue_priority_ = std::max<double>(max_queue_priority_, state.queue(q).spec.priority);
  double total_usage = 0;
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    if (state.queue(q).parent == kNone) total_usage += state.fair_share_usage(q);
  }
  fair_share_.assign(state.queue_count(), 1.0);
  if (total_usage > 0) {
    for (QueueId q = 0; q < state.queue_count(); ++q) {
      fair_share_[q] =
          std::exp2(-(state.fair_share_usage(q) / total_usage) / TargetShare(state, q));
    }
  }
}

void OrderingKeys::KeepBases() {
  const std::size_t classes = state_.priority_class_count();
  std::vector<double> bases(state_.queue_count() * classes);
  for (QueueId q = 0; q < state_.queue_count(); ++q) {
    for (PriorityClassId c = 0; c < classes; ++c) bases[q * classes + c] = Base(q, c);
  }
  bases_ = std::move(bases);
}

double OrderingKeys::Base(QueueId queue, PriorityClassId cls) const {
  if (!bases_.empty()) return bases_[queue * state_.priority_class_count() + cls];
  const OrderingWeights& w = weights_;
  const double class_factor = Clamp01(state_.priority_class(cls).value / max_class_);
  const double queue_factor = Clamp01(state_.queue(queue).spec.priority / max_queue_priority_);
  return w.priority_class * class_factor + w.queue_priority * queue_factor +
         w.fair_share * fair_share_[queue];
}

double OrderingKeys::Key(const Job& job, Millis at) const {
  if (job.queue >= state_.queue_count() || job.priority_class >= state_.priority_class_count())
    return 0.0;  // (refused by validation)
  if (Starving(job, at)) return kStarving;
  const OrderingWeights& w = weights_;
  const double age_factor =
      w.max_age > 0
          ? Clamp01(static_cast<double>(at - job.submit_time) / static_cast<double>(w.max_age))
          : 0.0;
  return Base(job.queue, job.priority_class) + w.age * age_factor;
}

bool OrderingKeys::Before(const Job& a, const Job& b, Millis at) const {
  const double ka = Key(a, at), kb = Key(b, at);
  if (ka != kb) return ka > kb;
  if (a.submit_time != b.submit_time) return a.submit_time < b.submit_time;
  return a.id < b.id;
}

bool OrderingKeys::StaysBefore(const Job& a, const Job& b, Millis at) const {
  if (a.queue >= state_.queue_count() || a.priority_class >= state_.priority_class_count() ||
      b.queue >= state_.queue_count() || b.priority_class >= state_.priority_class_count())
    return false;
  const bool a_first_on_ties =
      a.submit_time < b.submit_time || (a.submit_time == b.submit_time && a.id < b.id);
  // A key moves with the age only, between its base and its base plus the age weight.
  const double w = ages() ? weights_.age : 0.0;
  const double a_base = Base(a.queue, a.priority_class);
  const double b_base = Base(b.queue, b.priority_class);
  // Of at least b's base and submitted no later, a is never younger: its key stays at least b's
  // (and a starves no later than b, first among the starving by submission, then id).
  if (w >= 0 && a_base >= b_base && a.submit_time <= b.submit_time)
    return (a_base > b_base && !starves()) || a_first_on_ties;
  // Otherwise b, which may starve, passes a unless a starves now and was submitted first.
  if (starves()) return Starving(a, at) && a_first_on_ties;
  const double a_least = w >= 0 ? Key(a, at) : a_base + w;
  const double b_most = w >= 0 ? b_base + w : Key(b, at);
  if (a_least != b_most) return a_least > b_most;
  return a_first_on_ties;
}

double OrderingKey(const ClusterState& state, const Job& job, Millis now,
                   const OrderingWeights& w) {
  return OrderingKeys(state, w).Key(job, now);
}

namespace {

// The hint's indices, then the others in the list's order; the list's order alone when the hint
// names an index twice or out of range. `hinted`: how many come from the hint.
std::vector<std::uint32_t> Start(std::size_t n, std::span<const std::uint32_t> hint,
                                 std::size_t& hinted) {
  hinted = 0;
  std::vector<std::uint32_t> order(n);
  if (!hint.empty() && hint.size() <= n) {
    std::vector<bool> taken(n, false);
    bool valid = true;
    std::size_t k = 0;
    for (std::uint32_t i : hint) {
      if (i >= n || taken[i]) {
        valid = false;
        break;
      }
      taken[i] = true;
      order[k++] = i;
    }
    if (valid) {
      hinted = k;
      for (std::uint32_t i = 0; i < n; ++i) {
        if (!taken[i]) order[k++] = i;
      }
      return order;
    }
  }
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

// Whether `run`, split by the jobs' queues, is in order (`before`) within each queue; if so, it is
// put in order by merging the queues' runs (a heap of their heads: n log q comparisons).
template <typename Before>
bool MergeQueueRuns(std::span<std::uint32_t> run, std::span<const Job> pending, std::size_t queues,
                    const Before& before) {
  std::vector<std::vector<std::uint32_t>> by_queue(queues + 1);
  for (std::uint32_t i : run)
    by_queue[std::min<std::size_t>(pending[i].queue, queues)].push_back(i);
  for (const std::vector<std::uint32_t>& q : by_queue) {
    if (!std::is_sorted(q.begin(), q.end(), before)) return false;
  }
  struct Head {
    std::uint32_t queue;
    std::uint32_t at;
  };
  std::vector<Head> heads;
  for (std::uint32_t q = 0; q < by_queue.size(); ++q) {
    if (!by_queue[q].empty()) heads.push_back({q, 0});
  }
  // (A max-heap on "comes later", so its top comes first.)
  auto later = [&](const Head& a, const Head& b) {
    return before(by_queue[b.queue][b.at], by_queue[a.queue][a.at]);
  };
  std::make_heap(heads.begin(), heads.end(), later);
  std::size_t k = 0;
  while (!heads.empty()) {
    std::pop_heap(heads.begin(), heads.end(), later);
    Head& h = heads.back();
    run[k++] = by_queue[h.queue][h.at];
    if (++h.at < by_queue[h.queue].size()) {
      std::push_heap(heads.begin(), heads.end(), later);
    } else {
      heads.pop_back();
    }
  }
  return true;
}

// The lease orders' standings, higher first (kFinishTimeFairness: the rho; kGavel: the priority on
// the job's best model); empty under the other orders.
std::vector<double> Standings(const ClusterState& state, std::span<const Job> pending, Millis now,
                              const OrderingWeights& w, Millis default_runtime,
                              const GavelScope* gavel) {
  std::vector<double> standing;
  if (w.policy == OrderPolicy::kFinishTimeFairness) {
    const FinishTimeFairnessScope scope(state, pending, default_runtime, w.ftf_lease);
    standing.resize(pending.size());
    for (std::size_t i = 0; i < pending.size(); ++i) standing[i] = scope.Pending(pending[i], now);
  } else if (w.policy == OrderPolicy::kGavel) {
    std::optional<GavelScope> own;
    const GavelScope& scope = gavel ? *gavel : own.emplace(state, pending, w);
    standing.resize(pending.size());
    for (std::size_t i = 0; i < pending.size(); ++i)
      standing[i] = scope.BestOf(pending[i], now).priority;
  }
  return standing;
}

}  // namespace

std::vector<std::uint32_t> OrderPending(const ClusterState& state, std::span<const Job> pending,
                                        Millis now, const OrderingWeights& w,
                                        Millis default_runtime, std::span<const std::uint32_t> hint,
                                        const GavelScope* gavel) {
  OrderingKeys ordering(state, w);
  if (pending.size() > state.queue_count() * state.priority_class_count()) ordering.KeepBases();
  std::vector<double> keys(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i) keys[i] = ordering.Key(pending[i], now);
  // Least attained service: the service queue first (lower first), then (kGittins) the index,
  // then the jobs that ran in their queue, the most recently stopped first (LasLastStop), then the
  // key, its age counted from the job's entry into its queue (a promoted job goes behind those
  // already there).
  std::vector<int> las;
  std::vector<Millis> since;      // submit time, or the entry into the service queue
  std::vector<double> gittins;    // kGittins: the index, higher first within a service queue
  std::vector<Millis> last_stop;  // LasLastStop, later first
  if (IsLas(w.policy)) {
    las.resize(pending.size());
    since.resize(pending.size());
    last_stop.resize(pending.size());
    if (w.policy == OrderPolicy::kGittins && state.finished_service_count() > 0)
      gittins.resize(pending.size());
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const Millis attained = ServiceAtStart(pending[i], now, w).attained;
      las[i] = LasQueue(w, attained, pending[i].total_gpu().value());
      if (!gittins.empty())
        gittins[i] = state.GittinsIndex(LasService(w, attained, pending[i].total_gpu().value()),
                                        w.gittins_quantum);
      since[i] = LasQueueEntry(pending[i], now, w);
      last_stop[i] = LasLastStop(pending[i], since[i]);
      if (since[i] != pending[i].submit_time)
        keys[i] = ordering.Key(pending[i], now - (since[i] - pending[i].submit_time));
    }
  }
  const std::vector<double> rho = Standings(state, pending, now, w, default_runtime, gavel);
  auto entered = [&](std::uint32_t i) { return since.empty() ? pending[i].submit_time : since[i]; };
  std::size_t hinted = 0;
  std::vector<std::uint32_t> order = Start(pending.size(), hint, hinted);
  auto before = [&](std::uint32_t a, std::uint32_t b) {
    if (!las.empty() && las[a] != las[b]) return las[a] < las[b];
    if (!gittins.empty() && gittins[a] != gittins[b]) return gittins[a] > gittins[b];
    if (!last_stop.empty() && last_stop[a] != last_stop[b]) return last_stop[a] > last_stop[b];
    if (!rho.empty() && rho[a] != rho[b]) return rho[a] > rho[b];
    if (keys[a] != keys[b]) return keys[a] > keys[b];
    if (entered(a) != entered(b)) return entered(a) < entered(b);
    if (pending[a].id != pending[b].id) return pending[a].id < pending[b].id;
    return a < b;
  };
  // A driver that passes the last cycle's order (Plan::order) as the hint, or keeps its jobs in
  // arrival order where the order is the arrivals' (one class and queue, or ages alone apart),
  // starts from an order that holds but for the jobs that arrived since, after it: those are
  // sorted and merged in. (The jobs a hint does not name are sorted apart: one arrival of a high
  // key does not send the whole hinted list behind it to the sort.)
  const auto hint_end =
      hinted > 0 ? order.begin() + static_cast<std::ptrdiff_t>(hinted) : order.end();
  auto ordered_end = std::is_sorted_until(order.begin(), hint_end, before);
  // A fair-share refresh moves whole queues past each other and keeps each queue's own order:
  // when the hinted list is still in order within each queue, the queues' runs are merged.
  if (ordered_end != hint_end && MergeQueueRuns(std::span<std::uint32_t>(order.begin(), hint_end),
                                                pending, state.queue_count(), before))
    ordered_end = hint_end;
  if (ordered_end != order.end()) {
    std::sort(ordered_end, order.end(), before);
    std::inplace_merge(order.begin(), ordered_end, order.end(), before);
  }
  return order;
}

}  // namespace arbiter::engine

namespace arbiter {

const char* HeterogeneityPolicyName(HeterogeneityPolicy policy) {
  switch (policy) {
    case HeterogeneityPolicy::kOff:
      return "none";
    case HeterogeneityPolicy::kMaxThroughput:
      return "max-throughput";
    case HeterogeneityPolicy::kMaxMinFairness:
      return "max-min-fairness";
  }
  return "none";
}

const char* OrderPolicyName(OrderPolicy policy) {
  switch (policy) {
    case OrderPolicy::kMultifactor:
      return "multifactor";
    case OrderPolicy::kLas:
      return "las";
    case OrderPolicy::kLas2d:
      return "las-2d";
    case OrderPolicy::kGittins:
      return "gittins";
    case OrderPolicy::kFinishTimeFairness:
      return "ftf";
    case OrderPolicy::kGavel:
      return "gavel";
  }
  return "?";
}

namespace {

// Themis's rho of a job that has run `attained` of its `work`: its finish in the shared cluster if
// it runs from `now` on, over its finish alone on 1/N of the cluster.
double Rho(const Job& job, Millis attained, Millis now, Millis work, std::size_t queues,
           std::int64_t cluster_milli) {
  const double work_ms = static_cast<double>(std::max<Millis>(work, 1));
  const double waited = static_cast<double>(std::max<Millis>(0, now - job.submit_time));
  const double remaining = static_cast<double>(std::max<Millis>(0, work - attained));
  // Alone on 1/N of the cluster: as fast where its GPUs fit there, slower by the ratio where not.
  const double fair_milli =
      static_cast<double>(cluster_milli) / static_cast<double>(std::max<std::size_t>(queues, 1));
  const double gpus = static_cast<double>(job.total_gpu().value());
  const double alone = work_ms * std::max(1.0, fair_milli > 0 ? gpus / fair_milli : 1.0);
  return (waited + remaining) / alone;
}

}  // namespace

double FinishTimeFairness(const Job& job, Millis now, Millis work, std::size_t queues,
                          std::int64_t cluster_milli) {
  return Rho(job, job.attained, now, work, queues, cluster_milli);
}

double RunningFinishTimeFairness(const Job& job, Millis start, Millis now, Millis work,
                                 std::size_t queues, std::int64_t cluster_milli) {
  return Rho(job, job.attained + std::max<Millis>(0, now - start), now, work, queues,
             cluster_milli);
}

int LasQueue(const OrderingWeights& w, Millis attained, std::int64_t milli) {
  const Millis service = LasService(w, attained, milli);
  int queue = 0;
  for (Millis threshold : w.las_thresholds) queue += service >= threshold ? 1 : 0;
  return queue;
}

AttainedService ServiceAtStart(const Job& job, Millis now, const OrderingWeights& w) {
  AttainedService s{job.attained, job.starved};
  // (Tiresias counts the waiting of a job that has run only.)
  if (s.attained > 0 && now > job.service_time) s.starved += now - job.service_time;
  if (w.starvation_factor > 0 && s.attained > 0 &&
      LasQueue(w, s.attained, job.total_gpu().value()) > 0 &&
      static_cast<double>(s.starved) >= w.starvation_factor * static_cast<double>(s.attained)) {
    return {};
  }
  return s;
}

void BeginService(Job& job, Millis now, const OrderingWeights& w) {
  const AttainedService service = ServiceAtStart(job, now, w);
  job.attained = service.attained;
  job.starved = service.starved;
  job.service_time = now;
}

void AddTimeOnModel(std::vector<Millis>& time_on_model, GpuTypeId type, Millis ran) {
  if (type == kNone || ran <= 0) return;
  if (time_on_model.size() <= type) time_on_model.resize(type + 1, 0);
  time_on_model[type] += ran;
}

void RecordCompletion(ClusterState& state, const OrderingWeights& w, Millis ran,
                      std::int64_t milli) {
  if (w.policy != OrderPolicy::kGittins) return;
  state.RecordFinishedService(LasService(w, ran, milli),
                              static_cast<std::size_t>(w.gittins_window));
}

int PendingLasQueue(const Job& job, Millis now, const OrderingWeights& w) {
  return LasQueue(w, ServiceAtStart(job, now, w).attained, job.total_gpu().value());
}

double ServiceRate(const ClusterState& state, const Job& job, GpuTypeId type,
                   const OrderingWeights& w) {
  return w.heterogeneity == HeterogeneityPolicy::kMaxMinFairness
             ? state.NormalizedThroughput(job, type)
             : 1.0;
}

Millis ServiceOfRun(const ClusterState& state, const Job& job, GpuTypeId type, Millis ran,
                    const OrderingWeights& w) {
  if (ran <= 0) return 0;
  const double rate = ServiceRate(state, job, type, w);
  return rate == 1.0 ? ran : std::llround(static_cast<double>(ran) * rate);
}

int RunningLasQueue(const ClusterState& state, const RunningJob& running, Millis now,
                    const OrderingWeights& w) {
  const Job& job = running.job;
  const Millis service = ServiceOfRun(state, job, running.allocation.gpu_type,
                                      std::max<Millis>(0, now - running.start_time), w);
  return LasQueue(w, job.attained + service, job.total_gpu().value());
}

}  // namespace arbiter
