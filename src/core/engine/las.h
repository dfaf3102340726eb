// Least attained service (OrderPolicy kLas, kLas2d, kGittins): the times a waiting job's service
// queue changes by waiting alone, read by the order (order.cc) and by the cycle's promise of when
// its inputs change next (cycle.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "arbiter/engine.h"

namespace arbiter::engine {

// When a waiting job's starvation promotion takes it back to the first service queue (the first
// time at which ServiceAtStart gives 0; it may lie in the past), or -1 when waiting never will.
inline Millis LasPromotionAt(const Job& job, const OrderingWeights& w) {
  if (w.starvation_factor <= 0 || job.attained <= 0 ||
      LasQueue(w, job.attained, job.total_gpu().value()) == 0)
    return -1;
  const auto due =
      static_cast<Millis>(std::ceil(w.starvation_factor * static_cast<double>(job.attained)));
  return std::max(job.service_time + std::max<Millis>(0, due - job.starved), job.service_time + 1);
}

// The least time a job of `milli` GPUs must run for its service to reach `threshold`.
inline Millis LasRunToReach(const OrderingWeights& w, Millis threshold, std::int64_t milli) {
  return ServiceInGpuTime(w.policy) ? (threshold * kMilliPerGpu + milli - 1) / milli : threshold;
}

// The time a waiting job entered its service queue as far as its fields tell, so that a queue is
// taken in the order jobs entered it, as in Tiresias: its promotion when it has been promoted by
// `now` (it goes behind the jobs already in the first queue); in a later queue, the moment its
// service reached the queue's threshold, taken as within its last run (its requeue less the time
// it has run since); in the first queue, its submission.
inline Millis LasQueueEntry(const Job& job, Millis now, const OrderingWeights& w) {
  const Millis promoted = LasPromotionAt(job, w);
  if (promoted >= 0 && promoted <= now) return promoted;
  const std::int64_t milli = job.total_gpu().value();
  const int queue = LasQueue(w, job.attained, milli);
  if (queue == 0 || milli <= 0) return job.submit_time;
  const Millis threshold = w.las_thresholds[static_cast<std::size_t>(queue - 1)];
  const Millis run = LasRunToReach(w, threshold, milli);
  return std::max(job.submit_time, job.service_time - std::max<Millis>(0, job.attained - run));
}

// When a waiting job last stopped running in the service queue it is in (its requeue), or -1 when
// it has not run there since it entered it (a new job, a promoted one), given its `entry` into
// the queue (LasQueueEntry). Within a queue the jobs that ran there go first, the most recently
// stopped first: Tiresias keeps each queue as a list in which the running jobs stay ahead of the
// waiting ones, so a job it preempts goes to the head of the waiting ones.
inline Millis LasLastStop(const Job& job, Millis entry) {
  return job.attained > 0 && entry < job.service_time ? job.service_time : -1;
}

}  // namespace arbiter::engine
