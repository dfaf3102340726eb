#include "config/lint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/state/cluster_state.h"
#include "crypto/crypto.h"
#include "scenario/scenario.h"

namespace arbiter::config {
namespace {

const std::string kExamples = std::string(ARBITER_SOURCE_DIR) + "/examples/";

// 24 GPUs: two nodes of 8 H800, one of 8 A100-80G.
constexpr const char* kNodes = R"(nodes:
  - name: h800-{i}
    count: 2
    gpus: {model: H800, count: 8, memory: 80Gi}
    cpu: 128
    memory: 1Ti
  - name: a100
    gpus: {model: A100-80G, count: 8, memory: 80Gi}
    cpu: 128
    memory: 1Ti
)";

// Two classes whose preemptible one is protected by a minimum runtime.
constexpr const char* kProtectedClasses = R"(priority_classes:
  - {name: hi, value: 100, preemptible: false}
  - {name: lo, value: 10, min_runtime: 10m}
)";

constexpr const char* kOneQueue = R"(queues:
  - name: q
)";

std::string Cluster(const std::string& classes, const std::string& queues,
                    const std::string& scheduler = "") {
  return scheduler + classes + queues + kNodes;
}

// Lints a cluster file (and a jobs file when given); fails the test on a load error.
std::vector<LintWarning> LintYaml(const std::string& cluster, const std::string& jobs_yaml = "") {
  Result<ClusterConfig> config = ParseCluster(cluster, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status().message();
  if (!config.ok()) return {};
  Result<ClusterState> state = ClusterState::Create(config->cluster);
  EXPECT_TRUE(state.ok()) << state.status().message();
  if (!state.ok()) return {};
  std::vector<Job> jobs;
  std::vector<BareMemory> job_memory;
  if (!jobs_yaml.empty()) {
    Result<std::vector<Job>> parsed = ParseJobs(jobs_yaml, "jobs.yaml", *state, 1, &job_memory);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (!parsed.ok()) return {};
    jobs = std::move(parsed).value();
  }
  return Lint(*config, *state, jobs, job_memory);
}

// Lints every configuration of a scenario, as `arbiter lint --scenario` does; fails the test on a
// load error.
std::vector<LintWarning> LintScenarioYaml(const std::string& yaml) {
  Result<Scenario> scenario = ParseScenario(yaml, "scenario.yaml", ".");
  EXPECT_TRUE(scenario.ok()) << scenario.status().message();
  if (!scenario.ok()) return {};
  std::vector<LintWarning> out;
  for (const SimConfiguration& c : scenario->configurations) {
    Result<ClusterState> state = ClusterState::Create(c.cluster);
    EXPECT_TRUE(state.ok()) << state.status().message();
    if (!state.ok()) return {};
    std::vector<LintWarning> w = LintConfiguration(*scenario, c, *state);
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

std::vector<LintWarning> WithCode(const std::vector<LintWarning>& warnings,
                                  const std::string& code) {
  std::vector<LintWarning> out;
  std::copy_if(warnings.begin(), warnings.end(), std::back_inserter(out),
               [&](const LintWarning& w) { return w.code == code; });
  return out;
}

std::string Describe(const std::vector<LintWarning>& warnings) {
  std::string out;
  for (const LintWarning& w : warnings) out += w.field + ": " + w.message + " [" + w.code + "]\n";
  return out;
}

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// ---- limit-above-cluster, top-classes-alike, preemption-cap-zero ----

TEST(LintLimitAboveCluster, WarnsForAMaxOrBorrowingLimitTheClusterCannotReach) {
  const std::string queues = R"(queues:
  - name: org
  - name: a
    parent: org
    quota:
      H800: {nominal: 4, borrowing_limit: 40}
  - name: b
    parent: org
    quota:
      gpu: {max: 100}
      A100-80G: {max: 8}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kProtectedClasses, queues)), kLintLimitAboveCluster);
  ASSERT_EQ(w.size(), 2u) << Describe(w);
  EXPECT_EQ(w[0].field, "queues[1].quota.H800.borrowing_limit");
  EXPECT_TRUE(HasSubstr(w[0].message, "borrowing_limit 40 is more than the cluster's 16 H800"));
  EXPECT_EQ(w[1].field, "queues[2].quota.gpu.max");
  EXPECT_TRUE(HasSubstr(w[1].message, "max 100 is more than the cluster's 24 GPUs of all models"));
}

TEST(LintTopClassesAlike, WarnsWhenClassesShareTheTopValue) {
  const std::string classes = R"(priority_classes:
  - {name: urgent, value: 100, preemptible: false}
  - {name: critical, value: 100, preemptible: false}
  - {name: lo, value: 10, min_runtime: 10m}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(classes, kOneQueue)), kLintTopClassesAlike);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "priority_classes[0]");
  EXPECT_TRUE(HasSubstr(w[0].message, "urgent, critical all have the top value 100"));
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue)), kLintTopClassesAlike).empty());
}

TEST(LintPreemptionCapZero, WarnsWhenPreemptionIsOnButMayEvictNothing) {
  const std::string capped = "scheduler:\n  preemption: {enabled: true, max_gpus_per_cycle: 0}\n";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue, capped)), kLintPreemptionCapZero);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "scheduler.preemption.max_gpus_per_cycle");
  const std::string off = "scheduler:\n  preemption: {enabled: false, max_gpus_per_cycle: 0}\n";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue, off)), kLintPreemptionCapZero)
                  .empty());
}

