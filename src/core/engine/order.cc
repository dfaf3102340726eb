#include <algorithm>
#include <cmath>

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

// The job-independent parts of the key, computed once per cycle.
struct OrderingContext {
  double max_class = 1;
  double max_queue_priority = 1;
  std::vector<double> fair_share;  // per queue
};

OrderingContext MakeContext(const ClusterState& state) {
  OrderingContext ctx;
  for (PriorityClassId c = 0; c < state.priority_class_count(); ++c)
    ctx.max_class = std::max<double>(ctx.max_class, state.priority_class(c).value);
  for (QueueId q = 0; q < state.queue_count(); ++q)
    ctx.max_queue_priority = std::max<double>(ctx.max_queue_priority, state.queue(q).spec.priority);
  double total_usage = 0;
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    if (state.queue(q).parent == kNone) total_usage += state.recent_usage(q);
  }
  ctx.fair_share.assign(state.queue_count(), 1.0);
  if (total_usage > 0) {
    for (QueueId q = 0; q < state.queue_count(); ++q) {
      ctx.fair_share[q] = std::exp2(-(state.recent_usage(q) / total_usage) / TargetShare(state, q));
    }
  }
  return ctx;
}

double Key(const ClusterState& state, const OrderingContext& ctx, const Job& job, Millis now,
           const OrderingWeights& w) {
  const double class_factor =
      Clamp01(state.priority_class(job.priority_class).value / ctx.max_class);
  const double queue_factor =
      Clamp01(state.queue(job.queue).spec.priority / ctx.max_queue_priority);
  const double age_factor =
      w.max_age > 0
          ? Clamp01(static_cast<double>(now - job.submit_time) / static_cast<double>(w.max_age))
          : 0.0;
  return w.priority_class * class_factor + w.queue_priority * queue_factor +
         w.fair_share * ctx.fair_share[job.queue] + w.age * age_factor;
}

}  // namespace

double OrderingKey(const ClusterState& state, const Job& job, Millis now,
                   const OrderingWeights& w) {
  return Key(state, MakeContext(state), job, now, w);
}

std::vector<std::uint32_t> OrderPending(const ClusterState& state, std::span<const Job> pending,
                                        Millis now, const OrderingWeights& w) {
  const OrderingContext ctx = MakeContext(state);
  std::vector<double> keys(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const Job& job = pending[i];
    const bool known =
        job.queue < state.queue_count() && job.priority_class < state.priority_class_count();
    keys[i] = known ? Key(state, ctx, job, now, w) : 0.0;
  }
  std::vector<std::uint32_t> order(pending.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (keys[a] != keys[b]) return keys[a] > keys[b];
    if (pending[a].submit_time != pending[b].submit_time)
      return pending[a].submit_time < pending[b].submit_time;
    if (pending[a].id != pending[b].id) return pending[a].id < pending[b].id;
    return a < b;
  });
  return order;
}

}  // namespace arbiter::engine
