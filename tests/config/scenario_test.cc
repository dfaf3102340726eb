#include "scenario/scenario.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/state/cluster_state.h"
#include "sim/workload.h"
#include "trace/trace.h"

namespace arbiter::config {
namespace {

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;
constexpr Millis kDay = 24 * kHour;
constexpr double kHours = 3600.0 * 1000;  // an hour, for averages

const std::string kSourceDir = ARBITER_SOURCE_DIR;
const std::string kScenarios = kSourceDir + "/scenarios";
const std::string kPhilly = "../data/traces/philly/philly_first2000.csv";

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

::testing::AssertionResult StartsWith(const std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not start with '" << prefix << "'";
}

// A small cluster: h800-0, h800-1 (8 x H800 each) and a100 (8 x A100); classes normal and high;
// queues org > research, shared.
constexpr const char* kCluster = R"(cluster:
  nodes:
    - name: h800-{i}
      count: 2
      gpus: {model: H800, count: 8, memory: 80Gi}
      cpu: 128
      memory: 1Ti
    - name: a100
      gpus: {model: A100, count: 8, memory: 80Gi}
      cpu: 128
      memory: 1Ti
  priority_classes:
    - {name: normal, value: 0}
    - {name: high, value: 100}
  queues:
    - {name: org}
    - {name: research, parent: org}
    - {name: shared, parent: org}
)";

// One batch job an hour, 30 minutes each, in `shared`.
constexpr const char* kBatch = R"(  - name: w
    arrivals: {every: 1h}
    work: 30m
    job: {queue: shared, priority_class: normal, gpus: 1}
)";

// A scenario: `top` (horizon and the like), the small cluster, `workloads`, then `tail`
// (configurations, failures...).
std::string Scn(const std::string& workloads, const std::string& top = "horizon: 1d\n",
                const std::string& tail = "") {
  return "name: t\n" + top + kCluster + "workloads:\n" + workloads + tail;
}

Scenario MustParse(const std::string& yaml, std::optional<std::uint64_t> seed = std::nullopt,
                   const std::string& base_dir = kScenarios) {
  Result<Scenario> s = ParseScenario(yaml, "s.yaml", base_dir, seed);
  EXPECT_TRUE(s.ok()) << s.status().message() << "\nin:\n" << yaml;
  return s.ok() ? std::move(s).value() : Scenario{};
}

// The error of a scenario that must fail to load; it must start with `s.yaml:LINE:COL: `.
std::string ScenarioError(const std::string& yaml, const std::string& base_dir = kScenarios) {
  Result<Scenario> s = ParseScenario(yaml, "s.yaml", base_dir);
  EXPECT_FALSE(s.ok()) << "loaded:\n" << yaml;
  if (s.ok()) return "";
  const std::string& message = s.status().message();
  EXPECT_TRUE(std::regex_search(message, std::regex("^s\\.yaml:[0-9]+:[0-9]+: [^ ]"))) << message;
  return message;
}

// `s.yaml:LINE:COL` of the `nth` (0-based) occurrence of `needle` in `yaml`, `skip` characters
// into it.
std::string Pos(const std::string& yaml, const std::string& needle, int nth = 0,
                std::size_t skip = 0) {
  std::size_t at = yaml.find(needle);
  for (int i = 0; i < nth && at != std::string::npos; ++i) at = yaml.find(needle, at + 1);
  EXPECT_NE(at, std::string::npos) << needle;
  if (at == std::string::npos) return "?";
  at += skip;
  const std::size_t line_start =
      at == 0 || yaml.rfind('\n', at - 1) == std::string::npos ? 0 : yaml.rfind('\n', at - 1) + 1;
  const auto line = std::count(yaml.begin(), yaml.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  return fmt::format("s.yaml:{}:{}", line + 1, at - line_start + 1);
}

// The one configuration of a scenario (an empty one when it has none, after a failed check).
const SimConfiguration& Only(const Scenario& s) {
  static const SimConfiguration kEmpty;
  EXPECT_EQ(s.configurations.size(), 1u);
  return s.configurations.empty() ? kEmpty : s.configurations[0];
}

std::string QueueName(const SimConfiguration& c, QueueId q) { return c.cluster.queues.at(q).name; }
std::string ClassName(const SimConfiguration& c, PriorityClassId p) {
  return c.cluster.priority_classes.at(p).name;
}

std::int64_t MilliGpus(const Job& job) {
  std::int64_t gpus = 0;
  for (const TaskGroup& g : job.groups) gpus += g.request.gpu.value() * g.count;
  return gpus;
}

std::vector<Millis> SubmitTimes(const sim::Workload& w) {
  std::vector<Millis> out;
  for (const sim::SimJob& j : w.jobs) out.push_back(j.job.submit_time);
  return out;
}

std::vector<Millis> Works(const sim::Workload& w) {
  std::vector<Millis> out;
  for (const sim::SimJob& j : w.jobs) out.push_back(j.work);
  return out;
}

// The GPU model names a job accepts.
std::set<std::string> GpuTypes(const SimConfiguration& c, const Job& job) {
  Result<ClusterState> state = ClusterState::Create(c.cluster);
  EXPECT_TRUE(state.ok());
  std::set<std::string> out;
  if (!state.ok()) return out;
  for (GpuTypeId t = 0; t < state->gpu_type_count(); ++t) {
    if (job.gpu_types.Contains(t)) out.insert(state->gpu_type_name(t));
  }
  return out;
}

// A fresh folder under the system's temporary folder, removed with its files at the end.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("arbiter-scenario-{}-{}-{}", info->test_suite_name(), info->name(), tick);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path() const { return path_.string(); }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream out(path_ / name, std::ios::binary);
    out << text;
    ASSERT_TRUE(out.good()) << name;
  }

 private:
  std::filesystem::path path_;
};

// ---- Shipped scenarios ----

TEST(ScenarioShipped, AllLoad) {
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kScenarios)) {
    if (entry.path().extension() != ".yaml") continue;
    Result<Scenario> s = LoadScenarioFile(entry.path().string());
    ASSERT_TRUE(s.ok()) << entry.path() << ": " << s.status().message();
    EXPECT_FALSE(s->configurations.empty()) << entry.path();
    EXPECT_TRUE(s->skipped_rows.empty()) << entry.path();
    for (const SimConfiguration& c : s->configurations) {
      EXPECT_FALSE(c.workload.jobs.empty() && c.workload.services.empty()) << c.name;
    }
    ++loaded;
  }
  EXPECT_GE(loaded, 3);
}