// ---- top-class-majority ----

TEST(LintTopClassMajority, WarnsWhenMostGpusAreTopPriority) {
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: hi, gpus: 8, replicas: 3}
  - {name: b, queue: q, priority_class: lo, gpus: 8, checkpoint_interval: 30m}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue), jobs), kLintTopClassMajority);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "priority_classes[0]");
  EXPECT_TRUE(HasSubstr(w[0].message, "75%"));
  EXPECT_TRUE(HasSubstr(w[0].message, "24 of 32"));
  EXPECT_TRUE(HasSubstr(w[0].message, "hi"));
}

TEST(LintTopClassMajority, QuietWhenHalfOrLessIsTopPriority) {
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: hi, gpus: 8}
  - {name: b, queue: q, priority_class: lo, gpus: 8, checkpoint_interval: 30m}
  - {name: c, queue: q, priority_class: hi, cpu: 4}
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue), jobs), kLintTopClassMajority)
                  .empty());
}

TEST(LintTopClassMajority, QuietWithoutJobsOrWithOneClassValue) {
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue)), kLintTopClassMajority).empty());
  const std::string one_class = R"(priority_classes:
  - {name: only, value: 5, preemptible: false}
)";
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: only, gpus: 8}
)";
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(one_class, kOneQueue), jobs), kLintTopClassMajority).empty());
}

// ---- aging-overtakes-evicting-class ----

// Two preemptible classes five points apart (of a largest value of 100): under the default
// weights (priority class 10000, age 1000 over 7d) the class term gives 'hi' a lead of 500.
constexpr const char* kCloseClasses = R"(priority_classes:
  - {name: hi, value: 100, min_runtime: 10m}
  - {name: lo, value: 95, min_runtime: 10m}
)";

TEST(LintAgingOvertakesEvictingClass, WarnsWhenAgingOutweighsTheLeadOfAClassThatMayEvict) {
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kCloseClasses, kOneQueue)), kLintAgingOvertakesEvictingClass);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "scheduler.ordering");
  EXPECT_EQ(w[0].message,
            "aging (ordering.age_weight 1000 over ordering.max_age 7d) can order class 'lo' ahead "
            "of class 'hi', which may evict it (within queue q): a lo job that has waited 3d12h "
            "or more is ordered ahead of a hi job that has just arrived, so it can start first; "
            "a hi job then waits for such a job instead of evicting it: lower "
            "ordering.age_weight below 500 or raise ordering.priority_class_weight above 20000");
}

TEST(LintAgingOvertakesEvictingClass, WarnsAtATieWhichTheOlderJobWins) {
  // A lead of exactly the age weight: a lo job that has waited max_age ties with a hi job that
  // has just arrived, and the order takes the earlier submission first.
  const std::string classes = R"(priority_classes:
  - {name: hi, value: 1000}
  - {name: lo, value: 900, min_runtime: 10m}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(classes, kOneQueue)), kLintAgingOvertakesEvictingClass);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_TRUE(HasSubstr(w[0].message, "a lo job that has waited 7d or more"));
  EXPECT_TRUE(HasSubstr(w[0].message, "below 1000"));
}

TEST(LintAgingOvertakesEvictingClass, SaysWhenTheOrderGivesTheClassNoLead) {
  const std::string classes = R"(priority_classes:
  - {name: hi, value: 0}
  - {name: lo, value: -10, min_runtime: 10m}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(classes, kOneQueue)), kLintAgingOvertakesEvictingClass);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_TRUE(HasSubstr(w[0].message, "the order gives 'hi' no lead over 'lo'"));
  EXPECT_TRUE(HasSubstr(w[0].message, "set ordering.age_weight to 0"));
}

TEST(LintAgingOvertakesEvictingClass, QuietWhenTheLeadHoldsOrNothingEvictsWithinTheQueue) {
  // The lead of 'hi' (9000) is above the age weight.
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue)), kLintAgingOvertakesEvictingClass)
          .empty());
  // The weights keep the lead: no aging, a smaller age weight, a larger class weight.
  for (const char* ordering :
       {"{age_weight: 0}", "{age_weight: 499}", "{priority_class_weight: 20001}"}) {
    const std::string scheduler = std::string("scheduler:\n  ordering: ") + ordering + "\n";
    EXPECT_TRUE(WithCode(LintYaml(Cluster(kCloseClasses, kOneQueue, scheduler)),
                         kLintAgingOvertakesEvictingClass)
                    .empty())
        << ordering;
  }
  // No eviction within the queue: 'lo' not preemptible, the queue not preemptible or without
  // preempt_within_queue, preemption disabled.
  const std::string pinned_class = R"(priority_classes:
  - {name: hi, value: 100}
  - {name: lo, value: 95, preemptible: false}
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(pinned_class, kOneQueue)), kLintAgingOvertakesEvictingClass)
                  .empty());
  for (const char* queue : {"preemptible: false", "preempt_within_queue: false"}) {
    const std::string queues = std::string("queues:\n  - {name: q, ") + queue + "}\n";
    EXPECT_TRUE(WithCode(LintYaml(Cluster(kCloseClasses, queues)), kLintAgingOvertakesEvictingClass)
                    .empty())
        << queue;
  }
  const std::string disabled = "scheduler:\n  preemption: {enabled: false}\n";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kCloseClasses, kOneQueue, disabled)),
                       kLintAgingOvertakesEvictingClass)
                  .empty());
}

