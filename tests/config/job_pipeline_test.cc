// One job pipeline: a job written in a jobs file (YAML), read as `arbiter submit -f` reads it and
// sent as it sends it, and written as the JSON of the server's API, comes out the same Job; the
// shipped examples go through `submit -f`'s reader.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "config/config.h"
#include "core/state/cluster_state.h"
#include "job/limits.h"
#include "job/resolve.h"
#include "store/codec.h"
#include "store/store.h"

namespace arbiter::config {
namespace {

constexpr const char* kCluster = R"(topology:
  levels: [spine, leaf]
priority_classes:
  - {name: P0, value: 1000, preemptible: false}
  - {name: P1, value: 100}
queues:
  - name: org
  - {name: training, parent: org}
nodes:
  - name: h800-{i}
    count: 4
    gpus: {model: H800, count: 8, memory: 80Gi}
    cpu: 128
    memory: 1Ti
    labels: {pool: train}
    topology: {spine: spine-0, leaf: "leaf-{i/2}"}
)";

// Every field a job may have, in YAML.
constexpr const char* kYamlJob = R"(name: train
queue: training
priority_class: P1
gpu_types: [H800]
topology: {level: leaf, mode: preferred}
node_selector: {pool: train}
tolerations: [{key: dedicated, value: train, effect: NoSchedule}, {operator: Exists}]
labels: {app: llm}
affinity: [{match: {app: db}, level: leaf, anti: true, required: false}, {match: {app: llm}}]
runtime_estimate: 2h
checkpoint_interval: 30m
restart_overhead: 1m
groups:
  - {name: launcher, cpu: 2, memory: 8Gi}
  - {name: workers, tasks: 4, gpus: 8, gpu_memory: 80Gi, cpu: 32, memory: 512Gi}
)";

// The same job in the API's JSON.
constexpr const char* kJsonJob = R"({
  "name": "train", "queue": "training", "priority_class": "P1",
  "gpu_types": ["H800"], "topology": {"level": "leaf", "mode": "preferred"},
  "node_selector": {"pool": "train"},
  "tolerations": [{"key": "dedicated", "value": "train", "effect": "NoSchedule"},
                  {"operator": "Exists"}],
  "labels": {"app": "llm"},
  "affinity": [{"match": {"app": "db"}, "level": "leaf", "anti": true, "required": false},
               {"match": {"app": "llm"}}],
  "runtime_estimate_ms": 7200000, "checkpoint_interval_ms": 1800000, "restart_overhead_ms": 60000,
  "groups": [{"name": "launcher", "cpu_milli": 2000, "memory_mib": 8192},
             {"name": "workers", "tasks": 4, "gpu_milli": 8000, "gpu_memory_mib": 81920,
              "cpu_milli": 32000, "memory_mib": 524288}]
})";

ClusterState MakeState(const std::string& yaml) {
  Result<ClusterConfig> config = ParseCluster(yaml, "c.yaml");
  EXPECT_TRUE(config.ok()) << config.status().message();
  Result<ClusterState> state = ClusterState::Create(config->cluster);
  EXPECT_TRUE(state.ok()) << state.status().message();
  return std::move(state).value();
}

// The server's path: the API's JSON decoded, validated and resolved.
Job FromJson(const std::string& text, const ClusterState& state, JobId id) {
  Result<job::JobSpec> spec = store::DecodeJobSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(job::ValidateJobSpec(*spec).ok()) << job::ValidateJobSpec(*spec).message();
  Result<Job> job = job::ToJob(id, *spec, state);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return std::move(job).value();
}

// A jobs file of the one job: "jobs:" and the job indented as a list entry.
std::string JobsFile(const std::string& job) {
  std::string out = "jobs:\n";
  std::size_t start = 0;
  bool first = true;
  while (start < job.size()) {
    const std::size_t end = job.find('\n', start);
    out += (first ? "  - " : "    ") + job.substr(start, end - start) + "\n";
    first = false;
    start = end == std::string::npos ? job.size() : end + 1;
  }
  return out;
}

