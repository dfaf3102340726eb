#include "config/config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/state/cluster_state.h"

namespace arbiter::config {
namespace {

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

::testing::AssertionResult StartsWith(const std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not start with '" << prefix << "'";
}

const std::string kExamples = std::string(ARBITER_SOURCE_DIR) + "/examples/";

// A small valid cluster: levels [spine, leaf], H800 and A100-80G nodes, three queues.
constexpr const char* kCluster = R"(topology:
  levels: [spine, leaf]
priority_classes:
  - {name: P0, value: 1000, preemptible: false}
  - {name: P1, value: 100}
queues:
  - name: org
  - name: training
    parent: org
    quota:
      H800: {nominal: 16, borrowing_limit: 8}
  - name: batch
    parent: org
    quota:
      gpu: {nominal: 0.5}
nodes:
  - name: h800-{i}
    count: 4
    gpus: {model: H800, count: 8, memory: 80Gi}
    cpu: 128
    memory: 1Ti
    topology: {spine: spine-0, leaf: "leaf-{i/2}"}
  - name: a100
    gpus: {model: A100-80G, count: 8, memory: 80Gi, nvlink_group_size: 4}
    cpu: 96
    memory: 512Gi
    labels: {pool: train}
    taints: [{key: dedicated, value: train}]
    topology: {spine: spine-1, leaf: leaf-9}
)";

ClusterConfig MustParseCluster(const std::string& yaml) {
  Result<ClusterConfig> c = ParseCluster(yaml, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(c).value() : ClusterConfig{};
}

// The error of a cluster text that must fail to load.
std::string ClusterError(const std::string& yaml) {
  Result<ClusterConfig> c = ParseCluster(yaml, "c.yaml");
  EXPECT_FALSE(c.ok()) << "loaded:\n" << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << c.status().message();
  return c.status().message();
}

// kCluster with the first occurrence of `from` replaced by `to`.
std::string Edit(const std::string& from, const std::string& to) {
  std::string s = kCluster;
  std::size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

ClusterState MakeState() {
  Result<ClusterState> state = ClusterState::Create(MustParseCluster(kCluster).cluster);
  EXPECT_TRUE(state.ok()) << state.status().message();
  return std::move(state).value();
}

// ---------------------------------------------------------------------------------------------
// Quantity parsers.

// The parsed value, or -1 (failing the test) on an error.
template <typename T>
std::int64_t Raw(const Result<T>& r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return -1;
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return *r;
  } else {
    return r->value();
  }
}
std::int64_t Gpu(std::string_view text) { return Raw(ParseGpus(text, "f")); }
std::int64_t Cpu(std::string_view text) { return Raw(ParseCpu(text, "f")); }
std::int64_t MiB(std::string_view text) { return Raw(ParseMiB(text, "f")); }
std::int64_t Duration(std::string_view text) { return Raw(ParseDuration(text, "f")); }

TEST(ConfigQuantity, Gpus) {
  EXPECT_EQ(Gpu("2"), 2000);
  EXPECT_EQ(Gpu("0"), 0);
  EXPECT_EQ(Gpu("0.5"), 500);
  EXPECT_EQ(Gpu("0.125"), 125);
  EXPECT_EQ(Gpu("1.5"), 1500);
  EXPECT_EQ(Gpu("500m"), 500);
  EXPECT_EQ(Gpu("0.001"), 1);
  EXPECT_EQ(Gpu("2.000"), 2000);
  // 0.1 + 0.2 style values stay exact.
  EXPECT_EQ(Gpu("0.3"), 300);

  EXPECT_EQ(ParseGpus("0.0005", "gpus").status().message(),
            "gpus: finer than 1 milli-GPU (0.001), got 0.0005");
  EXPECT_EQ(ParseGpus("-4", "q.nominal").status().message(),
            "q.nominal: must not be negative, got -4");
  EXPECT_TRUE(
      StartsWith(ParseGpus("two", "gpus").status().message(), "gpus: invalid GPU count 'two'"));
  for (const char* bad : {"", "1.", ".5", "1e3", "1 ", "0x10", "5mm", "+1", "1,5", "2Gi"}) {
    EXPECT_FALSE(ParseGpus(bad, "gpus").ok()) << bad;
  }
  EXPECT_TRUE(
      HasSubstr(ParseGpus("99999999999999999999", "gpus").status().message(), "too many digits"));
  EXPECT_TRUE(HasSubstr(ParseGpus("9999999999999999", "gpus").status().message(), "too large"));
}

// A quota value: the cluster file's and the quota API's one parser.
TEST(ConfigQuantity, QuotaGpus) {
  EXPECT_EQ(Raw(ParseQuotaGpus("16", "f")), 16'000);
  EXPECT_EQ(Raw(ParseQuotaGpus("0.5", "f")), 500);
  EXPECT_EQ(Raw(ParseQuotaGpus("500m", "f")), 500);
  EXPECT_EQ(Raw(ParseQuotaGpus("1000000000", "f")), 1'000'000'000'000);
  EXPECT_EQ(ParseQuotaGpus("1000000001", "quota.H800.max").status().message(),
            "quota.H800.max: must be at most 1000000000 GPUs, got 1000000001");
  EXPECT_EQ(ParseQuotaGpus("-1", "quota.gpu.nominal").status().message(),
            "quota.gpu.nominal: must not be negative, got -1");
  EXPECT_TRUE(StartsWith(ParseQuotaGpus("16Gi", "quota.H800.nominal").status().message(),
                         "quota.H800.nominal: invalid GPU count '16Gi'"));
}

// Every milli value written as a decimal reads back exactly (a double would round some).
TEST(ConfigQuantity, DecimalsAreExact) {
  for (int milli = 0; milli <= 3000; ++milli) {
    std::string text =
        std::to_string(milli / 1000) + "." + std::to_string(1000 + milli % 1000).substr(1);
    ASSERT_EQ(Gpu(text), milli) << text;
    ASSERT_EQ(Cpu(text), milli) << text;
    ASSERT_EQ(Gpu(std::to_string(milli) + "m"), milli);
  }
}

TEST(ConfigQuantity, Cpu) {
  EXPECT_EQ(Cpu("16"), 16000);
  EXPECT_EQ(Cpu("0.25"), 250);
  EXPECT_EQ(Cpu("250m"), 250);
  EXPECT_TRUE(StartsWith(ParseCpu("0.0001", "cpu").status().message(), "cpu: finer than"));
  EXPECT_TRUE(HasSubstr(ParseCpu("-1", "cpu").status().message(), "must not be negative"));
  EXPECT_TRUE(StartsWith(ParseCpu("4 cores", "cpu").status().message(),
                         "cpu: invalid CPU amount '4 cores'"));
}

TEST(ConfigQuantity, MiB) {
  EXPECT_EQ(MiB("81920"), 81920);
  EXPECT_EQ(MiB("80Gi"), 81920);
  EXPECT_EQ(MiB("512Mi"), 512);
  EXPECT_EQ(MiB("1Ti"), 1048576);
  EXPECT_EQ(MiB("1Pi"), 1073741824);
  EXPECT_EQ(MiB("1048576Ki"), 1024);
  EXPECT_EQ(MiB("1.5Gi"), 1536);
  EXPECT_EQ(MiB("0"), 0);
  EXPECT_EQ(ParseMiB("1000Ki", "mem").status().message(), "mem: finer than 1 MiB, got 1000Ki");
  EXPECT_EQ(ParseMiB("80G", "mem").status().message(),
            "mem: unknown unit 'G' in '80G' (use a binary unit: Ki, Mi, Gi, Ti or Pi; a bare "
            "number is MiB)");
  EXPECT_TRUE(StartsWith(ParseMiB("Gi", "mem").status().message(), "mem: invalid memory size"));
  EXPECT_TRUE(HasSubstr(ParseMiB("-1Gi", "mem").status().message(), "must not be negative"));
}

TEST(ConfigQuantity, Duration) {
  EXPECT_EQ(Duration("90"), 90'000);
  EXPECT_EQ(Duration("500ms"), 500);
  EXPECT_EQ(Duration("30s"), 30'000);
  EXPECT_EQ(Duration("15m"), 900'000);
  EXPECT_EQ(Duration("4h"), 14'400'000);
  EXPECT_EQ(Duration("7d"), 604'800'000);
  EXPECT_EQ(Duration("1.5h"), 5'400'000);
  EXPECT_EQ(Duration("0.001"), 1);
  EXPECT_EQ(ParseDuration("0.5ms", "t").status().message(), "t: finer than 1 ms, got 0.5ms");
  EXPECT_TRUE(StartsWith(ParseDuration("1w", "t").status().message(), "t: unknown unit 'w'"));
  EXPECT_TRUE(HasSubstr(ParseDuration("-1s", "t").status().message(), "must not be negative"));
  EXPECT_TRUE(StartsWith(ParseDuration("soon", "t").status().message(), "t: invalid duration"));
}

TEST(ConfigQuantity, CompoundDuration) {
  EXPECT_EQ(Duration("1d12h"), 36 * 3'600'000);
  EXPECT_EQ(Duration("2h30m15s"), 9'015'000);
  EXPECT_EQ(Duration("1m500ms"), 60'500);
  EXPECT_EQ(Duration("1.5h30m"), 7'200'000);
  EXPECT_TRUE(HasSubstr(ParseDuration("30m2h", "t").status().message(), "largest unit first"));
  EXPECT_TRUE(HasSubstr(ParseDuration("1h1h", "t").status().message(), "largest unit first"));
  EXPECT_TRUE(StartsWith(ParseDuration("1d2w", "t").status().message(), "t: unknown unit 'w'"));
  EXPECT_TRUE(HasSubstr(ParseDuration("-1d2h", "t").status().message(), "must not be negative"));
}

TEST(ConfigQuantity, DurationTextReadsBack) {
  EXPECT_EQ(DurationText(0), "0s");
  EXPECT_EQ(DurationText(604'800'000), "7d");
  EXPECT_EQ(DurationText(90'000), "1m30s");
  EXPECT_EQ(DurationText(1'500), "1s500ms");
  EXPECT_EQ(DurationText(302'400'000), "3d12h");
  for (Millis d : {Millis{1}, Millis{999}, Millis{61'001}, Millis{93'784'005}, Millis{604'800'000}})
    EXPECT_EQ(Duration(DurationText(d)), d) << DurationText(d);
}

// ---------------------------------------------------------------------------------------------
// The example files.

TEST(ConfigExamples, ClusterLoads) {
  Result<ClusterConfig> c = LoadClusterFile(kExamples + "cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const ClusterSpec& spec = c->cluster;
  EXPECT_EQ(spec.topology.levels, (std::vector<std::string>{"spine", "leaf", "node", "nvlink"}));
  ASSERT_EQ(spec.nodes.size(), 8u + 4u + 1u + 4u + 2u);
  EXPECT_EQ(spec.nodes[5].name, "h800-5");
  EXPECT_EQ(spec.nodes[5].domains, (std::vector<std::string>{"spine-0", "leaf-1"}));
  EXPECT_EQ(spec.nodes[5].memory.value(), 2 * 1024 * 1024);
  EXPECT_EQ(spec.nodes[5].cpu.value(), 192'000);
  const NodeSpec& a100 = spec.nodes[8];
  EXPECT_EQ(a100.name, "a100-0");
  ASSERT_EQ(a100.devices.size(), 8u);
  EXPECT_EQ(a100.devices[3].nvlink_group, 0u);
  EXPECT_EQ(a100.devices[4].nvlink_group, 1u);
  EXPECT_EQ(a100.devices[0].memory.value(), 81920);
  EXPECT_TRUE(spec.nodes[12].cordoned);
  EXPECT_EQ(spec.nodes[13].taints.size(), 1u);
  EXPECT_EQ(spec.priority_classes.size(), 3u);
  EXPECT_FALSE(spec.priority_classes[0].preemptible);
  EXPECT_TRUE(spec.priority_classes[1].preemptible);
  ASSERT_EQ(spec.queues.size(), 4u);
  EXPECT_EQ(spec.queues[1].quota.at("H800").lending_limit->value(), 0);
  EXPECT_EQ(spec.queues[2].quota.at("H800").nominal.value(), 48'000);
  EXPECT_EQ(c->engine.ordering.max_age, 7 * 24 * 3600 * 1000LL);
  EXPECT_EQ(spec.fair_share_half_life, 24 * 3600 * 1000LL);

  Result<ClusterState> state = ClusterState::Create(spec);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->gpu_type_count(), 3u);
}

// The example with `gpu: {max: 16}` added under one queue's quota (as lint and this file's docs
// advise for a queue that may evict others): that queue is capped at 16 GPUs of any model, and
// nothing else changes. Before, declaring `gpu` anywhere made it limited in the whole tree, whose
// nominal quota for it was 0: every job could never fit.
TEST(ConfigExamples, AMaxUnderOneQueueCapsItAlone) {
  Result<ClusterConfig> c = LoadClusterFile(kExamples + "cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ClusterSpec& spec = c->cluster;
  ASSERT_EQ(spec.queues[1].name, "inference");
  QuotaSpec max;
  max.max = MilliGpu(16'000);
  spec.queues[1].quota["gpu"] = max;
  Result<ClusterState> state = ClusterState::Create(spec);
  ASSERT_TRUE(state.ok()) << state.status().message();
  for (QueueId q = 0; q < state->queue_count(); ++q) {
    EXPECT_FALSE(state->quota(q, 0).limited) << state->queue(q).spec.name;
  }
  EXPECT_EQ(state->quota(*state->FindQueue("inference"), 0).max, 16'000);
  EXPECT_EQ(state->quota(*state->FindQueue("training"), 0).max, -1);
  // The models' nominal quota is as before.
  const std::size_t h800 = 1 + *state->FindGpuType("H800");
  EXPECT_TRUE(state->quota(*state->FindQueue("training"), h800).limited);
  EXPECT_EQ(state->quota(*state->FindQueue("org"), h800).nominal, 64'000);
}

TEST(ConfigExamples, JobsLoad) {
  Result<ClusterConfig> c = LoadClusterFile(kExamples + "cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  Result<ClusterState> state = ClusterState::Create(c->cluster);
  ASSERT_TRUE(state.ok()) << state.status().message();
  Result<std::vector<Job>> jobs = LoadJobsFile(kExamples + "jobs.yaml", *state, 100);
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_GE(jobs->size(), 12u);
  for (std::size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*jobs)[i].id, 100 + i);
  const Job& pretrain = (*jobs)[0];
  EXPECT_EQ(pretrain.name, "llama-70b-pretrain");
  EXPECT_EQ(pretrain.total_gpu().value(), 32'000);
  EXPECT_EQ(pretrain.topology.mode, ConstraintMode::kRequired);
  EXPECT_EQ(pretrain.topology.level, 1);
  EXPECT_EQ(pretrain.checkpoint_interval, 3600 * 1000LL);
  std::vector<std::string> names;
  for (const Job& j : *jobs) names.push_back(j.name);
  for (const char* name : {"chat-serving-0", "chat-serving-2", "eval-sweep-3", "moe-giant",
                           "distill-32g", "data-prep"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Cluster files.

TEST(ConfigCluster, Parses) {
  ClusterConfig c = MustParseCluster(kCluster);
  ASSERT_EQ(c.cluster.nodes.size(), 5u);
  EXPECT_EQ(c.cluster.nodes[4].labels.at("pool"), "train");
  EXPECT_EQ(c.cluster.nodes[4].taints[0].effect, TaintEffect::kNoSchedule);
  EXPECT_EQ(c.cluster.queues[1].parent, "org");
  EXPECT_EQ(c.cluster.queues[1].weight, 1);
  EXPECT_TRUE(c.cluster.queues[1].preemptable);
  EXPECT_EQ(c.cluster.queues[1].quota.at("H800").borrowing_limit->value(), 8000);
  EXPECT_FALSE(c.cluster.queues[1].quota.at("H800").max.has_value());
  EXPECT_EQ(c.cluster.queues[2].quota.at("gpu").nominal.value(), 500);
  // No scheduler section: the defaults of engine.h and model.h.
  EXPECT_EQ(c.engine.score_candidates, EngineOptions{}.score_candidates);
  EXPECT_EQ(c.engine.ordering.age, OrderingWeights{}.age);
  EXPECT_EQ(c.cluster.fair_share_half_life, ClusterSpec{}.fair_share_half_life);
}

// "May be evicted" has one spelling, preemptible, for classes and queues; preemptable, the
// queues' old spelling, is its alias, kept for lint to note.
TEST(ConfigCluster, PreemptibleAndItsAlias) {
  ClusterConfig c =
      MustParseCluster(Edit("  - name: batch\n", "  - name: batch\n    preemptible: false\n"));
  EXPECT_FALSE(c.cluster.queues[2].preemptable);
  EXPECT_TRUE(c.aliases.empty());
  ClusterConfig alias =
      MustParseCluster(Edit("  - name: batch\n", "  - name: batch\n    preemptable: false\n"));
  EXPECT_FALSE(alias.cluster.queues[2].preemptable);
  ASSERT_EQ(alias.aliases.size(), 1u);
  EXPECT_EQ(alias.aliases[0].field, "queues[2].preemptable");
  EXPECT_EQ(alias.aliases[0].canonical, "preemptible");
  ClusterConfig of_class = MustParseCluster(
      Edit("{name: P1, value: 100}", "{name: P1, value: 100, preemptable: false}"));
  EXPECT_FALSE(of_class.cluster.priority_classes[1].preemptible);
  ASSERT_EQ(of_class.aliases.size(), 1u);
  EXPECT_EQ(of_class.aliases[0].field, "priority_classes[1].preemptable");
  EXPECT_EQ(ClusterError(Edit("  - name: batch\n",
                              "  - name: batch\n    preemptible: true\n    preemptable: true\n")),
            "c.yaml:14:5: queues[2].preemptable: give preemptible or its alias preemptable, not "
            "both");
}

TEST(ConfigCluster, Scheduler) {
  ClusterConfig c = MustParseCluster(std::string(kCluster) + R"(scheduler:
  ordering: {priority_class_weight: 5, queue_priority_weight: 0, fair_share_weight: 2.5,
             age_weight: 1e3, max_age: 2d}
  fair_share_half_life: 12h
  score_candidates: 3
)");
  EXPECT_EQ(c.engine.ordering.priority_class, 5);
  EXPECT_EQ(c.engine.ordering.queue_priority, 0);
  EXPECT_EQ(c.engine.ordering.fair_share, 2.5);
  EXPECT_EQ(c.engine.ordering.age, 1000);
  EXPECT_EQ(c.engine.ordering.max_age, 2 * 24 * 3600 * 1000LL);
  EXPECT_EQ(c.cluster.fair_share_half_life, 12 * 3600 * 1000LL);
  EXPECT_EQ(c.engine.score_candidates, 3);
}

TEST(ConfigCluster, LeastAttainedServiceOrder) {
  ClusterConfig c = MustParseCluster(std::string(kCluster) + R"(scheduler:
  ordering: {policy: las-2d, las_thresholds: [1h, 4h], starvation_factor: 2}
)");
  EXPECT_EQ(c.engine.ordering.policy, OrderPolicy::kLas2d);
  EXPECT_EQ(c.engine.ordering.las_thresholds,
            (std::vector<Millis>{3600 * 1000LL, 4 * 3600 * 1000LL}));
  EXPECT_EQ(c.engine.ordering.starvation_factor, 2);
  EXPECT_EQ(MustParseCluster(kCluster).engine.ordering.policy, OrderPolicy::kMultifactor);
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {las_thresholds: [2h, 1h]}\n"),
      "thresholds must ascend"));
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {policy: sjf}\n"), "policy"));
}

TEST(ConfigCluster, FinishTimeFairnessOrder) {
  ClusterConfig c = MustParseCluster(std::string(kCluster) + R"(scheduler:
  ordering: {policy: ftf, ftf_lease: 20m}
  backfill: {default_runtime: 2h}
)");
  EXPECT_EQ(c.engine.ordering.policy, OrderPolicy::kFinishTimeFairness);
  EXPECT_STREQ(OrderPolicyName(c.engine.ordering.policy), "ftf");
  EXPECT_EQ(c.engine.ordering.ftf_lease, 20 * 60 * 1000LL);
  EXPECT_EQ(c.engine.backfill.default_runtime, 2 * 3600 * 1000LL);
  EXPECT_EQ(MustParseCluster(kCluster).engine.ordering.ftf_lease, 10 * 60 * 1000LL);
  EXPECT_TRUE(
      HasSubstr(ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {ftf_lease: 0s}\n"),
                "ftf_lease"));
}

TEST(ConfigCluster, GavelRounds) {
  ClusterConfig c = MustParseCluster(std::string(kCluster) + R"(scheduler:
  ordering: {policy: gavel, heterogeneity: max-min-fairness, gavel_round: 30m}
)");
  EXPECT_EQ(c.engine.ordering.policy, OrderPolicy::kGavel);
  EXPECT_STREQ(OrderPolicyName(c.engine.ordering.policy), "gavel");
  EXPECT_EQ(c.engine.ordering.heterogeneity, HeterogeneityPolicy::kMaxMinFairness);
  EXPECT_EQ(c.engine.ordering.gavel_round, 30 * 60 * 1000LL);
  EXPECT_EQ(MustParseCluster(kCluster).engine.ordering.gavel_round, 6 * 60 * 1000LL);
  // The objective is the heterogeneity policy's; none is an error that names both.
  const std::string none =
      ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {policy: gavel}\n");
  EXPECT_TRUE(HasSubstr(none, "scheduler.ordering.policy")) << none;
  EXPECT_TRUE(HasSubstr(none, "heterogeneity")) << none;
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {policy: gavel, heterogeneity: "
                                           "max-throughput, gavel_round: 0s}\n"),
      "gavel_round"));
}

TEST(ConfigCluster, GpuThroughputAndHeterogeneity) {
  const std::string matrix = R"(gpu_throughput:
  workloads:
    resnet: {H800: 3, A100-80G: 2}
    lstm: {H800: 1, A100-80G: 1.5, V100: 0.5}
)";
  ClusterConfig c = MustParseCluster(std::string(kCluster) + matrix + R"(scheduler:
  ordering: {policy: las-2d, heterogeneity: max-min-fairness}
)");
  EXPECT_EQ(c.engine.ordering.heterogeneity, HeterogeneityPolicy::kMaxMinFairness);
  EXPECT_STREQ(HeterogeneityPolicyName(c.engine.ordering.heterogeneity), "max-min-fairness");
  EXPECT_EQ(c.cluster.throughput.label, "model");
  ASSERT_EQ(c.cluster.throughput.rows.size(), 2u);
  EXPECT_EQ(c.cluster.throughput.rows[1].workload, "lstm");
  EXPECT_DOUBLE_EQ(c.cluster.throughput.rows[1].by_model.at("A100-80G"), 1.5);
  Result<ClusterState> state = ClusterState::Create(c.cluster);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(MustParseCluster(kCluster).engine.ordering.heterogeneity, HeterogeneityPolicy::kOff);
  // Max-min fairness counts a least-attained-service order's service.
  EXPECT_TRUE(HasSubstr(ClusterError(std::string(kCluster) +
                                     "scheduler:\n  ordering: {heterogeneity: max-min-fairness}\n"),
                        "heterogeneity"));
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {heterogeneity: fastest}\n"),
      "max-throughput"));
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "gpu_throughput:\n  workloads: {resnet: {H800: 0}}\n"),
      "gpu_throughput.workloads.resnet.H800"));
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "gpu_throughput:\n  workloads: {resnet: {}}\n"),
      "resnet"));
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "gpu_throughput:\n  label: m\n  rows: {}\n"), "rows"));
  // A row must give every GPU model of the cluster (the state's check).
  ClusterConfig partial = MustParseCluster(std::string(kCluster) +
                                           "gpu_throughput:\n  workloads: {resnet: {H800: 2}}\n");
  Result<ClusterState> refused = ClusterState::Create(partial.cluster);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "gpu_throughput.workloads.resnet");
  EXPECT_TRUE(HasSubstr(refused.status().message(), "A100-80G"));
}

TEST(ConfigCluster, GittinsOrder) {
  ClusterConfig c = MustParseCluster(std::string(kCluster) + R"(scheduler:
  ordering: {policy: gittins, gittins_quantum: 2h, gittins_window: 500}
)");
  EXPECT_EQ(c.engine.ordering.policy, OrderPolicy::kGittins);
  EXPECT_EQ(c.engine.ordering.gittins_quantum, 2 * 3600 * 1000LL);
  EXPECT_EQ(c.engine.ordering.gittins_window, 500);
  const OrderingWeights defaults;
  EXPECT_EQ(defaults.gittins_quantum, 3250 * 1000LL);  // Tiresias's static delta
  EXPECT_EQ(defaults.gittins_window, 1000);
  EXPECT_TRUE(HasSubstr(
      ClusterError(std::string(kCluster) + "scheduler:\n  ordering: {gittins_window: 0}\n"),
      "gittins_window"));
}

TEST(ConfigCluster, PreemptionSettings) {
  ClusterConfig c =
      MustParseCluster(Edit("  - {name: P1, value: 100}",
                            "  - {name: P1, value: 100, min_runtime: 20m, grace_period: 2m, "
                            "checkpoint_signal: SIGUSR2,\n"
                            "     max_evictions: 3, eviction_window: 12h, eviction_cooldown: 1h}") +
                       R"(scheduler:
  preemption: {enabled: true, max_gpus_per_cycle: 64, max_loss_per_gpu: 30m, max_attempts_per_cycle: 8}
)");
  const PriorityClassSpec& p1 = c.cluster.priority_classes[1];
  EXPECT_EQ(p1.min_runtime, 20 * 60 * 1000LL);
  EXPECT_EQ(p1.grace_period, 2 * 60 * 1000LL);
  EXPECT_EQ(p1.checkpoint_signal, "SIGUSR2");
  EXPECT_EQ(p1.max_evictions, 3);
  EXPECT_EQ(p1.eviction_window, 12 * 3600 * 1000LL);
  EXPECT_EQ(p1.eviction_cooldown, 3600 * 1000LL);
  EXPECT_EQ(c.engine.preemption.max_gpus_per_cycle, 64000);
  EXPECT_EQ(c.engine.preemption.max_loss_per_gpu, 30 * 60 * 1000LL);
  EXPECT_EQ(c.engine.preemption.max_attempts_per_cycle, 8);
  ClusterConfig q = MustParseCluster(
      Edit("    parent: org\n    quota",
           "    parent: org\n    reclaim: false\n    preempt_within_queue: false\n    quota"));
  EXPECT_FALSE(q.cluster.queues[1].reclaim);
  EXPECT_FALSE(q.cluster.queues[1].preempt_within_queue);
  EXPECT_TRUE(HasSubstr(
      ClusterError(
          Edit("{name: P1, value: 100}", "{name: P1, value: 100, checkpoint_signal: USR1}")),
      "priority_classes[1].checkpoint_signal: expected a signal name such as SIGUSR1, got 'USR1'"));
  EXPECT_TRUE(HasSubstr(
      ClusterError(Edit("{name: P1, value: 100}", "{name: P1, value: 100, min_runtime: -5m}")),
      "priority_classes[1].min_runtime"));
}

TEST(ConfigCluster, ExpandsNames) {
  ClusterConfig c = MustParseCluster(kCluster);
  std::vector<std::string> names;
  std::vector<std::string> leaves;
  for (const NodeSpec& n : c.cluster.nodes) {
    names.push_back(n.name);
    leaves.push_back(n.domains.at(1));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"h800-0", "h800-1", "h800-2", "h800-3", "a100"}));
  EXPECT_EQ(leaves, (std::vector<std::string>{"leaf-0", "leaf-0", "leaf-1", "leaf-1", "leaf-9"}));
  EXPECT_EQ(c.cluster.nodes[0].devices.size(), 8u);
  EXPECT_EQ(c.cluster.nodes[0].devices[7].nvlink_group, 0u);  // one group by default
  EXPECT_EQ(c.cluster.nodes[4].devices[5].nvlink_group, 1u);

  // No placeholder and count > 1: -0, -1, ...; {i%N} and several placeholders in one name.
  c = MustParseCluster(Edit("name: h800-{i}", "name: gpu"));
  EXPECT_EQ(c.cluster.nodes[3].name, "gpu-3");
  c = MustParseCluster(Edit("name: h800-{i}", "name: r{i/2}-n{i%2}"));
  EXPECT_EQ(c.cluster.nodes[0].name, "r0-n0");
  EXPECT_EQ(c.cluster.nodes[3].name, "r1-n1");
}

TEST(ConfigCluster, Devices) {
  ClusterConfig c = MustParseCluster(
      Edit("gpus: {model: A100-80G, count: 8, memory: 80Gi, nvlink_group_size: 4}",
           "devices: [{model: A100-80G, memory: 80Gi}, {model: A100-40G, memory: 40960, "
           "nvlink_group: 1}]"));
  const NodeSpec& n = c.cluster.nodes[4];
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_EQ(n.devices[1].type, "A100-40G");
  EXPECT_EQ(n.devices[1].memory.value(), 40960);
  EXPECT_EQ(n.devices[1].nvlink_group, 1u);
  // A CPU-only node.
  c = MustParseCluster(
      Edit("gpus: {model: A100-80G, count: 8, memory: 80Gi, nvlink_group_size: 4}", ""));
  EXPECT_TRUE(c.cluster.nodes[4].devices.empty());
}

TEST(ConfigCluster, NoTopology) {
  ClusterConfig c = MustParseCluster(R"(priority_classes: [{name: P, value: 1}]
queues: [{name: q}]
nodes: [{name: n, cpu: 1, memory: 1Gi}]
)");
  EXPECT_EQ(c.cluster.topology.levels, (std::vector<std::string>{"node", "nvlink"}));
  EXPECT_TRUE(c.cluster.nodes[0].domains.empty());
}

// ---------------------------------------------------------------------------------------------
// Cluster errors: one line, `c.yaml:LINE:COL: PATH: problem`.

TEST(ConfigClusterErrors, NegativeQuota) {
  EXPECT_EQ(ClusterError(Edit("nominal: 16", "nominal: -4")),
            "c.yaml:11:23: queues[1].quota.H800.nominal: must not be negative, got -4");
}

TEST(ConfigClusterErrors, UnknownFieldSuggests) {
  EXPECT_EQ(ClusterError(Edit("nominal: 16", "nomnal: 16")),
            "c.yaml:11:14: queues[1].quota.H800.nomnal: unknown field 'nomnal' (expected one of: "
            "nominal, borrowing_limit, lending_limit, max); did you mean 'nominal'?");
  // Nothing close: no suggestion.
  std::string no_match =
      ClusterError(Edit("    parent: org\n    quota", "    zzz: org\n    quota"));
  EXPECT_TRUE(HasSubstr(no_match, "c.yaml:9:5: queues[1].zzz: unknown field 'zzz'"));
  EXPECT_FALSE(HasSubstr(no_match, "did you mean"));
  EXPECT_TRUE(HasSubstr(ClusterError(std::string(kCluster) + "nodse: []\n"),
                        "c.yaml:30:1: nodse: unknown field 'nodse'"));
}

TEST(ConfigClusterErrors, Syntax) {
  EXPECT_TRUE(StartsWith(ClusterError(Edit("[spine, leaf]", "[spine, leaf")),
                         "c.yaml:3:17: syntax error: end of sequence flow not found"));
  EXPECT_TRUE(StartsWith(ClusterError(""), "c.yaml:1:1: expected a mapping"));
}

TEST(ConfigClusterErrors, WrongTypes) {
  EXPECT_EQ(
      ClusterError(Edit("quota:\n      H800: {nominal: 16, borrowing_limit: 8}", "quota: lots")),
      "c.yaml:10:12: queues[1].quota: expected a mapping, got a scalar");
  EXPECT_EQ(ClusterError(Edit("count: 4", "count: [4]")),
            "c.yaml:18:12: nodes[0].count: expected an integer, got a list");
  EXPECT_EQ(ClusterError(Edit("count: 4", "count: four")),
            "c.yaml:18:12: nodes[0].count: expected an integer, got 'four'");
  EXPECT_EQ(ClusterError(Edit("preemptible: false", "preemptible: no")),
            "c.yaml:4:42: priority_classes[0].preemptible: expected true or false, got 'no'");
  EXPECT_EQ(ClusterError(Edit("labels: {pool: train}", "labels: [pool]")),
            "c.yaml:27:13: nodes[1].labels: expected a mapping, got a list");
  EXPECT_EQ(
      ClusterError(Edit("cpu: 96", "cpu: 9x6")),
      "c.yaml:25:10: nodes[1].cpu: invalid CPU amount '9x6' (expected e.g. 16, 0.25 or 250m)");
  EXPECT_EQ(ClusterError(Edit("memory: 512Gi", "memory:")),
            "c.yaml:26:5: nodes[1].memory: expected a memory size, got nothing");
}

TEST(ConfigClusterErrors, MissingFields) {
  EXPECT_EQ(ClusterError(Edit("  - name: org\n", "  - weight: 1\n")),
            "c.yaml:7:5: queues[0]: missing required field 'name'");
  EXPECT_EQ(ClusterError(Edit("    cpu: 96\n", "")),
            "c.yaml:23:5: nodes[1]: missing required field 'cpu'");
  EXPECT_EQ(ClusterError(Edit("{model: H800, count: 8, memory: 80Gi}", "{model: H800, count: 8}")),
            "c.yaml:19:11: nodes[0].gpus: missing required field 'memory'");
  EXPECT_TRUE(HasSubstr(ClusterError(Edit("queues:\n", "queuez:\n")), "unknown field 'queuez'"));
  std::string no_queues = kCluster;
  no_queues =
      no_queues.substr(0, no_queues.find("queues:")) + no_queues.substr(no_queues.find("nodes:"));
  EXPECT_EQ(ClusterError(no_queues), "c.yaml:1:1: missing required field 'queues'");
  EXPECT_EQ(ClusterError(Edit("H800: {nominal: 16, borrowing_limit: 8}", "H800: {}")),
            "c.yaml:11:13: queues[1].quota.H800: give at least one of nominal, borrowing_limit, "
            "lending_limit, max");
  EXPECT_EQ(ClusterError(Edit("priority_classes:\n  - {name: P0, value: 1000, preemptible: false}\n"
                              "  - {name: P1, value: 100}",
                              "priority_classes: []")),
            "c.yaml:3:19: priority_classes: list at least one priority class");
}

TEST(ConfigClusterErrors, Duplicates) {
  EXPECT_EQ(ClusterError(Edit("{name: P1, value: 100}", "{name: P0, value: 100}")),
            "c.yaml:5:12: priority_classes[1].name: duplicate priority class 'P0' (first at line "
            "4)");
  EXPECT_EQ(ClusterError(Edit("  - name: batch", "  - name: training")),
            "c.yaml:12:11: queues[2].name: duplicate queue 'training' (first at queues[1])");
  EXPECT_EQ(ClusterError(Edit("name: a100", "name: h800-2")),
            "c.yaml:23:11: nodes[1].name: duplicate node name 'h800-2' (also from nodes[0])");
  EXPECT_EQ(ClusterError(Edit("name: h800-{i}", "name: h800-{i/2}")),
            "c.yaml:17:11: nodes[0].name: duplicate node name 'h800-0' (also from nodes[0])");
  EXPECT_EQ(ClusterError(Edit("    count: 4\n", "    count: 4\n    count: 5\n")),
            "c.yaml:19:5: nodes[0].count: repeated field 'count' (first at line 18)");
}

TEST(ConfigClusterErrors, QueueTree) {
  EXPECT_EQ(ClusterError(Edit("parent: org", "parent: orgg")),
            "c.yaml:9:13: queues[1].parent: unknown parent queue 'orgg' (known: org, training, "
            "batch); did you mean 'org'?");
  EXPECT_EQ(ClusterError(Edit("  - name: org\n", "  - name: org\n    parent: batch\n")),
            "c.yaml:8:13: queues[0].parent: queue cycle: org -> batch -> org");
  EXPECT_TRUE(HasSubstr(ClusterError(Edit("    parent: org\n    quota:\n      H800",
                                          "    parent: training\n    quota:\n      H800")),
                        "queues[1].parent: queue cycle: training -> training"));
}

TEST(ConfigClusterErrors, QuotaResource) {
  EXPECT_EQ(ClusterError(Edit("H800: {nominal: 16", "H900: {nominal: 16")),
            "c.yaml:11:7: queues[1].quota.H900: unknown quota resource 'H900' (expected 'gpu' "
            "or a GPU model of the nodes: gpu, H800, A100-80G); did you mean 'H800'?");
}

TEST(ConfigClusterErrors, Topology) {
  EXPECT_EQ(ClusterError(Edit("leaf: \"leaf-{i/2}\"", "lef: \"leaf-{i/2}\"")),
            "c.yaml:22:32: nodes[0].topology.lef: unknown topology level 'lef' (declared: spine, "
            "leaf); did you mean 'leaf'?");
  EXPECT_EQ(ClusterError(Edit("{spine: spine-1, leaf: leaf-9}", "{spine: spine-1}")),
            "c.yaml:29:15: nodes[1].topology: missing level 'leaf' (declared levels: spine, "
            "leaf)");
  EXPECT_EQ(ClusterError(Edit("    topology: {spine: spine-1, leaf: leaf-9}\n", "")),
            "c.yaml:23:5: nodes[1]: missing required field 'topology' (declared levels: spine, "
            "leaf)");
  EXPECT_EQ(ClusterError(Edit("levels: [spine, leaf]", "levels: []")),
            "c.yaml:22:5: nodes[0].topology: no topology levels are declared (declare them in "
            "topology.levels)");
  EXPECT_EQ(ClusterError(Edit("levels: [spine, leaf]", "levels: [spine, node]")),
            "c.yaml:2:19: topology.levels[1]: 'node' is implicit (levels end with node, nvlink); "
            "list only the levels above nodes");
  EXPECT_EQ(ClusterError(Edit("leaf-{i/2}", "leaf-{j}")),
            "c.yaml:22:38: nodes[0].topology.leaf: unknown placeholder '{j}' in 'leaf-{j}' "
            "(expected {i}, {i/N} or {i%N}, N >= 1)");
  EXPECT_TRUE(
      HasSubstr(ClusterError(Edit("leaf-{i/2}", "leaf-{i/0}")), "unknown placeholder '{i/0}'"));
  EXPECT_TRUE(HasSubstr(ClusterError(Edit("name: h800-{i}", "name: h800-{i")),
                        "c.yaml:17:11: nodes[0].name: unclosed '{'"));
}

TEST(ConfigClusterErrors, Counts) {
  EXPECT_EQ(ClusterError(Edit("count: 4", "count: 0")),
            "c.yaml:18:12: nodes[0].count: must be at least 1, got 0");
  EXPECT_EQ(ClusterError(Edit("count: 8, memory: 80Gi}", "count: -8, memory: 80Gi}")),
            "c.yaml:19:32: nodes[0].gpus.count: must be at least 1, got -8");
  EXPECT_EQ(ClusterError(Edit("nvlink_group_size: 4", "nvlink_group_size: 3")),
            "c.yaml:24:72: nodes[1].gpus.nvlink_group_size: must divide gpus.count (8), got 3");
  EXPECT_EQ(ClusterError(Edit("    parent: org\n    quota",
                              "    parent: org\n    weight: 0\n"
                              "    quota")),
            "c.yaml:10:13: queues[1].weight: must be at least 1, got 0");
  EXPECT_EQ(ClusterError(Edit("memory: 1Ti", "memory: -1Ti")),
            "c.yaml:21:13: nodes[0].memory: must not be negative, got -1Ti");
  EXPECT_EQ(ClusterError(Edit("model: H800", "model: gpu")),
            "c.yaml:19:19: nodes[0].gpus.model: 'gpu' is reserved (the quota resource for all GPU "
            "types together); name the model");
  EXPECT_TRUE(
      HasSubstr(ClusterError(Edit("{model: H800, count: 8, memory: 80Gi}",
                                  "{model: H800, count: 8, memory: 80Gi}\n    devices: []")),
                "c.yaml:20:5: nodes[0].devices: give either 'gpus'"));
}

// Regression: the loader allowed 1024 devices per node and the state 256, so a 300-GPU node
// passed the loader and then failed without a line. The loader uses the state's maximum.
TEST(ConfigClusterErrors, DevicesPerNodeIsTheStatesMaximum) {
  EXPECT_EQ(ClusterError(Edit("count: 8, memory: 80Gi}", "count: 300, memory: 80Gi}")),
            fmt::format("c.yaml:19:32: nodes[0].gpus.count: must be at most {}, got 300",
                        kMaxDevicesPerNode));
  Result<ClusterConfig> ok =
      ParseCluster(Edit("count: 8, memory: 80Gi}", "count: 256, memory: 80Gi}"), "c.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ClusterState::Create(ok->cluster).ok());
}

TEST(ConfigClusterErrors, MissingFile) {
  Result<ClusterConfig> c = LoadClusterFile("/nonexistent/cluster.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(StartsWith(c.status().message(), "/nonexistent/cluster.yaml: cannot open"));
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

// ---------------------------------------------------------------------------------------------
// Jobs files.

Result<std::vector<Job>> Jobs(const ClusterState& state, const std::string& yaml) {
  return ParseJobs(yaml, "j.yaml", state, 7);
}

std::string JobsError(const ClusterState& state, const std::string& yaml) {
  Result<std::vector<Job>> jobs = Jobs(state, yaml);
  EXPECT_FALSE(jobs.ok()) << "loaded:\n" << yaml;
  if (jobs.ok()) return "";
  EXPECT_EQ(jobs.status().message().find('\n'), std::string::npos) << jobs.status().message();
  return jobs.status().message();
}

TEST(ConfigJobs, Resolves) {
  ClusterState state = MakeState();
  Result<std::vector<Job>> jobs = Jobs(state, R"(jobs:
  - name: train
    user: alice
    queue: training
    priority_class: P1
    submit_time: 90
    runtime_estimate: 4h
    checkpoint_interval: 30m
    gpu_types: [A100-80G, H800]
    topology: {level: leaf, mode: preferred}
    node_selector: {pool: train}
    tolerations:
      - {key: dedicated, value: train, effect: NoSchedule}
      - {operator: Exists}
    labels: {app: llama}
    affinity: [{match: {app: cache}, anti: true, required: false}]
    tasks: 4
    gpus: 8
    gpu_memory: 40Gi
    cpu: 16
    memory: 128Gi
  - name: serve
    queue: batch
    priority_class: P0
    replicas: 3
    gpus: 0.5
  - name: mixed
    queue: batch
    priority_class: P0
    groups:
      - {name: launcher, cpu: 4, memory: 16Gi}
      - {tasks: 8, gpus: 8}
)");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 5u);
  const Job& j = (*jobs)[0];
  EXPECT_EQ(j.id, 7u);
  EXPECT_EQ(j.user, "alice");
  EXPECT_EQ(j.queue, *state.FindQueue("training"));
  EXPECT_EQ(j.priority_class, *state.FindPriorityClass("P1"));
  EXPECT_EQ(j.submit_time, 90'000);
  EXPECT_EQ(j.runtime_estimate, 4 * 3600'000LL);
  EXPECT_EQ(j.checkpoint_interval, 30 * 60'000LL);
  EXPECT_TRUE(j.gpu_types.Contains(*state.FindGpuType("H800")));
  EXPECT_TRUE(j.gpu_types.Contains(*state.FindGpuType("A100-80G")));
  EXPECT_EQ(j.topology.level, 1);
  EXPECT_EQ(j.topology.mode, ConstraintMode::kPreferred);
  EXPECT_EQ(j.node_selector.at("pool"), "train");
  ASSERT_EQ(j.tolerations.size(), 2u);
  EXPECT_EQ(j.tolerations[0].effect, TaintEffect::kNoSchedule);
  EXPECT_EQ(j.tolerations[1].op, Toleration::Op::kExists);
  EXPECT_FALSE(j.tolerations[1].effect.has_value());
  ASSERT_EQ(j.affinity.size(), 1u);
  EXPECT_EQ(j.affinity[0].level, state.topology().node_level());
  EXPECT_TRUE(j.affinity[0].anti);
  EXPECT_FALSE(j.affinity[0].required);
  ASSERT_EQ(j.groups.size(), 1u);
  EXPECT_EQ(j.groups[0].count, 4);
  EXPECT_EQ(j.groups[0].request.gpu.value(), 8000);
  EXPECT_EQ(j.groups[0].request.gpu_memory.value(), 40960);
  EXPECT_EQ(j.groups[0].request.cpu.value(), 16000);
  EXPECT_EQ(j.groups[0].request.memory.value(), 131072);

  EXPECT_EQ((*jobs)[1].name, "serve-0");
  EXPECT_EQ((*jobs)[3].name, "serve-2");
  EXPECT_EQ((*jobs)[3].id, 10u);
  EXPECT_EQ((*jobs)[3].groups[0].request.gpu.value(), 500);
  EXPECT_TRUE((*jobs)[3].gpu_types.empty());
  EXPECT_EQ((*jobs)[3].topology.mode, ConstraintMode::kUnconstrained);

  const Job& mixed = (*jobs)[4];
  ASSERT_EQ(mixed.groups.size(), 2u);
  EXPECT_EQ(mixed.groups[0].name, "launcher");
  EXPECT_EQ(mixed.groups[0].count, 1);
  EXPECT_EQ(mixed.groups[1].name, "group-1");
  EXPECT_EQ(mixed.total_gpu().value(), 64'000);
}

TEST(ConfigJobs, UnknownNames) {
  ClusterState state = MakeState();
  EXPECT_EQ(JobsError(state, "jobs:\n  - {name: a, queue: trainng, priority_class: P1}\n"),
            "j.yaml:2:22: jobs[0].queue: unknown leaf queue 'trainng' (known: training, batch); "
            "did you mean 'training'?");
  EXPECT_EQ(JobsError(state, "jobs:\n  - {name: a, queue: org, priority_class: P1}\n"),
            "j.yaml:2:22: jobs[0].queue: queue 'org' has child queues; jobs go to leaf queues "
            "(training, batch)");
  EXPECT_EQ(JobsError(state, "jobs:\n  - {name: a, queue: batch, priority_class: P9}\n"),
            "j.yaml:2:45: jobs[0].priority_class: unknown priority class 'P9' (known: P0, P1); "
            "did you mean 'P0'?");
  EXPECT_EQ(JobsError(state,
                      "jobs:\n  - {name: a, queue: batch, priority_class: P1, "
                      "gpu_types: [H800, V100]}\n"),
            "j.yaml:2:67: jobs[0].gpu_types[1]: unknown GPU type 'V100' (known: H800, A100-80G)");
  EXPECT_EQ(JobsError(state,
                      "jobs:\n  - {name: a, queue: batch, priority_class: P1, "
                      "topology: {level: rack}}\n"),
            "j.yaml:2:67: jobs[0].topology.level: unknown topology level 'rack' (known: spine, "
            "leaf, node, nvlink)");
}

TEST(ConfigJobs, TaskChecks) {
  ClusterState state = MakeState();
  const std::string head = "jobs:\n  - name: a\n    queue: batch\n    priority_class: P1\n";
  EXPECT_EQ(JobsError(state, head + "    gpus: 1.5\n"),
            "j.yaml:5:11: jobs[0].gpus: above 1 GPU must be a whole number (a task takes a share "
            "of one GPU or whole GPUs), got 1.5 GPUs");
  EXPECT_EQ(JobsError(state, head + "    gpu_memory: 10Gi\n"),
            "j.yaml:5:17: jobs[0].gpu_memory: needs GPUs: GPU memory is asked per device of a task "
            "with GPUs");
  EXPECT_EQ(JobsError(state, head + "    tasks: 0\n"),
            "j.yaml:5:12: jobs[0].tasks: must be at least 1, got 0");
  EXPECT_EQ(JobsError(state, head + "    groups: [{name: w, tasks: -2}]\n"),
            "j.yaml:5:31: jobs[0].groups[0].tasks: must be at least 1, got -2");
  EXPECT_EQ(JobsError(state, head + "    gpus: 1\n    groups: [{name: w}]\n"),
            "j.yaml:5:5: jobs[0].gpus: not allowed together with 'groups'; give it in each group");
  EXPECT_EQ(JobsError(state, head + "    groups: [{name: w}, {name: w}]\n"),
            "j.yaml:5:32: jobs[0].groups[1].name: duplicate group name 'w'");
  EXPECT_EQ(JobsError(state, head + "    cpu: -1\n"),
            "j.yaml:5:10: jobs[0].cpu: must not be negative, got -1");
  EXPECT_EQ(JobsError(state, head + "    replicas: 0\n"),
            "j.yaml:5:15: jobs[0].replicas: must be at least 1, got 0");
  EXPECT_EQ(JobsError(state, head + "    tolerations: [{operator: Exists, value: x}]\n"),
            "j.yaml:5:45: jobs[0].tolerations[0].value: operator Exists matches any value; leave "
            "'value' out");
  EXPECT_EQ(JobsError(state, head + "    topology: {level: leaf, mode: strict}\n"),
            "j.yaml:5:35: jobs[0].topology.mode: expected one of: required, preferred; got "
            "'strict'");
  EXPECT_EQ(JobsError(state, head + "    runtme_estimate: 1h\n"),
            "j.yaml:5:5: jobs[0].runtme_estimate: unknown field 'runtme_estimate' (expected one "
            "of: name, user, queue, priority_class, submit_time, runtime_estimate, "
            "checkpoint_interval, restart_overhead, gpu_types, topology, node_selector, "
            "tolerations, labels, "
            "affinity, replicas, groups, tasks, gpus, gpu_memory, cpu, memory, argv, command, "
            "env, ... (2 more)); did you mean 'runtime_estimate'?");
  EXPECT_EQ(JobsError(state, "jobs:\n  - {queue: batch, priority_class: P1}\n"),
            "j.yaml:2:5: jobs[0]: missing required field 'name'");
  EXPECT_EQ(JobsError(state, "jobs: {a: 1}\n"), "j.yaml:1:7: jobs: expected a list, got a mapping");
  EXPECT_TRUE(StartsWith(JobsError(state, "jobs:\n  - {name: a\n"), "j.yaml:3:1: syntax error"));
}

// Every check of a job is the validator's or the resolver's (job::ValidateJobSpec, ToJob);
// their errors come back at the line of the field, with the path as the file wrote it.
TEST(ConfigJobs, ValidatorErrorsNameTheFileLineAndField) {
  ClusterState state = MakeState();
  const std::string head =
      "jobs:\n  - {name: ok, queue: batch, priority_class: P1}\n"
      "  - name: b\n    queue: batch\n    priority_class: P1\n";
  EXPECT_EQ(JobsError(state, head + "    groups:\n      - {name: w, gpus: 2.5}\n"),
            "j.yaml:7:25: jobs[1].groups[0].gpus: above 1 GPU must be a whole number (a task "
            "takes a share of one GPU or whole GPUs), got 2.5 GPUs");
  EXPECT_EQ(JobsError(state, head + "    tasks: 1000001\n"),
            "j.yaml:6:12: jobs[1].tasks: must be at most 1000000, got 1000001");
  EXPECT_EQ(JobsError(state, head + "    runtime_estimate: 40000000d\n"),
            "j.yaml:6:23: jobs[1].runtime_estimate: must be at most a year (31622400000 ms), got "
            "3456000000000000");
  EXPECT_EQ(JobsError(state, head + "    labels: {team: " + std::string(300, 'x') + "}\n"),
            "j.yaml:6:13: jobs[1].labels.team: must be at most 253 bytes long, got 300");
  EXPECT_EQ(JobsError(state, head + "    affinity: [{match: {}}]\n"),
            "j.yaml:6:24: jobs[1].affinity[0].match: give at least one label to match");
  EXPECT_EQ(JobsError(state, head + "    affinity: [{match: {a: b}, level: rack}]\n"),
            "j.yaml:6:39: jobs[1].affinity[0].level: unknown topology level 'rack' (known: "
            "spine, leaf, node, nvlink)");
  EXPECT_EQ(JobsError(state, head + "    tolerations: [{value: x}]\n"),
            "j.yaml:6:19: jobs[1].tolerations[0].key: operator Equal needs a key (an empty key "
            "with operator Exists tolerates all)");
}

TEST(ConfigJobs, Empty) {
  ClusterState state = MakeState();
  Result<std::vector<Job>> jobs = Jobs(state, "jobs: []\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  EXPECT_TRUE(jobs->empty());
}

}  // namespace
}  // namespace arbiter::config
