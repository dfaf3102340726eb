#include <algorithm>
#include <cmath>

#include "engine/stages.h"

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

double OrderingKey(const ClusterState& state, const Job& job, Millis now, const OrderingWeights& w) {
  std::int32_t max_class = 1, max_queue = 1;
  for (PriorityClassId c = 0; c < state.priority_class_count(); ++c) max_class = std::max(max_class, state.priority_class(c).value);
  for (QueueId q = 0; q < state.queue_count(); ++q) max_queue = std::max(max_queue, state.queue(q).spec.priority);

  const double class_factor = Clamp01(static_cast<double>(state.priority_class(job.priority_class).value) / max_class);
  const double queue_factor = Clamp01(static_cast<double>(state.queue(job.queue).spec.priority) / max_queue);

  double total_usage = 0;
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    if (state.queue(q).parent == kNone) total_usage += state.recent_usage(q);
  }
  double fair_factor = 1.0;
  if (total_usage > 0) {
    const double usage_share = state.recent_usage(job.queue) / total_usage;
    fair_factor = std::exp2(-usage_share / TargetShare(state, job.queue));
  }
  const double age_factor = w.max_age > 0 ? Clamp01(static_cast<double>(now - job.submit_time) / static_cast<double>(w.max_age)) : 0.0;

  return w.priority_class * class_factor + w.queue_priority * queue_factor + w.fair_share * fair_factor + w.age * age_factor;
}

std::vector<std::uint32_t> OrderPending(const ClusterState& state, std::span<const Job> pending, Millis now,
                                        const OrderingWeights& w) {
  std::vector<double> keys(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const Job& job = pending[i];
    const bool known = job.queue < state.queue_count() && job.priority_class < state.priority_class_count();
    keys[i] = known ? OrderingKey(state, job, now, w) : 0.0;
  }
  std::vector<std::uint32_t> order(pending.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (keys[a] != keys[b]) return keys[a] > keys[b];
    if (pending[a].submit_time != pending[b].submit_time) return pending[a].submit_time < pending[b].submit_time;
    if (pending[a].id != pending[b].id) return pending[a].id < pending[b].id;
    return a < b;
  });
  return order;
}

}  // namespace arbiter::engine
