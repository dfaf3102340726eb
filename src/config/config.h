// The configuration loader: YAML cluster and job files into the model (model.h), and the quantity
// parsers shared with the command-line flags. docs/configuration.md is the reference of the file
// formats.
//
// Every error is one line, `FILE:LINE:COL: FIELD.PATH: problem` (line and column 1-based), e.g.
// `cluster.yaml:14:9: queues[2].quota.H800.nominal: must not be negative, got -4`. Loading stops
// at the first error. Capacities are parsed as exact decimals into integers (never through a
// floating-point value).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "arbiter/quantity.h"
#include "arbiter/status.h"
#include "core/state/cluster_state.h"
#include "job/spec.h"

namespace arbiter::config {

// Who may call the server: a bearer token and what it may do.
struct TokenSpec {
  // kViewer reads everything (jobs, queues, nodes, events, logs) and changes nothing: a wall
  // screen's dashboard.
  enum class Role : std::uint8_t { kAdmin, kUser, kAgent, kViewer };
  std::string name;  // the identity jobs record as their submitter
  // The SHA-256 (hex) of the secret sent in `Authorization: Bearer TOKEN`: the server keeps no
  // secret. From `token_sha256:`, or computed from `token_file:` or `token:`.
  std::string sha256;
  // Given in the file itself (`token:`): for development only (`arbiter server --dev`).
  bool inline_secret = false;
  Role role = Role::kUser;
  std::vector<std::string> queues;  // kUser: the leaf queues it may submit to (empty: none)
  // kUser: the priority classes its jobs may have, at submission and after (empty: any).
  std::vector<std::string> priority_classes;
  // kAgent, a join token: the nodes it may register as, by name or with '*' wildcards ("gpu-*");
  // empty: any configured node. Registration exchanges it for the node's own credential.
  std::vector<std::string> nodes;
  Millis expires = -1;  // Unix time (ms) after which the token is refused; -1: never
};
const char* RoleName(TokenSpec::Role role);  // "admin", "user", "agent", "viewer"

// The tokens the shipped examples write in their `server:` section (examples/cluster.yaml, the
// README and docs/): published, so a server that takes one lets in anyone who read them. The one
// list of them; `arbiter lint` flags a configuration that uses one.
inline constexpr std::array<std::string_view, 3> kExampleTokens = {
    "example-admin-token", "example-alice-token", "example-agent-token"};
// The example token `token` is, compared by digest (whether given as token, token_file or
// token_sha256), or empty.
std::string_view ExampleToken(const TokenSpec& token);

// The `server:` section, read only by `arbiter server`.
struct ServerConfig {
  std::vector<TokenSpec> tokens;
  Millis cycle_min_interval = 200;                // at most one cycle per this interval
  Millis cycle_period = 5 * kMillisPerSecond;     // a cycle at least this often
  std::int64_t max_active_jobs_per_user = 10000;  // pending, held and running; 0: no limit
  // The GPUs (milli-GPU) those jobs ask for together; 0: no limit.
  std::int64_t max_active_gpu_milli_per_user = 0;
  std::int64_t max_body_bytes = 1 << 20;  // larger request bodies are refused
  // Long polls and event streams open at once, in all and per token (more are refused, 429).
  // Each costs a connection and a little memory, no thread.
  std::int64_t max_watchers = 10000;
  std::int64_t max_watchers_per_token = 1000;
  // The recent events the server keeps serialized for its watchers: a live event stream that
  // falls further behind than this is ended with `event: dropped` and its resume cursor.
  std::int64_t event_window_bytes = 64LL << 20;
  // Node agents (without --virtual-nodes). A node whose agent has not been heard from for
  // `node_lost_timeout` is lost: out of the schedulable pool, its jobs requeued or failed.
  Millis node_lost_timeout = 30 * kMillisPerSecond;
  // How long an agent's sync waits for new assignments before it answers (its heartbeat).
  Millis agent_sync_wait = 2 * kMillisPerSecond;
  // After the grace period's SIGTERM, how long before SIGKILL.
  Millis kill_after = 10 * kMillisPerSecond;
  // Where tasks keep their checkpoints, one directory per job below it, the same on every node
  // (shared storage) so a requeued job resumes wherever it runs next. Empty: each agent's
  // work directory.
  std::string checkpoint_root;
};

// A memory quantity written as a bare number, which reads as MiB (`memory: 512` is 512 MiB):
// kept by the readers for lint, which flags the small ones as a likely missing unit (512Gi).
struct BareMemory {
  enum class Kind : std::uint8_t {
    kNode,     // a node's `memory`
    kDevice,   // a node's `gpus.memory` or `devices[].memory`
    kTaskGpu,  // a job's (or job template's) `gpu_memory`
    kTask,     // a job's (or job template's) `memory`
  };
  Kind kind = Kind::kNode;
  std::string field;  // as the file wrote it: "nodes[2].memory", "jobs[0].groups[1].gpu_memory"
  std::string text;   // the number as written: "512"
  std::int64_t mib = 0;
};

// A field written in an accepted alias spelling (`preemptable:` for `preemptible:`), kept for
// lint, which notes the spelling to use.
struct SpellingAlias {
  std::string field;      // as the file wrote it: "queues[2].preemptable"
  std::string canonical;  // "preemptible"
};

struct ClusterConfig {
  ClusterSpec cluster;
  EngineOptions engine;  // `scheduler:` section; defaults of engine.h where not given
  ServerConfig server;   // `server:` section
  // The nodes' memory fields written as bare numbers, in file order (for lint).
  std::vector<BareMemory> bare_memory;
  // Fields written in an alias spelling, in file order (for lint).
  std::vector<SpellingAlias> aliases;
};

// Reads and parses a cluster file. Besides types and values it checks, with positions, duplicate
// names, unknown parent queues, queue cycles, unknown quota resources and node topology paths
// against the declared levels; ClusterState::Create repeats the semantic checks without positions.
Result<ClusterConfig> LoadClusterFile(const std::string& path);
// As LoadClusterFile, on text; `file_name` prefixes every error.
Result<ClusterConfig> ParseCluster(std::string_view yaml, const std::string& file_name);

// Reads and parses a jobs file. Jobs name leaf queues, priority classes, GPU types and topology
// levels; the names are resolved against `state`. Ids are first_id, first_id + 1, ... in file
// order, after `replicas` expansion. Each job goes the way of a job of the server's API: read into
// a job::JobSpec, checked by job::ValidateJobSpec against the limits of job/limits.h,
// resolved by job::ToJob; their errors are reported at the field's line. `bare_memory`, when
// given, receives the tasks' memory fields written as bare numbers, once per entry (for lint).
Result<std::vector<Job>> LoadJobsFile(const std::string& path, const ClusterState& state,
                                      JobId first_id = 1,
                                      std::vector<BareMemory>* bare_memory = nullptr);
Result<std::vector<Job>> ParseJobs(std::string_view yaml, const std::string& file_name,
                                   const ClusterState& state, JobId first_id = 1,
                                   std::vector<BareMemory>* bare_memory = nullptr);

// A job file for `arbiter submit -f`: one job, or a jobs file (`jobs:`), read as a jobs file and
// checked by job::ValidateJobSpec, but not resolved (the server does that). `replicas` gives
// that many specs (name-0, name-1, ...; an idempotency key gets the same suffix). The fields the
// server sets itself (user, submit_time) are dropped, each with a note `FILE:LINE: PATH:
// ignored: why` added to `notes`. `complete`, when given, changes each spec before it is checked
// (the command's flags, which override the file).
Result<std::vector<job::JobSpec>> ParseJobSpecs(std::string_view yaml, const std::string& file_name,
                                                const std::function<void(job::JobSpec&)>& complete,
                                                std::vector<std::string>* notes);

// Quantity parsers. An error reads `FIELD: problem`, naming `field`. Negative values are errors.
//
// GPUs: "2", "0.5", "500m" (milli-GPU); at most 1 milli-GPU of precision.
Result<MilliGpu> ParseGpus(std::string_view text, std::string_view field);
// A queue's quota value (nominal, borrowing_limit, lending_limit, max) as the cluster file and the
// quota API (`PUT /v1/queues/NAME/quota`) both take it: GPUs as ParseGpus reads them, at most
// limits::kMaxQuotaMilli (so that the queue tree's sums never overflow).
Result<MilliGpu> ParseQuotaGpus(std::string_view text, std::string_view field);
// The fields of one resource's quota, in the cluster file's spelling.
inline constexpr std::array<std::string_view, 4> kQuotaFields = {"nominal", "borrowing_limit",
                                                                 "lending_limit", "max"};
// CPU cores: "16", "0.25", "250m" (milli-cores).
Result<MilliCpu> ParseCpu(std::string_view text, std::string_view field);
// Memory in MiB: "81920" (a bare number is MiB), "512Mi", "80Gi", "1Ti", "1Pi", "1048576Ki";
// decimals allowed ("1.5Gi"); the result must be a whole number of MiB.
Result<std::int64_t> ParseMiB(std::string_view text, std::string_view field);
// Durations in milliseconds: "90" (a bare number is seconds), "500ms", "30s", "15m", "4h", "7d";
// decimals allowed ("1.5h"); the result must be a whole number of milliseconds.
Result<Millis> ParseDuration(std::string_view text, std::string_view field);
// A duration as a configuration writes it, which ParseDuration reads back: "7d", "1d12h30m",
// "90s" (as "1m30s"), "1.5s" (as "1s500ms"), "0s".
std::string DurationText(Millis d);
// A UTC time as YYYY-MM-DDTHH:MM:SSZ, in Unix milliseconds; nullopt when malformed.
std::optional<Millis> ParseUtcTime(std::string_view text);

}  // namespace arbiter::config