TEST(ScenarioShipped, MixedClusterSameJobsInEveryConfiguration) {
  Result<Scenario> s = LoadScenarioFile(kScenarios + "/mixed-cluster.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "mixed-cluster");
  EXPECT_EQ(s->seed, 7u);
  EXPECT_EQ(s->options.horizon, 3 * kDay);
  EXPECT_EQ(s->options.min_cycle_interval, 2 * kSecond);
  EXPECT_EQ(s->options.cycle_period, 30 * kSecond);
  EXPECT_EQ(s->options.sample_interval, 5 * kMinute);
  ASSERT_EQ(s->configurations.size(), 3u);
  EXPECT_EQ(s->configurations[0].name, "fcfs");
  EXPECT_EQ(s->configurations[1].name, "priorities");
  EXPECT_EQ(s->configurations[2].name, "quotas+checkpoints");
  EXPECT_EQ(s->configurations[0].description,
            "everything at one priority, first come first served");

  // The scheduler overrides.
  EXPECT_FALSE(s->configurations[0].engine.preemption.enabled);
  EXPECT_EQ(s->configurations[0].engine.backfill.reservations, 0);
  EXPECT_EQ(s->configurations[0].engine.ordering.age, 1);
  EXPECT_TRUE(s->configurations[1].engine.preemption.enabled);
  EXPECT_EQ(s->configurations[1].engine.backfill.reservations, 8);
  EXPECT_EQ(s->configurations[0].cluster.queues.size(), 1u);
  EXPECT_EQ(s->configurations[1].cluster.queues.size(), 4u);
  EXPECT_EQ(s->configurations[2].cluster.priority_classes.at(1).min_runtime, 30 * kMinute);
  for (const SimConfiguration& c : s->configurations) EXPECT_EQ(c.cluster.nodes.size(), 24u);

  // The same jobs (and services) everywhere.
  const sim::Workload& first = s->configurations[0].workload;
  std::map<std::string, int> per_workload;
  for (const sim::SimJob& j : first.jobs) ++per_workload[j.workload];
  EXPECT_EQ(per_workload["training"], 3 * 8);  // a burst of 8 every day
  EXPECT_EQ(per_workload["daily-etl"], 3 * 400);
  EXPECT_GT(per_workload["finetune"], 30);         // 0.8 an hour for 72 hours
  EXPECT_GT(per_workload["preprocessing"], 2000);  // 40 an hour
  EXPECT_EQ(per_workload.size(), 4u);
  for (const SimConfiguration& c : s->configurations) {
    ASSERT_EQ(c.workload.jobs.size(), first.jobs.size()) << c.name;
    for (std::size_t i = 0; i < first.jobs.size(); ++i) {
      const sim::SimJob& a = first.jobs[i];
      const sim::SimJob& b = c.workload.jobs[i];
      ASSERT_EQ(a.job.name, b.job.name) << c.name;
      EXPECT_EQ(a.job.submit_time, b.job.submit_time) << a.job.name;
      EXPECT_EQ(a.work, b.work) << a.job.name;
      EXPECT_EQ(MilliGpus(a.job), MilliGpus(b.job)) << a.job.name;
      EXPECT_EQ(a.job.runtime_estimate, b.job.runtime_estimate) << a.job.name;
      EXPECT_EQ(a.kind, b.kind) << a.job.name;
      EXPECT_EQ(a.workload, b.workload) << a.job.name;
      EXPECT_EQ(a.checkpoint_cost, b.checkpoint_cost) << a.job.name;
    }
    ASSERT_EQ(c.workload.services.size(), 2u);
    EXPECT_EQ(c.workload.services[0].name, "chat");
    EXPECT_EQ(c.workload.services[1].name, "embedding");
    EXPECT_TRUE(c.workload.outages.empty());
  }

  // Queues and classes per each configuration's `assign`.
  const std::map<std::string, std::pair<std::string, std::string>> tiers = {
      {"chat", {"inference", "P0"}},
      {"embedding", {"inference", "P0"}},
      {"training", {"training", "P1"}},
      {"finetune", {"training", "P1"}},
      {"preprocessing", {"preprocessing", "P2"}},
      {"daily-etl", {"preprocessing", "P2"}}};
  for (const SimConfiguration& c : s->configurations) {
    const bool fcfs = c.name == "fcfs";
    for (const sim::SimJob& j : c.workload.jobs) {
      const auto& [queue, klass] = tiers.at(j.workload);
      ASSERT_EQ(QueueName(c, j.job.queue), fcfs ? "shared" : queue) << c.name << " " << j.job.name;
      ASSERT_EQ(ClassName(c, j.job.priority_class), fcfs ? "normal" : klass) << c.name;
    }
    for (const sim::InferenceService& svc : c.workload.services) {
      EXPECT_EQ(QueueName(c, svc.replica.queue), fcfs ? "shared" : "inference") << c.name;
      EXPECT_EQ(ClassName(c, svc.replica.priority_class), fcfs ? "normal" : "P0") << c.name;
    }
  }

  // A generator's details: the daily training bursts.
  std::vector<Millis> training;
  for (const sim::SimJob& j : first.jobs) {
    if (j.workload != "training") continue;
    training.push_back(j.job.submit_time);
    EXPECT_EQ(j.kind, sim::WorkKind::kTraining);
    EXPECT_GE(j.work, 10 * kHour);
    EXPECT_LE(j.work, 16 * kHour);
    EXPECT_EQ(j.checkpoint_cost, 30 * kSecond);
    EXPECT_EQ(j.job.runtime_estimate, std::llround(static_cast<double>(j.work) * 1.2));
    EXPECT_EQ(MilliGpus(j.job), 16000);
    EXPECT_EQ(j.job.checkpoint_interval, 30 * kMinute);
    EXPECT_EQ(j.job.restart_overhead, 5 * kMinute);
  }
  ASSERT_EQ(training.size(), 24u);
  EXPECT_EQ(training[0], 1 * kHour);
  EXPECT_EQ(training[7], 1 * kHour);
  EXPECT_EQ(training[8], 25 * kHour);
  EXPECT_EQ(training[23], 49 * kHour);
}

TEST(ScenarioShipped, PhillyReplayQueuesPerConfiguration) {
  Result<Scenario> s = LoadScenarioFile(kScenarios + "/philly-replay.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->options.horizon, 0);
  ASSERT_EQ(s->configurations.size(), 2u);
  EXPECT_EQ(s->configurations[0].name, "fifo");
  EXPECT_EQ(s->configurations[1].name, "fair-share");
  EXPECT_TRUE(s->configurations[0].cluster.queues.at(0).strict_fifo);
  std::map<std::string, int> fifo, fair;
  for (const sim::SimJob& j : s->configurations[0].workload.jobs) {
    ++fifo[QueueName(s->configurations[0], j.job.queue)];
  }
  for (const sim::SimJob& j : s->configurations[1].workload.jobs) {
    ++fair[QueueName(s->configurations[1], j.job.queue)];
  }
  EXPECT_EQ(fifo, (std::map<std::string, int>{{"shared", 2000}}));
  EXPECT_EQ(fair, (std::map<std::string, int>{{"vc-6214e9", 1648}, {"vc-others", 352}}));
}

TEST(ScenarioShipped, PreemptionStorm) {
  Result<Scenario> s = LoadScenarioFile(kScenarios + "/preemption-storm.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->configurations.size(), 2u);
  EXPECT_EQ(s->configurations[0].name, "incident");
  EXPECT_EQ(s->configurations[1].name, "fix");
  for (const SimConfiguration& c : s->configurations) {
    int training = 0;
    for (const sim::SimJob& j : c.workload.jobs) {
      if (j.workload != "training") continue;
      ++training;
      EXPECT_EQ(j.job.submit_time, 0);
      EXPECT_EQ(j.work, 20 * kHour);
      EXPECT_EQ(QueueName(c, j.job.queue), c.name == "fix" ? "training" : "shared");
      EXPECT_EQ(ClassName(c, j.job.priority_class), "high");
    }
    EXPECT_EQ(training, 1);
  }
}

// ---- Configurations and assign ----

TEST(ScenarioConfigurations, NoneGivenIsOneNamedAfterTheScenario) {
  Scenario s = MustParse(Scn(kBatch));
  const SimConfiguration& c = Only(s);
  EXPECT_EQ(c.name, "t");
  EXPECT_EQ(c.cluster.queues.size(), 3u);
  ASSERT_EQ(c.workload.jobs.size(), 24u);
  EXPECT_EQ(c.workload.jobs[0].job.name, "w-0");
  EXPECT_EQ(QueueName(c, c.workload.jobs[0].job.queue), "shared");
  EXPECT_EQ(ClassName(c, c.workload.jobs[0].job.priority_class), "normal");
}

TEST(ScenarioConfigurations, AssignByNameThenStarThenTheJob) {
  const std::string workloads = std::string(kBatch) + R"(  - name: v
    arrivals: {every: 1h}
    work: 30m
    job: {queue: research, priority_class: high, gpus: 1}
)";
  const std::string configs = R"(configurations:
  - name: by-name
    assign:
      w: {queue: research}
  - name: star
    assign:
      "*": {queue: shared, priority_class: high}
      v: {priority_class: normal}
  - name: own
)";
  Scenario s = MustParse(Scn(workloads, "horizon: 1d\n", configs));
  ASSERT_EQ(s.configurations.size(), 3u);
  auto where = [&](const SimConfiguration& c, const std::string& workload) {
    for (const sim::SimJob& j : c.workload.jobs) {
      if (j.workload == workload) {
        return QueueName(c, j.job.queue) + "/" + ClassName(c, j.job.priority_class);
      }
    }
    return std::string("none");
  };
  // By name: the assign's queue, the job's class; v without an assign keeps its own.
  EXPECT_EQ(where(s.configurations[0], "w"), "research/normal");
  EXPECT_EQ(where(s.configurations[0], "v"), "research/high");
  // "*" for w; v's own entry wins over "*" (and gives only the class).
  EXPECT_EQ(where(s.configurations[1], "w"), "shared/high");
  EXPECT_EQ(where(s.configurations[1], "v"), "research/normal");
  // No assign: the jobs' own.
  EXPECT_EQ(where(s.configurations[2], "w"), "shared/normal");
  EXPECT_EQ(where(s.configurations[2], "v"), "research/high");
}

TEST(ScenarioConfigurations, OverridesReplaceTheClusters) {
  const std::string configs = R"(configurations:
  - name: flat
    queues: [{name: everyone, strict_fifo: true}]
    priority_classes: [{name: only, value: 5}]
    scheduler: {preemption: {enabled: false}, backfill: {reservations: 3}}
    assign:
      "*": {queue: everyone, priority_class: only}
  - name: as-is
)";
  Scenario s = MustParse(Scn(kBatch, "horizon: 1d\n", configs));
  ASSERT_EQ(s.configurations.size(), 2u);
  const SimConfiguration& flat = s.configurations[0];
  ASSERT_EQ(flat.cluster.queues.size(), 1u);
  EXPECT_EQ(flat.cluster.queues[0].name, "everyone");
  EXPECT_TRUE(flat.cluster.queues[0].strict_fifo);
  ASSERT_EQ(flat.cluster.priority_classes.size(), 1u);
  EXPECT_EQ(flat.cluster.priority_classes[0].name, "only");
  EXPECT_EQ(flat.cluster.priority_classes[0].value, 5);
  EXPECT_FALSE(flat.engine.preemption.enabled);
  EXPECT_EQ(flat.engine.backfill.reservations, 3);
  EXPECT_EQ(flat.cluster.nodes.size(), 3u);
  EXPECT_EQ(QueueName(flat, flat.workload.jobs.at(0).job.queue), "everyone");

  const SimConfiguration& as_is = s.configurations[1];
  EXPECT_EQ(as_is.cluster.queues.size(), 3u);
  EXPECT_EQ(as_is.cluster.priority_classes.size(), 2u);
  EXPECT_TRUE(as_is.engine.preemption.enabled);
  EXPECT_EQ(as_is.engine.backfill.reservations, BackfillOptions{}.reservations);
  EXPECT_EQ(as_is.cluster.nodes.size(), 3u);
}

TEST(ScenarioConfigurations, MissingQueueNamesTheWorkload) {
  const std::string yaml = Scn(R"(  - name: noq
    arrivals: {every: 1h}
    work: 30m
    job: {priority_class: normal, gpus: 1}
)");
  std::string e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "{priority_class: normal") + ": workloads[0].job: "));
  EXPECT_TRUE(HasSubstr(e, "no queue for workload 'noq'"));

  // An assign that gives only the class does not help.
  e = ScenarioError(
      Scn(R"(  - name: noq
    arrivals: {every: 1h}
    work: 30m
    job: {priority_class: normal, gpus: 1}
)",
          "horizon: 1d\n",
          "configurations:\n  - name: c\n    assign: {noq: {priority_class: high}}\n"));
  EXPECT_TRUE(HasSubstr(e, "workloads[0].job: no queue for workload 'noq'"));

  // A generator without a job at all.
  e = ScenarioError(Scn("  - name: bare\n    arrivals: {every: 1h}\n    work: 30m\n"));
  EXPECT_TRUE(HasSubstr(e, "workloads[0]: missing required field 'job'"));
}