TEST(LintAgingOvertakesEvictingClass, WithJobsOnlyInQueuesWhereBothClassesAre) {
  const std::string queues = "queues:\n  - name: q\n  - name: r\n";
  const std::string apart = R"(jobs:
  - {name: a, queue: q, priority_class: lo, gpus: 1, checkpoint_interval: 1h}
  - {name: b, queue: r, priority_class: hi, gpus: 1, checkpoint_interval: 1h}
)";
  std::vector<LintWarning> all = LintYaml(Cluster(kCloseClasses, queues), apart);
  EXPECT_TRUE(WithCode(all, kLintAgingOvertakesEvictingClass).empty()) << Describe(all);
  const std::string together = std::string(apart) +
                               "  - {name: c, queue: r, priority_class: lo, gpus: 1, "
                               "checkpoint_interval: 1h}\n";
  std::vector<LintWarning> w = WithCode(LintYaml(Cluster(kCloseClasses, queues), together),
                                        kLintAgingOvertakesEvictingClass);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_TRUE(HasSubstr(w[0].message, "(within queue r)"));
  // Without jobs, either queue can have both.
  w = WithCode(LintYaml(Cluster(kCloseClasses, queues)), kLintAgingOvertakesEvictingClass);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_TRUE(HasSubstr(w[0].message, "(within queues q, r)"));
}

// ---- aging-without-min-runtime ----

TEST(LintAgingWithoutMinRuntime, WarnsForAnEvictableClassWithOtherGuardsButNoMinRuntime) {
  const std::string classes = R"(priority_classes:
  - {name: hi, value: 100, preemptible: false}
  - {name: lo, value: 10, max_evictions: 3, eviction_window: 1d}
)";
  std::vector<LintWarning> all = LintYaml(Cluster(classes, kOneQueue));
  std::vector<LintWarning> w = WithCode(all, kLintAgingWithoutMinRuntime);
  ASSERT_EQ(w.size(), 1u) << Describe(all);
  EXPECT_EQ(w[0].field, "priority_classes[1]");
  EXPECT_EQ(w[0].message,
            "priority class 'lo' is preemptible with no min_runtime while aging is on "
            "(ordering.age_weight 1000 over ordering.max_age 7d): a job of the class that waited "
            "until aging brought it to the front can be evicted as soon as it has started, "
            "before it has made any progress, and then waits again; its max_evictions acts only "
            "once it has been evicted, so a started job has no protected time to make progress; "
            "set min_runtime (e.g. the checkpoint interval of its jobs)");
  // The other guards do not make it preemptible-class-without-protection.
  EXPECT_TRUE(WithCode(all, kLintPreemptibleClassWithoutProtection).empty()) << Describe(all);
}

TEST(LintAgingWithoutMinRuntime, QuietWithMinRuntimeWithoutAgingOrWithoutAnyGuard) {
  auto lint = [](const std::string& lo, const std::string& scheduler = "") {
    const std::string classes =
        "priority_classes:\n  - {name: hi, value: 100, preemptible: "
        "false}\n  - {name: lo, value: 10, " +
        lo + "}\n";
    return LintYaml(Cluster(classes, kOneQueue, scheduler));
  };
  EXPECT_TRUE(WithCode(lint("min_runtime: 10m, eviction_cooldown: 5m"), kLintAgingWithoutMinRuntime)
                  .empty());
  EXPECT_TRUE(WithCode(lint("eviction_cooldown: 5m", "scheduler:\n  ordering: {age_weight: 0}\n"),
                       kLintAgingWithoutMinRuntime)
                  .empty());
  EXPECT_TRUE(
      WithCode(lint("eviction_cooldown: 5m", "scheduler:\n  preemption: {enabled: false}\n"),
               kLintAgingWithoutMinRuntime)
          .empty());
  // Without any guard, preemptible-class-without-protection says it (and asks for min_runtime).
  std::vector<LintWarning> bare = lint("grace_period: 10s");
  EXPECT_TRUE(WithCode(bare, kLintAgingWithoutMinRuntime).empty()) << Describe(bare);
  EXPECT_EQ(WithCode(bare, kLintPreemptibleClassWithoutProtection).size(), 1u) << Describe(bare);
}

// ---- heterogeneity-without-throughput ----

TEST(LintHeterogeneityWithoutThroughput, WarnsWhenThePolicyHasNothingToChooseBetween) {
  const std::string on = "scheduler:\n  ordering: {heterogeneity: max-throughput}\n";
  const std::string matrix = "gpu_throughput:\n  workloads:\n    resnet: {H800: 2, A100-80G: 1}\n";
  // No matrix.
  std::vector<LintWarning> all = LintYaml(Cluster(kProtectedClasses, kOneQueue, on));
  std::vector<LintWarning> w = WithCode(all, kLintHeterogeneityWithoutThroughput);
  ASSERT_EQ(w.size(), 1u) << Describe(all);
  EXPECT_EQ(w[0].field, "scheduler.ordering.heterogeneity");
  EXPECT_TRUE(HasSubstr(w[0].message,
                        "heterogeneity is 'max-throughput' but the configuration "
                        "has no gpu_throughput matrix: every job runs alike"));
  // A matrix, but no job names a row of it.
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: lo, gpus: 1, labels: {model: bert}}
  - {name: b, queue: q, priority_class: lo, gpus: 1}
)";
  all = LintYaml(Cluster(kProtectedClasses, kOneQueue, on) + matrix, jobs);
  w = WithCode(all, kLintHeterogeneityWithoutThroughput);
  ASSERT_EQ(w.size(), 1u) << Describe(all);
  EXPECT_TRUE(HasSubstr(w[0].message, "no job's label names a workload of gpu_throughput"));
  // One GPU model with devices.
  const std::string one_model =
      on + kProtectedClasses + kOneQueue + matrix +
      "nodes:\n  - name: h\n    gpus: {model: H800, count: 8, memory: 80Gi}\n"
      "    cpu: 64\n    memory: 512Gi\n";
  all = LintYaml(one_model);
  w = WithCode(all, kLintHeterogeneityWithoutThroughput);
  ASSERT_EQ(w.size(), 1u) << Describe(all);
  EXPECT_TRUE(HasSubstr(w[0].message, "but the cluster has 1 GPU model with devices"));
  // max-min fairness says what it falls back to.
  const std::string max_min =
      "scheduler:\n  ordering: {policy: las, heterogeneity: max-min-fairness}\n";
  all = LintYaml(Cluster(kProtectedClasses, kOneQueue, max_min));
  w = WithCode(all, kLintHeterogeneityWithoutThroughput);
  ASSERT_EQ(w.size(), 1u) << Describe(all);
  EXPECT_TRUE(HasSubstr(w[0].message, "max-min fairness counts plain GPU time, as las does"));
}

