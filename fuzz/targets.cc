// The bodies of the fuzz targets (targets.h). Every parser gets the input as its caller gives it;
// errors are expected and dropped; FuzzCheck states what must hold for every input.
#include "fuzz/targets.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/snapshot.h"
#include "core/state/cluster_state.h"
#include "job/limits.h"
#include "job/resolve.h"
#include "scenario/scenario.h"
#include "server/agent_wire.h"
#include "store/binary.h"
#include "store/codec.h"
#include "store/store.h"
#include "trace/trace.h"

namespace arbiter::fuzz {
namespace {

// A broken invariant: says which and aborts, so that libFuzzer keeps the input as a crash (and a
// regression test fails).
void FuzzCheck(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

std::string_view Text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// store::ParseJson as the server calls it.
Result<nlohmann::json> ParseBody(std::string_view text) { return store::ParseJson(text, "body"); }

// A small cluster with what job specs name: leaf queues, priority classes, GPU types, topology
// levels, labels and taints (examples/cluster.yaml, cut down).
constexpr std::string_view kClusterYaml = R"(
topology:
  levels: [spine, leaf]
priority_classes:
  - {name: P0, value: 1000, preemptible: false}
  - {name: P1, value: 100, min_runtime: 30m}
  - {name: P2, value: 10}
queues:
  - name: org
  - name: inference
    parent: org
    quota:
      L40S: {nominal: 4}
  - name: training
    parent: org
    weight: 3
    quota:
      H800: {nominal: 12, borrowing_limit: 4}
      A100-80G: {nominal: 4, borrowing_limit: 4}
  - name: batch
    parent: org
    quota:
      gpu: {nominal: 4, max: 12}
nodes:
  - name: h800-{i}
    count: 2
    gpus: {model: H800, count: 8, memory: 80Gi, nvlink_group_size: 8}
    cpu: 192
    memory: 2Ti
    labels: {pool: train}
    topology: {spine: spine-0, leaf: "leaf-{i}"}
  - name: a100-0
    gpus: {model: A100-80G, count: 8, memory: 80Gi, nvlink_group_size: 4}
    cpu: 128
    memory: 1Ti
    labels: {pool: train}
    topology: {spine: spine-1, leaf: leaf-2}
  - name: l40s-0
    gpus: {model: L40S, count: 4, memory: 48Gi}
    cpu: 64
    memory: 512Gi
    labels: {pool: inference}
    taints: [{key: dedicated, value: inference, effect: NoSchedule}]
    topology: {spine: spine-1, leaf: leaf-3}
  - name: cpu-0
    cpu: 64
    memory: 256Gi
    topology: {spine: spine-1, leaf: leaf-3}
)";

struct Base {
  config::ClusterConfig config;
  std::optional<ClusterState> state;
};

const Base& TheBase() {
  static const Base* base = [] {
    auto* b = new Base;
    Result<config::ClusterConfig> config = config::ParseCluster(kClusterYaml, "fuzz-cluster.yaml");
    FuzzCheck(config.ok(), "the fuzz targets' cluster loads");
    b->config = std::move(config).value();
    Result<ClusterState> state = ClusterState::Create(b->config.cluster);
    FuzzCheck(state.ok(), "the fuzz targets' cluster state is created");
    b->state.emplace(std::move(state).value());
    return b;
  }();
  return *base;
}

// What decodes encodes again to the same value (for specs the store would write).
void CheckSpecRoundTrips(const job::JobSpec& spec) {
  const std::string text = store::EncodeJobSpec(spec);
  Result<job::JobSpec> again = store::DecodeJobSpec(text);
  FuzzCheck(again.ok(), "an encoded job spec decodes");
  FuzzCheck(*again == spec, "a job spec's JSON round trip keeps it");
  FuzzCheck(store::EncodeJobSpec(*again) == text, "a job spec encodes to one text");
  const std::string bytes = store::EncodeJobSpecBinary(spec);
  job::JobSpec binary;
  FuzzCheck(store::DecodeJobSpecBinary(bytes, binary).ok(), "a binary job spec decodes");
  FuzzCheck(binary == spec, "a job spec's binary round trip keeps it");
}

std::string QuotaText(const std::map<std::string, QuotaSpec>& quota) {
  return store::Dump(store::QuotaToJson(quota));
}

void TraceChecks(const Result<trace::Trace>& trace) {
  if (!trace.ok()) return;
  Millis previous = 0;
  for (const trace::TraceJob& job : trace->jobs) {
    FuzzCheck(job.submit >= previous, "a trace's jobs are sorted by submit time, from 0");
    previous = job.submit;
    FuzzCheck(job.tasks >= 1, "a trace job has a task");
    FuzzCheck(job.duration >= 0, "a trace job's duration is not negative");
    FuzzCheck(job.gpu_per_task.value() >= 0 && job.cpu_per_task.value() >= 0 &&
                  job.memory_per_task.value() >= 0,
              "a trace job's request is not negative");
  }
}

void FuzzTrace(const std::uint8_t* data, std::size_t size, trace::Format format) {
  const std::string_view text = Text(data, size);
  (void)trace::DetectFormat(text);
  const Result<trace::Trace> capped = trace::ReadTrace(text, format, "trace");
  TraceChecks(capped);
  // The error cap lists or counts every bad row, and the same rows as a read that lists them all.
  trace::ReadOptions all;
  all.max_bad_rows_per_kind = 0;
  all.split = trace::TaskSplit::kGpu;
  const Result<trace::Trace> listed = trace::ReadTrace(text, format, "trace", all);
  TraceChecks(listed);
  FuzzCheck(capped.ok() == listed.ok(), "the task split and the error cap fail no read");
  if (!capped.ok() || !listed.ok()) return;
  std::int64_t counted = static_cast<std::int64_t>(capped->bad_rows.size());
  for (const trace::RowCount& more : capped->more_bad_rows) counted += more.rows;
  FuzzCheck(counted == capped->bad_row_count, "every bad row is listed or counted");
  FuzzCheck(listed->bad_row_count == capped->bad_row_count &&
                static_cast<std::int64_t>(listed->bad_rows.size()) == listed->bad_row_count,
            "the error cap counts the rows a read without it lists");
  FuzzCheck(listed->jobs.size() == capped->jobs.size(), "the task split keeps every job");
  for (std::size_t i = 0; i < listed->jobs.size(); ++i) {
    const trace::TraceJob& a = capped->jobs[i];
    const trace::TraceJob& b = listed->jobs[i];
    FuzzCheck(a.tasks * a.gpu_per_task.value() == b.tasks * b.gpu_per_task.value(),
              "the task split keeps a job's GPUs");
  }
}

}  // namespace

void FuzzJobSpec(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = Text(data, size);
  // As Core::Submit: the reader, the validator, the resolver.
  Result<job::JobSpec> spec = store::DecodeJobSpec(body);
  // As a caller holding a JSON document.
  Result<nlohmann::json> json = ParseBody(body);
  if (json.ok()) {
    Result<job::JobSpec> from_json = store::JobSpecFromJson(*json);
    if (spec.ok() && from_json.ok()) {
      FuzzCheck(*spec == *from_json, "DecodeJobSpec and JobSpecFromJson agree");
    }
  }
  if (!spec.ok()) return;
  if (!job::ValidateJobSpec(*spec).ok()) return;
  CheckSpecRoundTrips(*spec);
  const Base& base = TheBase();
  Result<Job> job = job::ToJob(1, *spec, *base.state);
  if (job.ok()) (void)job::ToSpec(*job, *base.state);
}

void FuzzPriorityPatch(const std::uint8_t* data, std::size_t size) {
  // As http.cc's PATCH /v1/jobs/ID.
  Result<nlohmann::json> body = ParseBody(Text(data, size));
  if (!body.ok() || !body->is_object()) return;
  for (const auto& [key, value] : body->items()) {
    if (key != "priority_class") return;
  }
  if (!body->contains("priority_class") || !(*body)["priority_class"].is_string()) return;
  const std::string name = (*body)["priority_class"].get<std::string>();
  (void)TheBase().state->FindPriorityClass(name);
  (void)store::Dump(*body);
}

void FuzzQuota(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = Text(data, size);
  Result<std::map<std::string, QuotaSpec>> decoded = store::DecodeQuota(text, "quota");
  // As http.cc's PUT /v1/queues/Q/quota and Core::SetQueueQuota.
  Result<nlohmann::json> body = ParseBody(text);
  if (!body.ok() || !body->is_object()) return;
  Result<std::map<std::string, QuotaSpec>> quota = store::QuotaFromJson(*body, "quota");
  if (!quota.ok()) return;
  if (decoded.ok()) {
    FuzzCheck(QuotaText(*decoded) == QuotaText(*quota), "DecodeQuota and QuotaFromJson agree");
  }
  const std::string encoded = QuotaText(*quota);
  Result<std::map<std::string, QuotaSpec>> again = store::DecodeQuota(encoded, "quota");
  FuzzCheck(again.ok(), "an encoded quota decodes");
  FuzzCheck(QuotaText(*again) == encoded, "a quota's round trip keeps it");
  ClusterSpec changed = TheBase().config.cluster;
  for (QueueSpec& q : changed.queues) {
    if (q.name == "training") q.quota = *quota;
  }
  (void)ClusterState::Create(changed);
}

void FuzzSnapshotYaml(const std::uint8_t* data, std::size_t size) {
  Result<config::LoadedSnapshot> loaded = config::ParseSnapshot(Text(data, size), "now.yaml");
  if (!loaded.ok()) return;
  FuzzCheck(loaded->state.CheckInvariants().ok(), "a snapshot's state keeps its invariants");
  const std::string text = config::WriteSnapshot(loaded->snapshot);
  Result<config::LoadedSnapshot> again = config::ParseSnapshot(text, "again.yaml");
  FuzzCheck(again.ok(), "a snapshot written again loads");
  FuzzCheck(config::WriteSnapshot(again->snapshot) == text, "a snapshot writes to one text");
  FuzzCheck(again->state.running().size() == loaded->state.running().size() &&
                again->pending.size() == loaded->pending.size(),
            "a snapshot written again has the same jobs");
}

void FuzzClusterYaml(const std::uint8_t* data, std::size_t size) {
  Result<config::ClusterConfig> config = config::ParseCluster(Text(data, size), "cluster.yaml");
  if (!config.ok()) return;
  (void)ClusterState::Create(config->cluster);
}

void FuzzJobsYaml(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = Text(data, size);
  Result<std::vector<Job>> jobs = config::ParseJobs(text, "jobs.yaml", *TheBase().state);
  (void)jobs;
  // As `arbiter submit -f`: the command's flags complete each spec.
  std::vector<std::string> notes;
  Result<std::vector<job::JobSpec>> specs = config::ParseJobSpecs(
      text, "job.yaml", [](job::JobSpec&) {}, &notes);
  if (!specs.ok()) return;
  for (const job::JobSpec& spec : *specs) {
    FuzzCheck(job::ValidateJobSpec(spec).ok(), "submit -f gives valid specs");
    CheckSpecRoundTrips(spec);
  }
}

void FuzzScenarioYaml(const std::uint8_t* data, std::size_t size) {
  (void)config::ParseScenario(Text(data, size), "scenario.yaml", "/nonexistent/arbiter-fuzz");
}

void FuzzTracePhilly(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kPhilly);
}