TEST(ScenarioConfigurations, AssignErrors) {
  std::string yaml =
      Scn(kBatch, "horizon: 1d\n",
          "configurations:\n  - name: c\n    assign:\n      nope: {queue: shared}\n");
  std::string e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "{queue: shared}") + ": configurations[0].assign.nope: "));
  EXPECT_TRUE(HasSubstr(e, "unknown workload 'nope'"));

  // An unknown queue or class in an assign names the assign, not the job.
  yaml = Scn(kBatch, "horizon: 1d\n",
             "configurations:\n  - name: c\n    assign:\n      w: {queue: sharde}\n");
  e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "sharde") + ": configurations[0].assign.w.queue: "));
  EXPECT_TRUE(HasSubstr(e, "unknown leaf queue 'sharde' (known: research, shared)"));
  EXPECT_TRUE(HasSubstr(e, "did you mean 'shared'?"));
  yaml = Scn(kBatch, "horizon: 1d\n",
             "configurations:\n  - name: c\n    assign:\n      w: {queue: org}\n");
  e = ScenarioError(yaml);
  EXPECT_TRUE(
      StartsWith(e, Pos(yaml, "{queue: org}", 0, 8) + ": configurations[0].assign.w.queue: "));
  EXPECT_TRUE(HasSubstr(e, "unknown leaf queue 'org'"));
  yaml = Scn(kBatch, "horizon: 1d\n",
             "configurations:\n  - name: c\n    assign:\n      \"*\": {priority_class: P9}\n");
  e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "P9") + ": configurations[0].assign.*.priority_class: "));
  EXPECT_TRUE(HasSubstr(e, "unknown priority class 'P9'"));

  e = ScenarioError(
      Scn(kBatch, "horizon: 1d\n",
          "configurations:\n  - name: c\n    assign: {w: {queue: shared, user: x}}\n"));
  EXPECT_TRUE(HasSubstr(e, "configurations[0].assign.w.user: unknown field 'user'"));
}

TEST(ScenarioConfigurations, DuplicateNames) {
  std::string yaml =
      Scn(kBatch, "horizon: 1d\n", "configurations:\n  - name: a\n  - name: b\n  - name: a\n");
  std::string e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "- name: a\n", 1, 2) + ": configurations[2]: "));
  EXPECT_TRUE(HasSubstr(e, "duplicate configuration name 'a'"));

  yaml = Scn(std::string(kBatch) + kBatch);
  e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "w\n", 1) + ": workloads[1].name: "));
  EXPECT_TRUE(HasSubstr(e, "duplicate workload name 'w'"));
}

TEST(ScenarioConfigurations, ClusterOverrideErrors) {
  // The cluster's own checks apply to the merged cluster of each configuration.
  std::string e = ScenarioError(Scn(kBatch, "horizon: 1d\n",
                                    "configurations:\n  - name: c\n"
                                    "    queues: [{name: a, parent: nowhere}]\n"));
  EXPECT_TRUE(HasSubstr(e, "configurations[0].queues[0].parent: unknown parent queue 'nowhere'"));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\n",
                        "configurations:\n  - name: c\n"
                        "    priority_classes: [{name: normal, value: high}]\n"));
  EXPECT_TRUE(HasSubstr(e, "configurations[0].priority_classes[0].value: "));
  e = ScenarioError(
      Scn(kBatch, "horizon: 1d\n", "configurations:\n  - name: c\n    scheduler: {backfil: {}}\n"));
  EXPECT_TRUE(HasSubstr(e, "configurations[0].scheduler.backfil: unknown field 'backfil'"));
  // The cluster's own errors name the cluster, with configurations or without.
  std::string broken = Scn(kBatch, "horizon: 1d\n", "configurations:\n  - name: c\n");
  broken.replace(broken.find("count: 8"), 8, "count: -8");
  e = ScenarioError(broken);
  EXPECT_TRUE(StartsWith(e, Pos(broken, "-8") + ": cluster.nodes[0].gpus.count: ")) << e;
  e = ScenarioError(Scn(kBatch, "horizon: 1d\n", "configurations:\n  - name: c\n    nodes: []\n"));
  EXPECT_TRUE(HasSubstr(e, "configurations[0].nodes: unknown field 'nodes'"));
  // The job's class must exist in every configuration.
  e = ScenarioError(Scn(kBatch, "horizon: 1d\n",
                        "configurations:\n  - name: c\n"
                        "    priority_classes: [{name: P0, value: 1}]\n"));
  EXPECT_TRUE(HasSubstr(e, "workloads[0].job.priority_class: unknown priority class 'normal'"));
}

// ---- Generators ----

// A generator workload `w` of batch jobs with the given arrivals and work (any extra lines are
// appended to the workload).
std::string Gen(const std::string& arrivals, const std::string& work = "30m",
                const std::string& extra = "") {
  return "  - name: w\n    arrivals: " + arrivals + "\n    work: " + work + "\n" +
         "    job: {queue: shared, priority_class: normal, gpus: 1, tasks: 2}\n" + extra;
}

TEST(ScenarioGenerators, Poisson) {
  Scenario s = MustParse(Scn(Gen("{per_hour: 10}")));
  std::vector<Millis> t = SubmitTimes(Only(s).workload);
  EXPECT_GT(t.size(), 150u);  // about 240 in a day
  EXPECT_LT(t.size(), 350u);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  EXPECT_GE(t.front(), 0);
  EXPECT_LT(t.back(), kDay);
  EXPECT_EQ(Only(s).workload.jobs.at(3).job.name, "w-3");
  EXPECT_EQ(Only(s).workload.jobs.at(3).workload, "w");
  EXPECT_EQ(Only(s).workload.jobs.at(3).kind, sim::WorkKind::kBatch);

  s = MustParse(Scn(Gen("{per_hour: 10, start: 2h, until: 10h}")));
  t = SubmitTimes(Only(s).workload);
  EXPECT_GT(t.size(), 40u);  // about 80
  EXPECT_GE(t.front(), 2 * kHour);
  EXPECT_LT(t.back(), 10 * kHour);

  s = MustParse(Scn(Gen("{per_hour: 10, count: 5}")));
  EXPECT_EQ(Only(s).workload.jobs.size(), 5u);
}