TEST(LintHeterogeneityWithoutThroughput, QuietWithAMatrixSeveralModelsAndAJobOfARow) {
  const std::string on = "scheduler:\n  ordering: {heterogeneity: max-throughput}\n";
  const std::string matrix = "gpu_throughput:\n  workloads:\n    resnet: {H800: 2, A100-80G: 1}\n";
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: lo, gpus: 1, labels: {model: resnet}}
  - {name: b, queue: q, priority_class: lo, gpus: 1}
)";
  std::vector<LintWarning> all = LintYaml(Cluster(kProtectedClasses, kOneQueue, on) + matrix, jobs);
  EXPECT_TRUE(WithCode(all, kLintHeterogeneityWithoutThroughput).empty()) << Describe(all);
  all = LintYaml(Cluster(kProtectedClasses, kOneQueue, on) + matrix);  // no jobs: the matrix
  EXPECT_TRUE(WithCode(all, kLintHeterogeneityWithoutThroughput).empty()) << Describe(all);
  all = LintYaml(Cluster(kProtectedClasses, kOneQueue));  // heterogeneity: none
  EXPECT_TRUE(WithCode(all, kLintHeterogeneityWithoutThroughput).empty()) << Describe(all);
}

// ---- high-priority-queue-without-quota ----

constexpr const char* kUrgentQueues = R"(queues:
  - name: org
  - name: urgent
    parent: org
    priority: 10
    preempt_lower_priority: true
  - name: batch
    parent: org
)";

TEST(LintHighPriorityQueueWithoutQuota, WarnsWhenNothingCapsAQueueThatEvictsAcrossQueues) {
  std::vector<LintWarning> w = WithCode(LintYaml(Cluster(kProtectedClasses, kUrgentQueues)),
                                        kLintHighPriorityQueueWithoutQuota);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "queues[1]");
  EXPECT_TRUE(HasSubstr(w[0].message, "'urgent'"));
  EXPECT_TRUE(HasSubstr(w[0].message, "(batch)"));
  EXPECT_TRUE(HasSubstr(w[0].message, "H800"));
  EXPECT_TRUE(HasSubstr(w[0].message, "A100-80G"));
}

TEST(LintHighPriorityQueueWithoutQuota, NamesOnlyTheModelsNoQuotaLimits) {
  const std::string queues = std::string(kUrgentQueues) + R"(    quota:
      H800: {nominal: 8}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kProtectedClasses, queues)), kLintHighPriorityQueueWithoutQuota);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_TRUE(HasSubstr(w[0].message, "declares quota for A100-80G ("));
}

TEST(LintHighPriorityQueueWithoutQuota, QuietWithAMaxOrWithoutVictims) {
  const std::string capped = R"(queues:
  - name: org
  - name: urgent
    parent: org
    priority: 10
    preempt_lower_priority: true
    quota:
      gpu: {max: 8}
  - name: batch
    parent: org
)";
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, capped)), kLintHighPriorityQueueWithoutQuota)
          .empty());
  // The only lower-priority queue is not preemptable: it evicts no one.
  const std::string no_victims = std::string(kUrgentQueues) + "    preemptible: false\n";
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, no_victims)), kLintHighPriorityQueueWithoutQuota)
          .empty());
  // Preemption disabled: nothing is evicted at all.
  const std::string disabled = "scheduler:\n  preemption: {enabled: false}\n";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, kUrgentQueues, disabled)),
                       kLintHighPriorityQueueWithoutQuota)
                  .empty());
}

// ---- preemptible-class-without-protection ----

TEST(LintPreemptibleClassWithoutProtection, WarnsWhenNothingBoundsEvictions) {
  const std::string classes = R"(priority_classes:
  - {name: hi, value: 100, preemptible: false}
  - {name: lo, value: 10}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(classes, kOneQueue)), kLintPreemptibleClassWithoutProtection);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "priority_classes[1]");
  EXPECT_TRUE(HasSubstr(w[0].message, "'lo'"));
  EXPECT_TRUE(HasSubstr(w[0].message, "min_runtime"));
}

