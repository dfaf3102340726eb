#include "config/lint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "arbiter/state.h"
#include "config/config.h"

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
  if (!jobs_yaml.empty()) {
    Result<std::vector<Job>> parsed = ParseJobs(jobs_yaml, "jobs.yaml", *state);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (!parsed.ok()) return {};
    jobs = std::move(parsed).value();
  }
  return Lint(*config, *state, jobs);
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
  const std::string no_victims = std::string(kUrgentQueues) + "    preemptable: false\n";
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
    preemptable: false
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
    preemptable: false
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
    preemptable: false
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
          .replace(std::string(kScavengerQueues).find("    preemptable: false\n"),
                   std::string("    preemptable: false\n").size(),
                   "    preemptable: false\n    quota:\n      H800: {nominal: 8}\n");
  EXPECT_TRUE(
      WithCode(LintYaml(Cluster(kProtectedClasses, by_reclaim)), kLintPreemptibleQueueNothingEvicts)
          .empty());
  // Within the queue (the default).
  const std::string within = R"(queues:
  - name: org
  - name: serving
    parent: org
    priority: 10
    preemptable: false
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
  const std::string pinned = std::string(kScavengerQueues) + "    preemptable: false\n";
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

// ---- The examples ----

TEST(LintExamples, ClusterIsCleanAndJobsWarnOnlyAboutCheckpoints) {
  Result<ClusterConfig> config = LoadClusterFile(kExamples + "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  Result<ClusterState> state = ClusterState::Create(config->cluster);
  ASSERT_TRUE(state.ok()) << state.status().message();
  std::vector<LintWarning> w = Lint(*config, *state);
  EXPECT_TRUE(w.empty()) << Describe(w);
  Result<std::vector<Job>> jobs = LoadJobsFile(kExamples + "jobs.yaml", *state);
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  w = Lint(*config, *state, *jobs);
  // Best-effort batch jobs (and one that never fits) do not checkpoint.
  for (const LintWarning& warning : w)
    EXPECT_EQ(warning.code, kLintPreemptibleJobsWithoutCheckpoints) << Describe(w);
}

}  // namespace
}  // namespace arbiter::config
