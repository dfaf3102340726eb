// The HTTP layer: routes, bearer-token authentication, request parsing into the core's calls,
// and the core's answers into JSON responses. Errors become HTTP codes only here and in core.cc.
#include <fmt/format.h>
#include <httplib.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "arbiter/store.h"
#include "config/config.h"
#include "config/limits.h"
#include "net/tls.h"
#include "server/agent_wire.h"
#include "server/auth.h"
#include "server/core.h"
#include "server/server.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using net::TlsClientSettings;

// The one place where error codes become HTTP statuses.
int HttpStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kResourceExhausted:
      return 429;
  }
  return 500;
}

// {"error": {"code": "invalid_argument", "field": "groups[0].tasks", "message": "groups[0].tasks:
// must be at least 1, got 0"}}: the code's name with '_' for ' ', the field path ("" when the
// error concerns no one field) and the message for people.
void SendError(httplib::Response& res, int status, std::string code, const std::string& field,
               const std::string& message) {
  std::replace(code.begin(), code.end(), ' ', '_');
  res.status = status;
  res.set_content(
      store::Dump(Json{{"error", {{"code", code}, {"field", field}, {"message", message}}}}) + "\n",
      "application/json");
}

void Send(httplib::Response& res, const Answer& answer) {
  if (!answer.ok()) {
    const Status& e = answer.error;
    return SendError(res, HttpStatus(e.code()), StatusCodeName(e.code()), e.field(), e.message());
  }
  res.status = answer.created ? 201 : 200;
  res.set_content(store::Dump(answer.body) + "\n", "application/json");
}

// Watchers: long polls of the event log and event streams, each holding a connection thread
// while it waits. Each token holds at most `per_caller` at once and all together at most `total`,
// so that the other threads stay free for health checks, submissions and agents' syncs; one more
// is refused (429) rather than queued.
class Watchers {
 public:
  Watchers(std::size_t total, std::size_t per_caller) : total_(total), per_caller_(per_caller) {}

  // A watcher's place, given back when it is destroyed.
  class Slot {
   public:
    Slot(Watchers* owner, std::string caller) : owner_(owner), caller_(std::move(caller)) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { owner_->Release(caller_); }

   private:
    Watchers* owner_;
    std::string caller_;
  };

  Result<std::shared_ptr<Slot>> Acquire(const std::string& caller) {
    std::lock_guard lock(mu_);
    std::size_t& mine = by_caller_[caller];
    if (mine >= per_caller_) {
      return Status::FromCode(StatusCode::kResourceExhausted,
                              fmt::format("{} already watches {} times at once (the most one "
                                          "token may); close one first",
                                          caller, mine),
                              "wait");
    }
    if (in_use_ >= total_) {
      return Status::FromCode(StatusCode::kResourceExhausted,
                              fmt::format("the server already serves {} watchers (the most it "
                                          "keeps next to other requests); retry shortly",
                                          in_use_),
                              "wait");
    }
    ++mine;
    ++in_use_;
    return std::make_shared<Slot>(this, caller);
  }

 private:
  void Release(const std::string& caller) {
    std::lock_guard lock(mu_);
    --in_use_;
    if (--by_caller_[caller] == 0) by_caller_.erase(caller);
  }

  const std::size_t total_, per_caller_;
  std::mutex mu_;
  std::size_t in_use_ = 0;                                  // GUARDED_BY(mu_)
  std::unordered_map<std::string, std::size_t> by_caller_;  // GUARDED_BY(mu_)
};

