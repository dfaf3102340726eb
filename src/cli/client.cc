// The commands that talk to a running server over its HTTP/JSON API (docs/api.md). The server
// address and token come from --server / --token, else ARBITER_SERVER / ARBITER_TOKEN, else the
// user's client file (ARBITER_CONFIG, default ~/.config/arbiter/client.yaml: `server:` and
// `token:`), else http://127.0.0.1:8642 without a token. The address may be several, separated
// by commas (servers sharing one store, one leading): each request follows the leader
// (src/net/follow.h) for up to --failover-timeout (15 s by default with several servers), sending
// the same request again after a 503, and waits for each answer no longer than that (but a long
// poll). Exit status: 0 on success, 1 when the server refuses or cannot be reached, 2 on usage
// errors.
#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "arbiter/quantity.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/history.h"
#include "cli/http.h"
#include "cli/listing.h"
#include "config/config.h"
#include "config/reader.h"
#include "job/limits.h"
#include "net/follow.h"
#include "store/codec.h"
#include "store/store.h"

namespace arbiter::cli {

using Json = nlohmann::json;

std::string FormatGpus(std::int64_t milli) { return limits::FormatGpus(milli); }

struct ClientOptions {
  std::string subcommand;  // the one run: errors name its flags (flags.h)
  std::string server, token, token_file, ca_file, failover_timeout;
  bool json = false;
  // submit
  std::string file, name, queue, priority_class, gpus, gpu_memory, cpu, memory, topology, runtime,
      checkpoint, idempotency_key, shell;
  std::optional<std::int64_t> tasks;
  int max_retries = -1;  // -1: not given
  std::vector<std::string> gpu_types, command, env;
  // logs
  int task = 0;
  std::int64_t tail = -1;
  // jobs (comma-separated lists), queues, nodes
  std::string filter_queue, filter_state, filter_user;
  int limit = 0;
  std::string format;  // -o: listing.h
  bool watch = false;
  // set-quota
  std::string quota_queue, resource, nominal, borrowing_limit, lending_limit, max;
  bool reset = false, remove = false;
  // job ids, node, reason
  std::vector<std::string> ids;
  std::string node, reason;
  // snapshot
  std::string output;
};

namespace {

struct UsageError {
  std::string message;
};

struct Connection {
  std::vector<std::string> servers;  // every address given, in order
  std::string token, ca_file;
  // How long a request goes round the servers for the leader: by default 15 s with several, one
  // try with one (a single server that is down fails at once, as it always has).
  Millis failover_timeout = 0;