TEST(ScenarioGenerators, PeriodicBursts) {
  Scenario s = MustParse(Scn(Gen("{every: 6h, burst: 3, start: 1h}")));
  std::vector<Millis> expected;
  for (Millis at : {1 * kHour, 7 * kHour, 13 * kHour, 19 * kHour})
    expected.insert(expected.end(), 3, at);
  EXPECT_EQ(SubmitTimes(Only(s).workload), expected);

  s = MustParse(Scn(Gen("{every: 6h, burst: 3, start: 1h, until: 13h}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload),
            (std::vector<Millis>{kHour, kHour, kHour, 7 * kHour, 7 * kHour, 7 * kHour}));

  s = MustParse(Scn(Gen("{every: 6h, burst: 3, count: 4}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{0, 0, 0, 6 * kHour}));

  // Without burst: one job each time.
  s = MustParse(Scn(Gen("{every: 8h}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{0, 8 * kHour, 16 * kHour}));
}

TEST(ScenarioGenerators, GivenTimes) {
  Scenario s = MustParse(Scn(Gen("{at: [3h, 1h, 2h]}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{kHour, 2 * kHour, 3 * kHour}));
  // `count` takes the earliest, `until` and `start` bound the times, the horizon too.
  s = MustParse(Scn(Gen("{at: [3h, 1h, 2h], count: 2}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{kHour, 2 * kHour}));
  s = MustParse(Scn(Gen("{at: [3h, 1h, 2h], until: 2h}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{kHour}));
  s = MustParse(Scn(Gen("{at: [3h, 1h, 2h], start: 2h}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{2 * kHour, 3 * kHour}));
  s = MustParse(Scn(Gen("{at: [1h, 2d]}")));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{kHour}));
  // Without a horizon, given times need no count or until.
  s = MustParse(Scn(Gen("{at: [1h, 2d]}"), ""));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{kHour, 2 * kDay}));
}

TEST(ScenarioGenerators, ArrivalErrors) {
  struct Case {
    std::string arrivals;
    std::string path;
    std::string problem;
  };
  const Case cases[] = {
      {"{}", "workloads[0].arrivals: ", "give exactly one of per_hour (Poisson), every"},
      {"{per_hour: 1, every: 1h}", "workloads[0].arrivals: ", "give exactly one of"},
      {"{every: 1h, at: [1h]}", "workloads[0].arrivals: ", "give exactly one of"},
      {"{start: 1h}", "workloads[0].arrivals: ", "give exactly one of"},
      {"{per_hour: 1, burst: 3}", "workloads[0].arrivals.burst: ", "burst goes with every"},
      {"{at: [1h], burst: 3}", "workloads[0].arrivals.burst: ", "burst goes with every"},
      {"{per_hour: 0}", "workloads[0].arrivals.per_hour: ", "must be above 0"},
      {"{per_hour: -1}", "workloads[0].arrivals.per_hour: ", "must not be negative"},
      {"{every: 0s}", "workloads[0].arrivals.every: ", "must be above 0"},
      {"{every: 1h, burst: 0}", "workloads[0].arrivals.burst: ", "must be at least 1"},
      {"{every: 1h, count: -1}", "workloads[0].arrivals.count: ", "must not be negative"},
      {"{at: 1h}", "workloads[0].arrivals.at: ", "expected a list"},
      {"{at: [1h, soon]}", "workloads[0].arrivals.at[1]: ", "soon"},
      {"{per_hours: 1}", "workloads[0].arrivals.per_hours: ", "did you mean 'per_hour'?"},
      {"hourly", "workloads[0].arrivals: ", "expected a mapping"},
  };
  for (const Case& c : cases) {
    const std::string yaml = Scn(Gen(c.arrivals));
    const std::string e = ScenarioError(yaml);
    EXPECT_TRUE(HasSubstr(e, c.path)) << c.arrivals;
    EXPECT_TRUE(HasSubstr(e, c.problem)) << c.arrivals;
  }
  // Positioned at the arrivals' value.
  const std::string yaml = Scn(Gen("{per_hour: 1, every: 1h}"));
  EXPECT_TRUE(
      StartsWith(ScenarioError(yaml), Pos(yaml, "{per_hour") + ": workloads[0].arrivals: "));
  // A generator needs arrivals and work.
  EXPECT_TRUE(HasSubstr(ScenarioError(Scn("  - name: w\n    work: 1h\n"
                                          "    job: {queue: shared, priority_class: normal}\n")),
                        "workloads[0]: missing required field 'arrivals'"));
  EXPECT_TRUE(HasSubstr(ScenarioError(Scn("  - name: w\n    arrivals: {every: 1h}\n"
                                          "    job: {queue: shared, priority_class: normal}\n")),
                        "workloads[0]: missing required field 'work'"));
}

TEST(ScenarioGenerators, HorizonNeededForOpenEndedArrivals) {
  for (const char* arrivals : {"{per_hour: 1}", "{every: 1h}", "{every: 1h, burst: 2}"}) {
    const std::string yaml = Scn(Gen(arrivals), "");
    const std::string e = ScenarioError(yaml);
    EXPECT_TRUE(StartsWith(
        e, Pos(yaml, std::string("arrivals: ") + arrivals, 0, 10) + ": workloads[0].arrivals: "))
        << e;
    EXPECT_TRUE(HasSubstr(e, "without a horizon, give count or until")) << arrivals;
  }
  Scenario s = MustParse(Scn(Gen("{per_hour: 1, count: 7}"), ""));
  EXPECT_EQ(Only(s).workload.jobs.size(), 7u);
  s = MustParse(Scn(Gen("{per_hour: 60, until: 2h}"), ""));
  EXPECT_GT(Only(s).workload.jobs.size(), 60u);
  EXPECT_LT(SubmitTimes(Only(s).workload).back(), 2 * kHour);
  s = MustParse(Scn(Gen("{every: 1h, until: 3h}"), ""));
  EXPECT_EQ(SubmitTimes(Only(s).workload), (std::vector<Millis>{0, kHour, 2 * kHour}));
}

// 2000 jobs of the given work distribution.
std::vector<Millis> Draw(const std::string& work, const std::string& extra = "") {
  Scenario s = MustParse(Scn(Gen("{every: 1m, count: 2000}", work, extra), ""));
  return Works(Only(s).workload);
}

double Mean(const std::vector<Millis>& v) {
  double sum = 0;
  for (Millis x : v) sum += static_cast<double>(x);
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

TEST(ScenarioGenerators, Distributions) {
  std::vector<Millis> w = Draw("2h");
  ASSERT_EQ(w.size(), 2000u);
  EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](Millis x) { return x == 2 * kHour; }));
  w = Draw("90");  // a bare number is seconds
  EXPECT_EQ(w.at(0), 90 * kSecond);

  w = Draw("{uniform: [1h, 2h]}");
  EXPECT_TRUE(
      std::all_of(w.begin(), w.end(), [](Millis x) { return x >= kHour && x <= 2 * kHour; }));
  EXPECT_NEAR(Mean(w), 1.5 * kHours, 0.05 * kHours);
  EXPECT_NE(*std::min_element(w.begin(), w.end()), *std::max_element(w.begin(), w.end()));

  w = Draw("{exponential: 1h}");
  EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](Millis x) { return x >= 1; }));
  EXPECT_NEAR(Mean(w), kHours, 0.1 * kHours);

  w = Draw("{lognormal: {median: 1h, sigma: 0.5}}");
  std::vector<Millis> sorted = w;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NEAR(static_cast<double>(sorted[1000]), kHours, 0.1 * kHours);
  EXPECT_NEAR(Mean(w), kHours * std::exp(0.125), 0.1 * kHours);

  w = Draw("{choice: [1h, 2h], weights: [3, 1]}");
  const auto ones = std::count(w.begin(), w.end(), kHour);
  EXPECT_EQ(ones + std::count(w.begin(), w.end(), 2 * kHour), 2000);
  EXPECT_NEAR(static_cast<double>(ones) / 2000.0, 0.75, 0.05);

  w = Draw("{choice: [10m, 20m, 30m]}");  // equal weights
  for (Millis x : {10 * kMinute, 20 * kMinute, 30 * kMinute}) {
    EXPECT_NEAR(static_cast<double>(std::count(w.begin(), w.end(), x)) / 2000.0, 1.0 / 3, 0.05);
  }
}

TEST(ScenarioGenerators, DistributionErrors) {
  struct Case {
    std::string work;
    std::string path;
    std::string problem;
  };
  const Case cases[] = {
      {"{choice: [1h, 2h], weights: [1]}", "workloads[0].work.weights",
       "give one weight per choice (2)"},
      {"{choice: [1h, 2h], weights: [1, 2, 3]}", "workloads[0].work.weights",
       "give one weight per choice (2)"},
      {"{choice: [1h], weights: [-1]}", "workloads[0].work.weights[0]", "must not be negative"},
      {"{choice: []}", "workloads[0].work.choice", "list at least one value"},
      {"{uniform: [1h, 2h], weights: [1]}", "workloads[0].work.weights", "weights go with choice"},
      {"{uniform: [1h, 2h], exponential: 1h}", "workloads[0].work",
       "give exactly one of uniform, exponential, lognormal, choice"},
      {"{}", "workloads[0].work", "give exactly one of"},
      {"{uniform: [2h, 1h]}", "workloads[0].work.uniform", "high must not be below low"},
      {"{uniform: [1h]}", "workloads[0].work.uniform", "expected [low, high]"},
      {"{lognormal: {median: 1h}}", "workloads[0].work.lognormal",
       "missing required field 'sigma'"},
      {"{lognormal: {median: 1h, sigma: -1}}", "workloads[0].work.lognormal.sigma",
       "must not be negative"},
      {"{exponential: soon}", "workloads[0].work.exponential", "soon"},
      {"{normal: 1h}", "workloads[0].work.normal", "unknown field 'normal'"},
      {"[1h, 2h]", "workloads[0].work", "expected a duration, got a list"},
  };
  for (const Case& c : cases) {
    const std::string e = ScenarioError(Scn(Gen("{every: 1h}", c.work)));
    EXPECT_TRUE(HasSubstr(e, c.path + ": ") || HasSubstr(e, c.path + "[")) << c.work << ": " << e;
    EXPECT_TRUE(HasSubstr(e, c.problem)) << c.work;
  }
  const std::string yaml = Scn(Gen("{every: 1h}", "{choice: [1h, 2h], weights: [1]}"));
  EXPECT_TRUE(StartsWith(ScenarioError(yaml), Pos(yaml, "[1]") + ": workloads[0].work.weights: "));
}

TEST(ScenarioGenerators, GpusDistribution) {
  Scenario s =
      MustParse(Scn(Gen("{every: 1m, count: 300}", "1h", "    gpus: {choice: [0.5, 2, 4]}\n")));
  std::map<std::int64_t, int> seen;
  for (const sim::SimJob& j : Only(s).workload.jobs) {
    ASSERT_EQ(j.job.groups.size(), 1u);
    EXPECT_EQ(j.job.groups[0].count, 2);  // the template's tasks
    ++seen[j.job.groups[0].request.gpu.value()];
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_GT(seen[500], 0);
  EXPECT_GT(seen[2000], 0);
  EXPECT_GT(seen[4000], 0);

  // A constant replaces the template's GPUs; without `gpus` the template's stay.
  s = MustParse(Scn(Gen("{every: 1h}", "1h", "    gpus: 8\n")));
  EXPECT_EQ(Only(s).workload.jobs.at(0).job.groups.at(0).request.gpu.value(), 8000);
  s = MustParse(Scn(Gen("{every: 1h}", "1h")));
  EXPECT_EQ(Only(s).workload.jobs.at(0).job.groups.at(0).request.gpu.value(), 1000);

  EXPECT_TRUE(HasSubstr(ScenarioError(Scn(Gen("{every: 1h}", "1h", "    gpus: {choice: [-1]}\n"))),
                        "workloads[0].gpus.choice[0]: must not be negative"));
  for (const char* zero : {"0", "{uniform: [0, 2]}", "{choice: [1, 0]}"}) {
    EXPECT_TRUE(HasSubstr(
        ScenarioError(Scn(Gen("{every: 1h}", "1h", std::string("    gpus: ") + zero + "\n"))),
        "workloads[0].gpus: every draw must be above 0 GPUs"))
        << zero;
  }
  // A template without GPUs has none to replace: the distribution would be lost.
  const std::string yaml =
      Scn("  - name: w\n    arrivals: {every: 1h}\n    work: 1h\n"
          "    job: {queue: shared, priority_class: normal, cpu: 4}\n"
          "    gpus: {choice: [1, 2]}\n");
  const std::string e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "{choice: [1, 2]}") + ": workloads[0].gpus: ")) << e;
  EXPECT_TRUE(HasSubstr(e, "asks for no GPUs"));
}

TEST(ScenarioGenerators, EstimatesCheckpointsAndKind) {
  Scenario s = MustParse(Scn(Gen("{every: 1h}", "{uniform: [1h, 2h]}")));
  for (const sim::SimJob& j : Only(s).workload.jobs) {
    EXPECT_EQ(j.job.runtime_estimate, j.work);  // factor 1 by default
    EXPECT_EQ(j.checkpoint_cost, 0);
  }
  s = MustParse(
      Scn(Gen("{every: 1h}", "{uniform: [1h, 2h]}",
              "    estimate_factor: 1.5\n    checkpoint_cost: 30s\n    kind: training\n")));
  ASSERT_FALSE(Only(s).workload.jobs.empty());
  for (const sim::SimJob& j : Only(s).workload.jobs) {
    EXPECT_EQ(j.job.runtime_estimate, std::llround(static_cast<double>(j.work) * 1.5));
    EXPECT_EQ(j.checkpoint_cost, 30 * kSecond);
    EXPECT_EQ(j.kind, sim::WorkKind::kTraining);
  }
  s = MustParse(Scn(Gen("{every: 1h}", "1h", "    estimate_factor: 0\n")));
  for (const sim::SimJob& j : Only(s).workload.jobs) EXPECT_EQ(j.job.runtime_estimate, 0);

  EXPECT_TRUE(HasSubstr(ScenarioError(Scn(Gen("{every: 1h}", "1h", "    estimate_factor: -1\n"))),
                        "workloads[0].estimate_factor: must not be negative"));
  EXPECT_TRUE(HasSubstr(ScenarioError(Scn(Gen("{every: 1h}", "1h", "    kind: service\n"))),
                        "workloads[0].kind: expected one of: training, batch, inference"));
  EXPECT_TRUE(HasSubstr(ScenarioError(Scn(Gen("{every: 1h}", "1h", "    service: {}\n"))),
                        "workloads[0].service: only inference workloads have a service"));
  EXPECT_TRUE(HasSubstr(ScenarioError(Scn(Gen("{every: 1h}", "1h", "    arival: {}\n"))),
                        "workloads[0].arival: unknown field 'arival'"));
}

// ---- Inference services ----

constexpr const char* kReplica = "{queue: shared, priority_class: high, gpus: 1, cpu: 8}";

// An inference workload `chat` with the given service fields, replica job and extra fields.
std::string Service(const std::string& service, const std::string& job = kReplica,
                    const std::string& extra = "") {
  return "  - name: chat\n    kind: inference\n    job: " + job + "\n    service:\n" + service +
         extra;
}

constexpr const char* kMinimalService = "      rate: {base: 100}\n      replica_rate: 10\n";

TEST(ScenarioInference, Defaults) {
  Scenario s = MustParse(Scn(Service(kMinimalService)));
  const SimConfiguration& c = Only(s);
  EXPECT_TRUE(c.workload.jobs.empty());
  ASSERT_EQ(c.workload.services.size(), 1u);
  const sim::InferenceService& svc = c.workload.services[0];
  const sim::InferenceService defaults;
  EXPECT_EQ(svc.name, "chat");
  EXPECT_EQ(svc.rate.base, 100);
  EXPECT_EQ(svc.rate.diurnal, 0);
  EXPECT_EQ(svc.rate.peak, defaults.rate.peak);
  EXPECT_TRUE(svc.rate.spikes.empty());
  EXPECT_EQ(svc.replica_rate, 10);
  EXPECT_EQ(svc.target_utilization, 0.7);
  EXPECT_EQ(svc.min_replicas, 1);
  EXPECT_EQ(svc.max_replicas, 64);
  EXPECT_EQ(svc.scale_interval, kMinute);
  EXPECT_EQ(svc.startup, 0);
  EXPECT_EQ(svc.slo, 200);
  EXPECT_EQ(svc.timeout, 30 * kSecond);
  EXPECT_EQ(QueueName(c, svc.replica.queue), "shared");
  EXPECT_EQ(ClassName(c, svc.replica.priority_class), "high");
  ASSERT_EQ(svc.replica.groups.size(), 1u);
  EXPECT_EQ(svc.replica.groups[0].count, 1);
  EXPECT_EQ(svc.replica.groups[0].request.gpu.value(), 1000);
  EXPECT_EQ(svc.replica.groups[0].request.cpu.value(), 8000);
}

TEST(ScenarioInference, AllFields) {
  Scenario s = MustParse(Scn(Service(R"(      rate: {base: 1200, diurnal: 0.6, peak: 15h,
             spikes: [{at: 2h, duration: 30m, factor: 3}]}
      replica_rate: 40
      target_utilization: 0.8
      replicas: {min: 4, max: 96}
      scale_interval: 2m
      startup: 90s
      slo: 250ms
      timeout: 10s
)",
                                     "{queue: research, priority_class: normal, gpus: 1, "
                                     "gpu_types: [A100]}")));
  const SimConfiguration& c = Only(s);
  ASSERT_EQ(c.workload.services.size(), 1u);
  const sim::InferenceService& svc = c.workload.services[0];
  EXPECT_EQ(svc.rate.base, 1200);
  EXPECT_EQ(svc.rate.diurnal, 0.6);
  EXPECT_EQ(svc.rate.peak, 15 * kHour);
  ASSERT_EQ(svc.rate.spikes.size(), 1u);
  EXPECT_EQ(svc.rate.spikes[0].at, 2 * kHour);
  EXPECT_EQ(svc.rate.spikes[0].duration, 30 * kMinute);
  EXPECT_EQ(svc.rate.spikes[0].factor, 3);
  EXPECT_EQ(svc.replica_rate, 40);
  EXPECT_EQ(svc.target_utilization, 0.8);
  EXPECT_EQ(svc.min_replicas, 4);
  EXPECT_EQ(svc.max_replicas, 96);
  EXPECT_EQ(svc.scale_interval, 2 * kMinute);
  EXPECT_EQ(svc.startup, 90 * kSecond);
  EXPECT_EQ(svc.slo, 250);
  EXPECT_EQ(svc.timeout, 10 * kSecond);
  EXPECT_EQ(QueueName(c, svc.replica.queue), "research");
  EXPECT_EQ(GpuTypes(c, svc.replica), (std::set<std::string>{"A100"}));

  // Bounds given one at a time; target_utilization may be 1.
  s = MustParse(Scn(Service(std::string(kMinimalService) +
                            "      replicas: {max: 3}\n      target_utilization: 1\n")));
  EXPECT_EQ(Only(s).workload.services.at(0).min_replicas, 1);
  EXPECT_EQ(Only(s).workload.services.at(0).max_replicas, 3);
  EXPECT_EQ(Only(s).workload.services.at(0).target_utilization, 1);
}

TEST(ScenarioInference, ReplicaIsOneTask) {
  for (const char* job :
       {"{queue: shared, priority_class: high, gpus: 1, tasks: 2}",
        "{queue: shared, priority_class: high, groups: [{tasks: 1, gpus: 1}, {tasks: 1}]}",
        "{queue: shared, priority_class: high, groups: [{tasks: 3, gpus: 1}]}"}) {
    const std::string yaml = Scn(Service(kMinimalService, job));
    const std::string e = ScenarioError(yaml);
    EXPECT_TRUE(StartsWith(e, Pos(yaml, job) + ": workloads[0].job: ")) << e;
    EXPECT_TRUE(HasSubstr(e, "a replica is one task")) << job;
  }
  // One group of one task is one task.
  Scenario s = MustParse(
      Scn(Service(kMinimalService, "{queue: shared, priority_class: high, groups: [{gpus: 1}]}")));
  EXPECT_EQ(Only(s).workload.services.size(), 1u);
  EXPECT_TRUE(HasSubstr(ScenarioError(Scn("  - name: chat\n    kind: inference\n    service:\n" +
                                          std::string(kMinimalService))),
                        "workloads[0]: missing required field 'job'"));
}

TEST(ScenarioInference, Errors) {
  struct Case {
    std::string service;
    std::string path;
    std::string problem;
  };
  const std::string rate = "      rate: {base: 100}\n";
  const Case cases[] = {
      {rate + "      replica_rate: 10\n      target_utilization: 0\n",
       "workloads[0].service.target_utilization: ", "must be above 0 and at most 1"},
      {rate + "      replica_rate: 10\n      target_utilization: 1.5\n",
       "workloads[0].service.target_utilization: ", "must be above 0 and at most 1"},
      {rate + "      replica_rate: 10\n      target_utilization: -0.5\n",
       "workloads[0].service.target_utilization: ", "must not be negative"},
      {rate + "      replica_rate: 10\n      replicas: {min: 5, max: 2}\n",
       "workloads[0].service.replicas: ", "max must not be below min"},
      {rate + "      replica_rate: 10\n      replicas: {min: 100}\n",
       "workloads[0].service.replicas: ", "max must not be below min"},
      {rate + "      replica_rate: 10\n      replicas: {min: -1}\n",
       "workloads[0].service.replicas.min: ", "must not be negative"},
      {rate + "      replica_rate: 0\n", "workloads[0].service.replica_rate: ", "must be above 0"},
      {rate, "workloads[0].service: ", "missing required field 'replica_rate'"},
      {"      replica_rate: 10\n", "workloads[0].service: ", "missing required field 'rate'"},
      {"      rate: {base: 100, diurnal: 1.5}\n      replica_rate: 10\n",
       "workloads[0].service.rate.diurnal: ", "must be between 0 and 1"},
      {"      rate: {peak: 1h}\n      replica_rate: 10\n",
       "workloads[0].service.rate: ", "missing required field 'base'"},
      {"      rate: {base: 1, spikes: [{at: 1h, factor: 2}]}\n      replica_rate: 10\n",
       "workloads[0].service.rate.spikes[0]: ", "missing required field 'duration'"},
      {rate + "      replica_rate: 10\n      scale_interval: 0s\n",
       "workloads[0].service.scale_interval: ", "must be above 0"},
      {rate + "      replica_rate: 10\n      timeout: 0s\n",
       "workloads[0].service.timeout: ", "must be above 0"},
      {rate + "      replica_rate: 10\n      autoscale: true\n",
       "workloads[0].service.autoscale: ", "unknown field"},
  };
  for (const Case& c : cases) {
    const std::string e = ScenarioError(Scn(Service(c.service)));
    EXPECT_TRUE(HasSubstr(e, c.path)) << c.service;
    EXPECT_TRUE(HasSubstr(e, c.problem)) << c.service;
  }
  // Without a service.
  EXPECT_TRUE(
      HasSubstr(ScenarioError(Scn("  - name: chat\n    kind: inference\n"
                                  "    job: {queue: shared, priority_class: high, gpus: 1}\n")),
                "workloads[0]: missing required field 'service'"));
}

TEST(ScenarioInference, FieldsOfOtherWorkloads) {
  for (const char* field : {"arrivals: {every: 1h}", "work: 1h", "trace: {file: x.csv}", "gpus: 2",
                            "checkpoint_cost: 30s"}) {
    const std::string yaml =
        Scn(Service(kMinimalService, "{queue: shared, priority_class: high, gpus: 1}",
                    std::string("    ") + field + "\n"));
    const std::string key(field, std::string_view(field).find(':'));
    const std::string e = ScenarioError(yaml);
    EXPECT_TRUE(StartsWith(e, Pos(yaml, "\n    " + key + ":", 0, 5) + ": ")) << e;
    EXPECT_TRUE(HasSubstr(e, "workloads[0]." + key + ": not a field of an inference workload"))
        << e;
  }
}

TEST(ScenarioInference, NeedsAHorizon) {
  const std::string yaml = Scn(Gen("{every: 1h, count: 2}") + Service(kMinimalService), "");
  const std::string e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "rate: {base", 0, 0) + ": workloads[1].service: ")) << e;
  EXPECT_TRUE(HasSubstr(e, "an inference service needs a horizon"));
}

// ---- Traces ----

// The Philly sample as a trace workload with the given trace fields and job template.
std::string Philly(const std::string& trace_fields,
                   const std::string& job = "{priority_class: normal, cpu: 4, memory: 32Gi}") {
  return "  - name: philly\n    kind: training\n    trace: {file: " + kPhilly + ", format: philly" +
         trace_fields + "}\n    job: " + job + "\n";
}

trace::Trace ReadPhilly() {
  Result<trace::Trace> t =
      trace::ReadTraceFile(kSourceDir + "/data/traces/philly/philly_first2000.csv", "philly");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : trace::Trace{};
}

TEST(ScenarioTrace, PhillyQueuesByMap) {
  Scenario s = MustParse(Scn(Philly(", queues: {6214e9: research, \"*\": shared}"), ""));
  const SimConfiguration& c = Only(s);
  ASSERT_EQ(c.workload.jobs.size(), 2000u);
  std::map<std::string, int> queues;
  for (const sim::SimJob& j : c.workload.jobs) ++queues[QueueName(c, j.job.queue)];
  EXPECT_EQ(queues, (std::map<std::string, int>{{"research", 1648}, {"shared", 352}}));

  const trace::Trace tr = ReadPhilly();
  ASSERT_EQ(tr.jobs.size(), 2000u);
  for (std::size_t i = 0; i < tr.jobs.size(); ++i) {
    const sim::SimJob& j = c.workload.jobs[i];
    ASSERT_EQ(j.job.name, tr.jobs[i].name);
    EXPECT_EQ(j.job.submit_time, tr.jobs[i].submit);
    EXPECT_EQ(j.work, std::max<Millis>(1, tr.jobs[i].duration));
    EXPECT_EQ(j.job.groups.at(0).count, tr.jobs[i].tasks);
    EXPECT_EQ(j.job.groups.at(0).request.gpu.value(), tr.jobs[i].gpu_per_task.value());
    EXPECT_EQ(j.job.groups.at(0).request.cpu.value(), 4000);  // the template's
    EXPECT_EQ(j.kind, sim::WorkKind::kTraining);
    EXPECT_EQ(j.workload, "philly");
    EXPECT_EQ(j.job.runtime_estimate, j.work);
    EXPECT_EQ(ClassName(c, j.job.priority_class), "normal");
  }
  EXPECT_TRUE(s.skipped_rows.empty());
}

TEST(ScenarioTrace, QueueResolution) {
  // A trace queue named like a leaf queue is taken as it is; the rest go to job.queue.
  const std::string yaml = Scn(
      Philly(", queues: {6214e9: research}", "{queue: shared, priority_class: normal}"), "", "");
  std::string with_leaf = yaml;
  with_leaf.replace(with_leaf.find("    - {name: shared, parent: org}"), 0,
                    "    - {name: 11cb48, parent: org}\n");
  Scenario s = MustParse(with_leaf);
  std::map<std::string, int> queues;
  for (const sim::SimJob& j : Only(s).workload.jobs) ++queues[QueueName(Only(s), j.job.queue)];
  EXPECT_EQ(queues,
            (std::map<std::string, int>{{"research", 1648}, {"11cb48", 227}, {"shared", 125}}));

  // Not mapped, not a leaf queue and no job.queue: the trace line that has it.
  const std::string bad = Scn(Philly(", queues: {6214e9: research}"), "");
  const std::string e = ScenarioError(bad);
  const trace::Trace tr = ReadPhilly();
  const auto first = std::find_if(tr.jobs.begin(), tr.jobs.end(),
                                  [](const trace::TraceJob& j) { return j.queue != "6214e9"; });
  ASSERT_NE(first, tr.jobs.end());
  EXPECT_TRUE(StartsWith(e, Pos(bad, kPhilly) + ": workloads[0].trace.file: ")) << e;
  EXPECT_TRUE(HasSubstr(
      e, fmt::format("{}:{}: trace queue '{}' is not mapped", kPhilly, first->line, first->queue)));

  // Mapping to a queue that is not a leaf.
  const std::string e2 = ScenarioError(Scn(Philly(", queues: {\"*\": org}"), ""));
  EXPECT_TRUE(HasSubstr(e2, "workloads[0].trace.queues.*: unknown leaf queue 'org'"));
}

TEST(ScenarioTrace, AssignOverridesTheMap) {
  const std::string configs = R"(configurations:
  - name: one-queue
    assign:
      philly: {queue: shared}
  - name: mapped
)";
  // The map names a queue only the second configuration has.
  std::string yaml = Scn(Philly(", queues: {6214e9: research, \"*\": shared}"), "", configs);
  Scenario s = MustParse(yaml);
  ASSERT_EQ(s.configurations.size(), 2u);
  for (const sim::SimJob& j : s.configurations[0].workload.jobs) {
    ASSERT_EQ(QueueName(s.configurations[0], j.job.queue), "shared");
  }
  int research = 0;
  for (const sim::SimJob& j : s.configurations[1].workload.jobs) {
    research += QueueName(s.configurations[1], j.job.queue) == "research";
  }
  EXPECT_EQ(research, 1648);
  EXPECT_EQ(s.configurations[0].workload.jobs.size(), 2000u);
}

TEST(ScenarioTrace, LimitAndHorizon) {
  Scenario s = MustParse(Scn(Philly(", limit: 10, queues: {\"*\": shared}"), ""));
  ASSERT_EQ(Only(s).workload.jobs.size(), 10u);
  EXPECT_EQ(Only(s).workload.jobs[9].job.name, ReadPhilly().jobs.at(9).name);

  s = MustParse(Scn(Philly(", queues: {\"*\": shared}"), "horizon: 1d\n"));
  const trace::Trace tr = ReadPhilly();
  const auto within = std::count_if(tr.jobs.begin(), tr.jobs.end(),
                                    [](const trace::TraceJob& j) { return j.submit < kDay; });
  ASSERT_GT(within, 0);
  ASSERT_LT(within, 2000);
  EXPECT_EQ(static_cast<std::ptrdiff_t>(Only(s).workload.jobs.size()), within);
  for (const sim::SimJob& j : Only(s).workload.jobs) EXPECT_LT(j.job.submit_time, kDay);
}

TEST(ScenarioTrace, Errors) {
  struct Case {
    std::string workload;
    std::string path;
    std::string problem;
  };
  const Case cases[] = {
      {"  - name: p\n    trace: {file: nothing-here.csv}\n"
       "    job: {queue: shared, priority_class: normal}\n",
       "workloads[0].trace.file: ", "cannot open"},
      {"  - name: p\n    trace: {file: " + kPhilly +
           ", format: pilly}\n"
           "    job: {queue: shared, priority_class: normal}\n",
       "workloads[0].trace.format: ", "unknown trace format"},
      {"  - name: p\n    trace: {format: philly}\n    job: {queue: shared, priority_class: "
       "normal}\n",
       "workloads[0].trace: ", "missing required field 'file'"},
      {"  - name: p\n    trace: {file: " + kPhilly +
           ", limit: -1}\n"
           "    job: {queue: shared, priority_class: normal}\n",
       "workloads[0].trace.limit: ", "must not be negative"},
      {"  - name: p\n    trace: {file: " + kPhilly +
           "}\n    arrivals: {every: 1h}\n"
           "    job: {queue: shared, priority_class: normal}\n",
       "workloads[0].arrivals: ", "not a field of a trace workload"},
      {"  - name: p\n    trace: {file: " + kPhilly +
           "}\n    work: 1h\n"
           "    job: {queue: shared, priority_class: normal}\n",
       "workloads[0].work: ", "not a field of a trace workload"},
      {"  - name: p\n    trace: {file: " + kPhilly +
           ", queues: {\"*\": shared}}\n"
           "    job: {cpu: 4}\n",
       "workloads[0].job: ", "no priority class for workload 'p'"},
      {"  - name: p\n    trace: {file: " + kPhilly +
           ", queues: {\"*\": nowhere}}\n"
           "    job: {priority_class: normal}\n",
       "workloads[0].trace.queues.*: ", "unknown leaf queue 'nowhere'"},
  };
  for (const Case& c : cases) {
    const std::string e = ScenarioError(Scn(c.workload, ""));
    EXPECT_TRUE(HasSubstr(e, c.path)) << e;
    EXPECT_TRUE(HasSubstr(e, c.problem)) << e;
  }
}

constexpr const char* kBadPhilly = R"(timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:00:00,60.0,1,60.0,a
2017-10-09 07:01:00,60.0,x,60.0,a
2017-10-09 07:02:00,120.0,2,240.0,b
)";

TEST(ScenarioTrace, BadRows) {
  TempDir dir;
  dir.Write("bad.csv", kBadPhilly);
  const std::string workload =
      "  - name: p\n    trace: {file: bad.csv, format: philly, queues: {\"*\": shared}}\n"
      "    job: {priority_class: normal}\n";
  const std::string yaml = Scn(workload, "");
  const std::string e = ScenarioError(yaml, dir.path());
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "bad.csv") + ": workloads[0].trace.file: ")) << e;
  EXPECT_TRUE(HasSubstr(e, "1 bad rows (set skip_bad_rows: true to skip them)"));
  EXPECT_TRUE(HasSubstr(e, "bad.csv:3: num_gpus"));

  std::string skipping = workload;
  skipping.replace(skipping.find("format: philly"), 0, "skip_bad_rows: true, ");
  Scenario s = MustParse(Scn(skipping, "", "configurations:\n  - name: a\n  - name: b\n"),
                         std::nullopt, dir.path());
  ASSERT_EQ(s.configurations.size(), 2u);
  for (const SimConfiguration& c : s.configurations) {
    ASSERT_EQ(c.workload.jobs.size(), 2u);
    EXPECT_EQ(c.workload.jobs[0].job.submit_time, 0);
    EXPECT_EQ(c.workload.jobs[1].job.submit_time, 2 * kMinute);
    EXPECT_EQ(MilliGpus(c.workload.jobs[1].job), 2000);
  }
  ASSERT_EQ(s.skipped_rows.size(), 1u);  // once, not once per configuration
  EXPECT_TRUE(StartsWith(s.skipped_rows[0], "bad.csv:3: num_gpus"));

  // Two workloads of one file: each decides for itself whether bad rows fail.
  const std::string both = Scn(skipping +
                                   "  - name: q\n    trace: {file: bad.csv, format: philly, "
                                   "queues: {\"*\": shared}}\n"
                                   "    job: {priority_class: normal}\n",
                               "");
  EXPECT_TRUE(HasSubstr(ScenarioError(both, dir.path()), "workloads[1].trace.file: 1 bad rows"));
}