void FuzzTraceTiresias(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kTiresias);
}

void FuzzTraceOpenb(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kOpenb);
  Result<std::vector<trace::TraceNode>> nodes = trace::ReadOpenbNodes(Text(data, size), "nodes");
  if (!nodes.ok()) return;
  for (const trace::TraceNode& node : *nodes) {
    FuzzCheck(node.gpus >= 0 && node.cpu.value() >= 0 && node.memory.value() >= 0,
              "an openb node's capacity is not negative");
  }
}

void FuzzTraceCsv(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kCsv);
}

void FuzzTraceJson(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kJson);
}

void FuzzTracePai(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kPai);
  // The same text as the task table and as the job table beside it.
  const std::string_view text = Text(data, size);
  TraceChecks(trace::ReadPaiTables(text, "pai_task_table.csv", text, "pai_job_table.csv"));
}

void FuzzTraceHelios(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kHelios);
}

void FuzzTraceSwf(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kSwf);
}

void FuzzTraceSacct(const std::uint8_t* data, std::size_t size) {
  FuzzTrace(data, size, trace::Format::kSacct);
}

void FuzzBinaryRecords(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = Text(data, size);
  job::JobSpec spec;
  if (store::DecodeJobSpecBinary(bytes, spec).ok()) {
    const std::string encoded = store::EncodeJobSpecBinary(spec);
    job::JobSpec again;
    FuzzCheck(store::DecodeJobSpecBinary(encoded, again).ok(), "an encoded spec decodes");
    FuzzCheck(again == spec, "a binary spec's round trip keeps it");
  }
  job::StoredAllocation allocation;
  if (store::DecodeAllocationBinary(bytes, allocation).ok()) {
    const std::string encoded = store::EncodeAllocationBinary(allocation);
    job::StoredAllocation again;
    FuzzCheck(store::DecodeAllocationBinary(encoded, again).ok(), "an encoded allocation decodes");
    FuzzCheck(again == allocation, "a binary allocation's round trip keeps it");
    // The JSON form the API shows.
    Result<job::StoredAllocation> json =
        store::AllocationFromJson(store::AllocationToJson(allocation));
    (void)json;
  }
}