  std::string Servers() const {
    std::string out;
    for (const std::string& s : servers) out += (out.empty() ? "" : ",") + s;
    return out;
  }
};

// The address that answered last in this process: the next request goes there first.
std::string& LastAnswered() {
  static std::string last;
  return last;
}

// One attempt: plain HTTP here, https (or anything else) with cpp-httplib, verifying the
// server's certificate.
HttpAnswer SendOnce(const Connection& c, const std::string& base, const HttpRequest& request) {
  if (base.rfind("http://", 0) == 0) return SendPlainHttp(base, request);
  return SendHttps(base, c.ca_file, request);
}

// What an answer says about its server for the leader's follower: a standby's `leader`, the
// error's message, a 503's Retry-After.
net::Outcome OutcomeOf(const HttpAnswer& a) {
  net::Outcome o{a.status, a.error, a.location, std::nullopt, {}, {}, std::nullopt};
  if (a.status >= 300) {
    const Json j = Json::parse(a.body, nullptr, false);
    if (j.is_object()) {
      if (j.contains("leader") && j["leader"].is_string())
        o.leader = j["leader"].get<std::string>();
      if (j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
          j["error"]["message"].is_string())
        o.message = limits::Printable(j["error"]["message"].get<std::string>());
    }
  }
  if (a.status == 503) o.retry_after = net::ParseRetryAfter(a.retry_after);
  return o;
}

// Whether the request of an attempt may have been carried out: it was sent (anything but a
// connection that could not be made) and not answered by a standby (a redirect, or a 503 naming
// the leader or none), which does nothing but answer.
bool MayHaveBeenDone(const HttpAnswer& a, const net::Outcome& o) {
  if (a.status == 0) {
    return a.error != "Connection" && a.error != "ConnectionTimeout" &&
           a.error.rfind("SSL", 0) != 0 && a.error.rfind("https from", 0) != 0;
  }
  return !(a.status == 307 || a.status == 308 || (a.status == 503 && o.leader));
}

std::chrono::seconds AtLeastASecond(std::chrono::milliseconds ms) {
  return std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(ms));
}

// Sends `request` with the token to the leader among the connection's servers (src/net/follow.h):
// the answer of the server that took it, or status 0 with `error` naming every address tried and
// what each said. A 503 is not final: the same request (the same body) is sent again until the
// failover timeout. `maybe_done` (when given) says, for a request no server took, whether any
// attempt may have been carried out all the same (its answer lost, a commit cut off).
HttpAnswer Send(const Connection& c, HttpRequest request, bool* maybe_done = nullptr) {
  if (!c.token.empty()) request.headers.emplace_back("Authorization", "Bearer " + c.token);
  net::LeaderFollower::Settings settings;
  settings.deadline = std::chrono::milliseconds(c.failover_timeout);
  net::LeaderFollower follower(c.servers, settings);
  follower.set_preferred(LastAnswered());
  follower.Begin(request.path);
  const std::chrono::seconds connect = request.connect_timeout, read = request.read_timeout;
  // With a failover timeout, an attempt's wait for its answer ends with it too (a server that
  // accepts and never answers is passed for the next); a long poll's does not, nor does any with
  // one try per server (no timeout to keep).
  const bool bound_read = c.failover_timeout > 0 && !request.long_by_design;
  bool done = false;
  while (true) {
    request.path = follower.path();
    // A connection's wait ends with the deadline (at least a second: a slow link still answers).
    request.connect_timeout = AtLeastASecond(follower.Remaining(connect));
    if (bound_read) request.read_timeout = AtLeastASecond(follower.Remaining(read));
    HttpAnswer answer = SendOnce(c, follower.base(), request);
    const net::Outcome outcome = OutcomeOf(answer);
    done = done || MayHaveBeenDone(answer, outcome);
    const net::LeaderFollower::Decision d = follower.Judge(outcome);
    if (d.action == net::LeaderFollower::Action::kTake) {
      LastAnswered() = follower.base();
      return answer;
    }
    if (d.action == net::LeaderFollower::Action::kGiveUp) {
      if (maybe_done) *maybe_done = done;
      HttpAnswer failed;
      failed.error = follower.Summary();
      return failed;
    }
    if (d.wait.count() > 0) std::this_thread::sleep_for(d.wait);
  }
}

// What a request that no server took says: what each address said.
std::string Unreachable(const Connection& c, const std::string& said) {
  const Millis t = c.failover_timeout;
  const std::string within = t == 0          ? ""
                             : t % 1000 == 0 ? fmt::format(" within {}s", t / 1000)
                                             : fmt::format(" within {}ms", t);
  if (c.servers.size() == 1) {
    const std::string& server = c.servers[0];
    const std::string what =
        said.rfind(server + ": ", 0) == 0 ? said.substr(server.size() + 2) : said;
    if (what.rfind("no answer", 0) != 0) {
      return fmt::format("the Arbiter server at {} did not take the request{}: {}", server, within,
                         what);
    }
    std::string message =
        fmt::format("cannot reach the Arbiter server at {}{}: {}", server, within, what);
    if (what.rfind("no answer (Connection", 0) == 0)
      message += " (start one with `arbiter server`, or point --server / ARBITER_SERVER at it)";
    return message;
  }
  return fmt::format("cannot reach the leader of the Arbiter servers {}{}: {}", c.Servers(), within,
                     said);
}

// The first line of a file holding a token.
std::string ReadToken(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw UsageError{fmt::format("{}: cannot read {}", what, path)};
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

Connection Connect(const ClientOptions& o) {
  Connection c;
  std::string server = o.server;
  c.token = o.token;
  c.ca_file = o.ca_file;
  if (!o.token_file.empty()) c.token = ReadToken(o.token_file, "--token-file");
  if (server.empty()) {
    if (const char* v = std::getenv("ARBITER_SERVER")) server = v;
  }
  if (c.token.empty()) {
    if (const char* v = std::getenv("ARBITER_TOKEN")) c.token = v;
  }
  if (c.token.empty()) {
    if (const char* v = std::getenv("ARBITER_TOKEN_FILE"))
      c.token = ReadToken(v, "ARBITER_TOKEN_FILE");
  }
  if (c.ca_file.empty()) {
    if (const char* v = std::getenv("ARBITER_CA_FILE")) c.ca_file = v;
  }
  std::string timeout = o.failover_timeout;
  if (timeout.empty()) {
    if (const char* v = std::getenv("ARBITER_FAILOVER_TIMEOUT")) timeout = v;
  }
  if (server.empty() || c.token.empty() || c.ca_file.empty()) {
    std::string path;
    if (const char* v = std::getenv("ARBITER_CONFIG")) {
      path = v;
    } else if (const char* home = std::getenv("HOME")) {
      path = std::string(home) + "/.config/arbiter/client.yaml";
    }
    if (!path.empty()) {
      if (std::FILE* f = std::fopen(path.c_str(), "r")) {
        std::fclose(f);
        try {
          YAML::Node file = YAML::LoadFile(path);
          if (server.empty() && file["server"]) server = file["server"].as<std::string>();
          if (c.token.empty() && file["token"]) c.token = file["token"].as<std::string>();
          if (c.token.empty() && file["token_file"])
            c.token = ReadToken(file["token_file"].as<std::string>(), path + ": token_file");
          if (c.ca_file.empty() && file["ca_file"]) c.ca_file = file["ca_file"].as<std::string>();
        } catch (const std::exception& e) {
          throw UsageError{fmt::format("{}: {}", path, e.what())};
        }
      }
    }
  }
  if (server.empty()) server = "http://127.0.0.1:8642";
  c.servers = net::SplitServers(server);
  if (c.servers.empty()) throw UsageError{"--server: no address given"};
  for (const std::string& s : c.servers) {
    if (s.rfind("http://", 0) != 0 && s.rfind("https://", 0) != 0)
      throw UsageError{fmt::format("--server: '{}' is not an http:// or https:// address", s)};
  }
  if (!timeout.empty()) {
    Result<Millis> ms = config::ParseDuration(timeout, "--failover-timeout");
    if (!ms.ok()) throw UsageError{ms.status().message()};
    c.failover_timeout = *ms;
  } else if (c.servers.size() > 1) {
    c.failover_timeout = 15000;
  }
  return c;
}

// `json` with every string (and key) made printable (limits::Printable): what the client prints
// of it cannot carry a terminal's control sequences, whoever wrote it (a job's name, a reason).
Json Printable(Json json) {
  std::vector<Json*> stack = {&json};
  while (!stack.empty()) {
    Json* j = stack.back();
    stack.pop_back();
    if (j->is_string()) {
      *j = limits::Printable(j->get_ref<const std::string&>(), "\n");
    } else if (j->is_array()) {
      for (Json& e : *j) stack.push_back(&e);
    } else if (j->is_object()) {
      bool clean = true;
      for (auto it = j->begin(); it != j->end(); ++it)
        clean = clean && limits::FindUnprintable(it.key()) == std::string_view::npos;
      if (!clean) {
        Json rebuilt = Json::object();
        for (auto it = j->begin(); it != j->end(); ++it)
          rebuilt[limits::Printable(it.key())] = std::move(it.value());
        *j = std::move(rebuilt);
      }
      for (auto it = j->begin(); it != j->end(); ++it) stack.push_back(&it.value());
    }
  }
  return json;
}

// One API call. Prints the error and returns nullopt when the server cannot be reached or
// refuses (its JSON error message).
// `what` goes before the server's error (e.g. the job's name when several are sent);
// `unsettled` (when given) is set when no server took the request although it may have been
// carried out (Send's `maybe_done`).
std::optional<Json> Call(const ClientOptions& o, const std::string& method, const std::string& path,
                         const std::optional<Json>& body = {}, const std::string& what = {},
                         bool* unsettled = nullptr) {
  const Connection c = Connect(o);
  HttpRequest request;
  request.method = method;
  request.path = path;
  if (body) request.body = body->dump();
  request.connect_timeout = std::chrono::seconds(5);
  request.read_timeout = std::chrono::seconds(90);
  const HttpAnswer res = Send(c, std::move(request), unsettled);
  if (res.status == 0) {
    fmt::print(stderr, "error: {}{}\n", what, Unreachable(c, res.error));
    return std::nullopt;
  }
  if (unsettled) *unsettled = false;
  // Every text the server sends is printed: none may carry control characters to the terminal.
  Result<Json> parsed = store::ParseJson(res.body);
  Json json = parsed.ok() ? Printable(std::move(parsed).value()) : Json(Json::value_t::discarded);
  if (res.status >= 400) {
    std::string message = limits::Printable(res.body, "\n");
    if (!json.is_discarded() && json.contains("error") && json["error"].is_object()) {
      const Json& error = json["error"];
      message = error.value("message", "");
      // A job from a file is the file's: its fields are not flags.
      if (error.contains("field") && error["field"].is_string() &&
          !(o.subcommand == "submit" && !o.file.empty()))
        message = NameTheFlag(o.subcommand, error["field"].get<std::string>(), message);
    }
    fmt::print(stderr, "error: {}{} (HTTP {})\n", what, message, res.status);
    return std::nullopt;
  }
  if (json.is_discarded()) {
    fmt::print(stderr, "error: the server answered something other than JSON\n");
    return std::nullopt;
  }
  return json;
}

Millis NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A moment of the server's (Unix milliseconds) as every output prints it: ISO 8601 UTC.
std::string When(Millis t) { return FormatTime(t, TimeStyle::kCalendar); }

// The job's time `key` (`start_time_ms`, ...) if it has one.
std::optional<Millis> TimeOf(const Json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_number_integer()) return std::nullopt;
  return object[key].get<Millis>();
}

// "2026-05-01T10:00:00Z (3m20s ago)", "... (in 1h00m00s)": a moment and how far from now.
std::string WhenFromNow(Millis t) {
  const Millis now = NowMillis() / kMillisPerSecond * kMillisPerSecond;
  const Millis rounded = t / kMillisPerSecond * kMillisPerSecond;
  if (rounded <= now) return fmt::format("{} ({} ago)", When(t), FormatDuration(now - rounded));
  return fmt::format("{} (in {})", When(t), FormatDuration(rounded - now));
}

// ---- submit ----

template <typename T>
T Check(Result<T> r) {
  if (!r.ok()) throw UsageError{r.status().message()};
  return std::move(r).value();
}

// A job from a file (`-f`, read as a jobs file: config::ParseJobSpecs) or from the flags alone,
// the flags overriding the file; checked here by the same validator as the server's
// (job::ValidateJobSpec), so that errors name the file's line or the flag.
std::vector<job::JobSpec> SubmittedSpecs(const ClientOptions& o) {
  if (o.tasks && *o.tasks < 1) {
    throw UsageError{fmt::format("-n/--tasks: must be at least 1, got {}", *o.tasks)};
  }
  if (!o.command.empty() && !o.shell.empty()) {
    throw UsageError{"give the program after -- or a shell command with --sh, not both"};
  }
  // Each flag is parsed once, its errors naming it.
  std::optional<MilliGpu> gpus;
  if (!o.gpus.empty()) {
    gpus = Check(config::ParseGpus(o.gpus, "-g/--gpus"));
    if (Status st = limits::CheckTaskGpus("-g/--gpus", gpus->value()); !st.ok()) {
      throw UsageError{st.message()};
    }
  }
  std::optional<std::int64_t> gpu_memory, memory;
  std::optional<MilliCpu> cpu;
  std::optional<Millis> runtime, checkpoint;
  if (!o.gpu_memory.empty()) gpu_memory = Check(config::ParseMiB(o.gpu_memory, "--gpu-memory"));
  if (!o.cpu.empty()) cpu = Check(config::ParseCpu(o.cpu, "--cpu"));
  if (!o.memory.empty()) memory = Check(config::ParseMiB(o.memory, "--memory"));
  if (!o.runtime.empty()) runtime = Check(config::ParseDuration(o.runtime, "-r/--runtime"));
  if (!o.checkpoint.empty()) {
    checkpoint = Check(config::ParseDuration(o.checkpoint, "--checkpoint-interval"));
  }
  std::map<std::string, std::string> env;
  for (const std::string& kv : o.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError{fmt::format("-e/--env: expected NAME=VALUE, got '{}'", kv)};
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const std::string default_name = fmt::format("job-{}", NowMillis());
  auto apply = [&](job::JobSpec& job) {
    if (!o.name.empty()) job.name = o.name;
    if (job.name.empty()) job.name = default_name;
    if (!o.queue.empty()) job.queue = o.queue;
    if (!o.priority_class.empty()) job.priority_class = o.priority_class;
    TaskGroup& group = job.groups.at(0);
    if (o.tasks) group.count = static_cast<std::int32_t>(std::min<std::int64_t>(*o.tasks, 1 << 30));
    if (gpus) group.request.gpu = *gpus;
    if (gpu_memory) group.request.gpu_memory = GpuMemMiB(*gpu_memory);
    if (cpu) group.request.cpu = *cpu;
    if (memory) group.request.memory = MemMiB(*memory);
    if (!o.gpu_types.empty()) job.gpu_types = o.gpu_types;
    if (!o.topology.empty()) {
      job.topology_level = o.topology;
      job.topology_mode = ConstraintMode::kRequired;
    }
    if (runtime) job.runtime_estimate = *runtime;
    if (checkpoint) job.checkpoint_interval = *checkpoint;
    if (!o.idempotency_key.empty()) job.idempotency_key = o.idempotency_key;
    if (!o.command.empty()) {
      job.command.clear();
      job.argv = o.command;
    }
    if (!o.shell.empty()) {
      job.argv.clear();
      job.command = o.shell;
    }
    for (const auto& [k, v] : env) job.env[k] = v;
    if (o.max_retries >= 0) job.max_retries = o.max_retries;
  };
  if (!o.file.empty()) {
    Result<std::string> text = config::internal::ReadFile(o.file);
    if (!text.ok()) throw UsageError{text.status().message()};
    std::vector<std::string> notes;
    Result<std::vector<job::JobSpec>> specs = config::ParseJobSpecs(*text, o.file, apply, &notes);
    for (const std::string& note : notes) fmt::print(stderr, "note: {}\n", note);
    if (!specs.ok()) throw UsageError{specs.status().message()};
    return std::move(specs).value();
  }
  job::JobSpec job;
  job.groups.push_back(TaskGroup{limits::DefaultGroupName(0, 1), 1, {}});
  apply(job);
  if (Status st = job::ValidateJobSpec(job); !st.ok()) {
    const std::string flag = FlagOf("submit", st.field());
    if (st.detail() == "must not be empty" && !flag.empty()) {
      throw UsageError{fmt::format("{}: required", flag)};
    }
    throw UsageError{fmt::format("{}: {}", flag.empty() ? st.field() : flag, st.detail())};
  }
  return {std::move(job)};
}

// A random idempotency key (128 bits, hex), so that a submission sent again after its
// connection was lost, or to the next server, is not recorded twice.
std::string RandomKey() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      std::random_device device;  // no getrandom: the library's source
      for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
      break;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key = "arbiter-";
  for (const unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 15];
  }
  return key;
}