// Unix time in milliseconds (token expiry).
Millis NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Api {
 public:
  Api(const config::ClusterConfig& config, std::string node_key, int threads)
      : auth_(config.server.tokens, std::move(node_key)),
        // A quarter of the connection threads may wait; each token a few of them.
        watchers_(static_cast<std::size_t>(std::max(1, threads / 4)), 4) {
    max_body_ = static_cast<std::size_t>(config.server.max_body_bytes);
  }

  void SetCore(Core* core) { core_.store(core); }
  Core* core() const { return core_.load(); }

  void Register(httplib::Server& svr) {
    svr.set_payload_max_length(max_body_);
    svr.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
      if (res.status == 413) {
        Send(res,
             Status::InvalidArgument(
                 fmt::format("larger than {} bytes (server.max_body_bytes)", max_body_), "body"));
        CountBad();
      } else if (res.body.empty()) {
        if (res.status == 404) {
          Send(res, Status::NotFound("no such endpoint (see docs/api.md)", "path"));
        } else {
          // The HTTP library's own refusals (405 ...) keep their status.
          SendError(res, res.status, "invalid argument", "", "request refused");
        }
      }
    });
    svr.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          Send(res, Status::Internal("internal error"));
        });

    svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      Send(res, Answer(Json{{"status", "ok"}}));
    });
    svr.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      Send(res, core() ? Answer(Json{{"status", "ready"}})
                       : Status::Unavailable("recovering from the store"));
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      Core* c = core();
      if (!c) return Send(res, Status::Unavailable("recovering from the store"));
      res.set_content(c->MetricsText(), "text/plain; version=0.0.4");
    });

    Route(
        svr, "POST", "/v1/jobs",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          if (req.body.empty())
            return Status::InvalidArgument("empty; expected a job spec (JSON)", "body");
          return c.Submit(who, req.body);
        });
    Route(svr, "GET", "/v1/jobs",
          [](Core& c, const Caller&, const httplib::Request& req, httplib::Response&) -> Answer {
            JobFilter filter;
            filter.queue = req.get_param_value("queue");
            filter.user = req.get_param_value("user");
            if (req.has_param("state")) {
              const std::string s = req.get_param_value("state");
              filter.state = store::ParseJobState(s);
              if (!filter.state) {
                return Status::InvalidArgument(
                    fmt::format("unknown job state '{}' (known: pending, held, "
                                "running, completed, failed, cancelled)",
                                s),
                    "state");
              }
            }
            if (req.has_param("limit")) {
              std::optional<std::uint64_t> limit = Number(req.get_param_value("limit"));
              if (!limit || *limit == 0)
                return Status::InvalidArgument("must be a positive integer", "limit");
              filter.limit = static_cast<std::size_t>(*limit);
            }
            return c.ListJobs(filter);
          });
    Route(svr, "GET", R"(/v1/jobs/(\d+))",
          [](Core& c, const Caller&, const httplib::Request& req, httplib::Response&) -> Answer {
            std::optional<JobId> id = Number(req.matches[1]);
            if (!id) return Status::InvalidArgument("not a job id", "id");
            return c.GetJob(*id);
          });
    auto cancel = [](Core& c, const Caller& who, const httplib::Request& req,
                     httplib::Response&) -> Answer {
      std::optional<JobId> id = Number(req.matches[1]);
      if (!id) return Status::InvalidArgument("not a job id", "id");
      return c.Cancel(who, *id);
    };
    Route(svr, "DELETE", R"(/v1/jobs/(\d+))", cancel);
    Route(svr, "POST", R"(/v1/jobs/(\d+)/cancel)", cancel);
    Route(
        svr, "POST", R"(/v1/jobs/(\d+)/(hold|release))",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          std::optional<JobId> id = Number(req.matches[1]);
          if (!id) return Status::InvalidArgument("not a job id", "id");
          return c.Hold(who, *id, req.matches[2] == "hold");
        });
    Route(
        svr, "PATCH", R"(/v1/jobs/(\d+))",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          std::optional<JobId> id = Number(req.matches[1]);
          if (!id) return Status::InvalidArgument("not a job id", "id");
          Result<Json> body = Body(req);
          if (!body.ok()) return body.status();
          if (!body->is_object()) return Status::InvalidArgument("expected a JSON object", "body");
          for (const auto& [key, value] : body->items()) {
            if (key != "priority_class")
              return Status::InvalidArgument(
                  "unknown field (a job's priority_class can be changed; hold and release have "
                  "their "
                  "own endpoints)",
                  key);
          }
          if (!body->contains("priority_class") || !(*body)["priority_class"].is_string())
            return Status::InvalidArgument("must be given, as a string", "priority_class");
          return c.SetPriority(who, *id, (*body)["priority_class"].get<std::string>());
        });

    Route(svr, "GET", "/v1/queues",
          [](Core& c, const Caller&, const httplib::Request&, httplib::Response&) -> Answer {
            return c.ListQueues();
          });
    Route(
        svr, "PUT", R"(/v1/queues/([^/]+)/quota)",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          Result<Json> body = Body(req);
          if (!body.ok()) return body.status();
          if (!body->is_object())
            return Status::InvalidArgument("expected an object of resources", "quota");
          return c.SetQueueQuota(who, req.matches[1], *body);
        });
    Route(
        svr, "DELETE", R"(/v1/queues/([^/]+)/quota)",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          return c.SetQueueQuota(who, req.matches[1], nullptr);
        });

    Route(svr, "GET", "/v1/nodes",
          [](Core& c, const Caller&, const httplib::Request&, httplib::Response&) -> Answer {
            return c.ListNodes();
          });
    Route(
        svr, "POST", R"(/v1/nodes/([^/]+)/(cordon|uncordon|drain))",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          std::string reason;
          if (!req.body.empty()) {
            Result<Json> body = Body(req);
            if (!body.ok()) return body.status();
            if (!body->is_object())
              return Status::InvalidArgument("expected a JSON object", "body");
            for (const auto& [key, value] : body->items()) {
              if (key != "reason")
                return Status::InvalidArgument("unknown field (only reason)", key);
              if (!value.is_string()) return Status::InvalidArgument("must be a string", "reason");
              reason = value.get<std::string>();
              if (Status s = limits::CheckText("reason", reason, limits::kMaxReasonBytes); !s.ok())
                return s;
            }
          }
          const std::string action = req.matches[2];
          const store::NodeAdminState state = action == "cordon" ? store::NodeAdminState::kCordoned
                                              : action == "drain"
                                                  ? store::NodeAdminState::kDraining
                                                  : store::NodeAdminState::kSchedulable;
          return c.SetNodeState(who, req.matches[1], state, reason);
        });

    // Node agents (docs/api.md, "Node agents").
    Route(svr, "POST", R"(/v1/nodes/([^/]+)/register)",
          [this](Core& c, const Caller& who, const httplib::Request& req,
                 httplib::Response&) -> Answer {
            Result<RegisterBody> body = ParseRegisterBody(req.body);
            if (!body.ok()) return body.status();
            const std::string node = req.matches[1];
            Answer answer = c.RegisterAgent(who, node, *body, req.remote_addr);
            if (!answer.ok()) return answer;
            // The node's own credential for its syncs (and its next registration), and the token
            // its log server is to ask of the server: neither is a token of the configuration.
            answer.body["credential"] = auth_.NodeCredential(node);
            answer.body["log_token"] = auth_.LogToken(node);
            return answer;
          });
    Route(
        svr, "POST", R"(/v1/nodes/([^/]+)/sync)",
        [](Core& c, const Caller& who, const httplib::Request& req, httplib::Response&) -> Answer {
          std::uint64_t wait = 0;
          if (req.has_param("wait_ms")) {
            std::optional<std::uint64_t> v = Number(req.get_param_value("wait_ms"));
            if (!v || *v > 60000) return Status::InvalidArgument("must be 0 to 60000", "wait_ms");
            wait = *v;
          }
          Result<SyncBody> body = ParseSyncBody(req.body);
          if (!body.ok()) return body.status();
          return c.SyncAgent(who, req.matches[1], body->reports, body->version,
                             std::chrono::milliseconds(wait));
        });
    Route(svr, "GET", R"(/v1/jobs/(\d+)/logs)",
          [this](Core& c, const Caller&, const httplib::Request& req,
                 httplib::Response& res) -> Answer {
            std::optional<JobId> id = Number(req.matches[1]);
            if (!id) return Status::InvalidArgument("not a job id", "id");
            std::uint64_t task = 0;
            if (req.has_param("task")) {
              std::optional<std::uint64_t> v = Number(req.get_param_value("task"));
              if (!v || *v > UINT32_MAX)
                return Status::InvalidArgument("must be a task index", "task");
              task = *v;
            }
            Answer where = c.LogSource(*id, static_cast<std::uint32_t>(task));
            if (!where.ok()) return where;
            // The log stays on its node: asked of the agent's log server, without the core's lock,
            // with the node's log token (never the caller's token or a token of the server's).
            const std::string node = where.body["node"].get<std::string>();
            const std::string url = where.body["url"].get<std::string>();
            // With --agent-ca the server speaks to log servers over verified https only.
            if (!tls_.ca_file.empty() && url.rfind("https://", 0) != 0) {
              return Status::Unavailable(
                  fmt::format("the agent of {} serves logs over plain HTTP ({}); this server "
                              "(--agent-ca) asks log servers over https only: start the agent "
                              "with --tls-cert and --tls-key",
                              node, url));
            }
            httplib::Client agent(url);
            tls_.Configure(agent);
            agent.set_connection_timeout(std::chrono::seconds(5));
            agent.set_read_timeout(std::chrono::seconds(30));
            httplib::Headers headers{{"Authorization", "Bearer " + auth_.LogToken(node)}};
            std::string path = where.body["path"].get<std::string>();
            if (req.has_param("tail_bytes")) {
              std::optional<std::uint64_t> tail = Number(req.get_param_value("tail_bytes"));
              if (!tail)
                return Status::InvalidArgument("must be a non-negative integer", "tail_bytes");
              path += fmt::format("?tail_bytes={}", *tail);
            }
            httplib::Result got = agent.Get(path, headers);
            if (!got) {
              return Status::Unavailable(
                  fmt::format("node: the agent of {} did not answer for "
                              "the log",
                              where.body["node"].get<std::string>()));
            }
            if (got->status != 200) {
              const std::string problem =
                  fmt::format("the agent of {} answered {}: {}",
                              where.body["node"].get<std::string>(), got->status, got->body);
              if (got->status == 404) return Status::NotFound(problem, "log");
              return Status::FromCode(StatusCode::kUnavailable, problem, "log");
            }
            res.status = 200;
            res.set_content(got->body, "text/plain; charset=utf-8");
            return Answer::Written();
          });

    // Server-sent events: the same stream, pushed as it is committed. Each event is
    // `id: SEQ`, `event: KIND`, `data: JSON`; a reconnecting client's Last-Event-ID (or ?cursor=)
    // says where to go on. A comment line after 5 s without events keeps idle connections open.
    Route(svr, "GET", "/v1/events/stream",
          [this](Core& c, const Caller& who, const httplib::Request& req,
                 httplib::Response& res) -> Answer {
            std::string from = req.get_header_value("Last-Event-ID");
            if (req.has_param("cursor")) from = req.get_param_value("cursor");
            std::optional<std::uint64_t> cursor =
                from.empty() ? std::optional<std::uint64_t>(0) : Number(from);
            if (!cursor) return Status::InvalidArgument("must be a non-negative integer", "cursor");
            Result<std::shared_ptr<Watchers::Slot>> slot = watchers_.Acquire(who.name);
            if (!slot.ok()) return slot.status();
            struct Position {
              std::uint64_t cursor = 0;
              std::shared_ptr<Watchers::Slot> slot;  // given back when the stream ends
            };
            auto position = std::make_shared<Position>(Position{*cursor, *slot});
            res.set_header("Cache-Control", "no-cache");
            res.set_chunked_content_provider(
                "text/event-stream", [&c, position](std::size_t, httplib::DataSink& sink) {
                  // Waits a second at a time, so that a stopping server is not kept waiting.
                  Answer answer = c.Events(position->cursor, 1000, std::chrono::seconds(1));
                  if (!answer.ok() || !sink.is_writable()) return false;
                  std::string text;
                  for (const Json& e : answer.body["events"]) {
                    text += fmt::format("id: {}\nevent: {}\ndata: {}\n\n",
                                        e["seq"].get<std::uint64_t>(), e["kind"].get<std::string>(),
                                        store::Dump(e));
                  }
                  position->cursor = answer.body["cursor"].get<std::uint64_t>();
                  // A comment every idle second: a client that went away is found by the next
                  // write, and its watcher freed.
                  if (text.empty()) text = ":\n\n";
                  return sink.write(text.data(), text.size());
                });
            return Answer::Written();  // the provider writes the body
          });
    Route(svr, "GET", "/v1/events",
          [this](Core& c, const Caller& who, const httplib::Request& req,
                 httplib::Response& res) -> Answer {
            std::uint64_t cursor = 0;
            std::size_t limit = 1000;
            std::uint64_t wait = 0;
            if (req.has_param("cursor")) {
              std::optional<std::uint64_t> v = Number(req.get_param_value("cursor"));
              if (!v) return Status::InvalidArgument("must be a non-negative integer", "cursor");
              cursor = *v;
            }
            if (req.has_param("limit")) {
              std::optional<std::uint64_t> v = Number(req.get_param_value("limit"));
              if (!v || *v == 0 || *v > 10000)
                return Status::InvalidArgument("must be 1 to 10000", "limit");
              limit = static_cast<std::size_t>(*v);
            }
            if (req.has_param("wait")) {
              std::optional<std::uint64_t> v = Number(req.get_param_value("wait"));
              if (!v || *v > 60)
                return Status::InvalidArgument("must be 0 to 60 (seconds)", "wait");
              wait = *v;
            }
            if (wait == 0) return c.Events(cursor, limit, std::chrono::seconds(0));
            // A long poll waits a second at a time, writing a space (JSON allows it before the
            // value) after each: a client that went away is found within a second or two and
            // its watcher freed.
            Result<std::shared_ptr<Watchers::Slot>> slot = watchers_.Acquire(who.name);
            if (!slot.ok()) return slot.status();
            struct Poll {
              std::uint64_t cursor = 0;
              std::size_t limit = 0;
              std::uint64_t seconds_left = 0;
              std::shared_ptr<Watchers::Slot> slot;
            };
            auto poll = std::make_shared<Poll>(Poll{cursor, limit, wait, *slot});
            res.set_chunked_content_provider(
                "application/json", [&c, poll](std::size_t, httplib::DataSink& sink) {
                  Answer answer = c.Events(poll->cursor, poll->limit,
                                           std::chrono::seconds(poll->seconds_left > 0 ? 1 : 0));
                  if (!answer.ok()) return false;
                  if (answer.body["events"].empty() && poll->seconds_left > 1) {
                    --poll->seconds_left;
                    return sink.write(" ", 1);
                  }
                  const std::string text = store::Dump(answer.body) + "\n";
                  if (!sink.write(text.data(), text.size())) return false;
                  sink.done();
                  return true;
                });
            return Answer::Written();
          });
  }

  // The server's TLS settings for the requests it makes itself (to agents' log servers).
  void SetTls(TlsClientSettings tls) { tls_ = std::move(tls); }

 private:
  using Handler =
      std::function<Answer(Core&, const Caller&, const httplib::Request&, httplib::Response&)>;

  static std::optional<std::uint64_t> Number(const std::string& text) {
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return v;
  }

  static Result<Json> Body(const httplib::Request& req) {
    if (req.body.empty()) return Status::InvalidArgument("empty; expected JSON", "body");
    return store::ParseJson(req.body, "body");
  }

  void Route(httplib::Server& svr, const std::string& method, const std::string& pattern,
             Handler handler) {
    auto wrapped = [this, handler](const httplib::Request& req, httplib::Response& res) {
      Core* c = core();
      if (!c) return Send(res, Status::Unavailable("recovering from the store; retry shortly"));
      Result<Caller> who = Authenticate(req);
      if (!who.ok()) {
        // Authentication is HTTP's own: 401 with its challenge.
        res.set_header("WWW-Authenticate", "Bearer");
        CountBad();
        return Send(res, who.status());
      }
      Answer answer = handler(*c, *who, req, res);
      if (answer.written) return;  // a streamed or plain-text body
      if (answer.error.code() == StatusCode::kInvalidArgument) CountBad();
      Send(res, answer);
    };
    if (method == "GET") svr.Get(pattern, wrapped);
    if (method == "POST") svr.Post(pattern, wrapped);
    if (method == "PUT") svr.Put(pattern, wrapped);
    if (method == "PATCH") svr.Patch(pattern, wrapped);
    if (method == "DELETE") svr.Delete(pattern, wrapped);
  }

  Result<Caller> Authenticate(const httplib::Request& req) const {
    const std::string header = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) {
      return Status::FromCode(StatusCode::kUnauthenticated,
                              req.has_header("Authorization") ? "expected 'Bearer TOKEN'"
                                                              : "missing (expected 'Bearer TOKEN')",
                              "Authorization");
    }
    return auth_.Authenticate(std::string_view(header).substr(kBearer.size()), NowMillis());
  }

  void CountBad() {
    if (Core* c = core()) c->metrics().bad_requests.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<Core*> core_{nullptr};
  Authenticator auth_;
  Watchers watchers_;
  TlsClientSettings tls_;
  std::size_t max_body_ = 1 << 20;
};

