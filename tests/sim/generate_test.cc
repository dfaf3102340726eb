// Workload generators: seeded streams, arrivals and the random quantities of jobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "sim/workload.h"
#include "testing/builders.h"

namespace arbiter::sim {
namespace {

constexpr Millis kMinute = 60 * kMillisPerSecond;
constexpr Millis kHour = 60 * kMinute;

Generator Poisson(const std::string& name, double per_hour) {
  Generator g;
  g.name = name;
  g.kind = WorkKind::kTraining;
  g.job = testing::GpuJob(0, 1, 1000);
  g.arrivals.kind = Arrivals::Kind::kPoisson;
  g.arrivals.per_hour = per_hour;
  g.work = Dist{Dist::Kind::kExponential, static_cast<double>(kHour), 0, {}, {}};
  g.gpus = Dist{Dist::Kind::kChoice, 0, 0, {1, 2, 4, 8}, {}};
  g.gpus_set = true;
  return g;
}

bool SameJobs(const std::vector<SimJob>& a, const std::vector<SimJob>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].job.name != b[i].job.name || a[i].job.submit_time != b[i].job.submit_time ||
        a[i].work != b[i].work || a[i].job.total_gpu() != b[i].job.total_gpu()) {
      return false;
    }
  }
  return true;
}

TEST(GeneratorSeed, SameSeedSameJobs) {
  const Generator g = Poisson("train", 10);
  const std::vector<SimJob> a = Generate(g, 42, 24 * kHour);
  const std::vector<SimJob> b = Generate(g, 42, 24 * kHour);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(SameJobs(a, b));
  EXPECT_FALSE(SameJobs(a, Generate(g, 43, 24 * kHour)));
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].job.name, "train-" + std::to_string(k));
    EXPECT_EQ(a[k].job.id, 0u);
    EXPECT_EQ(a[k].kind, WorkKind::kTraining);
    EXPECT_EQ(a[k].workload, "train");
    EXPECT_GE(a[k].work, 1);
    EXPECT_EQ(a[k].job.runtime_estimate, a[k].work);  // estimate factor 1
    if (k > 0) {
      EXPECT_LE(a[k - 1].job.submit_time, a[k].job.submit_time);
    }
    EXPECT_LT(a[k].job.submit_time, 24 * kHour);
  }
}

TEST(GeneratorSeed, StreamsAreIndependentByName) {
  EXPECT_EQ(StreamSeed(1, "a"), StreamSeed(1, "a"));
  EXPECT_NE(StreamSeed(1, "a"), StreamSeed(1, "b"));
  EXPECT_NE(StreamSeed(1, "a"), StreamSeed(2, "a"));
  EXPECT_NE(StreamSeed(0, ""), StreamSeed(0, "x"));
  // A generator's jobs depend on the scenario seed and its own name only; another generator's
  // name gives another stream.
  const std::vector<SimJob> a = Generate(Poisson("a", 10), 7, 24 * kHour);
  Generator renamed = Poisson("b", 10);
  const std::vector<SimJob> b = Generate(renamed, 7, 24 * kHour);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a[0].job.submit_time, b[0].job.submit_time);
  // The same stream under a longer horizon: the arrivals before the shorter one are the same.
  const std::vector<SimJob> longer = Generate(Poisson("a", 10), 7, 48 * kHour);
  ASSERT_GT(longer.size(), a.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].job.submit_time, longer[k].job.submit_time);
  }
  EXPECT_GE(longer[a.size()].job.submit_time, 24 * kHour);
}