// Every job of a file is sent, in order, even after one is refused (each refusal is reported,
// as kubectl apply does); the exit status is 1 if any was. A job without an idempotency key (none
// in its file, no --idempotency-key) gets a random one: sending it again (a lost connection, the
// next server, a 503) cannot make a second job. A job no server acknowledged, although one may
// have stored it, is reported with its key, so that submitting it again with that key settles it.
int Submit(const ClientOptions& o) {
  int status = 0;
  std::vector<job::JobSpec> specs = SubmittedSpecs(o);
  for (job::JobSpec& job : specs) {
    const bool generated = job.idempotency_key.empty();
    if (generated) job.idempotency_key = RandomKey();
    bool unsettled = false;
    std::optional<Json> answer = Call(o, "POST", "/v1/jobs", store::JobSpecToJson(job),
                                      "job " + job.name + ": ", &unsettled);
    if (!answer) {
      if (unsettled) {
        const std::string how =
            specs.size() == 1
                ? fmt::format("run the same command with --idempotency-key {}", job.idempotency_key)
                : fmt::format("submit this job alone with the idempotency key {}",
                              job.idempotency_key);
        fmt::print(stderr,
                   "note: job {}: not acknowledged, and it may have been stored: {} to settle it "
                   "(the server answers a repeated key with the first job)\n",
                   job.name, how);
      }
      status = 1;
      continue;
    }
    if (o.json) {
      fmt::print("{}\n", answer->dump());
    } else {
      // A duplicate of a generated key is this submission, sent again: its first answer was lost.
      const bool duplicate = !generated && answer->value("duplicate", false);
      fmt::print("submitted job {} ({}){}\n", (*answer)["id"].get<std::uint64_t>(), job.name,
                 duplicate ? ": already submitted with this key" : "");
    }
  }
  return status;
}