void FuzzQuantity(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = Text(data, size);
  Result<Millis> duration = config::ParseDuration(text, "duration");
  if (duration.ok()) FuzzCheck(*duration >= 0, "a duration is not negative");
  Result<MilliGpu> gpus = config::ParseGpus(text, "gpus");
  Result<MilliCpu> cpu = config::ParseCpu(text, "cpu");
  // GPUs and CPU cores share their units (a whole one, or "m" for a thousandth).
  FuzzCheck(gpus.ok() == cpu.ok(), "ParseGpus and ParseCpu accept the same texts");
  if (gpus.ok()) {
    FuzzCheck(gpus->value() >= 0, "GPUs are not negative");
    FuzzCheck(gpus->value() == cpu->value(), "ParseGpus and ParseCpu agree");
  }
  Result<std::int64_t> mib = config::ParseMiB(text, "memory");
  if (mib.ok()) FuzzCheck(*mib >= 0, "memory is not negative");
}

void FuzzAgentRegister(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = Text(data, size);
  (void)server::UrlHost(text);
  Result<server::RegisterBody> body = server::ParseRegisterBody(text);
  if (!body.ok()) return;
  FuzzCheck(body->devices.size() <= kMaxDevicesPerNode, "a node registers at most its devices");
  FuzzCheck(body->labels.size() <= limits::kMaxLabels, "a node registers at most its labels");
  FuzzCheck(body->log_url.empty() || !server::UrlHost(body->log_url).empty(),
            "a registered log URL has a host");
  FuzzCheck(body->cpu_milli >= 0 && body->memory_mib >= 0, "a node's capacity is not negative");
}

