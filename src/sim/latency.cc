#include "sim/latency.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

namespace arbiter::sim {
namespace {

constexpr double kSaturation = 0.98;

// Survival of the time in system of a served request, x in seconds.
double ServedSurvival(const LatencyInterval& i, double x) {
  const double mu = i.replica_rate;
  const double c = static_cast<double>(i.replicas);
  const double theta = c * mu - i.served_rate;  // rate at which the queue drains
  const double busy = ErlangC(i.replicas, i.served_rate / mu);
  const double service = std::exp(-mu * x);
  double queued;  // P(wait + service > x) given a wait ~ Exp(theta)
  if (std::abs(theta - mu) < 1e-9 * mu) {
    queued = (1 + mu * x) * service;
  } else {
    queued = (theta * service - mu * std::exp(-theta * x)) / (theta - mu);
  }
  return (1 - busy) * service + busy * queued;
}

double Quantile(std::span<const LatencyInterval> intervals, double q, double timeout_ms) {
  double total = 0;
  for (const LatencyInterval& i : intervals) total += i.requests;
  if (total <= 0) return 0;
  const double target = (1 - q) * total;
  auto above = [&](double x_ms) {
    double s = 0;
    for (const LatencyInterval& i : intervals) s += i.requests * Survival(i, x_ms, timeout_ms);
    return s;
  };
  if (above(timeout_ms * (1 - 1e-9)) > target) return timeout_ms;
  double lo = 0;
  double hi = timeout_ms;
  for (int step = 0; step < 60 && hi - lo > 1e-3; ++step) {
    const double mid = (lo + hi) / 2;
    if (above(mid) > target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

}  // namespace

double ErlangC(std::int32_t c, double a) {
  if (c <= 0) return 1;
  // Erlang B by its stable recursion, then C from B.
  double b = 1;
  for (std::int32_t k = 1; k <= c; ++k) b = a * b / (static_cast<double>(k) + a * b);
  const double cd = static_cast<double>(c);
  if (a >= cd) return 1;
  return cd * b / (cd - a * (1 - b));
}

LatencyInterval MakeInterval(double rate, double replica_rate, double replicas, double seconds,
                             double timeout_ms) {
  (void)timeout_ms;
  LatencyInterval i;
  i.requests = rate * seconds;
  i.replica_rate = replica_rate;
  i.replicas = static_cast<std::int32_t>(std::floor(replicas + 0.5));
  const double capacity = static_cast<double>(i.replicas) * replica_rate;
  if (rate <= 0) return i;
  if (capacity <= 0) {
    i.timeout_fraction = 1;
    return i;
  }
  if (rate > kSaturation * capacity) {
    i.served_rate = kSaturation * capacity;
    i.timeout_fraction = std::max(0.0, 1 - capacity / rate);
  } else {
    i.served_rate = rate;
  }
  return i;
}

double Survival(const LatencyInterval& i, double x_ms, double timeout_ms) {
  const double timed_out = x_ms < timeout_ms ? i.timeout_fraction : 0;
  if (i.timeout_fraction >= 1) return timed_out;
  const double served = x_ms < timeout_ms ? ServedSurvival(i, x_ms / 1000.0) : 0;
  return timed_out + (1 - i.timeout_fraction) * served;
}

double IntervalQuantile(const LatencyInterval& interval, double q, double timeout_ms) {
  return Quantile(std::span<const LatencyInterval>(&interval, 1), q, timeout_ms);
}

double MixtureQuantile(const std::vector<LatencyInterval>& intervals, double q, double timeout_ms) {
  return Quantile(intervals, q, timeout_ms);
}

std::vector<double> WindowQuantiles(const std::vector<LatencyInterval>& intervals,
                                    std::int64_t window_ms, std::int64_t end_ms, double q,
                                    double timeout_ms) {
  std::vector<double> out;
  if (window_ms <= 0 || end_ms <= 0) return out;
  const std::int64_t windows = (end_ms + window_ms - 1) / window_ms;
  std::vector<std::vector<LatencyInterval>> by_window(static_cast<std::size_t>(windows));
  for (const LatencyInterval& i : intervals) {
    const std::int64_t length = i.end_ms - i.start_ms;
    if (length <= 0 || i.requests <= 0) continue;
    const std::int64_t first = std::max<std::int64_t>(0, i.start_ms / window_ms);
    const std::int64_t last = std::min(windows - 1, (i.end_ms - 1) / window_ms);
    for (std::int64_t w = first; w <= last; ++w) {
      const std::int64_t from = std::max(i.start_ms, w * window_ms);
      const std::int64_t to = std::min(i.end_ms, (w + 1) * window_ms);
      if (to <= from) continue;
      LatencyInterval part = i;
      part.requests = i.requests * static_cast<double>(to - from) / static_cast<double>(length);
      by_window[static_cast<std::size_t>(w)].push_back(part);
    }
  }
  out.reserve(by_window.size());
  for (const std::vector<LatencyInterval>& window : by_window) {
    out.push_back(window.empty() ? std::numeric_limits<double>::quiet_NaN()
                                 : Quantile(window, q, timeout_ms));
  }
  return out;
}

}  // namespace arbiter::sim