// ---- listings ----

std::string JobGpus(const Json& job) { return limits::FormatGpuCount(job.value("gpu_milli", 0)); }

std::string Where(const Json& job) { return listing::Where(job); }

// The query of `arbiter jobs`'s filters: comma-separated values, as the server takes them.
std::string JobsQuery(const ClientOptions& o) {
  std::string query;
  auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) {
      query += fmt::format("{}{}={}", query.empty() ? "?" : "&", key, EncodeQueryParam(value));
    }
  };
  static constexpr std::string_view kStates[] = {"pending",   "held",   "running",
                                                 "completed", "failed", "cancelled"};
  for (const std::string& state : listing::CommaList(o.filter_state)) {
    if (std::find(std::begin(kStates), std::end(kStates), state) == std::end(kStates))
      throw UsageError{fmt::format(
          "-s/--state: unknown job state '{}' (known: pending, held, running, completed, "
          "failed, cancelled; several separated by commas)",
          state)};
  }
  add("queue", o.filter_queue);
  add("state", o.filter_state);
  add("user", o.filter_user);
  if (o.limit < 0) throw UsageError{fmt::format("--limit: must be positive, got {}", o.limit)};
  if (o.limit > 0) add("limit", std::to_string(o.limit));
  return query;
}

// One listing: the items at `path`, under `kind.what` in the answer, printed as `format` says;
// a truncated listing says so on standard error. Returns the answer's event cursor (0 if none),
// or nullopt when the call failed.
std::optional<std::uint64_t> ListOnce(const ClientOptions& o, const listing::Kind& kind,
                                      const listing::Format& format, const std::string& path,
                                      bool again) {
  std::optional<Json> answer = Call(o, "GET", path);
  if (!answer) return std::nullopt;
  const Json items = answer->value(kind.what, Json::array());
  std::string text = listing::Render(format, kind, items);
  if (again) {
    // A terminal is redrawn; anything else gets each listing after the last.
    if (::isatty(STDOUT_FILENO) != 0) {
      text = "\033[H\033[2J" + text;
    } else {
      text = (format.style == listing::Format::Style::kYaml ? "---\n" : "\n") + text;
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (answer->value("truncated", false)) {
    fmt::print(stderr,
               "note: listed the first {} {} only, more match: give --limit with a larger number "
               "(at most 10000 are kept), or narrow with -q, -s or -u\n",
               items.size(), kind.what);
  }
  if (answer->value("partial", false)) {
    fmt::print(stderr,
               "note: the server has just started leading and is still reading its recent "
               "finished jobs: some may be missing from this listing (arbiter job ID reads any)\n");
  }
  return answer->value("cursor", std::uint64_t{0});
}

// Waits (a long poll of the event stream, docs/api.md "Events") until something happens after
// `cursor`; returns the new cursor, or nullopt when the server cannot be reached.
std::optional<std::uint64_t> WaitForChange(const ClientOptions& o, std::uint64_t cursor) {
  const Connection c = Connect(o);
  HttpRequest request;
  request.method = "GET";
  request.path = fmt::format("/v1/events?cursor={}&limit=1000&wait=30", cursor);
  request.connect_timeout = std::chrono::seconds(5);
  request.read_timeout = std::chrono::seconds(90);
  request.long_by_design = true;  // the server holds it up to 30 s
  const HttpAnswer res = Send(c, std::move(request));
  if (res.status == 0) {
    fmt::print(stderr, "error: --watch: {}\n", Unreachable(c, res.error));
    return std::nullopt;
  }
  Result<Json> json = store::ParseJson(res.body);
  if (res.status != 200 || !json.ok() || !json->is_object()) {
    std::string message = limits::Printable(res.body);
    if (json.ok() && json->contains("error") && (*json)["error"].is_object())
      message = limits::Printable((*json)["error"].value("message", ""));
    fmt::print(stderr, "error: --watch: {} (HTTP {})\n", message, res.status);
    return std::nullopt;
  }
  return json->value("cursor", cursor);
}

// `arbiter jobs|queues|nodes [-o FORMAT] [--watch]`: the listing, and with --watch again at each
// change the event stream reports (at most once a second) until interrupted.
int List(const ClientOptions& o, const listing::Kind& kind, const std::string& path) {
  const std::string spelled = o.json && o.format.empty() ? std::string("json") : o.format;
  Result<listing::Format> format = listing::ParseFormat(spelled, kind);
  if (!format.ok()) throw UsageError{format.status().message()};
  std::optional<std::uint64_t> cursor = ListOnce(o, kind, *format, path, false);
  if (!cursor) return 1;
  if (!o.watch) return 0;
  while (true) {
    const auto since = std::chrono::steady_clock::now();
    const std::optional<std::uint64_t> next = WaitForChange(o, *cursor);
    if (!next) return 1;
    if (*next == *cursor) continue;  // the long poll's wait ended with nothing new
    std::this_thread::sleep_until(since + std::chrono::seconds(1));
    cursor = ListOnce(o, kind, *format, path, true);
    if (!cursor) return 1;
    *cursor = std::max(*cursor, *next);
  }
}

int Jobs(const ClientOptions& o) {
  return List(o, listing::JobsKind(&NowMillis), "/v1/jobs" + JobsQuery(o));
}

// A job id: a positive number. `none`: what the error adds ("nothing was cancelled").
void CheckId(const std::string& id, std::string_view none = {}) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), value);
  if (id.empty() || ec != std::errc() || end != id.data() + id.size() || value == 0) {
    throw UsageError{fmt::format("job id: expected a positive number, got '{}'{}", id, none)};
  }
}

std::optional<std::string> OneId(const ClientOptions& o) {
  if (o.ids.size() != 1) throw UsageError{"give one job id"};
  CheckId(o.ids[0]);
  return o.ids[0];
}