TEST(GeneratorRng, UniformIsInRangeAndSeeded) {
  Rng a(5), b(5), c(6);
  double sum = 0;
  bool differs = false;
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs = differs || x != c.Next();
    const double u = a.Uniform();
    b.Uniform();
    EXPECT_GE(u, 0);
    EXPECT_LT(u, 1);
    sum += u;
  }
  EXPECT_TRUE(differs);
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(GeneratorArrivals, PoissonCountIsAboutTheRate) {
  const std::vector<SimJob> jobs = Generate(Poisson("p", 60), 1, 100 * kHour);
  // 6000 expected, standard deviation about 77.
  EXPECT_GT(jobs.size(), 5600u);
  EXPECT_LT(jobs.size(), 6400u);
  // Within [start, until) and limited by count.
  Generator g = Poisson("p", 60);
  g.arrivals.start = 10 * kHour;
  g.arrivals.until = 20 * kHour;
  const std::vector<SimJob> window = Generate(g, 1, 100 * kHour);
  ASSERT_FALSE(window.empty());
  EXPECT_GE(window.front().job.submit_time, 10 * kHour);
  EXPECT_LT(window.back().job.submit_time, 20 * kHour);
  EXPECT_GT(window.size(), 450u);
  EXPECT_LT(window.size(), 750u);
  g.arrivals.count = 25;
  EXPECT_EQ(Generate(g, 1, 100 * kHour).size(), 25u);
  g.arrivals.per_hour = 0;
  EXPECT_TRUE(Generate(g, 1, 100 * kHour).empty());
}

TEST(GeneratorArrivals, PeriodicBurstsAreExact) {
  Generator g = Poisson("cron", 1);
  g.arrivals.kind = Arrivals::Kind::kPeriodic;
  g.arrivals.every = kHour;
  g.arrivals.burst = 3;
  g.arrivals.start = 30 * kMinute;
  const std::vector<SimJob> jobs = Generate(g, 1, 5 * kHour);
  ASSERT_EQ(jobs.size(), 15u);
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    EXPECT_EQ(jobs[k].job.submit_time, 30 * kMinute + static_cast<Millis>(k / 3) * kHour) << k;
  }
  g.arrivals.count = 7;
  EXPECT_EQ(Generate(g, 1, 5 * kHour).size(), 7u);
  g.arrivals.count = 0;
  g.arrivals.until = 2 * kHour;  // before the horizon
  EXPECT_EQ(Generate(g, 1, 5 * kHour).size(), 6u);
  // No end at all: one burst.
  g.arrivals.until = 0;
  EXPECT_EQ(Generate(g, 1, 0).size(), 3u);
}

TEST(GeneratorArrivals, GivenTimesAreSortedAndCut) {
  Generator g = Poisson("at", 1);
  g.arrivals.kind = Arrivals::Kind::kAt;
  g.arrivals.at = {3 * kHour, kHour, 9 * kHour, 2 * kHour};
  const std::vector<SimJob> jobs = Generate(g, 1, 5 * kHour);
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].job.submit_time, kHour);
  EXPECT_EQ(jobs[1].job.submit_time, 2 * kHour);
  EXPECT_EQ(jobs[2].job.submit_time, 3 * kHour);
  EXPECT_EQ(Generate(g, 1, 0).size(), 4u);
}

TEST(GeneratorJobs, GpusAndEstimates) {
  Generator g = Poisson("g", 10);
  g.arrivals.count = 20;
  g.gpus = Dist{Dist::Kind::kConstant, 0.25, 0, {}, {}};
  g.estimate_factor = 0;
  for (const SimJob& j : Generate(g, 1, 0)) {
    EXPECT_EQ(j.job.groups[0].request.gpu.value(), 250);
    EXPECT_EQ(j.job.runtime_estimate, 0);
  }
  g.gpus = Dist{Dist::Kind::kConstant, 2.4, 0, {}, {}};
  g.estimate_factor = 1.5;
  g.work = Dist{Dist::Kind::kConstant, 1000, 0, {}, {}};
  g.checkpoint_cost = kMinute;
  for (const SimJob& j : Generate(g, 1, 0)) {
    EXPECT_EQ(j.job.groups[0].request.gpu.value(), 2000);
    EXPECT_EQ(j.work, 1000);
    EXPECT_EQ(j.job.runtime_estimate, 1500);
    EXPECT_EQ(j.checkpoint_cost, kMinute);
  }
  // Without gpus the template's request stays.
  g.gpus_set = false;
  for (const SimJob& j : Generate(g, 1, 0)) EXPECT_EQ(j.job.groups[0].request.gpu.value(), 1000);
}