TEST(LintPreemptibleClassWithoutProtection, QuietWithAnyGuard) {
  for (const char* guard : {"min_runtime: 10m", "max_evictions: 3", "eviction_cooldown: 5m"}) {
    const std::string classes = std::string(R"(priority_classes:
  - {name: hi, value: 100, preemptible: false}
  - {name: lo, value: 10, )") + guard +
                                "}\n";
    EXPECT_TRUE(
        WithCode(LintYaml(Cluster(classes, kOneQueue)), kLintPreemptibleClassWithoutProtection)
            .empty())
        << guard;
  }
}

TEST(LintPreemptibleClassWithoutProtection, QuietWhenNothingCanEvictTheClass) {
  // One class, one queue, no quota: no higher class, no queue priority, nothing to reclaim.
  const std::string one_class = R"(priority_classes:
  - {name: only, value: 5}
)";
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(one_class, kOneQueue)), kLintPreemptibleClassWithoutProtection)
          .empty());
  const std::string classes = R"(priority_classes:
  - {name: hi, value: 100}
  - {name: lo, value: 10}
)";
  const std::string disabled = "scheduler:\n  preemption: {enabled: false}\n";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(classes, kOneQueue, disabled)),
                       kLintPreemptibleClassWithoutProtection)
                  .empty());
}

TEST(LintPreemptibleClassWithoutProtection, LeastAttainedServiceEvictsEveryPreemptibleClass) {
  // One class, one queue: nothing else evicts it, but under least attained service a job that
  // crosses a threshold is evicted by those of lower service, and may never finish.
  const std::string one_class = R"(priority_classes:
  - {name: only, value: 5}
)";
  for (const char* policy : {"las", "las-2d"}) {
    const std::string scheduler = std::string("scheduler:\n  ordering: {policy: ") + policy + "}\n";
    std::vector<LintWarning> w = WithCode(LintYaml(Cluster(one_class, kOneQueue, scheduler)),
                                          kLintPreemptibleClassWithoutProtection);
    ASSERT_EQ(w.size(), 1u) << policy << Describe(w);
    EXPECT_TRUE(HasSubstr(w[0].message, "'only'"));
  }
}

// ---- preemptible-jobs-without-checkpoints ----

TEST(LintPreemptibleJobsWithoutCheckpoints, WarnsOncePerClass) {
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: lo, gpus: 2, replicas: 2}
  - {name: b, queue: q, priority_class: lo, gpus: 1, runtime_estimate: 2h}
  - {name: c, queue: q, priority_class: hi, gpus: 8}
)";
  std::vector<LintWarning> w = WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue), jobs),
                                        kLintPreemptibleJobsWithoutCheckpoints);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "jobs");
  EXPECT_TRUE(HasSubstr(w[0].message, "3 GPU jobs of preemptible class 'lo'"));
  EXPECT_TRUE(HasSubstr(w[0].message, "a-0, a-1, b"));
}

TEST(LintPreemptibleJobsWithoutCheckpoints, QuietForJobsThatCheckpointOrCannotBeEvicted) {
  const std::string jobs = R"(jobs:
  - {name: checkpoints, queue: q, priority_class: lo, gpus: 2, checkpoint_interval: 20m}
  - {name: protected, queue: q, priority_class: hi, gpus: 8}
  - {name: short, queue: q, priority_class: lo, gpus: 1, runtime_estimate: 5m}
  - {name: cpu-only, queue: q, priority_class: lo, cpu: 8}
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue), jobs),
                       kLintPreemptibleJobsWithoutCheckpoints)
                  .empty());
  const std::string pinned = R"(queues:
  - name: q
    preemptible: false
)";
  const std::string lo_job = R"(jobs:
  - {name: a, queue: q, priority_class: lo, gpus: 2}
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, pinned), lo_job),
                       kLintPreemptibleJobsWithoutCheckpoints)
                  .empty());
}

// ---- guarantees-exceed-capacity ----

TEST(LintGuaranteesExceedCapacity, WarnsPerResourceWithBothNumbers) {
  const std::string queues = R"(queues:
  - name: org
  - name: a
    parent: org
    quota:
      H800: {nominal: 12}
  - name: b
    parent: org
    quota:
      H800: {nominal: 8}
  - name: other
    quota:
      gpu: {nominal: 25}
)";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kProtectedClasses, queues)), kLintGuaranteesExceedCapacity);
  ASSERT_EQ(w.size(), 2u) << Describe(w);
  EXPECT_EQ(w[0].field, "queues");
  EXPECT_TRUE(HasSubstr(w[0].message, "25 GPUs of all models"));
  EXPECT_TRUE(HasSubstr(w[0].message, "has 24"));
  EXPECT_TRUE(HasSubstr(w[1].message, "20 H800 GPUs"));
  EXPECT_TRUE(HasSubstr(w[1].message, "org 20"));
  EXPECT_TRUE(HasSubstr(w[1].message, "has 16"));
}

TEST(LintGuaranteesExceedCapacity, QuietWhenGuaranteesFit) {
  const std::string queues = R"(queues:
  - name: org
  - name: a
    parent: org
    quota:
      H800: {nominal: 8}
      gpu: {nominal: 12}
  - name: b
    parent: org
    quota:
      H800: {nominal: 8}
      A100-80G: {nominal: 8}
      gpu: {nominal: 12}
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, queues)), kLintGuaranteesExceedCapacity)
                  .empty());
}

// ---- preemptible-queue-nothing-evicts ----

constexpr const char* kScavengerQueues = R"(queues:
  - name: org
  - name: serving
    parent: org
    priority: 10
    preemptible: false
  - name: scavenger
    parent: org
    preempt_within_queue: false
)";