// What the server says of a job's times, one line each: submitted, started, last checkpoint,
// evictions, stopping, reserved start, expected end by its runtime estimate, ended.
void PrintTimes(const Json& j) {
  const Json& spec = j["spec"];
  const Json& status = j["status"];
  const std::string state = status.value("state", "");
  if (std::optional<Millis> t = TimeOf(spec, "submit_time_ms"))
    fmt::print("  submitted at {}\n", WhenFromNow(*t));
  const std::optional<Millis> start = TimeOf(status, "start_time_ms");
  const std::optional<Millis> first = TimeOf(status, "first_start_time_ms");
  if (first && (!start || *first != *start)) fmt::print("  first started at {}\n", When(*first));
  if (start)
    fmt::print("  {} at {}\n", first && *first != *start ? "started again" : "started",
               WhenFromNow(*start));
  if (std::optional<Millis> t = TimeOf(status, "last_checkpoint_ms"); t && start && *t > *start)
    fmt::print("  last checkpoint at {}\n", When(*t));
  if (status.contains("evictions_ms") && status["evictions_ms"].is_array() &&
      !status["evictions_ms"].empty()) {
    const Json& evictions = status["evictions_ms"];
    fmt::print("  evicted {} time{}, last at {}\n", evictions.size(),
               evictions.size() == 1 ? "" : "s", When(evictions.back().get<Millis>()));
  }
  if (std::optional<Millis> t = TimeOf(status, "stop_at_ms"))
    fmt::print("  stopping by {}\n", WhenFromNow(*t));
  if (std::optional<Millis> t = TimeOf(j, "reserved_start_ms"))
    fmt::print("  reserved: expected to start at {}\n", WhenFromNow(*t));
  const std::optional<Millis> estimate = TimeOf(spec, "runtime_estimate_ms");
  if (state == "running" && start && estimate && *estimate > 0) {
    fmt::print("  expected to end at {} by its runtime estimate ({})\n",
               WhenFromNow(*start + *estimate), FormatDuration(*estimate));
  }
  if (std::optional<Millis> t = TimeOf(status, "end_time_ms"))
    fmt::print("  ended at {}\n", WhenFromNow(*t));
}

int JobDetail(const ClientOptions& o) {
  std::optional<Json> answer = Call(o, "GET", "/v1/jobs/" + *OneId(o));
  if (!answer) return 1;
  if (o.json) {
    fmt::print("{}\n", answer->dump(2));
    return 0;
  }
  const Json& j = *answer;
  const Json& spec = j["spec"];
  const Json& status = j["status"];
  fmt::print("job {} ({})\n", j["id"].get<std::uint64_t>(), spec.value("name", ""));
  fmt::print("  user {}, queue {}, class {}, {}\n", spec.value("user", ""), spec.value("queue", ""),
             status.value("priority_class", ""), JobGpus(j));
  fmt::print("  state {}\n", status.value("state", ""));
  PrintTimes(j);
  if (j.contains("tasks")) fmt::print("  on {}\n", Where(j));
  if (j.contains("reason")) fmt::print("  reason: {}\n", j["reason"].get<std::string>());
  if (status.contains("message")) fmt::print("  {}\n", status["message"].get<std::string>());
  return 0;
}

int Explain(const ClientOptions& o) {
  std::optional<Json> answer = Call(o, "GET", "/v1/jobs/" + *OneId(o));
  if (!answer) return 1;
  const Json& j = *answer;
  if (o.json) {
    Json out{{"id", j["id"]},
             {"state", j["status"].value("state", "")},
             {"reason", j.value("reason", "")},
             {"tasks", j.value("tasks", Json::array())}};
    if (std::optional<Millis> t = TimeOf(j, "reserved_start_ms")) {
      out["reserved_start_ms"] = *t;
      out["reserved_start"] = When(*t);
    }
    fmt::print("{}\n", out.dump());
    return 0;
  }
  const Json& spec = j["spec"];
  const std::string state = j["status"].value("state", "");
  fmt::print("job {} ({}, queue {}, class {}, {}):\n", j["id"].get<std::uint64_t>(),
             spec.value("name", ""), spec.value("queue", ""),
             j["status"].value("priority_class", ""), JobGpus(j));
  if (state == "pending" || state == "held") {
    fmt::print("  {}: {}\n", state, j.value("reason", ""));
  } else if (state == "running") {
    fmt::print("  running on {}\n", Where(j));
    if (j.contains("reason")) fmt::print("  {}\n", j["reason"].get<std::string>());
  } else {
    fmt::print(
        "  {}{}\n", state,
        j["status"].contains("message") ? ": " + j["status"]["message"].get<std::string>() : "");
  }
  PrintTimes(j);
  return 0;
}

// Sends `request(id)` for each job id of the command line and prints each answer (`line` of it,
// or its JSON with --json). Every id is checked before any is sent: one that is not a job id is a
// usage error and no job is touched (`untouched` says what was not done). The server then answers
// each on its own (one it refuses, e.g. a finished job, is reported and the others are still
// done, as scancel does); the exit status is 1 if any failed.
int EachJob(const ClientOptions& o, const std::string& untouched,
            const std::function<std::optional<Json>(const std::string&)>& request,
            const std::function<std::string(const std::string&, const Json&)>& line) {
  if (o.ids.empty()) throw UsageError{"give at least one job id"};
  for (const std::string& id : o.ids) CheckId(id, untouched);
  int status = 0;
  for (const std::string& id : o.ids) {
    std::optional<Json> answer = request(id);
    if (!answer) {
      status = 1;
      continue;
    }
    fmt::print("{}\n", o.json ? answer->dump() : line(id, *answer));
  }
  return status;
}

// `arbiter cancel|hold|release ID...`.
int JobAction(const ClientOptions& o, const std::string& action) {
  const std::string past = action == "cancel" ? "cancelled" : action + "ed";
  return EachJob(
      o, fmt::format(" (no job was {})", past),
      [&](const std::string& id) { return Call(o, "POST", "/v1/jobs/" + id + "/" + action); },
      [](const std::string& id, const Json& answer) {
        return fmt::format("job {}: {}", id, answer["status"].value("state", ""));
      });
}

// `arbiter set-priority ID... -p CLASS`: each job's priority class (PATCH /v1/jobs/ID; admin, or
// the submitter with a class its token allows).
int SetPriority(const ClientOptions& o) {
  if (o.priority_class.empty()) throw UsageError{"-p/--priority-class: required"};
  return EachJob(
      o, " (no priority was changed)",
      [&](const std::string& id) {
        return Call(o, "PATCH", "/v1/jobs/" + id, Json{{"priority_class", o.priority_class}},
                    "job " + id + ": ");
      },
      [&](const std::string& id, const Json&) {
        return fmt::format("job {}: priority class {}", id, o.priority_class);
      });
}

// A queue's quota (the store's milli-GPU form, as GET /v1/queues shows it) in the cluster file's
// words: "H800 {nominal: 48, borrowing_limit: 8}; gpu {max: 100}".
std::string QuotaText(const Json& quota) {
  Json queue{{"quota", quota}};
  const listing::Kind kind = listing::QueuesKind();
  for (const listing::Column& c : kind.columns)
    if (c.name == "quota") return c.value(queue);
  return "-";
}