void FuzzAgentSync(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = Text(data, size);
  Result<server::SyncBody> body = server::ParseSyncBody(text);
  if (!body.ok()) return;
  for (const server::TaskReport& r : body->reports) {
    FuzzCheck(r.job >= 1 && r.run >= 0 && r.exit_code >= -1 && r.signal >= 0 && r.checkpoint >= -1,
              "a task report's numbers are in range");
  }
}

void FuzzClientConfig(const std::uint8_t* data, std::size_t size) {
  // As src/cli/client.cc's Connect reads client.yaml (its reader is not a function of its own):
  // yaml-cpp, then `server`, `token`, `token_file` and `ca_file` as strings; any exception is the
  // file's error.
  std::string server, token, ca_file;
  try {
    YAML::Node file = YAML::Load(std::string(Text(data, size)));
    if (file["server"]) server = file["server"].as<std::string>();
    if (file["token"]) token = file["token"].as<std::string>();
    // The command reads the file token_file names; here only its name.
    if (file["token_file"]) token = file["token_file"].as<std::string>();
    if (file["ca_file"]) ca_file = file["ca_file"].as<std::string>();
  } catch (const std::exception&) {
    return;
  }
}

FuzzFunction FindTarget(std::string_view name) {
  static const std::map<std::string_view, FuzzFunction> kTargets = {
      {"job_spec", FuzzJobSpec},
      {"priority_patch", FuzzPriorityPatch},
      {"quota", FuzzQuota},
      {"cluster_yaml", FuzzClusterYaml},
      {"jobs_yaml", FuzzJobsYaml},
      {"scenario_yaml", FuzzScenarioYaml},
      {"snapshot_yaml", FuzzSnapshotYaml},
      {"trace_philly", FuzzTracePhilly},
      {"trace_tiresias", FuzzTraceTiresias},
      {"trace_openb", FuzzTraceOpenb},
      {"trace_csv", FuzzTraceCsv},
      {"trace_json", FuzzTraceJson},
      {"trace_pai", FuzzTracePai},
      {"trace_helios", FuzzTraceHelios},
      {"trace_swf", FuzzTraceSwf},
      {"trace_sacct", FuzzTraceSacct},
      {"binary_records", FuzzBinaryRecords},
      {"quantity", FuzzQuantity},
      {"agent_register", FuzzAgentRegister},
      {"agent_sync", FuzzAgentSync},
      {"client_config", FuzzClientConfig},
  };
  auto it = kTargets.find(name);
  return it == kTargets.end() ? nullptr : it->second;
}

}  // namespace arbiter::fuzz