// A row within the trace's limits whose job, the template's fields with the row's, is not one any
// reader of jobs accepts (job::ValidateJobSpec): a bad row, named with its line and field. A
// trace's id is kept as the job's name even where the API would refuse it as an object name.
TEST(ScenarioTrace, RowsPassTheJobValidator) {
  TempDir dir;
  // 300 days of work, estimated at twice that: beyond the longest estimate a job may give.
  dir.Write("long.csv", R"(timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:00:00,60.0,1,60.0,a
2017-10-09 07:01:00,25920000.0,1,25920000.0,a
)");
  const std::string workload =
      "  - name: p\n    trace: {file: long.csv, format: philly, queues: {\"*\": shared}}\n"
      "    estimate_factor: 2\n    job: {priority_class: normal}\n";
  const std::string e = ScenarioError(Scn(workload, ""), dir.path());
  EXPECT_TRUE(HasSubstr(e, "long.csv:3: runtime_estimate")) << e;
  EXPECT_TRUE(HasSubstr(e, "set skip_bad_rows: true")) << e;

  std::string skipping = workload;
  skipping.replace(skipping.find("format: philly"), 0, "skip_bad_rows: true, ");
  Scenario s = MustParse(Scn(skipping, ""), std::nullopt, dir.path());
  ASSERT_EQ(s.configurations.size(), 1u);
  EXPECT_EQ(s.configurations[0].workload.jobs.size(), 1u);
  ASSERT_EQ(s.skipped_rows.size(), 1u);
  EXPECT_TRUE(StartsWith(s.skipped_rows[0], "long.csv:3: runtime_estimate")) << s.skipped_rows[0];

  dir.Write("names.csv", R"(job_id,submit_time,duration,num_gpu
job/task 1,0,60,1
)");
  Scenario named = MustParse(
      Scn("  - name: t\n    trace: {file: names.csv, format: tiresias, queues: {\"*\": shared}}\n"
          "    job: {priority_class: normal}\n",
          ""),
      std::nullopt, dir.path());
  ASSERT_EQ(named.configurations.size(), 1u);
  ASSERT_EQ(named.configurations[0].workload.jobs.size(), 1u);
  EXPECT_EQ(named.configurations[0].workload.jobs[0].job.name, "job/task 1");
}

