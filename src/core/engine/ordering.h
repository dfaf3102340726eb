// The multifactor ordering key, written once: the cycle's order (order.cc) and the rule of who may
// evict whom (victim_policy.h) both read it, so that they never contradict each other.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "arbiter/engine.h"
#include "core/state/cluster_state.h"

namespace arbiter::engine {

// Keys of jobs against one state: the job-independent parts (largest class value, largest queue
// priority, every queue's fair-share factor from its decayed usage) are computed once.
class OrderingKeys {
 public:
  OrderingKeys(const ClusterState& state, const OrderingWeights& weights);

  // The key of `job` as of `at`: weighted class value, queue priority, fair share (as of the
  // state) and age (`at` - submit time, over max_age, in [0, 1]: a job not yet submitted at `at`
  // has age 0). Larger is scheduled first. A job that has waited starvation_wait by `at` is
  // starving: its key is kStarving, above every other, and starving jobs go by submission.
  double Key(const Job& job, Millis at) const;
  static constexpr double kStarving = std::numeric_limits<double>::infinity();
  // Whether `job` is starving at `at` (OrderingWeights::starvation_wait).
  bool Starving(const Job& job, Millis at) const {
    return starves() && at - job.submit_time >= weights_.starvation_wait;
  }
  // Whether the order puts `a` before `b` as of `at`: key descending, then submit time, then id.
  bool Before(const Job& a, const Job& b, Millis at) const;
  // Whether the order puts `a` before `b` as of `at` and at every later time, whatever their ages:
  // the least key `a` may have from then on is above the most `b` may have (or equal, `a` first
  // by submission).
  bool StaysBefore(const Job& a, const Job& b, Millis at) const;
  // Whether aging can change the order at all (an age weight and a max_age).
  bool ages() const { return weights_.age > 0 && weights_.max_age > 0; }
  // Whether a waiting job may become starving (a starvation_wait, under the multifactor order).
  bool starves() const {
    return weights_.starvation_wait > 0 && weights_.policy == OrderPolicy::kMultifactor;
  }
  // The key of a job of (queue, class) without its age: a job's key lies within the age weight of
  // it, so a job whose base exceeds another's by more than the age weight is always first.
  double Base(QueueId queue, PriorityClassId cls) const;
  // Computes Base for every queue and class once, for the keys of many jobs (OrderPending).
  void KeepBases();
  // Whether every job of (queue a, class a) is before every job of (queue b, class b), at any
  // time, whatever their ages.
  bool AlwaysBefore(QueueId a, PriorityClassId a_class, QueueId b, PriorityClassId b_class) const {
    if (starves()) return false;  // a job of (b, b_class) that starves goes first
    const double spread = ages() ? std::abs(weights_.age) : 0.0;
    return Base(a, a_class) > Base(b, b_class) + spread;
  }

 private:
  const ClusterState& state_;
  OrderingWeights weights_;
  double max_class_ = 1;
  double max_queue_priority_ = 1;
  std::vector<double> fair_share_;  // per queue
  std::vector<double> bases_;       // KeepBases: by queue, then class
};

}  // namespace arbiter::engine