// `arbiter set-quota QUEUE RESOURCE [--nominal N] [--borrowing-limit N] [--lending-limit N]
// [--max N]`: sets the limits given of one resource (`gpu` or a GPU model) of the queue's quota,
// in the cluster file's units (16, 0.5, 500m), keeping its other limits and resources;
// `--remove` drops the resource, `--reset` goes back to the configuration's quota (admin).
int SetQuota(const ClientOptions& o) {
  const std::string& queue = o.quota_queue;
  const bool limits_given = !o.nominal.empty() || !o.borrowing_limit.empty() ||
                            !o.lending_limit.empty() || !o.max.empty();
  if (o.reset && (limits_given || o.remove || !o.resource.empty()))
    throw UsageError{
        "--reset: the whole quota goes back to the configuration's; give no "
        "RESOURCE, limit or --remove with it"};
  std::optional<Json> answer;
  if (o.reset) {
    answer = Call(o, "DELETE", "/v1/queues/" + EncodeQueryParam(queue) + "/quota");
  } else {
    if (o.resource.empty())
      throw UsageError{
          "RESOURCE: required (gpu, for all GPU types together, or a GPU model), "
          "or --reset"};
    if (!limits_given && !o.remove)
      throw UsageError{
          "give at least one of --nominal, --borrowing-limit, --lending-limit, "
          "--max, or --remove"};
    if (limits_given && o.remove) throw UsageError{"--remove: give no limit with it"};
    std::optional<Json> queues = Call(o, "GET", "/v1/queues");
    if (!queues) return 1;
    const Json* found = nullptr;
    std::vector<std::string> names;
    if (!queues->contains("queues") || !(*queues)["queues"].is_array())
      throw UsageError{"GET /v1/queues: expected a list of queues"};
    for (const Json& q : (*queues)["queues"]) {
      names.push_back(q.value("name", ""));
      if (q.value("name", "") == queue) found = &q;
    }
    if (found == nullptr) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      throw UsageError{fmt::format("QUEUE: no queue '{}' (queues: {})", queue, known)};
    }
    Json quota = found->value("quota", Json::object());
    if (!quota.is_object()) quota = Json::object();
    if (o.remove) {
      quota.erase(o.resource);
    } else {
      // The values as typed: the server reads them with the cluster file's parser. The limits
      // not given keep their values (Slurm's GrpTRES=gres/gpu=8 changes that limit alone).
      Json limits = quota.contains(o.resource) && quota[o.resource].is_object() ? quota[o.resource]
                                                                                : Json::object();
      auto set = [&](const char* name, const std::string& value) {
        if (value.empty()) return;
        limits.erase(std::string(name) + "_milli");  // as GET /v1/queues gave it
        limits[name] = value;
      };
      set("nominal", o.nominal);
      set("borrowing_limit", o.borrowing_limit);
      set("lending_limit", o.lending_limit);
      set("max", o.max);
      quota[o.resource] = std::move(limits);
    }
    answer = Call(o, "PUT", "/v1/queues/" + EncodeQueryParam(queue) + "/quota", quota);
  }
  if (!answer) return 1;
  if (o.json) {
    fmt::print("{}\n", answer->dump());
  } else {
    fmt::print("queue {}: quota {}{}\n", queue, QuotaText(answer->value("quota", Json::object())),
               o.reset ? " (the configuration's)" : "");
  }
  return 0;
}

int Queues(const ClientOptions& o) { return List(o, listing::QueuesKind(), "/v1/queues"); }

int Nodes(const ClientOptions& o) { return List(o, listing::NodesKind(), "/v1/nodes"); }

int NodeAction(const ClientOptions& o, const std::string& action) {
  std::optional<Json> body;
  if (!o.reason.empty()) body = Json{{"reason", o.reason}};
  std::optional<Json> answer = Call(o, "POST", "/v1/nodes/" + o.node + "/" + action, body);
  if (!answer) return 1;
  if (o.json) {
    fmt::print("{}\n", answer->dump());
  } else {
    fmt::print("node {}: {}\n", o.node, (*answer)["state"].get<std::string>());
  }
  return 0;
}

// `arbiter logs JOB`: a task's output, from the agent of the node it ran on (through the server).
int Logs(const ClientOptions& o) {
  const Connection c = Connect(o);
  HttpRequest request;
  request.method = "GET";
  request.path = fmt::format("/v1/jobs/{}/logs?task={}", o.ids.at(0), o.task);
  if (o.tail >= 0) request.path += fmt::format("&tail_bytes={}", o.tail);
  request.connect_timeout = std::chrono::seconds(5);
  request.read_timeout = std::chrono::seconds(60);
  request.long_by_design = true;  // the server waits up to 30 s for the node's agent
  const HttpAnswer res = Send(c, std::move(request));
  if (res.status == 0) {
    fmt::print(stderr, "error: {}\n", Unreachable(c, res.error));
    return 1;
  }
  if (res.status != 200) {
    Result<Json> json = store::ParseJson(res.body);
    std::string message = res.body;
    if (json.ok() && json->contains("error") && (*json)["error"].is_object())
      message = (*json)["error"].value("message", "");
    fmt::print(stderr, "error: {} (HTTP {})\n", limits::Printable(message), res.status);
    return 1;
  }
  std::fwrite(res.body.data(), 1, res.body.size(), stdout);
  return 0;
}

// GET `path` as an admin; the body, or empty with the error printed.
std::optional<std::string> AdminGet(const Connection& c, const std::string& path) {
  HttpRequest request;
  request.method = "GET";
  request.path = path;
  request.connect_timeout = std::chrono::seconds(5);
  request.read_timeout = std::chrono::seconds(120);
  const HttpAnswer res = Send(c, std::move(request));
  if (res.status == 0) {
    fmt::print(stderr, "error: {}\n", Unreachable(c, res.error));
    return std::nullopt;
  }
  if (res.status != 200) {
    Result<Json> json = store::ParseJson(res.body);
    std::string message = res.body;
    if (json.ok() && json->contains("error") && (*json)["error"].is_object())
      message = (*json)["error"].value("message", "");
    fmt::print(stderr, "error: {} (HTTP {})\n", limits::Printable(message), res.status);
    return std::nullopt;
  }
  return res.body;
}

// Writes `text` to `path` beside it and renames it over: a reader never sees half a file.
bool WriteWhole(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      fmt::print(stderr, "error: -o: cannot write {}: {}\n", partial, std::strerror(errno));
      return false;
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    fmt::print(stderr, "error: -o: cannot write {}: {}\n", path, std::strerror(errno));
    std::remove(partial.c_str());
    return false;
  }
  return true;
}