TEST(JobPipeline, YamlFileSubmitFileAndJsonApiGiveTheSameJob) {
  const ClusterState state = MakeState(kCluster);
  // A jobs file (arbiter plan).
  Result<std::vector<Job>> file = ParseJobs(JobsFile(kYamlJob), "jobs.yaml", state, 5);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->size(), 1u);
  // `arbiter submit -f`: read and checked on the client, sent as JSON, taken by the server.
  std::vector<std::string> notes;
  Result<std::vector<job::JobSpec>> read = ParseJobSpecs(kYamlJob, "job.yaml", {}, &notes);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_TRUE(notes.empty());
  const Job submitted = FromJson(store::EncodeJobSpec(read->front()), state, 5);
  // The API.
  const Job api = FromJson(kJsonJob, state, 5);

  const job::JobSpec expected = job::ToSpec(file->front(), state);
  EXPECT_EQ(job::ToSpec(submitted, state), expected) << store::EncodeJobSpec(expected);
  EXPECT_EQ(job::ToSpec(api, state), expected) << store::EncodeJobSpec(expected);
  EXPECT_EQ(expected.groups.size(), 2u);
  EXPECT_EQ(expected.affinity.size(), 2u);
  EXPECT_EQ(expected.affinity[1].level, "node");  // the default level
  for (const Job* job : std::vector<const Job*>{&file->front(), &submitted, &api}) {
    EXPECT_EQ(job->id, 5u);
    EXPECT_EQ(job->topology.mode, ConstraintMode::kPreferred);
    EXPECT_EQ(job->groups[1].request.gpu.value(), 8000);
    EXPECT_EQ(job->total_gpu().value(), 32000);
  }
}

TEST(JobPipeline, OneDefaultForUnnamedGroups) {
  const ClusterState state = MakeState(kCluster);
  const std::string head = "name: j\nqueue: training\npriority_class: P1\n";
  for (const auto& [yaml, json, names] :
       std::vector<std::tuple<std::string, std::string, std::vector<std::string>>>{
           {head + "gpus: 1\n", R"({"groups": [{"gpu_milli": 1000}]})", {"main"}},
           {head + "groups: [{gpus: 1}]\n", R"({"groups": [{"gpu_milli": 1000}]})", {"main"}},
           {head + "groups: [{gpus: 1}, {tasks: 2}]\n",
            R"({"groups": [{"gpu_milli": 1000},
             {"tasks": 2}]})",
            {"group-0", "group-1"}}}) {
    Result<std::vector<Job>> file = ParseJobs(JobsFile(yaml), "jobs.yaml", state, 1);
    ASSERT_TRUE(file.ok()) << file.status().message();
    std::string body = json;
    body.insert(1, R"("name": "j", "queue": "training", "priority_class": "P1", )");
    const Job api = FromJson(body, state, 1);
    ASSERT_EQ(file->front().groups.size(), names.size());
    for (std::size_t g = 0; g < names.size(); ++g) {
      EXPECT_EQ(file->front().groups[g].name, names[g]);
      EXPECT_EQ(api.groups[g].name, names[g]);
    }
  }
}