// trace.split: a Tiresias job of 16 GPUs is 2 tasks of 8 by default and 16 of 1 with `gpu`;
// trace.processors_per_gpu for SWF; a wrong value names its field.
TEST(ScenarioTrace, SplitAndProcessorsPerGpu) {
  TempDir dir;
  dir.Write("t.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
            "a,16,0,1,vgg19,100,30\n");
  dir.Write("log.swf", "; Version: 2.2\n1 0 -1 100 64 -1 -1 64 -1 -1 1 1 1 -1 -1 -1 -1 -1\n");
  const auto workload = [](const std::string& trace) {
    return "  - name: t\n    trace: {" + trace + ", queues: {\"*\": shared}}\n" +
           "    job: {priority_class: normal}\n";
  };
  // The job's tasks and its GPUs in all.
  const auto shape = [&](const std::string& trace) {
    Scenario s = MustParse(Scn(workload(trace), ""), std::nullopt, dir.path());
    EXPECT_EQ(s.configurations.size(), 1u);
    if (s.configurations.empty() || s.configurations[0].workload.jobs.size() != 1) {
      return std::pair<std::int64_t, std::int64_t>{-1, -1};
    }
    const Job& job = s.configurations[0].workload.jobs[0].job;
    return std::pair<std::int64_t, std::int64_t>{job.groups[0].count, MilliGpus(job)};
  };
  using Shape = std::pair<std::int64_t, std::int64_t>;
  EXPECT_EQ(shape("file: t.csv, format: tiresias"), (Shape{2, 16000}));
  EXPECT_EQ(shape("file: t.csv, format: tiresias, split: node"), (Shape{2, 16000}));
  EXPECT_EQ(shape("file: t.csv, format: tiresias, split: gpu"), (Shape{16, 16000}));
  EXPECT_EQ(shape("file: log.swf"), (Shape{8, 64000}));  // 64 processors, 64 GPUs
  EXPECT_EQ(shape("file: log.swf, format: swf, processors_per_gpu: 16"), (Shape{1, 4000}));

  const std::string bad_split = Scn(workload("file: t.csv, split: count"), "");
  const std::string e = ScenarioError(bad_split, dir.path());
  EXPECT_TRUE(HasSubstr(e, ": workloads[0].trace.split: unknown task split \"count\"")) << e;
  EXPECT_TRUE(HasSubstr(e, "unknown task split \"count\""));
  const std::string bad_ratio = Scn(workload("file: log.swf, processors_per_gpu: 0"), "");
  EXPECT_TRUE(
      HasSubstr(ScenarioError(bad_ratio, dir.path()), "workloads[0].trace.processors_per_gpu"));
}