TEST(LintPreemptibleQueueNothingEvicts, WarnsWhenNoRuleReachesAPreemptableQueue) {
  std::vector<LintWarning> w = WithCode(LintYaml(Cluster(kProtectedClasses, kScavengerQueues)),
                                        kLintPreemptibleQueueNothingEvicts);
  ASSERT_EQ(w.size(), 1u) << Describe(w);
  EXPECT_EQ(w[0].field, "queues[2]");
  EXPECT_TRUE(HasSubstr(w[0].message, "'scavenger'"));
  EXPECT_TRUE(HasSubstr(w[0].message, "preempt_within_queue is false"));
  EXPECT_TRUE(HasSubstr(w[0].message, "(serving)"));
}

TEST(LintPreemptibleQueueNothingEvicts, QuietWhenSomeRuleReachesIt) {
  // Queue priority.
  const std::string by_priority = R"(queues:
  - name: org
  - name: serving
    parent: org
    priority: 10
    preemptible: false
    preempt_lower_priority: true
    quota:
      gpu: {max: 8}
  - name: scavenger
    parent: org
    preempt_within_queue: false
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, by_priority)),
                       kLintPreemptibleQueueNothingEvicts)
                  .empty());
  // Reclaim: serving has nominal quota, the scavenger borrows.
  const std::string by_reclaim =
      std::string(kScavengerQueues)
          .replace(std::string(kScavengerQueues).find("    preemptible: false\n"),
                   std::string("    preemptible: false\n").size(),
                   "    preemptible: false\n    quota:\n      H800: {nominal: 8}\n");
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, by_reclaim)), kLintPreemptibleQueueNothingEvicts)
          .empty());
  // Within the queue (the default).
  const std::string within = R"(queues:
  - name: org
  - name: serving
    parent: org
    priority: 10
    preemptible: false
  - name: scavenger
    parent: org
)";
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, within)), kLintPreemptibleQueueNothingEvicts)
          .empty());
}

TEST(LintPreemptibleQueueNothingEvicts, QuietWhenEvictionIsNotMeant) {
  // Preemption disabled.
  const std::string disabled = "scheduler:\n  preemption: {enabled: false}\n";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, kScavengerQueues, disabled)),
                       kLintPreemptibleQueueNothingEvicts)
                  .empty());
  // The queue says it is not preemptable.
  const std::string pinned = std::string(kScavengerQueues) + "    preemptible: false\n";
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, pinned)), kLintPreemptibleQueueNothingEvicts)
          .empty());
  // One queue with one class: nothing is ranked above anything.
  const std::string one_class = R"(priority_classes:
  - {name: only, value: 5}
)";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(one_class, kOneQueue)), kLintPreemptibleQueueNothingEvicts)
                  .empty());
}

// ---- memory-without-unit ----

TEST(LintMemoryWithoutUnit, WarnsForSmallBareNumbersInNodesAndJobs) {
  const std::string nodes = R"(nodes:
  - name: big
    gpus: {model: H800, count: 8, memory: 80}
    cpu: 128
    memory: 512
  - name: odd
    devices:
      - {model: H800, memory: 80Gi}
      - {model: H800, memory: 40}
    cpu: 32
    memory: 256Gi
)";
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: hi, gpus: 1, gpu_memory: 80, checkpoint_interval: 1h}
  - name: b
    queue: q
    priority_class: hi
    groups:
      - {name: launcher, cpu: 1, memory: 64}
      - {name: worker, gpus: 0.5, gpu_memory: 20Gi, memory: 64Gi}
)";
  std::vector<LintWarning> w = WithCode(
      LintYaml(std::string(kProtectedClasses) + kOneQueue + nodes, jobs), kLintMemoryWithoutUnit);
  ASSERT_EQ(w.size(), 5u) << Describe(w);
  EXPECT_EQ(w[0].field, "nodes[0].gpus.memory");
  EXPECT_EQ(w[0].message,
            "nodes[0].gpus.memory is 80 without a unit, which reads as 80 MiB: each device has 80 "
            "MiB, so a job whose gpu_memory asks for more never lands on these GPUs, and few "
            "shared tasks fit on one; write the unit: 80Gi for 80 GiB (80Mi if MiB is meant)");
  EXPECT_EQ(w[1].field, "nodes[0].memory");
  EXPECT_TRUE(HasSubstr(w[1].message, "offers its tasks 512 MiB of host memory in all"));
  EXPECT_TRUE(HasSubstr(w[1].message, "write the unit: 512Gi"));
  EXPECT_EQ(w[2].field, "nodes[1].devices[1].memory");
  EXPECT_EQ(w[3].field, "jobs[0].gpu_memory");
  EXPECT_TRUE(HasSubstr(w[3].message, "the job may land on GPUs too small for it"));
  EXPECT_EQ(w[4].field, "jobs[1].groups[0].memory");
  EXPECT_TRUE(HasSubstr(w[4].message, "each task reserves only 64 MiB"));
}

TEST(LintMemoryWithoutUnit, QuietWithAUnitOrANumberOfMiBTooLargeToBeAMistake) {
  const std::string nodes = R"(nodes:
  - name: n
    gpus: {model: H800, count: 8, memory: 81920}
    cpu: 128
    memory: 512Mi
)";
  const std::string jobs = R"(jobs:
  - {name: a, queue: q, priority_class: hi, gpus: 1, gpu_memory: 1024, memory: 0}
  - {name: b, queue: q, priority_class: hi, gpus: 1, gpu_memory: 80Gi, memory: 64Mi}
)";
  std::vector<LintWarning> all = LintYaml(std::string(kProtectedClasses) + kOneQueue + nodes, jobs);
  EXPECT_TRUE(WithCode(all, kLintMemoryWithoutUnit).empty()) << Describe(all);
}