// `arbiter snapshot [-o FILE]`: the whole cluster at this moment, as the server sees it (admin;
// docs/snapshot.md), to FILE or standard output.
int Snapshot(const ClientOptions& o) {
  const Connection c = Connect(o);
  const std::optional<std::string> body = AdminGet(c, "/v1/admin/snapshot");
  if (!body) return 1;
  if (o.output.empty() || o.output == "-") {
    std::fwrite(body->data(), 1, body->size(), stdout);
    return 0;
  }
  if (!WriteWhole(o.output, *body)) return 1;
  fmt::print(stderr, "snapshot written to {} ({} bytes)\n", o.output, body->size());
  return 0;
}

// `arbiter history [-o FILE]`: the server's snapshot and every job it lists, with their times
// (admin; docs/whatif.md), for `arbiter whatif --history FILE`.
int HistoryCommand(const ClientOptions& o) {
  const Connection c = Connect(o);
  const std::optional<std::string> snapshot = AdminGet(c, "/v1/admin/snapshot");
  if (!snapshot) return 1;
  const std::optional<std::string> jobs = AdminGet(c, "/v1/jobs?limit=10000");
  if (!jobs) return 1;
  Result<config::LoadedSnapshot> loaded = config::ParseSnapshot(*snapshot, "snapshot");
  if (!loaded.ok()) {
    fmt::print(stderr, "error: {}\n", loaded.status().message());
    return 1;
  }
  Result<Json> answer = store::ParseJson(*jobs);
  const Json* list =
      answer.ok() && answer->is_object() && answer->contains("jobs") ? &(*answer)["jobs"] : nullptr;
  if (list == nullptr || !list->is_array()) {
    fmt::print(stderr, "error: GET /v1/jobs: expected a list of jobs\n");
    return 1;
  }
  if (answer->value("truncated", false))
    fmt::print(stderr,
               "note: the server lists at most {} jobs: the history has the first of them\n",
               list->size());
  History history;
  history.taken_at = loaded->snapshot.taken_at;
  history.snapshot_text = *snapshot;
  for (const Json& j : *list) {
    store::StoredJob job;
    job.id = j.value("id", JobId{0});
    Result<job::JobSpec> spec = store::JobSpecFromJson(j.value("spec", Json::object()), "spec");
    Result<store::JobStatus> status =
        store::JobStatusFromJson(j.value("status", Json::object()), "status");
    if (!spec.ok() || !status.ok()) {
      fmt::print(stderr, "error: GET /v1/jobs: job {}: {}\n", job.id,
                 (spec.ok() ? status.status() : spec.status()).message());
      return 1;
    }
    job.spec = std::move(spec).value();
    job.status = std::move(status).value();
    history.jobs.push_back(std::move(job));
  }
  const std::string text = WriteHistory(history);
  if (o.output.empty() || o.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  if (!WriteWhole(o.output, text)) return 1;
  fmt::print(stderr, "history written to {} ({} jobs)\n", o.output, history.jobs.size());
  return 0;
}

void AddConnection(CLI::App* cmd, ClientOptions& o, bool json) {
  cmd->add_option("--server", o.server,
                  "Server address, or several separated by commas (servers sharing one store: "
                  "the leader is followed); default: $ARBITER_SERVER, the client file, "
                  "http://127.0.0.1:8642");
  cmd->add_option("--failover-timeout", o.failover_timeout,
                  "How long to go round the servers for the leader, and to ask again after a "
                  "503, before giving up; no answer is waited for longer (default: "
                  "$ARBITER_FAILOVER_TIMEOUT, else 15s with several servers, one try with one; "
                  "0: each once)");
  cmd->add_option("--token", o.token,
                  "Bearer token (visible in ps: prefer --token-file; default: $ARBITER_TOKEN, "
                  "$ARBITER_TOKEN_FILE, the client file)");
  cmd->add_option("--token-file", o.token_file, "A file holding the bearer token");
  cmd->add_option("--ca-file", o.ca_file,
                  "The CA (PEM) that signs an https server's certificate (default: "
                  "$ARBITER_CA_FILE, the client file's ca_file, the system's)");
  if (json) cmd->add_flag("--json", o.json, "Print JSON");
}

}  // namespace

bool IsClientCommand(std::string_view name) {
  for (std::string_view command :
       {"submit", "jobs", "job", "cancel", "hold", "release", "logs", "queues", "nodes", "cordon",
        "uncordon", "drain", "snapshot", "history", "set-priority", "set-quota"}) {
    if (name == command) return true;
  }
  return false;
}

