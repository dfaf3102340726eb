#include "agent/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "agent/discovery.h"
#include "agent/supervisor.h"
#include "crypto/crypto.h"
#include "net/follow.h"
#include "net/tls.h"
#include "version.h"

namespace arbiter::agent {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// The marker a task (or `arbiter checkpoint`) writes in its checkpoint directory once a
// checkpoint is complete: the time, Unix ms (or, when it does not parse, its modification time).
constexpr const char* kCheckpointMarker = ".arbiter-checkpoint";

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::int64_t> ParseInt(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// The latest checkpoint recorded in `dir`'s marker, or -1.
std::int64_t CheckpointTime(const std::string& dir) {
  const fs::path marker = fs::path(dir) / kCheckpointMarker;
  std::error_code ec;
  if (!fs::exists(marker, ec)) return -1;
  std::ifstream in(marker);
  std::string text;
  std::getline(in, text);
  if (std::optional<std::int64_t> v = ParseInt(text)) return *v;
  struct stat st {};
  if (::stat(marker.c_str(), &st) != 0) return -1;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

int SignalNumber(const std::string& name) {
  static const std::map<std::string, int> kSignals = {
      {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},
      {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT}, {"SIGKILL", SIGKILL}};
  auto it = kSignals.find(name);
  return it == kSignals.end() ? SIGUSR1 : it->second;
}

// A task key is "JOB.RANK.RUN" (the server's assignment).
struct KeyParts {
  std::uint64_t job = 0;
  std::uint32_t rank = 0;
  std::int64_t run = 0;
};
std::optional<KeyParts> ParseKey(const std::string& key) {
  const auto a = key.find('.'), b = key.find('.', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos) return std::nullopt;
  std::optional<std::int64_t> job = ParseInt(std::string_view(key).substr(0, a));
  std::optional<std::int64_t> rank = ParseInt(std::string_view(key).substr(a + 1, b - a - 1));
  std::optional<std::int64_t> run = ParseInt(std::string_view(key).substr(b + 1));
  if (!job || !rank || !run || *job <= 0 || *rank < 0) return std::nullopt;
  return KeyParts{static_cast<std::uint64_t>(*job), static_cast<std::uint32_t>(*rank), *run};
}

class Agent {
 public:
  explicit Agent(AgentArgs args) : args_(std::move(args)) {}

  int Run(const std::atomic<bool>& stop) {
    // Every server given (several share one store, one leading): the agent follows the leader
    // among them, forever (src/net/follow.h).
    std::vector<std::string> servers = net::SplitServers(args_.server);
    for (const std::string& server : servers) {
      if (server.rfind("http://", 0) != 0 && server.rfind("https://", 0) != 0) {
        fmt::print(stderr, "error: --server: '{}' is not an http:// or https:// address\n", server);
        return 2;
      }
    }
    if (servers.empty()) {
      fmt::print(stderr, "error: --server: no address given\n");
      return 2;
    }
    net::LeaderFollower::Settings settings;
    settings.deadline = std::nullopt;
    follower_.emplace(std::move(servers), settings);
    stop_ = &stop;

    Result<Devices> devices = DiscoverDevices(args_.devices);
    if (!devices.ok()) {
      fmt::print(stderr, "error: {}\n", devices.status().message());
      return 2;
    }
    if (!devices->warning.empty()) fmt::print(stderr, "warning: {}\n", devices->warning);
    devices_ = devices->gpus;
    host_ = DiscoverHost();
    if (args_.address.empty()) args_.address = host_.hostname;

    std::error_code ec;
    fs::create_directories(args_.work_dir, ec);
    if (ec) {
      fmt::print(stderr, "error: --work-dir: cannot create {}: {}\n", args_.work_dir, ec.message());
      return 2;
    }
    work_dir_ = fs::absolute(args_.work_dir).string();
    credential_ = ReadSecret(CredentialPath());
    if (credential_.empty() && args_.token.empty()) {
      fmt::print(stderr,
                 "error: no join token (--token-file or ARBITER_AGENT_TOKEN) and no node "
                 "credential in {}\n",
                 CredentialPath());
      return 2;
    }
    Result<std::unique_ptr<Supervisor>> supervisor = Supervisor::Open(work_dir_ + "/tasks");
    if (!supervisor.ok()) {
      fmt::print(stderr, "error: --work-dir: {}\n", supervisor.status().message());
      return 2;
    }
    supervisor_ = std::move(supervisor).value();
    if (Status st = StartLogServer(); !st.ok()) {
      fmt::print(stderr, "error: {}\n", st.message());
      return 2;
    }
    fmt::print("arbiter agent {}: node {}, {} GPU(s), logs on {}\n", arbiter::Version(), args_.name,
               devices_.size(), log_url_);
    std::fflush(stdout);

    while (!stop) {
      if (!registered_) {
        const int status = Register();
        // A credential the server no longer takes (its node key was rotated): join again.
        if (status == 401 && !credential_.empty() && !args_.token.empty()) {
          fmt::print(stderr,
                     "arbiter agent: the server refused the node credential; joining "
                     "again with the join token\n");
          credential_.clear();
          std::error_code ignored;
          fs::remove(CredentialPath(), ignored);
          continue;
        }
        if (status == 401 || status == 403) return 2;
        if (!registered_) {
          Sleep(stop, status == 409 ? std::chrono::seconds(5) : Pause());
          continue;
        }
      }
      // Refused because the server wants a registration first: at once; no answer: in a second
      // (or what a 503's Retry-After asked for).
      if (!Sync() && registered_) Sleep(stop, Pause());
      Enforce();
    }
    logs_->stop();
    if (log_thread_.joinable()) log_thread_.join();
    fmt::print("arbiter agent: stopping; its tasks keep running\n");
    return 0;
  }

 private:
  // What the agent keeps of a task beyond its process: its job's checkpoint directory and the
  // eviction's deadlines.
  struct Local {
    std::string checkpoint_dir;
    bool signalled = false;  // the checkpoint signal was sent
    std::optional<Clock::time_point> term_at, kill_at;
    bool termed = false, killed = false;
  };

  // The wait before the next round of the servers: a second, or the longer wait the last round
  // ended with (a 503's Retry-After, src/net/follow.h).
  std::chrono::milliseconds Pause() const {
    return std::max<std::chrono::milliseconds>(std::chrono::seconds(1), round_wait_);
  }

  static void Sleep(const std::atomic<bool>& stop, std::chrono::milliseconds d) {
    const auto end = Clock::now() + d;
    while (!stop && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // The node's credential once it has one; the join token before.
  httplib::Headers Auth() const {
    return {{"Authorization", "Bearer " + (credential_.empty() ? args_.token : credential_)}};
  }

  std::string CredentialPath() const { return work_dir_ + "/node-credential"; }

  // The first line of a file of secrets, or "" when there is none.
  static std::string ReadSecret(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line;
  }

  // Keeps the node's credential for the agent's next start (mode 0600, replaced whole).
  void SaveCredential(const std::string& credential) {
    const std::string temp = CredentialPath() + ".tmp";
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    bool ok = fd >= 0;
    if (ok) {
      const std::string line = credential + "\n";
      ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
           ::fsync(fd) == 0;
      ::close(fd);
    }
    std::error_code ec;
    if (ok) fs::rename(temp, CredentialPath(), ec);
    if (!ok || ec) {
      Complain(fmt::format("cannot keep the node credential in {}; the join token stays needed",
                           CredentialPath()));
    }
  }

  // An answer taken from the leader (src/net/follow.h): its server, status, body, and the body
  // as JSON (discarded when it is not).
  struct Reply {
    std::string server;
    int status = 0;
    std::string body;
    Json json;
  };

  httplib::Client& ClientFor(const std::string& base) {
    std::unique_ptr<httplib::Client>& client = clients_[base];
    if (!client) {
      const net::TlsClientSettings tls{args_.ca_file, args_.tls_cert, args_.tls_key};
      client = tls.Client(base);
      client->set_connection_timeout(std::chrono::seconds(5));
      client->set_keep_alive(true);
    }
    return *client;
  }

  // Posts `body` to the leader among the servers: a redirect is followed; a standby, a 503 (a
  // server still recovering, a deposed leader) or a server that does not answer within
  // `read_timeout` is passed for the next; and a register or sync answer of an epoch lower than
  // one seen already (a deposed leader's) is ignored. Nullopt when every server has been tried
  // once without an answer to take (said once; the caller waits Pause() before the next round).
  std::optional<Reply> Post(const std::string& path, const std::string& body,
                            std::chrono::milliseconds read_timeout, const std::string& what) {
    net::LeaderFollower& follower = *follower_;
    follower.Begin(path);
    round_wait_ = std::chrono::milliseconds(0);
    while (!*stop_) {
      const std::string base = follower.base();
      httplib::Client& client = ClientFor(base);
      client.set_read_timeout(read_timeout);
      httplib::Result res = client.Post(follower.path(), Auth(), body, "application/json");
      net::Outcome outcome;
      Reply reply{base, 0, {}, Json(Json::value_t::discarded)};
      if (!res) {
        outcome.error = httplib::to_string(res.error());
      } else {
        reply.status = outcome.status = res->status;
        reply.body = std::move(res->body);
        outcome.location = res->get_header_value("Location");
        if (res->status == 503)
          outcome.retry_after = net::ParseRetryAfter(res->get_header_value("Retry-After"));
        reply.json = Json::parse(reply.body, nullptr, false);
        if (reply.json.is_object()) {
          if (reply.json.contains("leader") && reply.json["leader"].is_string())
            outcome.leader = reply.json["leader"].get<std::string>();
          if (res->status != 200) outcome.message = ErrorText(reply.body);
        }
        if (res->status == 200) outcome.refused = CheckEpoch(base, reply.json, what);
      }
      const net::LeaderFollower::Decision d = follower.Judge(outcome);
      if (d.action == net::LeaderFollower::Action::kTake) return reply;
      if (d.action == net::LeaderFollower::Action::kGiveUp || d.wait.count() > 0) {
        round_wait_ = d.wait;
        Complain(fmt::format("no server took the {} as the leader ({}); tasks keep running", what,
                             follower.Summary()));
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  // Fencing: the highest epoch (the leader's term) an answer gave is kept; an answer of a lower
  // one comes from a deposed leader and is not applied. Returns why an answer is refused, or "".
  std::string CheckEpoch(const std::string& server, const Json& answer, const std::string& what) {
    std::uint64_t epoch = 0;
    if (answer.is_object() && answer.contains("epoch") && answer["epoch"].is_number_unsigned())
      epoch = answer["epoch"].get<std::uint64_t>();
    if (epoch < epoch_) {
      const std::string said = fmt::format(
          "answered the {} with epoch {}, below {} seen already: a deposed leader's "
          "answer, ignored",
          what, epoch, epoch_);
      if (std::exchange(stale_, server + " " + std::to_string(epoch)) !=
          server + " " + std::to_string(epoch)) {
        fmt::print(stderr, "arbiter agent: {} {}\n", server, said);
      }
      return said;
    }
    if (epoch > epoch_) {
      epoch_ = epoch;
      fmt::print("arbiter agent: {} leads (epoch {})\n", server, epoch_);
      std::fflush(stdout);
    }
    return {};
  }

  int Register() {
    Json devices = Json::array();
    for (const GpuInfo& g : devices_) {
      devices.push_back(Json{{"model", g.model},
                             {"name", g.name},
                             {"memory_mib", g.memory_mib},
                             {"uuid", g.uuid},
                             {"nvlink_group", g.nvlink_group}});
    }
    Json labels = Json::object();
    std::stringstream in(args_.labels);
    for (std::string kv; std::getline(in, kv, ',');) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos) labels[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    const Json body{{"devices", std::move(devices)},  {"cpu_milli", host_.cpu_milli},
                    {"memory_mib", host_.memory_mib}, {"hostname", host_.hostname},
                    {"address", args_.address},       {"log_url", log_url_},
                    {"labels", std::move(labels)}};
    std::optional<Reply> res = Post("/v1/nodes/" + args_.name + "/register", body.dump(),
                                    std::chrono::seconds(30), "registration");
    if (!res) return 0;
    if (res->status != 200) {
      Complain(fmt::format("registration refused by {} ({}): {}", res->server, res->status,
                           ErrorText(res->body)));
      return res->status;
    }
    const Json& answer = res->json;
    if (!answer.is_object() || !answer.value("credential", Json()).is_string() ||
        !answer.value("log_token", Json()).is_string()) {
      Complain("registration: the server's answer has no node credential");
      return 0;
    }
    if (const std::string credential = answer["credential"]; credential != credential_) {
      credential_ = credential;
      SaveCredential(credential_);
    }
    {
      std::lock_guard lock(log_token_mu_);
      log_token_ = answer["log_token"].get<std::string>();
    }
    sync_wait_ms_ = answer.value("sync_wait_ms", std::int64_t{2000});
    kill_after_ms_ = answer.value("kill_after_ms", std::int64_t{10000});
    const Json root = answer.value("checkpoint_root", Json(""));
    checkpoint_root_ = root.is_string() ? root.get<std::string>() : "";
    registered_ = true;
    // A registration starts the sync afresh: everything reported, everything answered.
    revision_.clear();
    sent_.clear();
    complained_.clear();
    fmt::print("arbiter agent: registered node {} with {}\n", args_.name, res->server);
    std::fflush(stdout);
    return 200;
  }

  // Says a problem once until it changes (a loop retrying every second would flood the log).
  void Complain(const std::string& text) {
    if (text == complained_) return;
    complained_ = text;
    fmt::print(stderr, "arbiter agent: {}\n", text);
  }

  static std::string ErrorText(const std::string& body) {
    const Json j = Json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("error")) return j["error"].value("message", body);
    return body;
  }

  std::string CheckpointDir(std::uint64_t job, const Json& given) const {
    if (given.is_string() && !given.get<std::string>().empty()) return given.get<std::string>();
    if (!checkpoint_root_.empty()) return fmt::format("{}/job-{}", checkpoint_root_, job);
    return fmt::format("{}/checkpoints/job-{}", work_dir_, job);
  }

  std::string LogPath(std::uint64_t job, std::uint32_t rank) const {
    return fmt::format("{}/logs/job-{}/task-{}.log", work_dir_, job, rank);
  }

  // Reports what changed in its tasks since the last sync the server answered, then takes the
  // server's answer: what changed in the tasks the node is to run (docs/api.md, "Sync by
  // difference").
  bool Sync() {
    std::map<std::string, Json> reports;  // by task key
    for (const TaskStatus& t : supervisor_->Poll()) {
      std::optional<KeyParts> key = ParseKey(t.key);
      if (!key) continue;
      Local& local = local_[t.key];
      if (local.checkpoint_dir.empty()) local.checkpoint_dir = CheckpointDir(key->job, nullptr);
      reports[t.key] =
          Json{{"job", key->job},          {"rank", key->rank},
               {"run", key->run},          {"running", t.running},
               {"exit_code", t.exit_code}, {"signal", t.signal},
               {"lost", t.lost},           {"checkpoint_ms", CheckpointTime(local.checkpoint_dir)}};
    }
    for (const auto& [key, code] : unstarted_) {
      std::optional<KeyParts> k = ParseKey(key);
      if (!k) continue;
      reports[key] = Json{{"job", k->job},
                          {"rank", k->rank},
                          {"run", k->run},
                          {"running", false},
                          {"exit_code", code}};
    }
    Json tasks = Json::array();
    for (const auto& [key, report] : reports) {
      auto sent = sent_.find(key);
      if (sent == sent_.end() || sent->second != report) tasks.push_back(report);
    }
    const Json body{{"revision", revision_}, {"tasks", std::move(tasks)}};
    std::optional<Reply> res =
        Post(fmt::format("/v1/nodes/{}/sync?wait_ms={}", args_.name, sync_wait_ms_), body.dump(),
             std::chrono::milliseconds(sync_wait_ms_ + 5000), "sync");
    if (!res) return false;
    // Not registered (409, 404), or the credential refused (401: the node key was rotated):
    // register again, which joins again with the join token when the credential is refused.
    if (res->status == 409 || res->status == 404 || res->status == 401) {
      Complain(fmt::format("server: {}", ErrorText(res->body)));
      registered_ = false;
      return false;
    }
    if (res->status != 200) {
      Complain(fmt::format("sync refused ({}): {}", res->status, ErrorText(res->body)));
      return false;
    }
    complained_.clear();
    const Json& answer = res->json;
    if (!answer.is_object() || !answer.value("tasks", Json()).is_array() ||
        !answer.value("revision", Json()).is_string())
      return false;
    // The server has the reports: the next sync sends only what changes from here.
    sent_ = std::move(reports);
    revision_ = answer["revision"].get<std::string>();
    if (answer.value("full", false)) wanted_.clear();
    const std::int64_t server_now = answer.value("now_ms", std::int64_t{0});
    for (const Json& task : answer["tasks"]) {
      if (!task.is_object() || !task.value("key", Json()).is_string()) continue;
      Json kept = task;
      if (kept.contains("stop") && kept["stop"].is_object()) {
        // The server's deadline, counted from its clock's now: a local wait from here.
        Json& stop = kept["stop"];
        stop["term_in_ms"] =
            std::max<std::int64_t>(0, stop.value("term_at_ms", server_now) - server_now);
      }
      wanted_[task["key"].get<std::string>()] = std::move(kept);
    }
    if (answer.value("removed", Json()).is_array()) {
      for (const Json& key : answer["removed"]) {
        if (key.is_string()) wanted_.erase(key.get<std::string>());
      }
    }
    Json wanted = Json::array();
    for (const auto& [key, task] : wanted_) wanted.push_back(task);
    Reconcile(wanted);
    return true;
  }

  void Reconcile(const Json& wanted) {
    std::set<std::string> keys;
    std::map<std::string, bool> known;  // key -> running
    for (const TaskStatus& t : supervisor_->Poll()) known[t.key] = t.running;
    const auto now = Clock::now();
    for (const Json& w : wanted) {
      const std::string key = w.value("key", "");
      if (key.empty()) continue;
      keys.insert(key);
      if (!known.count(key) && !unstarted_.count(key)) {
        if (w.contains("stop")) {
          // Evicted before it ever ran here: nothing to stop, it is gone.
          unstarted_[key] = 0;
          continue;
        }
        Launch(w);
      }
      if (w.contains("stop") && known.count(key)) {
        Local& local = local_[key];
        if (!local.signalled) {
          const Json& stop = w["stop"];
          const std::string sig = stop.value("signal", "SIGUSR1");
          (void)supervisor_->Signal(key, SignalNumber(sig));
          local.signalled = true;
          local.term_at = now + std::chrono::milliseconds(stop.value("term_in_ms", 0));
          local.kill_at = *local.term_at +
                          std::chrono::milliseconds(stop.value("kill_after_ms", kill_after_ms_));
          fmt::print("arbiter agent: task {}: evicted, {} sent\n", key, sig);
          std::fflush(stdout);
        }
      }
    }
    // What the server no longer lists: stopped (a run moved elsewhere, a job cancelled), or,
    // once ended, forgotten.
    for (const auto& [key, running] : known) {
      if (keys.count(key)) continue;
      Local& local = local_[key];
      if (running) {
        if (!local.term_at) {
          (void)supervisor_->Signal(key, SIGTERM);
          local.term_at = now;
          local.kill_at = now + std::chrono::milliseconds(kill_after_ms_);
          fmt::print("arbiter agent: task {}: not assigned to this node; stopping it\n", key);
          std::fflush(stdout);
        }
      } else if (supervisor_->Forget(key).ok()) {
        local_.erase(key);
      }
    }
    for (auto it = unstarted_.begin(); it != unstarted_.end();) {
      it = keys.count(it->first) ? std::next(it) : unstarted_.erase(it);
    }
  }

  void Launch(const Json& w) {
    const std::string key = w["key"].get<std::string>();
    std::optional<KeyParts> parts = ParseKey(key);
    if (!parts) return;
    TaskLaunch launch;
    launch.key = key;
    if (w.contains("argv") && w["argv"].is_array()) {
      for (const Json& a : w["argv"]) launch.argv.push_back(a.get<std::string>());
    }
    if (w.contains("env") && w["env"].is_object()) {
      for (const auto& [k, v] : w["env"].items()) launch.env[k] = v.get<std::string>();
    }
    Local& local = local_[key];
    local.checkpoint_dir =
        CheckpointDir(parts->job, w.contains("checkpoint_dir") ? w["checkpoint_dir"] : Json());
    std::error_code ec;
    fs::create_directories(local.checkpoint_dir, ec);
    launch.env["ARBITER_CHECKPOINT_DIR"] = local.checkpoint_dir;
    launch.log_path = LogPath(parts->job, parts->rank);
    {
      fs::create_directories(fs::path(launch.log_path).parent_path(), ec);
      std::ofstream(launch.log_path, std::ios::app)
          << fmt::format("--- arbiter: job {} task {} run {} on {} ---\n", parts->job, parts->rank,
                         parts->run, args_.name);
    }
    Status st = launch.argv.empty()
                    ? Status::FromCode(StatusCode::kInvalidArgument, "the job gives nothing to run")
                    : supervisor_->Start(launch);
    if (!st.ok()) {
      // Reported as a shell would: 127, and the reason in the task's log.
      std::ofstream(launch.log_path, std::ios::app)
          << fmt::format("arbiter agent: cannot start the task: {}\n", st.message());
      unstarted_[key] = 127;
      fmt::print(stderr, "arbiter agent: task {}: cannot start: {}\n", key, st.message());
      return;
    }
    fmt::print("arbiter agent: task {} started\n", key);
    std::fflush(stdout);
  }

  // The eviction's and the stop's deadlines: SIGTERM at the end of the grace period, SIGKILL
  // kill_after later.
  void Enforce() {
    const auto now = Clock::now();
    std::map<std::string, bool> running;
    for (const TaskStatus& t : supervisor_->Poll()) running[t.key] = t.running;
    for (auto& [key, local] : local_) {
      auto it = running.find(key);
      if (it == running.end() || !it->second) continue;
      if (local.term_at && now >= *local.term_at && !local.termed) {
        (void)supervisor_->Signal(key, SIGTERM);
        local.termed = true;
      }
      if (local.kill_at && now >= *local.kill_at && !local.killed) {
        (void)supervisor_->Signal(key, SIGKILL);
        local.killed = true;
      }
    }
  }

  Status StartLogServer() {
    if (args_.listen.empty()) args_.listen = args_.address + ":0";
    const auto colon = args_.listen.rfind(':');
    std::optional<std::int64_t> port =
        colon == std::string::npos ? std::nullopt : ParseInt(args_.listen.substr(colon + 1));
    if (!port || *port < 0 || *port > 65535) {
      return Status::FromCode(StatusCode::kInvalidArgument,
                              fmt::format("expected HOST:PORT, got '{}'", args_.listen),
                              "--listen");
    }
    const std::string host = args_.listen.substr(0, colon);
    const bool tls = !args_.tls_cert.empty();
    if (tls) {
      auto ssl =
          std::make_unique<httplib::SSLServer>(args_.tls_cert.c_str(), args_.tls_key.c_str());
      if (!ssl->is_valid()) {
        return Status::InvalidArgument(fmt::format("cannot use the certificate {} with the key {}",
                                                   args_.tls_cert, args_.tls_key),
                                       "--tls-cert");
      }
      logs_ = std::move(ssl);
    } else {
      logs_ = std::make_unique<httplib::Server>();
    }
    logs_->Get(R"(/logs/(\d+)/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
      // Only the server asks, with this node's log token (given at registration).
      std::string token;
      {
        std::lock_guard lock(log_token_mu_);
        token = log_token_;
      }
      const std::string header = req.get_header_value("Authorization");
      if (token.empty() || header.rfind("Bearer ", 0) != 0 ||
          !crypto::EqualConstantTime(std::string_view(header).substr(7), token)) {
        res.status = 401;
        res.set_content("Authorization: the node's log token is required\n", "text/plain");
        return;
      }
      const std::optional<std::int64_t> job = ParseInt(req.matches[1].str());
      const std::optional<std::int64_t> rank = ParseInt(req.matches[2].str());
      if (!job || !rank || *rank > std::numeric_limits<std::uint32_t>::max()) {
        res.status = 400;
        res.set_content("a job id and a task rank are whole numbers in range\n", "text/plain");
        return;
      }
      const std::string path =
          LogPath(static_cast<std::uint64_t>(*job), static_cast<std::uint32_t>(*rank));
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        res.status = 404;
        res.set_content(fmt::format("no log of job {} task {} on this node\n", *job, *rank),
                        "text/plain");
        return;
      }
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (req.has_param("tail_bytes")) {
        const std::optional<std::int64_t> tail = ParseInt(req.get_param_value("tail_bytes"));
        if (tail && *tail >= 0 && static_cast<std::size_t>(*tail) < text.size())
          text = text.substr(text.size() - static_cast<std::size_t>(*tail));
      }
      res.set_content(text, "text/plain; charset=utf-8");
    });
    const int bound =
        *port == 0
            ? logs_->bind_to_any_port(host)
            : (logs_->bind_to_port(host, static_cast<int>(*port)) ? static_cast<int>(*port) : -1);
    if (bound < 0)
      return Status::FromCode(StatusCode::kUnavailable,
                              fmt::format("cannot listen on {}", args_.listen), "--listen");
    log_url_ = fmt::format("{}://{}:{}", tls ? "https" : "http", args_.address, bound);
    log_thread_ = std::thread([this] { logs_->listen_after_bind(); });
    return Status::Ok();
  }

  AgentArgs args_;
  // The servers, and a client (keeping its connection) for each address used.
  std::optional<net::LeaderFollower> follower_;
  std::chrono::milliseconds round_wait_{0};  // the wait the last round of the servers ended with
  std::map<std::string, std::unique_ptr<httplib::Client>> clients_;
  const std::atomic<bool>* stop_ = nullptr;
  std::uint64_t epoch_ = 0;  // the highest epoch an answer gave
  std::string stale_;        // the last deposed leader's answer said (server and epoch)
  std::vector<GpuInfo> devices_;
  HostInfo host_;
  std::string work_dir_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<httplib::Server> logs_;
  std::thread log_thread_;
  std::string log_url_;
  std::string credential_;  // the node's credential (empty: not joined yet)
  std::mutex log_token_mu_;
  std::string log_token_;  // GUARDED_BY(log_token_mu_): what the server's log requests carry

  bool registered_ = false;
  // The sync by difference: the revision the server's last answer gave, the tasks the node is to
  // run (by key) as its answers built them up, and the reports the server has (by task key).
  std::string revision_;
  std::map<std::string, Json> wanted_;
  std::map<std::string, Json> sent_;
  std::int64_t sync_wait_ms_ = 2000;
  std::int64_t kill_after_ms_ = 10000;
  std::string checkpoint_root_;
  std::string complained_;
  std::map<std::string, Local> local_;
  // Tasks the answer lists that never ran here (they could not start: 127; or were evicted
  // first: 0), reported as ended with that code until the answer drops them.
  std::map<std::string, int> unstarted_;
};

}  // namespace

int RunAgent(const AgentArgs& given) {
  AgentArgs args = given;
  if (args.name.empty() || args.server.empty()) {
    fmt::print(stderr, "error: agent needs --server and --name\n");
    return 2;
  }
  if (!args.token.empty() && !args.token_file.empty()) {
    fmt::print(stderr, "error: give --token or --token-file, not both\n");
    return 2;
  }
  if (!args.token_file.empty()) {
    std::ifstream in(args.token_file);
    if (!in) {
      fmt::print(stderr, "error: --token-file: cannot read {}\n", args.token_file);
      return 2;
    }
    std::getline(in, args.token);
    while (!args.token.empty() && (args.token.back() == '\r' || args.token.back() == ' '))
      args.token.pop_back();
  } else if (args.token.empty()) {
    if (const char* v = std::getenv("ARBITER_AGENT_TOKEN")) args.token = v;
  } else {
    fmt::print(stderr,
               "warning: --token shows the join token to every user of this machine (ps); "
               "prefer --token-file or ARBITER_AGENT_TOKEN\n");
  }
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    fmt::print(stderr, "error: give both --tls-cert and --tls-key\n");
    return 2;
  }
  // SIGINT and SIGTERM stop the agent (not its tasks): taken by sigwait on a thread of their own.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    stop = true;
  });
  waiter.detach();
  Agent agent(args);
  return agent.Run(stop);
}

int RunCheckpoint() {
  const char* dir = std::getenv("ARBITER_CHECKPOINT_DIR");
  if (!dir || !*dir) {
    fmt::print(stderr,
               "error: ARBITER_CHECKPOINT_DIR is not set: `arbiter checkpoint` is run "
               "by a task its agent started\n");
    return 2;
  }
  const fs::path marker = fs::path(dir) / kCheckpointMarker;
  const fs::path temp = fs::path(dir) / (std::string(kCheckpointMarker) + ".tmp");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << NowMs() << "\n";
    if (!out) {
      fmt::print(stderr, "error: cannot write {}\n", temp.string());
      return 1;
    }
  }
  std::error_code ec;
  fs::rename(temp, marker, ec);
  if (ec) {
    fmt::print(stderr, "error: cannot write {}: {}\n", marker.string(), ec.message());
    return 1;
  }
  return 0;
}

}  // namespace arbiter::agent
