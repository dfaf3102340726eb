// The M/M/c latency model of inference services: Erlang C, the survival of a request's time in
// the system, quantiles of one interval and of a mixture, and overload.
#include "sim/latency.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace arbiter::sim {
namespace {

constexpr double kTimeoutMs = 30000;

TEST(LatencyErlangC, KnownValues) {
  // One server: the probability of waiting is the utilisation.
  for (double rho : {0.1, 0.5, 0.9}) EXPECT_NEAR(ErlangC(1, rho), rho, 1e-12);
  EXPECT_NEAR(ErlangC(2, 1.0), 1.0 / 3, 1e-12);
  // c = 3, a = 2: (a^3/3! * 3/(3-2)) / (1 + 2 + 2 + 4) = 4/9.
  EXPECT_NEAR(ErlangC(3, 2.0), 4.0 / 9, 1e-12);
  EXPECT_NEAR(ErlangC(5, 0.0), 0.0, 1e-12);
  // At or beyond saturation every request waits; no server: always.
  EXPECT_EQ(ErlangC(4, 4.0), 1.0);
  EXPECT_EQ(ErlangC(4, 9.0), 1.0);
  EXPECT_EQ(ErlangC(0, 1.0), 1.0);
}

TEST(LatencyErlangC, GrowsWithLoadAndShrinksWithServers) {
  double last = 0;
  for (double a = 0.5; a < 8; a += 0.5) {
    const double c = ErlangC(8, a);
    EXPECT_GT(c, last);
    last = c;
  }
  for (int c = 3; c < 20; ++c) EXPECT_LT(ErlangC(c + 1, 2.5), ErlangC(c, 2.5));
}

// M/M/1: the time in the system is exponential with rate mu - lambda.
TEST(LatencyMM1, ResponseTimeIsExponential) {
  const double lambda = 5, mu = 10;
  const LatencyInterval i = MakeInterval(lambda, mu, 1, 60, kTimeoutMs);
  EXPECT_EQ(i.replicas, 1);
  EXPECT_EQ(i.served_rate, lambda);
  EXPECT_EQ(i.timeout_fraction, 0);
  EXPECT_NEAR(i.requests, lambda * 60, 1e-9);
  EXPECT_NEAR(Survival(i, 0, kTimeoutMs), 1.0, 1e-12);
  for (double x_ms : {10.0, 100.0, 460.0, 2000.0}) {
    EXPECT_NEAR(Survival(i, x_ms, kTimeoutMs), std::exp(-(mu - lambda) * x_ms / 1000), 1e-12)
        << x_ms;
  }
  // Nothing lasts beyond the timeout.
  EXPECT_EQ(Survival(i, kTimeoutMs, kTimeoutMs), 0);
  EXPECT_NEAR(IntervalQuantile(i, 0.99, kTimeoutMs), std::log(100.0) / (mu - lambda) * 1000, 1e-2);
  EXPECT_NEAR(IntervalQuantile(i, 0.5, kTimeoutMs), std::log(2.0) / (mu - lambda) * 1000, 1e-2);
}

// When the queue drains as fast as one replica serves (c mu - lambda = mu), the time in the
// system of a queued request is Erlang-2; the survival is continuous across that case.
TEST(LatencyMMc, DrainRateEqualToServiceRateIsContinuous) {
  const double mu = 10;
  const LatencyInterval equal = MakeInterval(10, mu, 2, 60, kTimeoutMs);
  const LatencyInterval near = MakeInterval(10.000001, mu, 2, 60, kTimeoutMs);
  for (double x_ms : {0.0, 50.0, 200.0, 1000.0}) {
    EXPECT_NEAR(Survival(equal, x_ms, kTimeoutMs), Survival(near, x_ms, kTimeoutMs), 1e-6) << x_ms;
  }
  // C(2, 1) = 1/3: (2/3) e^{-mu x} + (1/3)(1 + mu x) e^{-mu x}.
  const double x = 0.2;
  EXPECT_NEAR(Survival(equal, x * 1000, kTimeoutMs),
              (2.0 / 3) * std::exp(-mu * x) + (1.0 / 3) * (1 + mu * x) * std::exp(-mu * x), 1e-12);
}

TEST(LatencyMMc, MoreReplicasLowerTheTail) {
  double last = kTimeoutMs;
  for (int c = 11; c <= 16; ++c) {
    const double p99 = IntervalQuantile(MakeInterval(100, 10, c, 60, kTimeoutMs), 0.99, kTimeoutMs);
    EXPECT_LT(p99, last) << c;
    last = p99;
  }
  // With many idle replicas the tail is the service time's: ln(100) / mu.
  EXPECT_NEAR(IntervalQuantile(MakeInterval(1, 10, 40, 60, kTimeoutMs), 0.99, kTimeoutMs),
              std::log(100.0) / 10 * 1000, 1e-2);
}

TEST(LatencyMakeInterval, OverloadTimesOutTheExcess) {
  const LatencyInterval i = MakeInterval(100, 10, 4, 60, kTimeoutMs);
  EXPECT_EQ(i.replicas, 4);
  EXPECT_NEAR(i.timeout_fraction, 1 - 4 * 10.0 / 100, 1e-12);
  EXPECT_NEAR(i.served_rate, 0.98 * 40, 1e-12);  // the served requests see a saturated queue
  EXPECT_NEAR(i.requests, 6000, 1e-9);
  const LatencyInterval served{6000, 0.98 * 40, 10, 4, 0};
  for (double x_ms : {1.0, 100.0, 1000.0}) {
    EXPECT_NEAR(Survival(i, x_ms, kTimeoutMs), 0.6 + 0.4 * Survival(served, x_ms, kTimeoutMs),
                1e-12);
  }
  EXPECT_EQ(IntervalQuantile(i, 0.99, kTimeoutMs), kTimeoutMs);
  EXPECT_LT(IntervalQuantile(i, 0.3, kTimeoutMs), kTimeoutMs);
  // Just above the 98% saturation point: served at 98%, a sliver times out.
  const LatencyInterval edge = MakeInterval(39.6, 10, 4, 60, kTimeoutMs);
  EXPECT_NEAR(edge.served_rate, 39.2, 1e-12);
  EXPECT_NEAR(edge.timeout_fraction, 0, 1e-12);
}

TEST(LatencyMakeInterval, RoundsReplicasAndHandlesNoCapacityOrNoRequests) {
  EXPECT_EQ(MakeInterval(1, 10, 3.49, 60, kTimeoutMs).replicas, 3);
  EXPECT_EQ(MakeInterval(1, 10, 3.5, 60, kTimeoutMs).replicas, 4);
  const LatencyInterval none = MakeInterval(5, 10, 0.4, 60, kTimeoutMs);
  EXPECT_EQ(none.replicas, 0);
  EXPECT_EQ(none.timeout_fraction, 1);
  EXPECT_EQ(Survival(none, 1, kTimeoutMs), 1);
  EXPECT_EQ(IntervalQuantile(none, 0.5, kTimeoutMs), kTimeoutMs);
  const LatencyInterval idle = MakeInterval(0, 10, 2, 60, kTimeoutMs);
  EXPECT_EQ(idle.requests, 0);
  EXPECT_EQ(idle.timeout_fraction, 0);
  EXPECT_EQ(IntervalQuantile(idle, 0.99, kTimeoutMs), 0);
}

TEST(LatencyMixture, WeighsIntervalsByTheirRequests) {
  // Half the requests time out (no replica), half see an M/M/1 with rate 5: the 40th percentile
  // from the top is where 0.5 + 0.5 e^{-5x} = 0.6, x = ln(5)/5 s; above the median: timeout.
  const LatencyInterval down = MakeInterval(10, 10, 0, 100, kTimeoutMs);
  const LatencyInterval mm1 = MakeInterval(5, 10, 1, 200, kTimeoutMs);
  ASSERT_NEAR(down.requests, mm1.requests, 1e-9);
  const std::vector<LatencyInterval> both{down, mm1};
  EXPECT_NEAR(MixtureQuantile(both, 0.4, kTimeoutMs), std::log(5.0) / 5 * 1000, 1e-2);
  EXPECT_EQ(MixtureQuantile(both, 0.55, kTimeoutMs), kTimeoutMs);
  EXPECT_EQ(MixtureQuantile(both, 0.99, kTimeoutMs), kTimeoutMs);

  // Two M/M/1 intervals with 1:3 requests: the quantile solves the weighted survival.
  const LatencyInterval slow = MakeInterval(8, 10, 1, 100, kTimeoutMs);  // Exp(2), 800 requests
  const LatencyInterval fast = MakeInterval(4, 10, 1, 600, kTimeoutMs);  // Exp(6), 2400 requests
  const double x = MixtureQuantile({slow, fast}, 0.99, kTimeoutMs) / 1000;
  EXPECT_NEAR(0.25 * std::exp(-2 * x) + 0.75 * std::exp(-6 * x), 0.01, 1e-7);
  EXPECT_GT(x * 1000, IntervalQuantile(fast, 0.99, kTimeoutMs));
  EXPECT_LT(x * 1000, IntervalQuantile(slow, 0.99, kTimeoutMs));
  // One interval alone, or the same one twice, gives its own quantile.
  EXPECT_EQ(MixtureQuantile({slow}, 0.99, kTimeoutMs), IntervalQuantile(slow, 0.99, kTimeoutMs));
  EXPECT_NEAR(MixtureQuantile({slow, slow}, 0.99, kTimeoutMs),
              IntervalQuantile(slow, 0.99, kTimeoutMs), 1e-9);
  EXPECT_EQ(MixtureQuantile({}, 0.99, kTimeoutMs), 0);
}

// Per-window quantiles: each window holds the intervals within it, an interval across a
// boundary split by its time on each side; a window without requests is NaN.
TEST(LatencyWindows, SplitsIntervalsAtWindowBoundaries) {
  auto at = [](LatencyInterval i, std::int64_t start, std::int64_t end) {
    i.start_ms = start;
    i.end_ms = end;
    return i;
  };
  const LatencyInterval calm = MakeInterval(100, 10, 15, 60, kTimeoutMs);
  const LatencyInterval busy = MakeInterval(140, 10, 16, 60, kTimeoutMs);
  // 0-60 s calm, 60-120 s busy (across the boundary at 90 s), 120-180 s calm; windows of 90 s
  // up to 240 s: [0, 90) holds the calm minute and half the busy one, [90, 180) the other half
  // and the calm minute, [180, 240) nothing.
  const std::vector<LatencyInterval> intervals = {at(calm, 0, 60'000), at(busy, 60'000, 120'000),
                                                  at(calm, 120'000, 180'000)};
  const std::vector<double> p99 = WindowQuantiles(intervals, 90'000, 240'000, 0.99, kTimeoutMs);
  ASSERT_EQ(p99.size(), 3u);
  LatencyInterval half = busy;
  half.requests = busy.requests / 2;
  const double expected = MixtureQuantile({calm, half}, 0.99, kTimeoutMs);
  EXPECT_DOUBLE_EQ(p99[0], expected);
  EXPECT_DOUBLE_EQ(p99[1], expected);
  EXPECT_GT(expected, IntervalQuantile(calm, 0.99, kTimeoutMs));
  EXPECT_LT(expected, IntervalQuantile(busy, 0.99, kTimeoutMs));
  EXPECT_TRUE(std::isnan(p99[2]));
  EXPECT_TRUE(WindowQuantiles(intervals, 0, 240'000, 0.99, kTimeoutMs).empty());
}

}  // namespace
}  // namespace arbiter::sim