double SampleMean(const Dist& d, int n, std::uint64_t seed) {
  Rng rng(seed);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += d.Draw(rng);
  return sum / n;
}

TEST(GeneratorDist, MeansMatchTheDraws) {
  const std::vector<Dist> dists = {
      {Dist::Kind::kConstant, 7, 0, {}, {}},         {Dist::Kind::kUniform, 2, 10, {}, {}},
      {Dist::Kind::kExponential, 3, 0, {}, {}},      {Dist::Kind::kLogNormal, 5, 0.5, {}, {}},
      {Dist::Kind::kChoice, 0, 0, {1, 2, 4, 8}, {}}, {Dist::Kind::kChoice, 0, 0, {1, 10}, {3, 1}},
  };
  EXPECT_EQ(dists[0].Mean(), 7);
  EXPECT_EQ(dists[1].Mean(), 6);
  EXPECT_EQ(dists[2].Mean(), 3);
  EXPECT_NEAR(dists[3].Mean(), 5 * std::exp(0.125), 1e-12);
  EXPECT_EQ(dists[4].Mean(), 3.75);
  EXPECT_EQ(dists[5].Mean(), 13.0 / 4);
  for (const Dist& d : dists) {
    EXPECT_NEAR(SampleMean(d, 100000, 3), d.Mean(), 0.02 * d.Mean()) << static_cast<int>(d.kind);
  }
  // Uniform stays within its bounds; a choice draws only its values.
  Rng rng(9);
  std::set<double> seen;
  for (int i = 0; i < 1000; ++i) {
    const double u = dists[1].Draw(rng);
    EXPECT_GE(u, 2);
    EXPECT_LT(u, 10);
    seen.insert(dists[4].Draw(rng));
  }
  EXPECT_EQ(seen, (std::set<double>{1, 2, 4, 8}));
  EXPECT_EQ(Dist{}.Mean(), 0);
  EXPECT_EQ((Dist{Dist::Kind::kChoice, 0, 0, {}, {}}).Mean(), 0);
}

TEST(GeneratorOutages, RandomOutagesAreSortedWithinTheHorizonAndDoNotOverlap) {
  const Millis horizon = 30 * 24 * kHour;
  const std::vector<NodeOutage> a = RandomOutages(8, 5 * 24 * kHour, 4 * kHour, 11, horizon);
  const std::vector<NodeOutage> b = RandomOutages(8, 5 * 24 * kHour, 4 * kHour, 11, horizon);
  ASSERT_EQ(a.size(), b.size());
  // 8 nodes over 30 days with a mean of 5 days between failures: about 48.
  EXPECT_GT(a.size(), 20u);
  EXPECT_LT(a.size(), 90u);
  std::vector<Millis> last_end(8, -1);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at, b[i].at);
    EXPECT_EQ(a[i].node, b[i].node);
    EXPECT_EQ(a[i].duration, 4 * kHour);
    EXPECT_GE(a[i].at, 0);
    EXPECT_LT(a[i].at, horizon);
    ASSERT_LT(a[i].node, 8u);
    if (i > 0) {
      EXPECT_LE(a[i - 1].at, a[i].at);
    }
    EXPECT_GT(a[i].at, last_end[a[i].node]);
    last_end[a[i].node] = a[i].at + a[i].duration;
  }
  EXPECT_TRUE(RandomOutages(8, 0, kHour, 1, horizon).empty());
  EXPECT_TRUE(RandomOutages(8, kHour, kHour, 1, 0).empty());
}

}  // namespace
}  // namespace arbiter::sim