class ServerImpl : public Server {
 public:
  ~ServerImpl() override {
    if (svr_) svr_->stop();
    if (http_.joinable()) http_.join();
    if (api_) api_->SetCore(nullptr);
    core_.reset();
  }
  int port() const override { return port_; }

  Status Start(const ServerArgs& args, const std::function<void(int)>& listening) {
    Result<config::ClusterConfig> config = config::LoadClusterFile(args.config);
    if (!config.ok()) return config.status();
    if (config->server.tokens.empty()) {
      fmt::print(stderr, "warning: {}: no server.tokens; every API call will be refused (401)\n",
                 args.config);
    }
    for (std::size_t i = 0; i < config->server.tokens.size(); ++i) {
      const config::TokenSpec& t = config->server.tokens[i];
      if (t.inline_secret && !args.dev) {
        return Status::InvalidArgument(
            fmt::format("{}: server.tokens[{}] ({}): a token written in the configuration is for "
                        "development only (arbiter server --dev); give token_sha256 (arbiter "
                        "token new) or token_file",
                        args.config, i, t.name),
            "--config");
      }
      if (t.role == config::TokenSpec::Role::kUser && t.priority_classes.empty()) {
        fmt::print(stderr,
                   "warning: {}: the user token {} may give its jobs any priority class; list "
                   "its priority_classes (docs/security.md)\n",
                   args.config, t.name);
      }
    }
    const auto colon = args.listen.rfind(':');
    int port = -1;
    if (colon != std::string::npos) {
      const std::string p = args.listen.substr(colon + 1);
      auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
      if (ec != std::errc() || end != p.data() + p.size() || port < 0 || port > 65535) port = -1;
    }
    if (port < 0) {
      return Status::InvalidArgument(
          fmt::format("expected HOST:PORT (e.g. 127.0.0.1:8642), got '{}'", args.listen),
          "--listen");
    }
    const std::string host = args.listen.substr(0, colon);
    const bool tls = !args.tls_cert.empty();
    if (tls != !args.tls_key.empty())
      return Status::InvalidArgument("give both --tls-cert and --tls-key", "--tls-cert");
    if (!tls && !args.tls_client_ca.empty())
      return Status::InvalidArgument("client certificates need TLS: give --tls-cert and --tls-key",
                                     "--tls-client-ca");
    if (!tls && !net::IsLoopback(host) && !args.insecure_http) {
      return Status::InvalidArgument(
          fmt::format("plain HTTP on {} would carry tokens in the clear over the network: give "
                      "--tls-cert and --tls-key, or --insecure-http to accept it",
                      host),
          "--listen");
    }
    Result<std::string> node_key = LoadOrCreateNodeKey(args.data);
    if (!node_key.ok()) return node_key.status();
    api_ = std::make_unique<Api>(*config, std::move(node_key).value(), args.threads);
    TlsClientSettings agent_tls;
    agent_tls.ca_file = args.agent_ca;
    api_->SetTls(std::move(agent_tls));
    if (tls) {
      auto ssl = std::make_unique<httplib::SSLServer>(
          args.tls_cert.c_str(), args.tls_key.c_str(),
          args.tls_client_ca.empty() ? nullptr : args.tls_client_ca.c_str());
      if (!ssl->is_valid()) {
        return Status::InvalidArgument(
            fmt::format("cannot use the certificate {} with the key {}{}: unreadable, not PEM, or "
                        "not a pair",
                        args.tls_cert, args.tls_key,
                        args.tls_client_ca.empty() ? "" : " and the CA " + args.tls_client_ca),
            "--tls-cert");
      }
      svr_ = std::move(ssl);
    } else {
      svr_ = std::make_unique<httplib::Server>();
    }
    httplib::Server& svr = *svr_;
    const int threads = args.threads;
    svr.new_task_queue = [threads] {
      return new httplib::ThreadPool(static_cast<size_t>(threads));
    };
    svr.set_keep_alive_max_count(100000);
    // An idle keep-alive connection holds a thread until it times out: keep that short.
    svr.set_keep_alive_timeout(2);
    svr.set_tcp_nodelay(true);
    // The library listens with a backlog of 5: a burst of clients connecting at once would
    // overflow it (connections reset). Remember the socket to listen again with a larger one.
    // Its default options include SO_REUSEPORT, with which a second server on the same port
    // would silently share it: only SO_REUSEADDR here (a restarted server takes its port back
    // from connections in TIME_WAIT; a port another server listens on stays refused).
    int listening_socket = -1;
    svr.set_socket_options([&listening_socket](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listening_socket = sock;
    });
    api_->Register(svr);
    port_ = port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
    if (port_ < 0) {
      return Status::FromCode(
          StatusCode::kUnavailable,
          fmt::format("cannot listen on {}: the address is in use (another server?) or not this "
                      "machine's",
                      args.listen),
          "--listen");
    }
    if (listening_socket >= 0) ::listen(listening_socket, SOMAXCONN);
    http_ = std::thread([this] {
      svr_->listen_after_bind();
      http_done_ = true;
    });
    // stop() before the loop runs would be lost (and the loop never end): wait until it runs.
    while (!svr_->is_running() && !http_done_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (listening) listening(port_);

    Result<std::unique_ptr<store::Store>> store = store::OpenSqliteStore({.dir = args.data});
    if (!store.ok()) return store.status();
    CoreOptions options;
    options.virtual_nodes = args.virtual_nodes;
    Result<std::unique_ptr<Core>> core =
        Core::Open(*config, std::move(store).value(), std::move(options));
    if (!core.ok()) return core.status();
    core_ = std::move(core).value();
    api_->SetCore(core_.get());
    return Status::Ok();
  }

 private:
  std::unique_ptr<httplib::Server> svr_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<Core> core_;
  std::thread http_;
  std::atomic<bool> http_done_{false};
  int port_ = 0;
};

}  // namespace