ClientCommands AddClientCommands(CLI::App& app, CLI::App* explain, std::string_view only) {
  ClientCommands out;
  out.options = std::make_shared<ClientOptions>();
  ClientOptions& o = *out.options;
  auto wanted = [only](std::string_view name) { return only.empty() || only == name; };
  auto add = [&](const char* name, const char* help, int (*run)(const ClientOptions&)) {
    CLI::App* cmd = app.add_subcommand(name, help);
    AddConnection(cmd, o, true);
    out.commands.emplace_back(cmd, run);
    return cmd;
  };
  if (wanted("submit")) {
    CLI::App* submit = add("submit", "Submit a job to the server", &Submit);
    submit
        ->add_option("-f,--file", o.file,
                     "Job file (YAML, as a jobs file: one job, or `jobs:` with several; user and "
                     "submit_time are ignored, the server sets them)")
        ->check(CLI::ExistingFile);
    submit->add_option("--name", o.name, "Job name (default: job-TIME)");
    submit->add_option("-q,--queue", o.queue, "Leaf queue");
    submit->add_option("-p,--priority-class", o.priority_class, "Priority class");
    submit->add_option("-n,--tasks", o.tasks, "Tasks, at least 1 (a gang: all start together)");
    submit->add_option("-g,--gpus", o.gpus, "GPUs per task: whole (2) or a fraction (0.5, 250m)");
    submit->add_option("--gpu-memory", o.gpu_memory, "GPU memory per device (e.g. 40Gi)");
    submit->add_option("--cpu", o.cpu, "CPU cores per task");
    submit->add_option("--memory", o.memory, "Memory per task (e.g. 64Gi)");
    submit->add_option("-t,--gpu-type", o.gpu_types, "Acceptable GPU type (repeatable)");
    submit->add_option("--topology", o.topology, "Keep every task in one domain of this level");
    submit->add_option("-r,--runtime", o.runtime, "Runtime estimate (e.g. 2h)");
    submit->add_option("--checkpoint-interval", o.checkpoint, "Checkpoint interval (e.g. 30m)");
    submit->add_option("--idempotency-key", o.idempotency_key,
                       "A retry with the same key is not submitted twice (default: a random "
                       "key, printed when no server acknowledged the job)");
    submit->add_option("--sh", o.shell, "A shell command to run (by /bin/sh -c)");
    submit->add_option("-e,--env", o.env, "NAME=VALUE in each task's environment (repeatable)");
    submit->add_option("--max-retries", o.max_retries,
                       "Failed runs started again before the job fails (default 0)");
    submit->add_option("command", o.command, "The program to run and its arguments (after --)");
  }

  // The list commands: -o and --watch (listing.h).
  auto list_flags = [&o](CLI::App* cmd, const listing::Kind& kind) {
    cmd->add_option("-o,--output", o.format,
                    "Output: wide, json, yaml, name (" + kind.name_column +
                        " only), columns separated by commas (" + listing::ColumnNames(kind) +
                        ") or custom-columns=HEADER:.json.path,...");
    cmd->add_flag("-w,--watch", o.watch,
                  "Print again at each change (the server's events), until interrupted");
  };
  if (wanted("jobs")) {
    CLI::App* jobs = add("jobs", "List jobs (like squeue)", &Jobs);
    jobs->add_option("-q,--queue", o.filter_queue, "Only these queues (separated by commas)");
    jobs->add_option("-s,--state", o.filter_state,
                     "Only these states, separated by commas (pending, held, running, completed, "
                     "failed, cancelled)");
    jobs->add_option("-u,--user", o.filter_user, "Only these users' (separated by commas)");
    jobs->add_option("--limit", o.limit,
                     "At most this many (default 1000; a listing cut short says so on stderr)");
    list_flags(jobs, listing::JobsKind(&NowMillis));
  }

  if (wanted("job"))
    add("job", "Show one job", &JobDetail)->add_option("ID", o.ids, "Job id")->required();
  if (wanted("cancel"))
    add("cancel",
        "Cancel jobs (every id is checked first: one that is not a job id cancels none; the server "
        "answers each of the others)",
        [](const ClientOptions& opt) { return JobAction(opt, "cancel"); })
        ->add_option("ID", o.ids, "Job ids")
        ->required();
  if (wanted("hold"))
    add("hold", "Hold pending jobs",
        [](const ClientOptions& opt) { return JobAction(opt, "hold"); })
        ->add_option("ID", o.ids, "Job ids")
        ->required();
  if (wanted("release"))
    add("release", "Release held jobs (admin)",
        [](const ClientOptions& opt) { return JobAction(opt, "release"); })
        ->add_option("ID", o.ids, "Job ids")
        ->required();
  if (wanted("logs")) {
    CLI::App* logs = add("logs", "Show a task's output (from its node's agent)", &Logs);
    logs->add_option("ID", o.ids, "Job id")->required();
    logs->add_option("--task", o.task, "Task index (rank; default 0)");
    logs->add_option("--tail", o.tail, "Only the last BYTES bytes");
  }
  if (wanted("queues"))
    list_flags(add("queues", "List queues: usage against guarantee and max", &Queues),
               listing::QueuesKind());
  if (wanted("nodes")) list_flags(add("nodes", "List nodes", &Nodes), listing::NodesKind());
  if (wanted("set-priority")) {
    CLI::App* cmd = add("set-priority",
                        "Change jobs' priority class (admin, or the submitter with a class its "
                        "token allows; every id is checked first)",
                        &SetPriority);
    cmd->add_option("ID", o.ids, "Job ids")->required();
    cmd->add_option("-p,--priority-class", o.priority_class, "The new priority class")->required();
  }
  if (wanted("set-quota")) {
    CLI::App* cmd =
        add("set-quota",
            "Change the limits given of one resource of a queue's quota (the others are kept), "
            "in the cluster file's units: GPUs, 16, 0.5 or 500m (admin); stored, until --reset",
            &SetQuota);
    cmd->add_option("QUEUE", o.quota_queue, "Queue")->required();
    cmd->add_option("RESOURCE", o.resource, "gpu (all GPU types together) or a GPU model");
    cmd->add_option("--nominal", o.nominal, "Guaranteed GPUs");
    cmd->add_option("--borrowing-limit", o.borrowing_limit, "How far above nominal it may borrow");
    cmd->add_option("--lending-limit", o.lending_limit, "How much of its unused nominal it lends");
    cmd->add_option("--max", o.max, "At most this many GPUs");
    cmd->add_flag("--remove", o.remove, "Drop RESOURCE from the quota");
    cmd->add_flag("--reset", o.reset, "Go back to the configuration's quota");
  }
  for (auto [name, help, run] :
       std::vector<std::tuple<const char*, const char*, int (*)(const ClientOptions&)>>{
           {"cordon", "Cordon a node: nothing new lands on it (admin)",
            [](const ClientOptions& opt) { return NodeAction(opt, "cordon"); }},
           {"uncordon", "Make a node schedulable again (admin)",
            [](const ClientOptions& opt) { return NodeAction(opt, "uncordon"); }},
           {"drain", "Cordon a node and move its jobs off (admin)",
            [](const ClientOptions& opt) { return NodeAction(opt, "drain"); }}}) {
    if (!wanted(name)) continue;
    CLI::App* cmd = add(name, help, run);
    cmd->add_option("NODE", o.node, "Node name")->required();
    cmd->add_option("--reason", o.reason, "Why (recorded with the event)");
  }
  // The admin's exports: a document written whole to -o FILE or standard output.
  for (const auto& [name, help, run] :
       std::initializer_list<std::tuple<const char*, const char*, int (*)(const ClientOptions&)>>{
           {"snapshot",
            "Write the whole cluster as the server sees it now: nodes, running and pending jobs, "
            "queue usage (admin; docs/snapshot.md)",
            &Snapshot},
           {"history",
            "Write the server's snapshot and every job it lists with their times, for arbiter "
            "whatif --history (admin; docs/whatif.md)",
            &HistoryCommand}}) {
    if (!wanted(name)) continue;
    CLI::App* cmd = app.add_subcommand(name, help);
    AddConnection(cmd, o, false);
    cmd->add_option("-o,--output", o.output, "Write it to FILE (default: standard output)");
    out.commands.emplace_back(cmd, run);
  }
  if (explain != nullptr) AddConnection(explain, o, true);
  return out;
}

bool NeedsWholeProgram(const ClientCommands& commands) {
  try {
    for (const std::string& server : Connect(*commands.options).servers) {
      if (server.rfind("http://", 0) != 0) return true;
    }
    return false;
  } catch (const UsageError&) {
    return true;  // the whole program says what is wrong, as it does
  }
}

std::optional<int> RunClientCommand(const ClientCommands& commands) {
  for (const auto& [cmd, run] : commands.commands) {
    if (!cmd->parsed()) continue;
    commands.options->subcommand = cmd->get_name();
    try {
      return run(*commands.options);
    } catch (const UsageError& e) {
      fmt::print(stderr, "error: {}\n", e.message);
      return 2;
    }
  }
  return std::nullopt;
}

int RunExplainServer(const ClientCommands& commands, const std::string& id) {
  ClientOptions o = *commands.options;
  o.ids = {id};
  try {
    return Explain(o);
  } catch (const UsageError& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 2;
  }
}

}  // namespace arbiter::cli