// ---- alias-spelling ----

TEST(LintAliasSpelling, NotesPreemptableWhereverItIsWritten) {
  const std::string cluster = R"(priority_classes:
  - {name: hi, value: 100, preemptable: false}
  - {name: lo, value: 10, min_runtime: 10m}
queues:
  - {name: q, preemptable: true}
  - {name: r, preemptible: true}
nodes:
  - {name: n, gpus: {model: H800, count: 8, memory: 80Gi}, cpu: 128, memory: 1Ti}
)";
  std::vector<LintWarning> w = WithCode(LintYaml(cluster), kLintAliasSpelling);
  ASSERT_EQ(w.size(), 2u) << Describe(w);
  EXPECT_EQ(w[0].field, "priority_classes[0].preemptable");
  EXPECT_EQ(w[0].message,
            "preemptable is the alias of preemptible, the one spelling of \"may be evicted\" for "
            "queues and priority classes alike; write preemptible");
  EXPECT_EQ(w[1].field, "queues[0].preemptable");
}

// ---- example-token ----

TEST(LintExampleToken, WarnsForTheShippedExampleTokensHoweverGiven) {
  const std::string server =
      "server:\n  tokens:\n"
      "    - {name: root, token: example-admin-token, role: admin}\n"
      "    - {name: mine, token: a-secret-of-my-own-0123, role: admin}\n"
      "    - {name: bob, role: user, token_sha256: " +
      crypto::Sha256Hex("example-alice-token") + "}\n";
  std::vector<LintWarning> w =
      WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue) + server), kLintExampleToken);
  ASSERT_EQ(w.size(), 2u) << Describe(w);
  EXPECT_EQ(w[0].field, "server.tokens[0]");
  EXPECT_EQ(w[0].message,
            "token 'root' (admin) is the example token 'example-admin-token', published with the "
            "examples and the docs: anyone who has read them can call the server as 'root' and do "
            "what its role allows (everything: cancel, hold and change any job, cordon and drain "
            "nodes); give it a secret of its own, as token_sha256 (from `arbiter token new`) or "
            "token_file, and keep the examples' tokens for `arbiter server --dev`");
  EXPECT_EQ(w[1].field, "server.tokens[2]");
  EXPECT_TRUE(HasSubstr(w[1].message, "'example-alice-token'"));
  EXPECT_TRUE(HasSubstr(w[1].message, "submit jobs to its queues"));
}

TEST(LintExampleToken, QuietForTokensOfTheirOwn) {
  const std::string server =
      "server:\n  tokens:\n"
      "    - {name: admin, token: example-admin-token-but-longer, role: "
      "admin}\n";
  EXPECT_TRUE(WithCode(LintYaml(Cluster(kProtectedClasses, kOneQueue) + server), kLintExampleToken)
                  .empty());
  // The list the lint checks against is the examples' own.
  Result<ClusterConfig> config = LoadClusterFile(kExamples + "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  for (const TokenSpec& t : config->server.tokens) EXPECT_FALSE(ExampleToken(t).empty()) << t.name;
}

// ---- Scenarios: checkpoint-interval-ignored, and what the cluster and jobs lint checks ----

// One node of 8 H800, two classes, one queue; `workloads` follow.
constexpr const char* kScenario = R"(name: s
horizon: 1d
cluster:
  nodes:
    - name: n
      gpus: {model: H800, count: 8, memory: 80Gi}
      cpu: 128
      memory: 1Ti
  priority_classes:
    - {name: hi, value: 100, preemptible: false}
    - {name: lo, value: 10, min_runtime: 10m}
  queues:
    - {name: q}
workloads:
)";

TEST(LintCheckpointIntervalIgnored, WarnsForBatchWorkAndServicesThatSetOne) {
  const std::string workloads = R"(  - name: train
    kind: training
    arrivals: {every: 6h}
    work: 2h
    checkpoint_cost: 10s
    job: {queue: q, priority_class: lo, gpus: 1, checkpoint_interval: 30m}
  - name: prep
    kind: batch
    arrivals: {every: 6h}
    work: 2h
    job: {queue: q, priority_class: lo, gpus: 1, checkpoint_interval: 30m}
  - name: chat
    kind: inference
    service: {rate: {base: 10}, replica_rate: 10}
    job: {queue: q, priority_class: hi, gpus: 1, checkpoint_interval: 1h}
)";
  std::vector<LintWarning> all = LintScenarioYaml(std::string(kScenario) + workloads);
  std::vector<LintWarning> w = WithCode(all, kLintCheckpointIntervalIgnored);
  ASSERT_EQ(w.size(), 2u) << Describe(all);
  EXPECT_EQ(w[0].field, "workloads[1]");
  EXPECT_EQ(w[0].message,
            "4 jobs of workload 'prep' run as batch work but set checkpoint_interval (30m): the "
            "simulator keeps no checkpoint of batch work, so an evicted or failed batch job "
            "starts over from zero whatever the interval, and the run's evictions cost more than "
            "the configuration suggests (lint counts these jobs as jobs that never checkpoint); "
            "make the workload kind: training if its jobs do checkpoint (with checkpoint_cost, "
            "the time one takes), or leave checkpoint_interval out");
  EXPECT_EQ(w[1].field, "workloads[2]");
  EXPECT_TRUE(HasSubstr(w[1].message, "workload 'chat' is an inference service"));
  // The batch jobs count as jobs that never checkpoint; the training jobs do checkpoint.
  std::vector<LintWarning> checkpoints = WithCode(all, kLintPreemptibleJobsWithoutCheckpoints);
  ASSERT_EQ(checkpoints.size(), 1u) << Describe(all);
  EXPECT_TRUE(HasSubstr(checkpoints[0].message, "4 GPU jobs of preemptible class 'lo'"));
}