// The server's process allocates and frees millions of small records (recovery, submissions):
// glibc's malloc is told to keep freed memory for reuse rather than hand it back to the kernel,
// which zeroes every page again when it is touched next (half of the recovery of a million jobs
// went there), to serve large blocks from the heap as well, and to keep few arenas for the
// server's many threads (recovery of a million jobs, in a process of its own on a loaded 2-core
// machine: 8.0-8.5 s without, 7.3-7.4 s with; submissions unchanged).
namespace {
void TuneAllocator() {
#ifdef __GLIBC__
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc accepts
#endif
}
}  // namespace

Result<std::unique_ptr<Server>> Server::Start(const ServerArgs& args,
                                              const std::function<void(int)>& listening) {
  TuneAllocator();
  auto server = std::make_unique<ServerImpl>();
  if (Status st = server->Start(args, listening); !st.ok()) return st;
  return std::unique_ptr<Server>(std::move(server));
}

int RunServer(const ServerArgs& args) {
  // Signals are taken by sigwait below; every thread started from here on has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  std::string host = args.listen.substr(0, args.listen.rfind(':'));
  Result<std::unique_ptr<Server>> server = Server::Start(args, [&](int port) {
    fmt::print("arbiter server: listening on {}://{}:{}\n",
               args.tls_cert.empty() ? "http" : "https", host, port);
    std::fflush(stdout);
  });
  if (!server.ok()) {
    fmt::print(stderr, "error: {}\n", server.status().message());
    // A bad command line is a usage error (2), as for every command.
    return server.status().field() == "--listen" ? 2 : 1;
  }
  fmt::print("arbiter server: ready ({} in {:.2f} s){}\n", args.data,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
             args.virtual_nodes ? ", virtual nodes" : "");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print("arbiter server: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server->reset();
  return 0;
}

}  // namespace arbiter::server