constexpr const char* kOpenb =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    R"(p0,4000,8192,1,1000,H800,LS,Running,0,3600,0
p1,4000,8192,2,1000,A100|V100,BE,Running,60,7260,60
p2,4000,8192,1,500,V100|T4,LS,Running,120,3720,120
p3,2000,4096,1,250,,high,Running,180,3780,180
)";

TEST(ScenarioTrace, OpenbGpuModels) {
  TempDir dir;
  dir.Write("openb.csv", kOpenb);
  const std::string workload =
      "  - name: pods\n    trace: {file: openb.csv, format: openb, queues: {\"*\": shared}}\n"
      "    job: {priority_class: normal}\n";
  Scenario s = MustParse(Scn(workload, "", "configurations:\n  - name: a\n  - name: b\n"),
                         std::nullopt, dir.path());
  ASSERT_EQ(s.configurations.size(), 2u);
  for (const SimConfiguration& c : s.configurations) {
    const std::vector<sim::SimJob>& jobs = c.workload.jobs;
    ASSERT_EQ(jobs.size(), 3u);
    EXPECT_EQ(jobs[0].job.name, "p0");
    EXPECT_EQ(GpuTypes(c, jobs[0].job), (std::set<std::string>{"H800"}));
    EXPECT_EQ(jobs[1].job.name, "p1");
    EXPECT_EQ(GpuTypes(c, jobs[1].job), (std::set<std::string>{"A100"}));
    EXPECT_EQ(MilliGpus(jobs[1].job), 2000);
    EXPECT_EQ(jobs[1].work, 7200 * kSecond);
    EXPECT_EQ(jobs[2].job.name, "p3");
    EXPECT_TRUE(jobs[2].job.gpu_types.empty());  // any model
    EXPECT_EQ(jobs[2].job.groups.at(0).request.gpu.value(), 250);
    EXPECT_EQ(jobs[2].job.groups.at(0).request.cpu.value(), 2000);
    EXPECT_EQ(jobs[2].job.groups.at(0).request.memory.value(), 4096);
    EXPECT_EQ(ClassName(c, jobs[0].job.priority_class), "normal");  // LS: no such class
    EXPECT_EQ(ClassName(c, jobs[2].job.priority_class), "high");    // the row's qos
  }
  ASSERT_EQ(s.skipped_rows.size(), 1u);  // once, not once per configuration
  EXPECT_EQ(s.skipped_rows[0], "openb.csv:4: no GPU model of the cluster among the row's models");

  // A configuration's assign gives the class of every job, as it gives the queue.
  s = MustParse(Scn(workload, "",
                    "configurations:\n  - name: a\n    assign: {pods: {priority_class: normal}}\n"),
                std::nullopt, dir.path());
  for (const sim::SimJob& j : Only(s).workload.jobs) {
    EXPECT_EQ(ClassName(Only(s), j.job.priority_class), "normal") << j.job.name;
  }
}