TEST(LintCheckpointIntervalIgnored, QuietWhenOnlyTrainingSetsOne) {
  const std::string workloads = R"(  - name: train
    kind: training
    arrivals: {every: 6h}
    work: 2h
    job: {queue: q, priority_class: lo, gpus: 1, checkpoint_interval: 30m}
  - name: prep
    arrivals: {every: 6h}
    work: 10m
    job: {queue: q, priority_class: hi, gpus: 1}
)";
  std::vector<LintWarning> all = LintScenarioYaml(std::string(kScenario) + workloads);
  EXPECT_TRUE(WithCode(all, kLintCheckpointIntervalIgnored).empty()) << Describe(all);
}

TEST(LintScenario, MemoryWithoutUnitInTheClusterAndTheJobTemplates) {
  std::string yaml = std::string(kScenario) + R"(  - name: prep
    arrivals: {every: 6h}
    work: 10m
    job: {queue: q, priority_class: hi, gpus: 1, gpu_memory: 40}
configurations:
  - name: a
  - name: b
)";
  yaml.replace(yaml.find("memory: 1Ti"), std::string("memory: 1Ti").size(), "memory: 512");
  std::vector<LintWarning> w = WithCode(LintScenarioYaml(yaml), kLintMemoryWithoutUnit);
  // Each configuration has both.
  ASSERT_EQ(w.size(), 4u) << Describe(w);
  EXPECT_EQ(w[0].field, "cluster.nodes[0].memory");
  EXPECT_EQ(w[1].field, "workloads[0].job.gpu_memory");
  EXPECT_EQ(w[2].field, "cluster.nodes[0].memory");
  EXPECT_EQ(w[3].field, "workloads[0].job.gpu_memory");
}

TEST(LintScenario, AliasSpellingInEachConfiguration) {
  std::string yaml = std::string(kScenario) + R"(  - name: prep
    arrivals: {every: 6h}
    work: 10m
    job: {queue: q, priority_class: hi, gpus: 1}
configurations:
  - name: a
  - name: b
)";
  yaml.replace(yaml.find("{name: q}"), std::string("{name: q}").size(),
               "{name: q, preemptable: true}");
  std::vector<LintWarning> w = WithCode(LintScenarioYaml(yaml), kLintAliasSpelling);
  ASSERT_EQ(w.size(), 2u) << Describe(w);
  // Named in the configuration it reaches (the cluster merged with its overrides).
  EXPECT_EQ(w[0].field, "configurations[0].queues[0].preemptable");
  EXPECT_EQ(w[1].field, "configurations[1].queues[0].preemptable");
}

// ---- The examples ----

TEST(LintExamples, ClusterWarnsOnlyAboutItsTokensAndJobsAboutCheckpoints) {
  Result<ClusterConfig> config = LoadClusterFile(kExamples + "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  Result<ClusterState> state = ClusterState::Create(config->cluster);
  ASSERT_TRUE(state.ok()) << state.status().message();
  // The example tokens (for `arbiter server --dev`) are the only warnings of the cluster file.
  std::vector<LintWarning> w = Lint(*config, *state);
  ASSERT_EQ(w.size(), 3u) << Describe(w);
  for (const LintWarning& warning : w) EXPECT_EQ(warning.code, kLintExampleToken) << Describe(w);
  std::vector<BareMemory> job_memory;
  Result<std::vector<Job>> jobs = LoadJobsFile(kExamples + "jobs.yaml", *state, 1, &job_memory);
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  w = Lint(*config, *state, *jobs, job_memory);
  // Best-effort batch jobs (and one that never fits) do not checkpoint.
  for (const LintWarning& warning : w) {
    if (warning.code != kLintExampleToken) {
      EXPECT_EQ(warning.code, kLintPreemptibleJobsWithoutCheckpoints) << Describe(w);
    }
  }
}

TEST(LintExamples, ScenariosIgnoreNoCheckpointIntervalAndWriteMemoryWithUnits) {
  for (const char* name : {"mixed-cluster.yaml", "preemption-storm.yaml", "philly-replay.yaml"}) {
    Result<Scenario> scenario =
        LoadScenarioFile(std::string(ARBITER_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(scenario.ok()) << scenario.status().message();
    for (const SimConfiguration& c : scenario->configurations) {
      Result<ClusterState> state = ClusterState::Create(c.cluster);
      ASSERT_TRUE(state.ok()) << state.status().message();
      for (const LintWarning& warning : LintConfiguration(*scenario, c, *state)) {
        EXPECT_NE(warning.code, kLintCheckpointIntervalIgnored) << name << ": " << warning.message;
        EXPECT_NE(warning.code, kLintMemoryWithoutUnit) << name << ": " << warning.message;
      }
    }
  }
}

}  // namespace
}  // namespace arbiter::config
