// Request latency of an inference service from the replicas serving it, as an M/M/c queue:
// requests arrive at rate lambda, each of c replicas serves mu per second, and a request's time in
// the system is its wait (Erlang C) plus its service time. Requests beyond what the replicas can
// serve (lambda > c mu) time out: they are counted at the timeout, and the ones served see a queue
// at 98% utilisation.
#pragma once

#include <cstdint>
#include <vector>

namespace arbiter::sim {

// One stretch of time with a constant rate and number of replicas.
struct LatencyInterval {
  double requests = 0;          // requests that arrived in the interval
  double served_rate = 0;       // lambda of the requests served, per second
  double replica_rate = 0;      // mu
  std::int32_t replicas = 0;    // c
  double timeout_fraction = 0;  // of the requests, the share that timed out
  std::int64_t start_ms = 0;    // the stretch of simulated time it covers
  std::int64_t end_ms = 0;
};

// `replicas` may be a time average; it is rounded to the nearest whole replica.
LatencyInterval MakeInterval(double rate, double replica_rate, double replicas, double seconds,
                             double timeout_ms);

// Probability that all c servers are busy (Erlang C) for offered load a = lambda / mu.
double ErlangC(std::int32_t c, double a);

// P(latency > x_ms) of a request of the interval, timeouts included.
double Survival(const LatencyInterval& interval, double x_ms, double timeout_ms);

// The q-quantile of the latency in ms of one interval, and of all requests of many intervals.
double IntervalQuantile(const LatencyInterval& interval, double q, double timeout_ms);
double MixtureQuantile(const std::vector<LatencyInterval>& intervals, double q, double timeout_ms);

// The q-quantile of the requests of each window of `window_ms` from time 0 up to `end_ms` (the
// last window may be shorter), by the intervals' start_ms and end_ms: an interval across a
// window's boundary counts in each window with its requests in proportion to its time there. A
// window without requests gets NaN.
std::vector<double> WindowQuantiles(const std::vector<LatencyInterval>& intervals,
                                    std::int64_t window_ms, std::int64_t end_ms, double q,
                                    double timeout_ms);

}  // namespace arbiter::sim
