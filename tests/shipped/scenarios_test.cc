// The shipped scenarios tell their stories: these tests hold them to it, so that a change to the
// engine or the simulator that breaks the case study or the incident's fix is caught.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "scenario/scenario.h"
#include "sim/sim.h"
#include "testing/builders.h"
#include "testing/sanitized.h"

namespace arbiter {
namespace {

const sim::RunResult& Named(const std::vector<sim::RunResult>& runs, const std::string& name) {
  for (const sim::RunResult& r : runs) {
    if (r.name == name) return r;
  }
  ADD_FAILURE() << "no run " << name;
  return runs.front();
}

std::vector<sim::RunResult> Simulate(const std::string& file) {
  Result<config::Scenario> scenario =
      config::LoadScenarioFile(fmt::format("{}/scenarios/{}", ARBITER_SOURCE_DIR, file));
  EXPECT_TRUE(scenario.ok()) << scenario.status().message();
  std::vector<sim::RunResult> runs;
  if (!scenario.ok()) return runs;
  for (const config::SimConfiguration& c : scenario->configurations) {
    Result<sim::RunResult> r =
        sim::Simulate(c.cluster, c.engine, c.workload, testing::Checked(scenario->options), c.name);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) runs.push_back(std::move(*r));
  }
  return runs;
}

double WorstP99(const sim::RunResult& r) {
  double worst = 0;
  for (const sim::ServiceMetrics& s : r.services) worst = std::max(worst, s.latency_p99_ms);
  return worst;
}

TEST(ShippedScenario, PreemptionStormAndItsFix) {
  std::vector<sim::RunResult> runs = Simulate("preemption-storm.yaml");
  ASSERT_EQ(runs.size(), 2u);
  const sim::RunResult& incident = Named(runs, "incident");
  const sim::RunResult& fix = Named(runs, "fix");
  // The incident: evicted over and over, the training job never finishes.
  const sim::GroupMetrics& storm = incident.workloads.at("training");
  EXPECT_EQ(storm.jobs_completed, 0);
  EXPECT_GE(storm.evictions, 50);
  EXPECT_GT(storm.gpu_hours_lost, 50);
  // The fix: it finishes in about its 20 hours of work, and the tasks still run.
  const sim::GroupMetrics& fixed = fix.workloads.at("training");
  EXPECT_EQ(fixed.jobs_completed, 1);
  EXPECT_LT(fixed.jct.mean, 22 * 3600.0);
  EXPECT_GE(fix.workloads.at("inference-tasks").jobs_completed,
            incident.workloads.at("inference-tasks").jobs_completed * 95 / 100);
}

TEST(ShippedScenario, MixedClusterCaseStudyShape) {
  ARBITER_SKIP_WHEN_SANITIZED("a whole trace's figures");
  std::vector<sim::RunResult> runs = Simulate("mixed-cluster.yaml");
  ASSERT_EQ(runs.size(), 3u);
  const sim::RunResult& fcfs = Named(runs, "fcfs");
  const sim::RunResult& priorities = Named(runs, "priorities");
  const sim::RunResult& protected_run = Named(runs, "quotas+checkpoints");
  // Inference latency falls once serving comes first.
  EXPECT_LT(WorstP99(priorities), WorstP99(fcfs) * 0.8);
  EXPECT_LT(WorstP99(protected_run), 200);
  // Checkpoint protection: far less work lost than with bare priorities.
  EXPECT_LT(protected_run.overall.gpu_hours_lost, priorities.overall.gpu_hours_lost * 0.6);
  // The cluster stays busy.
  EXPECT_GT(protected_run.gpu_utilization, 0.85);
  EXPECT_GT(protected_run.gpu_utilization, fcfs.gpu_utilization);
}

// Tiresias's own sample on its cluster: lightly loaded, every policy runs every job as it arrives,
// and the figures are those of Tiresias's simulator on the same trace (docs/simulator.md).
TEST(ShippedScenario, TiresiasSampleMatchesTiresiasSimulator) {
  std::vector<sim::RunResult> runs = Simulate("tiresias-sample.yaml");
  ASSERT_EQ(runs.size(), 6u);
  for (const sim::RunResult& r : runs) {
    EXPECT_EQ(r.overall.jobs_completed, 60) << r.name;
    EXPECT_NEAR(r.overall.jct.mean, 178.4, 0.1) << r.name;
    EXPECT_EQ(r.overall.jct.p99, 1800) << r.name;
    EXPECT_EQ(r.horizon, 3271 * kMillisPerSecond) << r.name;
  }
}

// The Philly sample as Tiresias replays it: least attained service cuts the mean JCT of strict
// FIFO tenfold by running short jobs first and evicting long ones for them, and does no worse than
// Tiresias's own simulator; the Gittins index, learned from the jobs that finish, runs the likely
// short ones of a service queue first and shortens the tail. Finish-time
// fairness, knowing each job's work, lets short jobs overtake once they have waited a fraction of
// a long one's wait: lower in mean and p99 than 2D-LAS without evicting anything; with Themis's
// leases (evicting for a higher rho), lower in mean still. Gavel's max-min fairness on one GPU
// model time-shares the GPUs equally: a worse mean than LAS on this heavy-tailed trace, and a
// shorter tail.
TEST(ShippedScenario, PhillyUnderLeastAttainedService) {
  ARBITER_SKIP_WHEN_SANITIZED("a whole trace's figures");
  std::vector<sim::RunResult> runs = Simulate("philly-tiresias.yaml");
  ASSERT_EQ(runs.size(), 8u);
  const sim::RunResult& fifo = Named(runs, "fifo");
  // Strict FIFO is Tiresias's FIFO exactly: mean JCT 1,404,970.9 s there.
  EXPECT_NEAR(fifo.overall.jct.mean, 1404970.9, 1);
  EXPECT_EQ(fifo.overall.evictions, 0);
  for (const char* name : {"las", "las-2d", "gittins"}) {
    const sim::RunResult& las = Named(runs, name);
    EXPECT_EQ(las.overall.jobs_completed, 2000) << name;
    EXPECT_LT(las.overall.jct.mean, fifo.overall.jct.mean / 8) << name;
    EXPECT_LT(las.overall.jct.p50, fifo.overall.jct.p50 / 20) << name;
    EXPECT_GT(las.overall.evictions, 1000) << name;
  }
  // Tiresias's own simulator on the same jobs (docs/simulator.md): dlas 131,118 s of mean JCT
  // and 1,403,268 s of p99; dlas-gpu 134,481 s and 1,339,764 s. Arbiter's LAS does no worse.
  EXPECT_LT(Named(runs, "las").overall.jct.mean, 131118);
  EXPECT_LT(Named(runs, "las").overall.jct.p99, 1403268);
  EXPECT_LT(Named(runs, "las-2d").overall.jct.mean, 134481);
  EXPECT_LT(Named(runs, "las-2d").overall.jct.p99, 1339764);
  const sim::RunResult& promote = Named(runs, "las-2d-promote");
  EXPECT_EQ(promote.overall.jobs_completed, 2000);
  EXPECT_LT(promote.overall.jct.mean, fifo.overall.jct.mean / 5);
  // Gittins: a shorter tail than 2D-LAS's on its queues (its p99 6% lower).
  const sim::RunResult& gittins = Named(runs, "gittins");
  EXPECT_LT(gittins.overall.jct.p99, Named(runs, "las-2d").overall.jct.p99 * 0.97);
  const sim::RunResult& ftf = Named(runs, "ftf");
  EXPECT_EQ(ftf.overall.jobs_completed, 2000);
  EXPECT_EQ(ftf.overall.evictions, 0);
  EXPECT_LT(ftf.overall.jct.mean, Named(runs, "las-2d").overall.jct.mean * 0.97);
  EXPECT_LT(ftf.overall.jct.p99, Named(runs, "las-2d").overall.jct.p99 * 0.8);
  const sim::RunResult& lease = Named(runs, "ftf-lease");
  EXPECT_EQ(lease.overall.jobs_completed, 2000);
  EXPECT_GT(lease.overall.evictions, 1000);
  EXPECT_LT(lease.overall.jct.mean, ftf.overall.jct.mean * 0.95);
  EXPECT_LT(lease.overall.jct.p99, Named(runs, "las-2d").overall.jct.p99);
  const sim::RunResult& gavel = Named(runs, "gavel");
  EXPECT_EQ(gavel.overall.jobs_completed, 2000);
  EXPECT_GT(gavel.overall.evictions, 1000);
  EXPECT_LT(gavel.overall.jct.mean, fifo.overall.jct.mean / 5);
  EXPECT_GT(gavel.overall.jct.mean, Named(runs, "las-2d").overall.jct.mean);
  EXPECT_LT(gavel.overall.jct.p99, Named(runs, "las-2d").overall.jct.p99 * 0.95);
}

// Heterogeneous GPUs (Gavel): choosing each job's GPU model by comparative advantage on the
// throughput matrix finishes jobs sooner on average under the default order (it lowered the mean
// JCT by 6 to 28% over six seeds of this workload, and raised its p95: a job that gains little
// from the fast models waits for the slow ones); under least attained service, counting service
// in normalised throughput is about even in mean. Gavel's own policy, its max-min fairness
// program realised in rounds, had the lowest mean of all on each of six seeds (9 to 22% below the
// best configuration of the other policies) and a p95 near the default order's, far below LAS's.
TEST(ShippedScenario, GavelHeterogeneityAwareModels) {
  ARBITER_SKIP_WHEN_SANITIZED("a whole trace's figures");
  std::vector<sim::RunResult> runs = Simulate("gavel.yaml");
  ASSERT_EQ(runs.size(), 6u);
  for (const sim::RunResult& r : runs) {
    EXPECT_EQ(r.overall.jobs_completed, r.overall.jobs_submitted) << r.name;
  }
  const sim::RunResult& plain = Named(runs, "default");
  const sim::RunResult& fast = Named(runs, "max-throughput");
  EXPECT_LT(fast.overall.jct.mean, plain.overall.jct.mean * 0.95);
  EXPECT_EQ(fast.overall.evictions, 0);
  const sim::RunResult& las = Named(runs, "las");
  const sim::RunResult& fair = Named(runs, "las-max-min");
  EXPECT_LT(fair.overall.jct.mean, las.overall.jct.mean * 1.05);
  const sim::RunResult& gavel = Named(runs, "gavel-max-min");
  for (const sim::RunResult* other : {&plain, &fast, &las, &fair}) {
    EXPECT_LT(gavel.overall.jct.mean, other->overall.jct.mean * 0.95) << other->name;
  }
  EXPECT_LT(gavel.overall.jct.p95, las.overall.jct.p95 * 0.8);
  EXPECT_LT(gavel.overall.jct.p95, fast.overall.jct.p95 * 0.8);
  // The rounds time-share: evictions, each of a job that had had its share.
  EXPECT_GT(gavel.overall.evictions, 0);
  EXPECT_EQ(Named(runs, "gavel-max-throughput").overall.jobs_completed,
            Named(runs, "gavel-max-throughput").overall.jobs_submitted);
}

}  // namespace
}  // namespace arbiter