// ---- Failures and outages ----

TEST(ScenarioFailures, RandomOutages) {
  const std::string failures = "failures: {mtbf: 2d, repair: 1h}\n";
  const std::string yaml = Scn(kBatch, "horizon: 20d\n", failures);
  Scenario s = MustParse(yaml);
  const std::vector<sim::NodeOutage>& outages = Only(s).workload.outages;
  ASSERT_GT(outages.size(), 10u);  // about 30: 3 nodes, 20 days, one in 2 days each
  std::set<NodeId> nodes;
  for (std::size_t i = 0; i < outages.size(); ++i) {
    EXPECT_LT(outages[i].node, 3u);
    EXPECT_GE(outages[i].at, 0);
    EXPECT_LT(outages[i].at, 20 * kDay);
    EXPECT_EQ(outages[i].duration, kHour);
    if (i > 0) {
      EXPECT_LE(outages[i - 1].at, outages[i].at);
    }
    nodes.insert(outages[i].node);
  }
  EXPECT_EQ(nodes.size(), 3u);

  // Deterministic for a seed, the same in every configuration, different for another seed.
  auto same = [](const std::vector<sim::NodeOutage>& a, const std::vector<sim::NodeOutage>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].node != b[i].node || a[i].at != b[i].at || a[i].duration != b[i].duration) {
        return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(same(outages, Only(MustParse(yaml)).workload.outages));
  Scenario two = MustParse(
      Scn(kBatch, "horizon: 20d\n", failures + "configurations:\n  - name: a\n  - name: b\n"));
  ASSERT_EQ(two.configurations.size(), 2u);
  EXPECT_TRUE(same(outages, two.configurations[0].workload.outages));
  EXPECT_TRUE(same(outages, two.configurations[1].workload.outages));
  EXPECT_FALSE(same(outages, Only(MustParse(yaml, 2)).workload.outages));
  EXPECT_FALSE(same(
      outages, Only(MustParse(Scn(kBatch, "seed: 2\nhorizon: 20d\n", failures))).workload.outages));

  // Errors.
  std::string e = ScenarioError(Scn(Gen("{every: 1h, count: 3}"), "", failures));
  EXPECT_TRUE(StartsWith(e, Pos(Scn(Gen("{every: 1h, count: 3}"), "", failures), "{mtbf") +
                                ": failures: random failures need a horizon"));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\n", "failures: {mtbf: 0s, repair: 1h}\n"));
  EXPECT_TRUE(HasSubstr(e, "failures.mtbf: must be above 0"));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\n", "failures: {mtbf: 1d}\n"));
  EXPECT_TRUE(HasSubstr(e, "failures: missing required field 'repair'"));
}

TEST(ScenarioFailures, GivenOutages) {
  Scenario s = MustParse(Scn(kBatch, "horizon: 1d\n",
                             "outages:\n  - {node: h800-1, at: 2h, duration: 30m}\n"
                             "  - {node: a100, at: 1h, duration: 1h}\n"));
  const std::vector<sim::NodeOutage>& o = Only(s).workload.outages;
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].node, 1u);
  EXPECT_EQ(o[0].at, 2 * kHour);
  EXPECT_EQ(o[0].duration, 30 * kMinute);
  EXPECT_EQ(o[1].node, 2u);
  EXPECT_EQ(o[1].at, kHour);

  const std::string yaml = Scn(kBatch, "horizon: 1d\n",
                               "outages:\n  - {node: h800-1, at: 2h, duration: 30m}\n"
                               "  - {node: h900-0, at: 1h, duration: 1h}\n");
  const std::string e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "h900-0") + ": outages[1].node: unknown node 'h900-0'")) << e;
  EXPECT_TRUE(
      HasSubstr(ScenarioError(Scn(kBatch, "horizon: 1d\n", "outages:\n  - {node: a100, at: 1h}\n")),
                "outages[0]: missing required field 'duration'"));
}

// ---- Seeds ----

TEST(ScenarioSeed, OverrideChangesTheDrawsNotTheirParameters) {
  const std::string yaml =
      Scn(Gen("{per_hour: 20}", "{uniform: [1h, 2h]}", "    gpus: {choice: [1, 2, 4]}\n") +
              "  - name: periodic\n    arrivals: {every: 2h, burst: 2}\n"
              "    work: {exponential: 1h}\n"
              "    job: {queue: shared, priority_class: normal, gpus: 1}\n",
          "seed: 5\nhorizon: 1d\n");
  const Scenario base = MustParse(yaml);
  const Scenario again = MustParse(yaml);
  const Scenario same = MustParse(yaml, 5);
  const Scenario other = MustParse(yaml, 6);
  EXPECT_EQ(base.seed, 5u);
  EXPECT_EQ(other.seed, 6u);
  const sim::Workload& a = Only(base).workload;
  const sim::Workload& b = Only(other).workload;
  EXPECT_EQ(SubmitTimes(a), SubmitTimes(Only(again).workload));
  EXPECT_EQ(Works(a), Works(Only(again).workload));
  EXPECT_EQ(SubmitTimes(a), SubmitTimes(Only(same).workload));
  EXPECT_EQ(Works(a), Works(Only(same).workload));
  EXPECT_NE(SubmitTimes(a), SubmitTimes(b));
  EXPECT_NE(Works(a), Works(b));

  // The distributions stay the scenario's: bounds, GPU choices and the periodic arrivals.
  for (const sim::Workload* w : {&a, &b}) {
    std::vector<Millis> periodic;
    for (const sim::SimJob& j : w->jobs) {
      if (j.workload == "periodic") {
        periodic.push_back(j.job.submit_time);
        continue;
      }
      EXPECT_GE(j.work, kHour);
      EXPECT_LE(j.work, 2 * kHour);
      const std::int64_t gpus = j.job.groups.at(0).request.gpu.value();
      EXPECT_TRUE(gpus == 1000 || gpus == 2000 || gpus == 4000) << gpus;
      EXPECT_LT(j.job.submit_time, kDay);
    }
    EXPECT_EQ(periodic.size(), 24u);
    EXPECT_EQ(periodic.at(2), 2 * kHour);
  }
}

// ---- Error positions ----

TEST(ScenarioErrors, PositionAndPath) {
  // Top-level fields.
  std::string e = ScenarioError("name: t\nhorizon: 1d\nworkloads: []\n" + std::string(kCluster));
  EXPECT_TRUE(HasSubstr(e, "missing required field 'workloads'"));
  e = ScenarioError(Scn(kBatch, "horizon: soon\n"));
  EXPECT_TRUE(StartsWith(e, "s.yaml:2:10: horizon: "));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\ncycle: {period: 0s}\n"));
  EXPECT_TRUE(HasSubstr(e, "cycle.period: must be above 0"));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\nsample_interval: 0s\n"));
  EXPECT_TRUE(HasSubstr(e, "sample_interval: must be above 0"));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\nlatency_window: 0s\n"));
  EXPECT_TRUE(HasSubstr(e, "latency_window: must be above 0"));
  EXPECT_EQ(MustParse(Scn(kBatch, "horizon: 1d\nlatency_window: 15m\n")).options.latency_window,
            15 * kMinute);
  EXPECT_EQ(MustParse(Scn(kBatch, "horizon: 1d\n")).options.latency_window, kHour);
  e = ScenarioError(Scn(kBatch, "horizon: 1d\nseed: -3\n"));
  EXPECT_TRUE(HasSubstr(e, "seed: must not be negative"));
  e = ScenarioError(Scn(kBatch, "horizon: 1d\nhorizn: 2d\n"));
  EXPECT_TRUE(StartsWith(e, "s.yaml:3:1: horizn: unknown field 'horizn'"));
  EXPECT_TRUE(HasSubstr(e, "did you mean 'horizon'?"));
  e = ScenarioError("name: t\nworkloads:\n" + std::string(kBatch));
  EXPECT_TRUE(HasSubstr(e, "missing required field 'cluster'"));

  // Nested ones, at the offending value.
  std::string yaml = Scn(std::string(kBatch) + Gen("{every: 1h}", "{uniform: [2h, 1h]}"));
  yaml.replace(yaml.rfind("name: w"), 7, "name: u");
  e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "1h]}") + ": workloads[1].work.uniform"));
  EXPECT_TRUE(HasSubstr(e, "high must not be below low"));

  yaml = Scn(Gen("{every: 1h}", "1h"));
  yaml.replace(yaml.find("gpus: 1"), 7, "gpus: 1.5");
  e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "1.5") + ": workloads[0].job.gpus: ")) << e;

  yaml = Scn(Gen("{every: 1h}"));
  yaml.replace(yaml.find("queue: shared"), 13, "queue: shraed");
  e = ScenarioError(yaml);
  EXPECT_TRUE(StartsWith(e, Pos(yaml, "shraed") + ": workloads[0].job.queue: unknown leaf queue"));
}

}  // namespace
}  // namespace arbiter::config