// `arbiter submit -f examples/jobs.yaml`: every job of the shipped jobs file is read (affinity,
// replicas and all), each `user:` is dropped with a note naming its line (the server records the
// submitter from the token), and each resolves to the job `arbiter plan` makes of it.
TEST(JobPipeline, SubmitFileTakesTheShippedJobsFile) {
  const std::string examples = std::string(ARBITER_SOURCE_DIR) + "/examples/";
  Result<ClusterConfig> cluster = LoadClusterFile(examples + "cluster.yaml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  Result<ClusterState> state = ClusterState::Create(cluster->cluster);
  ASSERT_TRUE(state.ok()) << state.status().message();
  Result<std::vector<Job>> planned = LoadJobsFile(examples + "jobs.yaml", *state);
  ASSERT_TRUE(planned.ok()) << planned.status().message();

  std::string text;
  {
    std::ifstream in(examples + "jobs.yaml");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<std::string> notes;
  Result<std::vector<job::JobSpec>> specs = ParseJobSpecs(text, "examples/jobs.yaml", {}, &notes);
  ASSERT_TRUE(specs.ok()) << specs.status().message();
  ASSERT_EQ(specs->size(), planned->size());
  std::size_t users = 0;
  for (const Job& job : *planned) users += job.user.empty() ? 0 : 1;
  EXPECT_GT(users, 0u) << "the example should show a user: field";
  std::size_t user_notes = 0;
  for (const std::string& note : notes) {
    if (note.find("user: ignored: the server records the submitter") != std::string::npos) {
      ++user_notes;
    }
  }
  EXPECT_EQ(user_notes, 12u);  // one per entry with a user (before replicas)
  bool affinity = false;
  for (std::size_t i = 0; i < specs->size(); ++i) {
    const job::JobSpec& spec = (*specs)[i];
    EXPECT_TRUE(spec.user.empty());
    Result<Job> job = job::ToJob(planned->at(i).id, spec, *state);
    ASSERT_TRUE(job.ok()) << job.status().message();
    Job expected = planned->at(i);
    expected.user.clear();
    expected.submit_time = 0;
    EXPECT_EQ(job::ToSpec(*job, *state), job::ToSpec(expected, *state)) << spec.name;
    affinity = affinity || !spec.affinity.empty();
  }
  EXPECT_TRUE(affinity) << "the example should show affinity";
}

TEST(JobPipeline, SubmitFileNotesServerFieldsAndAppliesFlags) {
  std::vector<std::string> notes;
  Result<std::vector<job::JobSpec>> specs = ParseJobSpecs(
      "jobs:\n  - name: a\n    user: mallory\n    submit_time: 1h\n    queue: q\n"
      "    priority_class: p\n    replicas: 2\n    idempotency_key: k\n",
      "f.yaml", [](job::JobSpec& s) { s.queue = "other"; }, &notes);
  ASSERT_TRUE(specs.ok()) << specs.status().message();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].name, "a-0");
  EXPECT_EQ((*specs)[1].name, "a-1");
  EXPECT_EQ((*specs)[1].idempotency_key, "k-1");
  EXPECT_EQ((*specs)[0].queue, "other");
  EXPECT_TRUE((*specs)[0].user.empty());
  EXPECT_EQ((*specs)[0].submit_time, 0);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "f.yaml:3: jobs[0].user: ignored: the server records the submitter from "
            "the token");
  EXPECT_EQ(notes[1],
            "f.yaml:4: jobs[0].submit_time: ignored: the server records the time it "
            "accepts the job");
  // A check that fails names the file's line and the field as written.
  Result<std::vector<job::JobSpec>> bad =
      ParseJobSpecs("name: a\nqueue: q\npriority_class: p\ntasks: 0\n", "f.yaml", {}, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "f.yaml:4:8: tasks: must be at least 1, got 0");
  Result<std::vector<job::JobSpec>> missing =
      ParseJobSpecs("name: a\npriority_class: p\n", "f.yaml", {}, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "f.yaml:1:1: missing required field 'queue'");
}

// The limits are one set: the validator of every reader refuses the same values.
TEST(JobPipeline, OneSetOfLimits) {
  job::JobSpec spec;
  spec.name = "j";
  spec.queue = "q";
  spec.priority_class = "p";
  spec.groups.push_back(TaskGroup{"main", 1, {}});
  ASSERT_TRUE(job::ValidateJobSpec(spec).ok());
  auto field = [&](auto change) {
    job::JobSpec s = spec;
    change(s);
    Status st = job::ValidateJobSpec(s);
    EXPECT_EQ(st.code(), st.ok() ? StatusCode::kOk : StatusCode::kInvalidArgument);
    return st.field();
  };
  EXPECT_EQ(field([](job::JobSpec& s) { s.groups[0].count = limits::kMaxTasksPerJob + 1; }),
            "groups[0].tasks");
  EXPECT_EQ(field([](job::JobSpec& s) {
              s.groups[0].count = limits::kMaxTasksPerJob;
              s.groups.push_back(TaskGroup{"b", 1, {}});
            }),
            "groups");
  EXPECT_EQ(field([](job::JobSpec& s) {
              s.groups[0].request.gpu = MilliGpu(limits::kMaxGpuMilliPerTask + kMilliPerGpu);
            }),
            "groups[0].gpu_milli");
  EXPECT_EQ(field([](job::JobSpec& s) { s.name = std::string(limits::kMaxNameBytes + 1, 'n'); }),
            "name");
  EXPECT_EQ(field([](job::JobSpec& s) { s.runtime_estimate = limits::kMaxDuration + 1; }),
            "runtime_estimate_ms");
  EXPECT_EQ(field([](job::JobSpec& s) {
              for (std::size_t i = 0; i <= limits::kMaxLabels; ++i) s.labels[std::to_string(i)];
            }),
            "labels");
  EXPECT_EQ(field([](job::JobSpec& s) { s.max_retries = limits::kMaxRetries + 1; }), "max_retries");
  EXPECT_EQ(field([](job::JobSpec& s) { s.name = std::string(limits::kMaxNameBytes, 'n'); }), "");
}

}  // namespace
}  // namespace arbiter::config
