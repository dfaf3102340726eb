#include "loadgen/load.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "loadgen/http_client.h"
#include "loadgen/server_process.h"

namespace arbiter::loadgen {

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Unix time in milliseconds: the server's clock for a task's `run` and a stop's `term_at_ms`
// (same machine, same clock).
std::int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

Clock::time_point After(Clock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

asio::awaitable<void> SleepUntil(Clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_at(when);
  co_await timer.async_wait(kAwait);
}

asio::awaitable<void> Sleep(milliseconds d) { co_await SleepUntil(Clock::now() + d); }

// The `field` of an error answer ({"error": {"code", "field", "message"}}), or "".
std::string ErrorField(const std::string& body) {
  const Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const Json& field = j["error"].value("field", Json(""));
  return field.is_string() ? field.get<std::string>() : "";
}

std::int64_t EnvMillis(const Json& task, const char* name, std::int64_t fallback) {
  if (!task.contains("env") || !task["env"].is_object()) return fallback;
  const Json& v = task["env"].value(name, Json());
  if (!v.is_string()) return fallback;
  const std::int64_t ms = std::atoll(v.get<std::string>().c_str());
  return ms > 0 ? ms : fallback;
}

// A task an agent pretends to run: it runs for LOADGEN_RUNTIME_MS from when the agent first saw
// it, checkpoints every LOADGEN_CHECKPOINT_MS counted from its run (so that every task of a gang
// reports the same checkpoint times), and ends with exit code 0, or with SIGTERM when a stop's
// term time comes first.
struct FakeTask {
  std::uint64_t job = 0;
  std::uint32_t rank = 0;
  std::int64_t run = 0;  // the job's start time (Unix ms, the server's clock)
  std::int64_t end_ms = 0;
  std::int64_t checkpoint_every_ms = 0;
  std::int64_t term_at_ms = -1;  // a stop's SIGTERM time; -1: no stop
  bool end_counted = false;
};

struct Agent {
  std::uint32_t index = 0;
  std::string name, register_target, sync_target;
  std::unique_ptr<Connection> connection;
  std::string credential;  // the node's, once registered; the join token before
  bool registered = false;
  std::int64_t wait_ms = 2000;  // sync_wait_ms of the registration
  std::string revision;         // of the last answer (sync by difference)
  std::uint64_t version = 0;    // of the last answer (today's whole-set answers)
  std::unordered_map<std::string, FakeTask> tasks;  // by key
  Clock::time_point last_sync{};
};

struct Watcher {
  std::uint32_t index = 0;
  std::string token;
  std::unique_ptr<Connection> connection;
  std::string cursor = "0";  // the last event's id
  bool streaming = false;
  bool measures_lag = false;  // watcher 0 reads the `submitted` events' times
};

class Load {
 public:
  Load(asio::io_context& io, const LoadOptions& options)
      : io_(io),
        options_(options),
        server_(asio::ip::make_address(options.host), static_cast<unsigned short>(options.port)),
        rng_(options.seed) {}

  void Start() {
    start_ = Clock::now();
    window_start_ = After(start_, options_.warmup_s);
    window_end_ = After(window_start_, options_.duration_s);
    // Agents register spread over most of the warmup, watchers over its first half, so that
    // neither comes as one burst of connections.
    const std::uint32_t n = options_.shape.nodes;
    for (std::uint32_t i = 0; i < n; ++i) {
      auto a = std::make_unique<Agent>();
      a->index = i;
      a->name = NodeName(i);
      a->register_target = fmt::format("/v1/nodes/{}/register", a->name);
      a->connection = std::make_unique<Connection>(io_.get_executor(), server_);
      Spawn(RunAgent(*a, After(start_, options_.warmup_s * 0.6 * i / n)));
      agents_.push_back(std::move(a));
    }
    for (std::uint32_t i = 0; i < options_.watchers; ++i) {
      auto w = std::make_unique<Watcher>();
      w->index = i;
      const std::vector<std::string>& tokens = options_.tokens.watchers;
      w->token =
          tokens.empty() ? options_.tokens.user : tokens[i * tokens.size() / options_.watchers];
      w->connection = std::make_unique<Connection>(io_.get_executor(), server_);
      w->measures_lag = i == 0;
      Spawn(RunWatcher(*w, After(start_, options_.warmup_s * 0.5 * i / options_.watchers)));
      watchers_.push_back(std::move(w));
    }
    const int submitters = std::max(1, options_.submitters);
    submit_in_flight_.resize(static_cast<std::size_t>(submitters));
    for (int i = 0; i < submitters; ++i) Spawn(RunSubmitter(static_cast<std::size_t>(i)));
    Spawn(RunProbe());
    Spawn(RunLoopProbe());
    Spawn(RunWindow());
  }

  LoadResults& results() { return results_; }

  void Stop() {
    stopping_ = true;
    io_.stop();
  }

 private:
  void Spawn(asio::awaitable<void> task) { asio::co_spawn(io_, std::move(task), asio::detached); }

  void Error(const std::string& kind) { ++results_.errors[kind]; }

  // ---- agents ----

  asio::awaitable<void> RunAgent(Agent& a, Clock::time_point start) {
    co_await SleepUntil(start);
    while (!stopping_) {
      if (!a.registered) {
        if (const int status = co_await Register(a); status != 200)
          co_await Sleep(milliseconds(status == 409 ? 5000 : 1000));
        continue;
      }
      if (!co_await Sync(a)) co_await Sleep(milliseconds(1000));
    }
  }

  // POST /v1/nodes/NAME/register with the node's credential, or the join token before it has one
  // (and after the server refused the credential); 200 or the status (0: no answer).
  asio::awaitable<int> Register(Agent& a) {
    const std::uint32_t gpus = options_.shape.gpus_per_node;
    std::string devices;
    for (std::uint32_t d = 0; d < gpus; ++d) {
      devices += fmt::format(
          "{}{{\"model\":\"{}\",\"name\":\"NVIDIA H800 80GB HBM3\",\"memory_mib\":{},"
          "\"uuid\":\"GPU-loadgen-{}-{}\",\"nvlink_group\":0}}",
          d ? "," : "", kGpuModel, kGpuMemoryMiB, a.index, d);
    }
    std::string body = fmt::format(
        "{{\"devices\":[{}],\"cpu_milli\":{},\"memory_mib\":{},\"hostname\":\"{}\","
        "\"address\":\"127.0.0.1\"}}",
        devices, kNodeCpuMilli, kNodeMemoryMiB, a.name);
    const std::string& token = a.credential.empty() ? options_.tokens.agent : a.credential;
    Reply r = co_await a.connection->Call(http::verb::post, a.register_target, token,
                                          std::move(body), milliseconds(30'000));
    if (r.status != 200) {
      Error(r.status == 0 ? "register_" + r.error : fmt::format("register_{}", r.status));
      if (r.status == 401) a.credential.clear();
      co_return r.status;
    }
    const Json answer = Json::parse(r.body, nullptr, false);
    if (!answer.is_object() || !answer.value("credential", Json()).is_string()) {
      Error("register_bad_answer");
      co_return 0;
    }
    a.credential = answer["credential"].get<std::string>();
    const Json wait = answer.value("sync_wait_ms", Json(2000));
    a.wait_ms = wait.is_number_integer() ? wait.get<std::int64_t>() : 2000;
    a.sync_target = fmt::format("/v1/nodes/{}/sync?wait_ms={}", a.name, a.wait_ms);
    a.revision.clear();
    a.version = 0;
    a.registered = true;
    ++results_.registrations;
    co_return 200;
  }

  // One report per task the agent has, as it stands at `now` (Unix ms).
  std::string Reports(Agent& a, std::int64_t now) {
    std::string out;
    for (auto& [key, t] : a.tasks) {
      const bool terminated = t.term_at_ms >= 0 && now >= t.term_at_ms && t.term_at_ms < t.end_ms;
      const bool ended = terminated || now >= t.end_ms;
      const std::int64_t until = std::min(now, terminated ? t.term_at_ms : t.end_ms);
      std::int64_t checkpoint = -1;
      if (t.checkpoint_every_ms > 0 && until - t.run >= t.checkpoint_every_ms)
        checkpoint = t.run + (until - t.run) / t.checkpoint_every_ms * t.checkpoint_every_ms;
      if (ended && !t.end_counted) {
        t.end_counted = true;
        if (measuring_) ++(terminated ? results_.stopped : results_.completed);
      }
      out += fmt::format(
          "{}{{\"job\":{},\"rank\":{},\"run\":{},\"running\":{},\"exit_code\":{},\"signal\":{},"
          "\"lost\":false,\"checkpoint_ms\":{}}}",
          out.empty() ? "" : ",", t.job, t.rank, t.run, ended ? "false" : "true",
          ended && !terminated ? 0 : -1, terminated ? 15 : 0, checkpoint);
    }
    return out;
  }

  // One sync: every task's report, then the answer taken (whole set, or by difference). False
  // when no answer came or it was refused (the caller waits a second before the next).
  asio::awaitable<bool> Sync(Agent& a) {
    std::string body = "{";
    if (send_revision_) body += fmt::format("\"revision\":{},", Json(a.revision).dump());
    if (send_version_) body += fmt::format("\"version\":{},", a.version);
    body += "\"tasks\":[" + Reports(a, UnixMs()) + "]}";
    Reply r = co_await a.connection->Call(http::verb::post, a.sync_target, a.credential,
                                          std::move(body), milliseconds(a.wait_ms + 15'000));
    if (r.status == 0) {
      Error("sync_" + r.error);
      co_return false;
    }
    if (r.status == 401 || r.status == 404 || r.status == 409) {
      // Not registered (the server restarted, or lost the node), or the credential refused.
      Error(fmt::format("sync_{}", r.status));
      a.registered = false;
      co_return true;
    }
    if (r.status == 400) {
      // Today's server reads `version` alone and refuses an unknown `revision`; a server that
      // speaks only by difference may refuse `version`. Learn which, once, and send the other.
      // (Syncs sent before the first refusal came back are refused too: sent again.)
      const std::string field = ErrorField(r.body);
      if (field == "revision" && send_version_) {
        send_revision_ = false;
        co_return true;
      }
      if (field == "version" && send_revision_) {
        send_version_ = false;
        co_return true;
      }
    }
    if (r.status != 200) {
      Error(fmt::format("sync_{}", r.status));
      co_return false;
    }
    Json answer = Json::parse(r.body, nullptr, false);
    if (!answer.is_object() || !answer.contains("tasks") || !answer["tasks"].is_array()) {
      Error("sync_bad_answer");
      co_return false;
    }
    a.last_sync = Clock::now();
    if (measuring_) ++results_.syncs;
    Take(a, answer);
    co_return true;
  }

  // The answer's tasks. New form: {"revision", "full", "tasks", "removed", "now_ms"}; full=true
  // lists the node's whole set, else what was added or changed, and the keys removed. Today's:
  // {"version", "tasks"}, always the whole set.
  void Take(Agent& a, const Json& answer) {
    bool full = true;
    if (answer.contains("revision") && answer["revision"].is_string()) {
      a.revision = answer["revision"].get<std::string>();
      full = answer.value("full", false);
      if (results_.sync_form.empty()) results_.sync_form = "revision";
    } else {
      if (answer.contains("version") && answer["version"].is_number_unsigned())
        a.version = answer["version"].get<std::uint64_t>();
      if (results_.sync_form.empty()) results_.sync_form = "version";
    }
    const std::int64_t now = UnixMs();
    std::unordered_set<std::string> listed;
    for (const Json& w : answer["tasks"]) {
      if (!w.is_object() || !w.contains("key") || !w["key"].is_string()) continue;
      std::string key = w["key"].get<std::string>();
      auto it = a.tasks.find(key);
      if (it == a.tasks.end()) {
        FakeTask t;
        t.job = w.value("job", std::uint64_t{0});
        t.rank = w.value("rank", std::uint32_t{0});
        t.run = w.value("run", std::int64_t{0});
        t.end_ms = now + EnvMillis(w, "LOADGEN_RUNTIME_MS", 60'000);
        t.checkpoint_every_ms = EnvMillis(w, "LOADGEN_CHECKPOINT_MS", 0);
        // The bind-to-agent latency: from the job's start (the server's clock) to now.
        if (measuring_) {
          ++results_.assigned;
          results_.assign_ms.push_back(static_cast<double>(now - t.run));
        }
        it = a.tasks.emplace(key, t).first;
      }
      if (w.contains("stop") && w["stop"].is_object() && it->second.term_at_ms < 0) {
        const Json& stop = w["stop"];
        if (stop.contains("term_at_ms") && stop["term_at_ms"].is_number_integer())
          it->second.term_at_ms = stop["term_at_ms"].get<std::int64_t>();
        else
          it->second.term_at_ms = now + stop.value("term_in_ms", std::int64_t{0});
      }
      if (full) listed.insert(std::move(key));
    }
    if (full) {
      std::erase_if(a.tasks, [&](const auto& entry) { return !listed.count(entry.first); });
    } else if (answer.contains("removed") && answer["removed"].is_array()) {
      for (const Json& key : answer["removed"])
        if (key.is_string()) a.tasks.erase(key.get<std::string>());
    }
  }

  // ---- watchers ----

  asio::awaitable<void> RunWatcher(Watcher& w, Clock::time_point start) {
    co_await SleepUntil(start);
    while (!stopping_) {
      const std::string error = co_await Watch(w);
      w.streaming = false;
      if (stopping_) break;
      if (!error.empty()) Error("watch_" + error);
      co_await Sleep(milliseconds(error.empty() ? 100 : error == "429" ? 2000 : 1000));
    }
  }

  // One event stream, from the watcher's cursor until it ends: "" after an `event: dropped` (a
  // slow watcher, to resume from the cursor it gives), else why it ended.
  asio::awaitable<std::string> Watch(Watcher& w) {
    Connection& c = *w.connection;
    if (std::string error = co_await c.Connect(milliseconds(30'000)); !error.empty())
      co_return error;
    http::request<http::empty_body> request{
        http::verb::get, fmt::format("/v1/events/stream?cursor={}", w.cursor), 11};
    request.set(http::field::host, c.host());
    request.set(http::field::authorization, "Bearer " + w.token);
    request.keep_alive(true);
    c.stream().expires_after(milliseconds(30'000));
    if (auto [ec, n] = co_await http::async_write(c.stream(), request, kAwait); ec) {
      c.Close();
      co_return ErrorKind(ec);
    }
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    if (auto [ec, n] = co_await http::async_read_header(c.stream(), c.buffer(), parser, kAwait);
        ec) {
      c.Close();
      co_return ErrorKind(ec);
    }
    if (parser.get().result_int() != 200) {
      // Read the (small) error body so that the connection can be used again.
      const int status = static_cast<int>(parser.get().result_int());
      c.Close();
      co_return std::to_string(status);
    }
    w.streaming = true;
    std::string pending, kind;
    char chunk[16384];
    while (!stopping_) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      // The server writes a keep-alive comment within seconds when nothing happens.
      c.stream().expires_after(milliseconds(30'000));
      auto [ec, n] = co_await http::async_read(c.stream(), c.buffer(), parser, kAwait);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        c.Close();
        co_return ErrorKind(ec);
      }
      pending.append(chunk, sizeof chunk - parser.get().body().size);
      bool dropped = false;
      std::size_t begin = 0;
      for (std::size_t eol; (eol = pending.find('\n', begin)) != std::string::npos;
           begin = eol + 1) {
        const std::string_view line(pending.data() + begin, eol - begin);
        if (line.empty()) {
          if (!kind.empty() && measuring_) {
            ++results_.events;
            if (w.measures_lag) ++results_.event_kinds[kind];
          }
          kind.clear();
        } else if (line.starts_with("id:")) {
          w.cursor =
              std::string(line.substr(std::min(line.size(), line.find_first_not_of(' ', 3))));
        } else if (line.starts_with("event:")) {
          kind = std::string(line.substr(std::min(line.size(), line.find_first_not_of(' ', 6))));
          if (kind == "dropped") dropped = true;
        } else if (line.starts_with("data:")) {
          Data(w, kind, line.substr(5));
        }
      }
      pending.erase(0, begin);
      if (dropped) {
        Error("watch_dropped");
        c.Close();
        co_return "";
      }
      if (parser.is_done()) {
        c.Close();
        co_return "ended";
      }
    }
    co_return "";
  }

  // An event's data: the lag of `submitted` events for the first watcher; the cursor of a
  // `dropped` one (where the watcher resumes).
  void Data(Watcher& w, const std::string& kind, std::string_view data) {
    if (kind == "dropped") {
      const Json j = Json::parse(data, nullptr, false);
      if (j.is_object() && j.contains("cursor")) {
        const Json& cursor = j["cursor"];
        w.cursor = cursor.is_string() ? cursor.get<std::string>() : cursor.dump();
      }
      return;
    }
    if (!w.measures_lag || kind != "submitted" || !measuring_) return;
    const Json j = Json::parse(data, nullptr, false);
    if (j.is_object() && j.contains("time_ms") && j["time_ms"].is_number_integer())
      results_.event_lag_ms.push_back(
          static_cast<double>(UnixMs() - j["time_ms"].get<std::int64_t>()));
  }

  // ---- submissions and probes ----

  // One of the submitters' connections: takes the next arrival of the open-loop schedule
  // (arrival k at window start + k / rate), sends it at its time or, when every connection was
  // busy, as soon as this one is free; the latency runs from the arrival's time to the answer, so
  // that time spent waiting for a connection counts. A request with no answer (a timeout, a
  // closed connection) counts the time until it failed, one still unanswered when the window
  // ends its age then (so with failures the percentiles are lower bounds), and a refusal (4xx,
  // 5xx) counts as an error only.
  asio::awaitable<void> RunSubmitter(std::size_t slot) {
    Connection c(co_await asio::this_coro::executor, server_);
    co_await SleepUntil(window_start_);
    while (!stopping_ && Clock::now() < window_end_) {
      const std::uint64_t k = next_arrival_++;
      const Clock::time_point due = SubmitDue(k);
      if (due >= window_end_) break;
      co_await SleepUntil(due);
      std::string body = JobBody(rng_, k, options_.shape, options_.times);
      submit_in_flight_[slot] = due;
      Reply r = co_await c.Call(http::verb::post, "/v1/jobs", options_.tokens.user, std::move(body),
                                milliseconds(30'000));
      submit_in_flight_[slot].reset();
      if (!measuring_) break;
      if (r.status == 201 || r.status == 200) {
        ++results_.submitted;
        results_.submit_ms.push_back(MsSince(due));
      } else {
        Error(r.status == 0 ? "submit_" + r.error : fmt::format("submit_{}", r.status));
        if (r.status == 0) {
          results_.submit_ms.push_back(MsSince(due));
          co_await Sleep(milliseconds(100));
        }
      }
    }
  }

  Clock::time_point SubmitDue(std::uint64_t k) const {
    return After(window_start_, static_cast<double>(k) / options_.submit_rate);
  }

  // GET /healthz at its rate on a connection of its own, open loop as the submissions.
  asio::awaitable<void> RunProbe() {
    Connection c(co_await asio::this_coro::executor, server_);
    co_await SleepUntil(window_start_);
    for (std::uint64_t k = 0; !stopping_; ++k) {
      const Clock::time_point due =
          After(window_start_, static_cast<double>(k) / options_.healthz_rate);
      if (due >= window_end_) break;
      co_await SleepUntil(due);
      healthz_in_flight_ = due;
      Reply r = co_await c.Call(http::verb::get, "/healthz", "", "", milliseconds(10'000));
      healthz_in_flight_.reset();
      if (!measuring_) break;
      if (r.status == 200 || r.status == 0) results_.healthz_ms.push_back(MsSince(due));
      if (r.status != 200)
        Error(r.status == 0 ? "healthz_" + r.error : fmt::format("healthz_{}", r.status));
    }
  }

  // At the window's end: the submissions and probes still unanswered, and the arrivals no
  // connection took yet, count their age.
  void CountUnanswered() {
    const Clock::time_point now = Clock::now();
    auto age = [&](Clock::time_point due) {
      return std::chrono::duration<double, std::milli>(now - due).count();
    };
    for (const std::optional<Clock::time_point>& due : submit_in_flight_) {
      if (!due) continue;
      results_.submit_ms.push_back(age(*due));
      Error("submit_unanswered");
    }
    for (std::uint64_t k = next_arrival_; SubmitDue(k) < window_end_; ++k) {
      results_.submit_ms.push_back(age(SubmitDue(k)));
      Error("submit_unsent");
    }
    if (healthz_in_flight_) {
      results_.healthz_ms.push_back(age(*healthz_in_flight_));
      Error("healthz_unanswered");
    }
  }

  // How late a 50 ms timer fires: when the load generator's own thread is saturated, this says
  // so (its latencies then measure itself as much as the server).
  asio::awaitable<void> RunLoopProbe() {
    Clock::time_point due = window_start_;
    co_await SleepUntil(due);
    while (!stopping_ && due < window_end_) {
      co_await SleepUntil(due);
      results_.loop_lag_ms.push_back(MsSince(due));
      due += milliseconds(50);
    }
  }

  // The window: samples the server once a second, counts what is live at its start and end.
  asio::awaitable<void> RunWindow() {
    asio::signal_set signals(io_, SIGINT, SIGTERM);
    signals.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      results_.interrupted = true;
      interrupted_ = true;
    });
    double server_cpu0 = 0, self_cpu0 = 0;
    bool started = false;
    Clock::time_point began{};
    for (Clock::time_point tick = start_;; tick += milliseconds(1000)) {
      const Clock::time_point next = std::min(tick, window_end_);
      if (!started && next >= window_start_) {
        co_await SleepUntil(window_start_);
        started = true;
        measuring_ = true;
        began = Clock::now();
        self_cpu0 = SelfCpuSeconds();
        if (auto s = Sample()) server_cpu0 = s->cpu_seconds;
        for (const auto& a : agents_) results_.agents_registered += a->registered ? 1 : 0;
      }
      co_await SleepUntil(next);
      const bool dead = options_.server_alive && !options_.server_alive();
      if (dead) results_.server_died = true;
      if (measuring_) {
        if (auto s = Sample()) {
          results_.sampled = true;
          results_.server_threads_max = std::max(results_.server_threads_max, s->threads);
          results_.server_rss_mib_max = std::max(results_.server_rss_mib_max, s->rss_mib);
        }
      }
      if (next >= window_end_ || dead || interrupted_) break;
    }
    if (!started) {
      Stop();
      co_return;
    }
    measuring_ = false;
    CountUnanswered();
    results_.window_s = std::chrono::duration<double>(Clock::now() - began).count();
    if (auto s = Sample())
      results_.server_cpu_cores = (s->cpu_seconds - server_cpu0) / results_.window_s;
    results_.self_cpu_cores = (SelfCpuSeconds() - self_cpu0) / results_.window_s;
    const Clock::time_point recent = Clock::now() - std::chrono::seconds(10);
    for (const auto& a : agents_) results_.agents_live += a->last_sync >= recent ? 1 : 0;
    for (const auto& w : watchers_) results_.watchers_streaming += w->streaming ? 1 : 0;
    signals.cancel();
    Stop();
  }

  std::optional<ProcSample> Sample() const {
    if (options_.server_pid <= 0) return std::nullopt;
    return SampleProcess(options_.server_pid);
  }

  asio::io_context& io_;
  const LoadOptions& options_;
  Tcp::endpoint server_;
  Rng rng_;
  Clock::time_point start_, window_start_, window_end_;
  bool measuring_ = false;
  bool stopping_ = false;
  bool interrupted_ = false;
  // Which fields a sync body carries: both until the server refuses one.
  bool send_revision_ = true;
  bool send_version_ = true;
  std::uint64_t next_arrival_ = 0;
  // The arrival time of each submitter's request in flight, and of the probe's.
  std::vector<std::optional<Clock::time_point>> submit_in_flight_;
  std::optional<Clock::time_point> healthz_in_flight_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  LoadResults results_;
};

}  // namespace

LoadResults RunLoad(const LoadOptions& options) {
  // The io_context outlives the load's connections (declared first, destroyed last): the
  // coroutines still suspended when the run stops are destroyed with it.
  asio::io_context io(1);
  auto load = std::make_unique<Load>(io, options);
  load->Start();
  io.run();
  LoadResults results = std::move(load->results());
  load.reset();
  return results;
}

bool WaitReady(const std::string& host, int port, double seconds) {
  asio::io_context io(1);
  bool ready = false;
  const Tcp::endpoint server(asio::ip::make_address(host), static_cast<unsigned short>(port));
  auto poll = [&]() -> asio::awaitable<void> {
    Connection c(co_await asio::this_coro::executor, server);
    const Clock::time_point end = After(Clock::now(), seconds);
    while (Clock::now() < end) {
      Reply r = co_await c.Call(http::verb::get, "/readyz", "", "", milliseconds(5000));
      if (r.status == 200) {
        ready = true;
        break;
      }
      co_await Sleep(milliseconds(100));
    }
  };
  asio::co_spawn(io, poll(), asio::detached);
  io.run();
  return ready;
}

}  // namespace arbiter::loadgen
