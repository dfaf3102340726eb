// The HTTP layer: routes, bearer-token authentication, request parsing into the core's calls,
// and the core's answers into JSON responses. Errors become HTTP codes only here and in core.cc.
// It runs on the event-driven server of net/http_server.h: handlers answer through exchanges,
// and nothing that waits (a long poll, an event stream, an agent's sync, a submission's commit)
// holds a thread (docs/design/server.md).
#include <fmt/format.h>
#include <httplib.h>
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "config/config.h"
#include "crypto/crypto.h"
#include "job/limits.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "server/agent_wire.h"
#include "server/auth.h"
#include "server/core.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/web_assets.h"
#include "store/codec.h"
#include "store/leader.h"
#include "store/store.h"
#include "version.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using net::HttpExchangePtr;
using net::HttpRequest;
using net::HttpResponse;
using net::HttpServer;
using net::SharedText;
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
HttpResponse ErrorResponse(int status, std::string code, const std::string& field,
                           const std::string& message) {
  std::replace(code.begin(), code.end(), ' ', '_');
  HttpResponse r;
  r.status = status;
  // Unavailable is never final: a client sends the request again (docs/api.md, "Several
  // servers"), to this server or another.
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  r.body =
      store::Dump(Json{{"error", {{"code", code}, {"field", field}, {"message", message}}}}) + "\n";
  return r;
}

HttpResponse ToResponse(const Answer& answer) {
  if (!answer.ok()) {
    const Status& e = answer.error;
    return ErrorResponse(HttpStatus(e.code()), StatusCodeName(e.code()), e.field(), e.message());
  }
  HttpResponse r;
  r.status = answer.created ? 201 : 200;
  r.body = store::Dump(answer.body) + "\n";
  return r;
}

void Send(const HttpExchangePtr& exchange, const Answer& answer) {
  exchange->Respond(ToResponse(answer));
}

// A file of the dashboard (web_assets.h), with the headers that keep the browser to it: its own
// scripts and styles only (no inline script, nothing from elsewhere), no sniffing of types, no
// framing. 404 in the API's format for a name it lacks.
HttpResponse WebFile(std::string_view name) {
  for (const WebAsset& asset : WebAssets()) {
    if (asset.path != name) continue;
    HttpResponse r;
    r.content_type = std::string(asset.content_type);
    r.body = std::string(asset.body);
    r.headers = {{"Content-Security-Policy",
                  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                  "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                  "frame-ancestors 'none'"},
                 {"X-Content-Type-Options", "nosniff"},
                 {"X-Frame-Options", "DENY"},
                 {"Referrer-Policy", "no-referrer"},
                 {"Cache-Control", "no-cache"}};
    return r;
  }
  return ErrorResponse(404, "not found", "path",
                       fmt::format("no file '{}' in the dashboard (/ui/)", name));
}

SharedText Text(std::string text) { return std::make_shared<const std::string>(std::move(text)); }

// Watchers: long polls of the event log and event streams. Each token holds at most
// `per_caller` at once and all together at most `total` (server.max_watchers,
// max_watchers_per_token); one more is refused (429) rather than queued.
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
                                          "token may, server.max_watchers_per_token); close one "
                                          "first",
                                          caller, mine),
                              "wait");
    }
    if (in_use_ >= total_) {
      return Status::FromCode(StatusCode::kResourceExhausted,
                              fmt::format("the server already serves {} watchers (the most it "
                                          "keeps, server.max_watchers); retry shortly",
                                          in_use_),
                              "wait");
    }
    ++mine;
    ++in_use_;
    return std::make_shared<Slot>(this, caller);
  }

  std::size_t in_use() const {
    std::lock_guard lock(mu_);
    return in_use_;
  }

 private:
  void Release(const std::string& caller) {
    std::lock_guard lock(mu_);
    --in_use_;
    if (--by_caller_[caller] == 0) by_caller_.erase(caller);
  }

  const std::size_t total_, per_caller_;
  mutable std::mutex mu_;
  std::size_t in_use_ = 0;                                  // GUARDED_BY(mu_)
  std::unordered_map<std::string, std::size_t> by_caller_;  // GUARDED_BY(mu_)
};

// Unix time in milliseconds (token expiry).
Millis NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::uint64_t> Number(const std::string& text) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// A query parameter's comma-separated values (`state=pending,running`), the empty ones left out.
std::vector<std::string> CommaList(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Result<Json> Body(const HttpRequest& req) {
  if (req.body.empty()) return Status::InvalidArgument("empty; expected JSON", "body");
  return store::ParseJson(req.body, "body");
}

// How often a waiting long poll writes a space (JSON allows it before the value) and an idle
// event stream a comment: a client that went away is found by the next write, and its watcher
// given back.
constexpr std::chrono::milliseconds kPollTick{1000};
constexpr std::chrono::milliseconds kStreamTick{5000};
// How long a woken event stream waits for more events before it writes (at most this late, then,
// and a write per watcher per this interval at most).
constexpr std::chrono::milliseconds kStreamGather{100};
// How often a live stream whose write has not completed (its client reads slowly, or not at all)
// is checked against the feed's window: once behind it, its watcher slot is given back at once,
// not when the write times out (the stream ends with `event: dropped` once the write completes).
constexpr std::chrono::milliseconds kBlockedStreamCheck{1000};
// A request's headers, in all (a larger one is refused, naming `headers`).
constexpr std::size_t kMaxHeaderBytes = 16 << 10;
// The lanes (net/http_server.h) the handlers run on: users' requests; the agents' registrations
// and syncs (thousands a second, which wait for the core's lock while a cycle runs: no user's
// request queues behind them); requests that wait on an agent's log server.
constexpr int kUserLane = 0;
constexpr int kAgentLane = 1;
constexpr int kLogLane = 2;
// Events read at a time for a stream.
constexpr std::size_t kStreamBatch = 1000;

// One wait for a wake-up or a deadline, whichever comes first; no thread waits. `resume(timed
// out)` runs once, on a worker thread.
class Wait : public std::enable_shared_from_this<Wait> {
 public:
  Wait(HttpServer& http, std::function<void(bool timed_out)> resume, int lane = kUserLane)
      : http_(http), resume_(std::move(resume)), lane_(lane) {}

  // The wake-up to hand to the source (the event feed, the core): any thread, any number of
  // times.
  std::function<void()> Waker() {
    return [self = shared_from_this()] { self->Fire(false); };
  }
  void Arm(std::chrono::milliseconds deadline) {
    std::shared_ptr<HttpServer::Timer> timer =
        http_.After(deadline, [self = shared_from_this()] { self->Fire(true); });
    std::lock_guard lock(mu_);
    if (fired_) {
      timer->Cancel();
    } else {
      timer_ = timer;
    }
  }

 private:
  void Fire(bool timed_out) {
    std::shared_ptr<HttpServer::Timer> timer;
    {
      std::lock_guard lock(mu_);
      if (fired_) return;
      fired_ = true;
      timer = timer_.lock();
      timer_.reset();
    }
    if (timer && !timed_out) timer->Cancel();
    http_.Post([self = shared_from_this(), timed_out] { self->resume_(timed_out); }, lane_);
  }

  HttpServer& http_;
  const std::function<void(bool)> resume_;
  const int lane_;  // where `resume_` runs
  std::mutex mu_;
  bool fired_ = false;  // GUARDED_BY(mu_)
  // GUARDED_BY(mu_). Weak: the timer's callback holds this wait, and the server holds the timer
  // while it is pending; a strong pointer back would make a cycle that outlives a server stopped
  // with the wait still armed.
  std::weak_ptr<HttpServer::Timer> timer_;
};

// {"cursor": N, "events": [...]}, from the events' shared texts.
std::string EventsBody(const std::vector<EventFeed::Item>& items, std::uint64_t cursor) {
  std::string body =
      "{\"cursor\":" + std::to_string(items.empty() ? cursor : items.back().seq) + ",\"events\":[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) body += ',';
    body += *items[i].json;
  }
  body += "]}\n";
  return body;
}

// A watcher of the event log: a long poll (one answer, once there are events or the wait is
// over) or an event stream (server-sent events until the client goes). Every step runs on a
// worker; between steps it waits on the feed without a thread. While it waits it writes a tick
// (a space before the long poll's JSON, a comment line in a stream), so that a client that went
// away is found and its watcher given back.
class Watch : public std::enable_shared_from_this<Watch> {
 public:
  enum class Kind { kPoll, kStream };
  Watch(Kind kind, Core& core, HttpServer& http, HttpExchangePtr exchange,
        std::shared_ptr<Watchers::Slot> slot, std::uint64_t cursor, std::size_t limit,
        std::chrono::steady_clock::time_point deadline)
      : kind_(kind),
        core_(core),
        http_(http),
        exchange_(std::move(exchange)),
        slot_(std::move(slot)),
        cursor_(cursor),
        limit_(limit),
        deadline_(deadline) {}

  void Step() {
    std::optional<std::vector<EventFeed::Item>> items = core_.feed().Read(cursor_, limit_);
    if (!items) {
      if (live_ && kind_ == Kind::kStream) return Drop();
      // Behind the feed's window from the start: the older events come from the store.
      Result<std::vector<EventFeed::Item>> older = core_.Events(cursor_, limit_);
      if (!older.ok()) return exchange_->End();  // the client sees the body cut short
      items = std::move(older).value();
    }
    const auto now = std::chrono::steady_clock::now();
    if (kind_ == Kind::kPoll) {
      if (!items->empty() || now >= deadline_) {
        exchange_->Write({Text(EventsBody(*items, cursor_))}, {});
        return exchange_->End();
      }
    } else if (!items->empty()) {
      std::vector<SharedText> frames;
      frames.reserve(items->size());
      for (const EventFeed::Item& item : *items) frames.push_back(item.frame);
      cursor_ = items->back().seq;
      if (live_ && kind_ == Kind::kStream) {
        written_ = cursor_;
        writing_ = true;
        if (!checking_.exchange(true)) CheckWhileWriting();
      }
      return exchange_->Write(std::move(frames), Next());
    }
    // Nothing new: wait for the feed, a tick at most.
    live_ = true;
    auto self = shared_from_this();
    auto ticket = std::make_shared<std::atomic<std::uint64_t>>(0);
    auto wait = std::make_shared<Wait>(http_, [self, ticket](bool timed_out) {
      if (!timed_out && self->kind_ == Kind::kStream) {
        // A stream gathers what follows for a moment: one write of many events to each of
        // many watchers, rather than one per commit.
        self->http_.After(kStreamGather, [self] { self->Step(); });
        return;
      }
      if (!timed_out) return self->Step();
      self->core_.feed().Cancel(ticket->load());
      if (self->kind_ == Kind::kPoll && std::chrono::steady_clock::now() >= self->deadline_)
        return self->Step();
      self->exchange_->Write({Text(self->kind_ == Kind::kPoll ? " " : ":\n\n")}, self->Next());
    });
    ticket->store(core_.feed().Wait(cursor_, wait->Waker()));
    auto tick = kind_ == Kind::kPoll ? kPollTick : kStreamTick;
    if (kind_ == Kind::kPoll) {
      tick = std::min(tick, std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now));
    }
    wait->Arm(tick);
  }

 private:
  // After a write: the next step, unless the client has gone.
  // A live stream reads only the feed's memory: its next step runs on the I/O thread that wrote;
  // anything else may read the store, on a worker.
  std::function<void(bool)> Next() {
    return [self = shared_from_this()](bool ok) {
      self->writing_ = false;
      if (!ok) return;
      if (self->live_ && self->kind_ == Kind::kStream) return self->Step();
      self->http_.Post([self] { self->Step(); });
    };
  }

  // While a live stream has a write pending, every kBlockedStreamCheck: once the feed's window has
  // moved past the events being written, the watcher slot goes back (the write's completion then
  // drops the stream). One check at a time per stream; none once no write is pending.
  void CheckWhileWriting() {
    std::weak_ptr<Watch> weak = weak_from_this();
    http_.After(kBlockedStreamCheck, [weak] {
      std::shared_ptr<Watch> self = weak.lock();
      if (!self) return;
      if (!self->writing_) {
        self->checking_ = false;
        // A write that began meanwhile found the check still on: it is this check's to watch.
        if (!self->writing_ || self->checking_.exchange(true)) return;
      }
      if (self->core_.feed().Read(self->written_, 1)) return self->CheckWhileWriting();
      std::lock_guard lock(self->slot_mu_);
      self->slot_.reset();
    });
  }

  // A stream that fell behind the feed's window while live (a slow reader): ended with the
  // cursor to resume from, rather than slowing the others or holding events for it.
  void Drop() {
    const std::string data =
        store::Dump(Json{{"cursor", cursor_},
                         {"message",
                          "too slow: the stream fell behind the server's window of "
                          "recent events; reconnect with ?cursor= (or Last-Event-ID)"}});
    exchange_->Write({Text(fmt::format("event: dropped\ndata: {}\n\n", data))}, {});
    exchange_->End();
  }

  const Kind kind_;
  Core& core_;
  HttpServer& http_;
  const HttpExchangePtr exchange_;
  std::mutex slot_mu_;
  // Given back when the watch ends, or when a blocked stream falls behind the window.
  std::shared_ptr<Watchers::Slot> slot_;   // GUARDED_BY(slot_mu_) once the watch runs
  std::atomic<bool> writing_{false};       // a live stream's write is pending
  std::atomic<std::uint64_t> written_{0};  // the last event that write carries
  std::atomic<bool> checking_{false};      // a CheckWhileWriting is scheduled
  std::uint64_t cursor_;
  const std::size_t limit_;
  const std::chrono::steady_clock::time_point deadline_;  // a long poll's
  bool live_ = false;                                     // a stream caught up with the feed once
};

class Api {
 public:
  Api(const config::ClusterConfig& config, std::string node_key)
      : node_key_(std::move(node_key)),
        auth_(std::make_shared<const Authenticator>(config.server.tokens, node_key_)),
        watchers_(static_cast<std::size_t>(config.server.max_watchers),
                  static_cast<std::size_t>(config.server.max_watchers_per_token)),
        max_body_(static_cast<std::size_t>(config.server.max_body_bytes)),
        sync_wait_(config.server.agent_sync_wait) {}

  void SetCore(Core* core) { core_.store(core); }
  // The core, while this server may answer as the leader: it has one, and (with a shared store)
  // its lease is proven until now (docs/design/ha.md, "Timing").
  Core* core() const {
    Core* c = core_.load();
    if (c != nullptr && SteadyMillis() >= lease_until_.load(std::memory_order_relaxed)) {
      return nullptr;
    }
    return c;
  }
  // With a shared store: this server may answer as the leader until `until` (the steady clock's
  // milliseconds), as its last renewal proves.
  void ExtendLease(Millis until) { lease_until_.store(until, std::memory_order_relaxed); }
  static Millis SteadyMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // The tokens, replaced (SIGHUP): requests under way keep the ones they started with.
  void SetTokens(const std::vector<config::TokenSpec>& tokens) {
    auto fresh = std::make_shared<const Authenticator>(tokens, node_key_);
    std::lock_guard lock(auth_mu_);
    auth_ = std::move(fresh);
  }
  std::shared_ptr<const Authenticator> auth() const {
    std::lock_guard lock(auth_mu_);
    return auth_;
  }
  // High availability (docs/design/ha.md): this server is a standby, and `leader` leads ("" while
  // none is known). Without a core, requests are then sent to the leader rather than told to wait
  // for a recovery.
  void SetStandby(std::string leader) {
    std::lock_guard lock(leader_mu_);
    role_ = Role::kStandby;
    leader_ = std::move(leader);
  }
  // This server has won the lease: until its core is set (it recovers), requests are asked to
  // retry (503), never sent to the leader before it, which is gone.
  void SetLeading() {
    std::lock_guard lock(leader_mu_);
    role_ = Role::kLeading;
    leader_.clear();
  }
  // This server has lost its lease: from now on it answers 503 naming no leader, at once, and
  // its core is no longer reached.
  void SetDeposed() {
    core_.store(nullptr);
    std::lock_guard lock(leader_mu_);
    role_ = Role::kDeposed;
    leader_.clear();
  }
  // A standby's warm copy of the active jobs: how many it holds, -1 when it has none.
  void SetWarmJobs(std::int64_t jobs) { warm_jobs_.store(jobs); }
  // The server's TLS settings for the requests it makes itself (to agents' log servers).
  void SetTls(TlsClientSettings tls) { tls_ = std::move(tls); }

  // The server's own refusals, in the API's error format.
  HttpResponse Refusal(int status, std::string_view what) {
    switch (status) {
      case 413:
        CountBad();
        return ToResponse(Status::InvalidArgument(
            fmt::format("larger than {} bytes (server.max_body_bytes)", max_body_), "body"));
      case 431:
        CountBad();
        return ToResponse(Status::InvalidArgument(
            fmt::format("larger than {} bytes in all", kMaxHeaderBytes), "headers"));
      case 404:
        return ToResponse(Status::NotFound("no such endpoint (see docs/api.md)", "path"));
      case 503:
        return ToResponse(Status::Unavailable(std::string(what)));
      case 500:
        return ToResponse(Status::Internal(std::string(what)));
      default:
        CountBad();
        return ErrorResponse(status, "invalid argument", "", std::string(what));
    }
  }

  void Register(HttpServer& http) {
    http_ = &http;
    http.Route(
        "GET", "/healthz",
        [](HttpRequest&, const HttpExchangePtr& ex) {
          Send(ex, Answer(Json{{"status", "ok"}}));
        },
        HttpServer::kInline);
    http.Route(
        "GET", "/readyz",
        [this](HttpRequest& req, const HttpExchangePtr& ex) {
          if (core()) return Send(ex, Answer(Json{{"status", "ready"}}));
          HttpResponse r = NotServing(req);
          r.status = 503;  // a standby is not ready, whoever leads
          ex->Respond(std::move(r));
        },
        HttpServer::kInline);
    http.Route("GET", "/metrics", [this](HttpRequest&, const HttpExchangePtr& ex) {
      // A standby has no core: only its build, its connections' figures, and that it does not
      // lead.
      Core* c = core();
      std::vector<prometheus::MetricFamily> families;
      Scrape scrape;
      scrape.Gauge("arbiter_build_info", "The build of this server (always 1): its version.")
          .Add({{"version", arbiter::Version()}})
          .Set(1);
      scrape.Gauge("arbiter_leader", "Whether this server leads (schedules and writes).")
          .Add({})
          .Set(c ? 1 : 0);
      scrape
          .Gauge("arbiter_standby_warm_jobs",
                 "A standby's copy of the active jobs: how many it holds (-1: none, or not a "
                 "standby).")
          .Add({})
          .Set(static_cast<double>(warm_jobs_.load()));
      HttpMetrics(scrape);
      scrape.CollectInto(families);
      if (c) c->CollectMetrics(families);
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = MetricsText(families);
      ex->Respond(std::move(r));
    });

    // The dashboard (web/, built into the binary): static files, no token (every API call it
    // makes sends one). Served by a standby too: the page itself says where the leader is.
    http.Route(
        "GET", "/ui",
        [](HttpRequest&, const HttpExchangePtr& ex) {
          HttpResponse r;
          r.status = 308;
          r.content_type = "text/plain; charset=utf-8";
          r.headers.emplace_back("Location", "/ui/");
          r.body = "/ui/\n";
          ex->Respond(std::move(r));
        },
        HttpServer::kInline);
    http.Route(
        "GET", "/ui/",
        [](HttpRequest&, const HttpExchangePtr& ex) { ex->Respond(WebFile("index.html")); },
        HttpServer::kInline);
    http.Route(
        "GET", "/ui/*",
        [](HttpRequest& req, const HttpExchangePtr& ex) { ex->Respond(WebFile(req.matches[0])); },
        HttpServer::kInline);

    // Who the token is: its name, role and what it may do (the dashboard shows only the actions
    // the role allows; the endpoints refuse the others anyway).
    Sync("GET", "/v1/whoami", [](Core&, const Caller& who, const HttpRequest&) -> Answer {
      Json out{{"name", who.name}, {"role", config::RoleName(who.role)}};
      if (who.role == config::TokenSpec::Role::kUser) {
        out["queues"] = who.queues;
        out["priority_classes"] = who.priority_classes;
      }
      return Answer(std::move(out));
    });

    // Jobs.
    Async("POST", "/v1/jobs",
          [](Core& c, const Caller& who, HttpRequest& req, const HttpExchangePtr& ex) {
            if (req.body.empty())
              return Send(ex, Status::InvalidArgument("empty; expected a job spec (JSON)", "body"));
            c.Submit(who, req.body, [ex](Answer answer) { Send(ex, answer); });
          });
    Sync("GET", "/v1/jobs", [](Core& c, const Caller&, const HttpRequest& req) -> Answer {
      JobFilter filter;
      filter.queues = CommaList(req.Param("queue"));
      filter.users = CommaList(req.Param("user"));
      for (const std::string& s : CommaList(req.Param("state"))) {
        const std::optional<job::JobState> state = job::ParseJobState(s);
        if (!state) {
          return Status::InvalidArgument(
              fmt::format("unknown job state '{}' (known: pending, held, "
                          "running, completed, failed, cancelled)",
                          s),
              "state");
        }
        filter.states.push_back(*state);
      }
      if (req.HasParam("limit")) {
        std::optional<std::uint64_t> limit = Number(req.Param("limit"));
        if (!limit || *limit == 0)
          return Status::InvalidArgument("must be a positive integer", "limit");
        filter.limit = static_cast<std::size_t>(*limit);
      }
      return c.ListJobs(filter);
    });
    Sync("GET", "/v1/jobs/#", [](Core& c, const Caller&, const HttpRequest& req) -> Answer {
      std::optional<JobId> id = Number(req.matches[0]);
      if (!id) return Status::InvalidArgument("not a job id", "id");
      return c.GetJob(*id);
    });
    auto cancel = [](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
      std::optional<JobId> id = Number(req.matches[0]);
      if (!id) return Status::InvalidArgument("not a job id", "id");
      return c.Cancel(who, *id);
    };
    Sync("DELETE", "/v1/jobs/#", cancel);
    Sync("POST", "/v1/jobs/#/cancel", cancel);
    Sync("POST", "/v1/jobs/#/hold|release",
         [](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
           std::optional<JobId> id = Number(req.matches[0]);
           if (!id) return Status::InvalidArgument("not a job id", "id");
           return c.Hold(who, *id, req.matches[1] == "hold");
         });
    Sync("PATCH", "/v1/jobs/#", [](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
      std::optional<JobId> id = Number(req.matches[0]);
      if (!id) return Status::InvalidArgument("not a job id", "id");
      Result<Json> body = Body(req);
      if (!body.ok()) return body.status();
      if (!body->is_object()) return Status::InvalidArgument("expected a JSON object", "body");
      for (const auto& [key, value] : body->items()) {
        if (key != "priority_class")
          return Status::InvalidArgument(
              "unknown field (a job's priority_class can be changed; hold and release have "
              "their own endpoints)",
              key);
      }
      if (!body->contains("priority_class") || !(*body)["priority_class"].is_string())
        return Status::InvalidArgument("must be given, as a string", "priority_class");
      return c.SetPriority(who, *id, (*body)["priority_class"].get<std::string>());
    });

    // Queues and nodes.
    Sync("GET", "/v1/queues",
         [](Core& c, const Caller&, const HttpRequest&) -> Answer { return c.ListQueues(); });
    Sync("PUT", "/v1/queues/*/quota",
         [](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
           Result<Json> body = Body(req);
           if (!body.ok()) return body.status();
           if (!body->is_object())
             return Status::InvalidArgument("expected an object of resources", "quota");
           return c.SetQueueQuota(who, req.matches[0], *body);
         });
    Sync("DELETE", "/v1/queues/*/quota",
         [](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
           return c.SetQueueQuota(who, req.matches[0], nullptr);
         });
    Sync("GET", "/v1/queues/usage", [](Core& c, const Caller&, const HttpRequest&) -> Answer {
      return c.QueueUsageHistory();
    });
    Sync("GET", "/v1/cluster/map",
         [](Core& c, const Caller&, const HttpRequest&) -> Answer { return c.ClusterMap(); });
    Sync("GET", "/v1/nodes",
         [](Core& c, const Caller&, const HttpRequest&) -> Answer { return c.ListNodes(); });
    Sync("POST", "/v1/nodes/*/cordon|uncordon|drain",
         [](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
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
           const std::string& action = req.matches[1];
           const store::NodeAdminState state = action == "cordon" ? store::NodeAdminState::kCordoned
                                               : action == "drain"
                                                   ? store::NodeAdminState::kDraining
                                                   : store::NodeAdminState::kSchedulable;
           return c.SetNodeState(who, req.matches[0], state, reason);
         });

    // The whole cluster as YAML (docs/snapshot.md), for `arbiter snapshot`.
    Async("GET", "/v1/admin/snapshot",
          [](Core& c, const Caller& who, HttpRequest&, const HttpExchangePtr& ex) {
            Answer answer = c.Snapshot(who);
            if (!answer.ok()) return Send(ex, answer);
            HttpResponse r;
            r.content_type = "application/yaml; charset=utf-8";
            r.body = answer.body.get<std::string>();
            ex->Respond(std::move(r));
          });

    // Node agents (docs/api.md, "Node agents").
    Sync(
        "POST", "/v1/nodes/*/register",
        [this](Core& c, const Caller& who, const HttpRequest& req) -> Answer {
          Result<RegisterBody> body = ParseRegisterBody(req.body);
          if (!body.ok()) return body.status();
          const std::string& node = req.matches[0];
          Answer answer = c.RegisterAgent(who, node, *body, req.peer);
          if (!answer.ok()) return answer;
          // The node's own credential for its syncs (and its next registration), and the token
          // its log server is to ask of the server: neither is a token of the configuration.
          answer.body["credential"] = auth()->NodeCredential(node);
          answer.body["log_token"] = auth()->LogToken(node);
          return answer;
        },
        kAgentLane);
    // A sync answers what changed for the node; when nothing has, it waits (no thread with it)
    // until something does or its wait is over (at most the heartbeat the server gave).
    Async(
        "POST", "/v1/nodes/*/sync",
        [this](Core& c, const Caller& who, HttpRequest& req, const HttpExchangePtr& ex) {
          std::uint64_t wait = 0;
          if (req.HasParam("wait_ms")) {
            std::optional<std::uint64_t> v = Number(req.Param("wait_ms"));
            if (!v || *v > 60000)
              return Send(ex, Status::InvalidArgument("must be 0 to 60000", "wait_ms"));
            wait = std::min<std::uint64_t>(*v, static_cast<std::uint64_t>(sync_wait_));
          }
          Result<SyncBody> body = ParseSyncBody(req.body);
          if (!body.ok()) return Send(ex, body.status());
          const std::string node = req.matches[0];
          const std::string revision = body->revision;
          auto ticket = std::make_shared<std::atomic<std::uint64_t>>(0);
          auto waiting = std::make_shared<Wait>(
              *http_,
              [&c, node, revision, ticket, ex](bool) {
                Send(ex, c.AgentChanges(node, revision, ticket->load()));
              },
              kAgentLane);
          const auto t0 = std::chrono::steady_clock::now();
          Core::SyncOutcome out = c.SyncAgent(who, node, body->reports, revision,
                                              wait > 0 ? waiting->Waker() : nullptr);
          ObserveSince(c.metrics().agent_sync_seconds, t0);
          if (!out.waiting) return Send(ex, out.answer);
          ticket->store(out.ticket);
          waiting->Arm(std::chrono::milliseconds(wait));
        },
        kAgentLane);
    // The log stays on its node: asked of the agent's log server (on a thread that may wait for
    // it), without the core's lock, with the node's log token (never the caller's token or a
    // token of the server's).
    Async(
        "GET", "/v1/jobs/#/logs",
        [this](Core& c, const Caller&, HttpRequest& req, const HttpExchangePtr& ex) {
          Log(c, req, ex);
        },
        kLogLane);

    // Server-sent events: the same stream, pushed as it is committed. Each event is
    // `id: SEQ`, `event: KIND`, `data: JSON`; a reconnecting client's Last-Event-ID (or ?cursor=)
    // says where to go on. A comment line after 5 s without events keeps idle connections open.
    Async("GET", "/v1/events/stream",
          [this](Core& c, const Caller& who, HttpRequest& req, const HttpExchangePtr& ex) {
            std::string from = req.Header("Last-Event-ID");
            if (req.HasParam("cursor")) from = req.Param("cursor");
            std::optional<std::uint64_t> cursor =
                from.empty() ? std::optional<std::uint64_t>(0) : Number(from);
            if (!cursor)
              return Send(ex, Status::InvalidArgument("must be a non-negative integer", "cursor"));
            Result<std::shared_ptr<Watchers::Slot>> slot = watchers_.Acquire(who.name);
            if (!slot.ok()) return Send(ex, slot.status());
            ex->Start(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
            std::make_shared<Watch>(Watch::Kind::kStream, c, *http_, ex, *slot, *cursor,
                                    kStreamBatch, std::chrono::steady_clock::time_point())
                ->Step();
          });
    Async("GET", "/v1/events",
          [this](Core& c, const Caller& who, HttpRequest& req, const HttpExchangePtr& ex) {
            std::uint64_t cursor = 0;
            std::size_t limit = 1000;
            std::uint64_t wait = 0;
            if (req.HasParam("cursor")) {
              std::optional<std::uint64_t> v = Number(req.Param("cursor"));
              if (!v)
                return Send(ex,
                            Status::InvalidArgument("must be a non-negative integer", "cursor"));
              cursor = *v;
            }
            if (req.HasParam("limit")) {
              std::optional<std::uint64_t> v = Number(req.Param("limit"));
              if (!v || *v == 0 || *v > 10000)
                return Send(ex, Status::InvalidArgument("must be 1 to 10000", "limit"));
              limit = static_cast<std::size_t>(*v);
            }
            if (req.HasParam("wait")) {
              std::optional<std::uint64_t> v = Number(req.Param("wait"));
              if (!v || *v > 60)
                return Send(ex, Status::InvalidArgument("must be 0 to 60 (seconds)", "wait"));
              wait = *v;
            }
            if (req.HasParam("job")) {
              std::optional<std::uint64_t> job = Number(req.Param("job"));
              if (!job || *job == 0)
                return Send(ex, Status::InvalidArgument("must be a job id", "job"));
              if (wait != 0)
                return Send(ex, Status::InvalidArgument(
                                    "a job's events are not waited for (leave wait out, or "
                                    "watch the whole stream)",
                                    "wait"));
              return ex->Respond(JobEvents(c, *job, cursor, limit));
            }
            if (wait == 0) {
              Result<std::vector<EventFeed::Item>> items = c.Events(cursor, limit);
              if (!items.ok()) return Send(ex, items.status());
              HttpResponse r;
              r.body = EventsBody(*items, cursor);
              return ex->Respond(std::move(r));
            }
            Result<std::shared_ptr<Watchers::Slot>> slot = watchers_.Acquire(who.name);
            if (!slot.ok()) return Send(ex, slot.status());
            ex->Start(200, "application/json");
            std::make_shared<Watch>(Watch::Kind::kPoll, c, *http_, ex, *slot, cursor, limit,
                                    std::chrono::steady_clock::now() + std::chrono::seconds(wait))
                ->Step();
          });
  }

 private:
  // A handler that answers later (through the exchange), and one that answers at once.
  using AsyncHandler =
      std::function<void(Core&, const Caller&, HttpRequest&, const HttpExchangePtr&)>;
  using SyncHandler = std::function<Answer(Core&, const Caller&, const HttpRequest&)>;

  // Every API route: the core must be there (recovery done) and the caller known.
  void Async(const char* method, const char* pattern, AsyncHandler handler, int lane = kUserLane) {
    const bool changes = std::string_view(method) != "GET";
    http_->Route(
        method, pattern,
        [this, changes, handler = std::move(handler)](HttpRequest& req, const HttpExchangePtr& ex) {
          Core* c = core();
          if (!c) return ex->Respond(NotServing(req));
          Result<Caller> who = Authenticate(req);
          if (!who.ok()) {
            // Authentication is HTTP's own: 401 with its challenge.
            CountBad();
            HttpResponse r = ToResponse(who.status());
            r.headers.emplace_back("WWW-Authenticate", "Bearer");
            return ex->Respond(std::move(r));
          }
          // The viewer role reads only: every endpoint that changes something refuses it here,
          // whatever the core would say.
          if (changes && who->viewer()) {
            return Send(ex, Status::PermissionDenied(fmt::format(
                                "{} has the role viewer, which may not {} {}: a viewer token "
                                "reads and changes nothing (docs/security.md)",
                                who->name, req.method, req.path)));
          }
          handler(*c, *who, req, ex);
        },
        lane);
  }
  void Sync(const char* method, const char* pattern, SyncHandler handler, int lane = kUserLane) {
    Async(
        method, pattern,
        [this, handler = std::move(handler)](Core& c, const Caller& who, HttpRequest& req,
                                             const HttpExchangePtr& ex) {
          Answer answer = handler(c, who, req);
          if (answer.error.code() == StatusCode::kInvalidArgument) CountBad();
          Send(ex, answer);
        },
        lane);
  }

  // GET /v1/events?job=N: the job's events after `cursor`, at most `limit`, found among at most
  // kJobEventScan events of the log; the answer's cursor is the last event looked at, where a
  // client goes on (it has seen them all when a page comes back with fewer than `limit`
  // events and the cursor at the log's end).
  static HttpResponse JobEvents(Core& c, JobId job, std::uint64_t cursor, std::size_t limit) {
    constexpr std::size_t kJobEventScan = 200000;
    std::vector<EventFeed::Item> found;
    std::size_t scanned = 0;
    while (found.size() < limit && scanned < kJobEventScan) {
      Result<std::vector<EventFeed::Item>> items = c.Events(cursor, 10000);
      if (!items.ok()) return ToResponse(items.status());
      if (items->empty()) break;
      for (const EventFeed::Item& item : *items) {
        cursor = item.seq;
        if (item.job == job) found.push_back(item);
        if (found.size() >= limit) break;
      }
      scanned += items->size();
    }
    // The cursor is the last event looked at, which may be past the last one found.
    HttpResponse r;
    r.body = "{\"cursor\":" + std::to_string(cursor) + ",\"events\":[";
    for (std::size_t i = 0; i < found.size(); ++i) {
      if (i > 0) r.body += ',';
      r.body += *found[i].json;
    }
    r.body += "]}\n";
    return r;
  }

  void Log(Core& c, const HttpRequest& req, const HttpExchangePtr& ex) {
    Answer answer = FetchLog(c, req);
    if (answer.ok()) {
      HttpResponse r;
      r.content_type = "text/plain; charset=utf-8";
      r.body = answer.body.get<std::string>();
      return ex->Respond(std::move(r));
    }
    if (answer.error.code() == StatusCode::kInvalidArgument) CountBad();
    Send(ex, answer);
  }

  // The log's text (a JSON string), asked of the agent.
  Answer FetchLog(Core& c, const HttpRequest& req) {
    std::optional<JobId> id = Number(req.matches[0]);
    if (!id) return Status::InvalidArgument("not a job id", "id");
    std::uint64_t task = 0;
    if (req.HasParam("task")) {
      std::optional<std::uint64_t> v = Number(req.Param("task"));
      if (!v || *v > UINT32_MAX) return Status::InvalidArgument("must be a task index", "task");
      task = *v;
    }
    Answer where = c.LogSource(*id, static_cast<std::uint32_t>(task));
    if (!where.ok()) return where;
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
    httplib::Headers headers{{"Authorization", "Bearer " + auth()->LogToken(node)}};
    std::string path = where.body["path"].get<std::string>();
    if (req.HasParam("tail_bytes")) {
      std::optional<std::uint64_t> tail = Number(req.Param("tail_bytes"));
      if (!tail) return Status::InvalidArgument("must be a non-negative integer", "tail_bytes");
      path += fmt::format("?tail_bytes={}", *tail);
    }
    httplib::Result got = agent.Get(path, headers);
    if (!got) {
      return Status::Unavailable(fmt::format("node: the agent of {} did not answer for the log",
                                             where.body["node"].get<std::string>()));
    }
    if (got->status != 200) {
      const std::string problem =
          fmt::format("the agent of {} answered {}: {}", where.body["node"].get<std::string>(),
                      got->status, got->body);
      if (got->status == 404) return Status::NotFound(problem, "log");
      return Status::FromCode(StatusCode::kUnavailable, problem, "log");
    }
    return Answer(Json(std::move(got->body)));
  }

  // The answer of a server that does not answer as the leader: recovering from the store (503),
  // deposed (503), or a standby that sends the request to the leader (307, the same path and
  // query) or, while no leader is known, asks to retry (503). The body names the leader ("" when
  // none is known) for clients that do not follow redirects; every 503 says Retry-After.
  HttpResponse NotServing(const HttpRequest& req) const {
    Role role;
    std::string leader;
    {
      std::lock_guard lock(leader_mu_);
      role = role_;
      leader = leader_;
    }
    std::string message;
    switch (role) {
      case Role::kStandby:
        message = leader.empty() ? "standby: no server leads yet; retry shortly"
                                 : fmt::format("standby: the leader is {}", leader);
        break;
      case Role::kDeposed:
        message = "this server no longer leads; another takes over: retry shortly";
        break;
      case Role::kLeading:
      case Role::kSingle:
        message = core_.load() != nullptr ? "the leader's lease is not renewed yet; retry shortly"
                                          : "recovering from the store; retry shortly";
        break;
    }
    HttpResponse r;
    r.body =
        store::Dump(Json{{"error", {{"code", "unavailable"}, {"field", ""}, {"message", message}}},
                         {"leader", leader}}) +
        "\n";
    if (leader.empty()) {
      r.status = 503;
      r.headers.emplace_back("Retry-After", "1");
    } else {
      r.status = 307;
      r.headers.emplace_back("Location", leader + req.target);
    }
    return r;
  }

  Result<Caller> Authenticate(const HttpRequest& req) const {
    const std::string header = req.Header("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) {
      return Status::FromCode(StatusCode::kUnauthenticated,
                              req.HasHeader("Authorization") ? "expected 'Bearer TOKEN'"
                                                             : "missing (expected 'Bearer TOKEN')",
                              "Authorization");
    }
    return auth()->Authenticate(std::string_view(header).substr(kBearer.size()), NowMillis());
  }

  // The connection layer's figures, for /metrics.
  void HttpMetrics(Scrape& scrape) const {
    const net::HttpServerStats s = http_->stats();
    scrape.Gauge("arbiter_http_connections", "Open connections.")
        .Add({})
        .Set(static_cast<double>(s.connections_open));
    scrape
        .Counter("arbiter_http_connections_refused_total",
                 "Connections closed at once at the connection limit.")
        .Add({})
        .Increment(static_cast<double>(s.connections_refused));
    scrape.Counter("arbiter_http_requests_total", "Requests read.")
        .Add({})
        .Increment(static_cast<double>(s.requests));
    scrape.Gauge("arbiter_watchers", "Long polls and event streams open.")
        .Add({})
        .Set(static_cast<double>(watchers_.in_use()));
  }

  void CountBad() {
    if (Core* c = core()) c->metrics().bad_requests.Increment();
  }

  // What this server is among the servers of a shared store (kSingle: it has its own store).
  enum class Role { kSingle, kStandby, kLeading, kDeposed };

  std::atomic<Core*> core_{nullptr};
  std::atomic<std::int64_t> warm_jobs_{-1};
  std::atomic<Millis> lease_until_{std::numeric_limits<Millis>::max()};
  mutable std::mutex leader_mu_;
  Role role_ = Role::kSingle;  // GUARDED_BY(leader_mu_)
  std::string leader_;         // GUARDED_BY(leader_mu_)
  HttpServer* http_ = nullptr;
  const std::string node_key_;
  mutable std::mutex auth_mu_;
  std::shared_ptr<const Authenticator> auth_;  // GUARDED_BY(auth_mu_); replaced by SetTokens
  Watchers watchers_;
  TlsClientSettings tls_;
  const std::size_t max_body_;
  const Millis sync_wait_;
};
class ServerImpl : public Server {
 public:
  ~ServerImpl() override {
    // The connections and handlers first (none runs afterwards), then the core, then what the
    // HTTP server still holds (timers of watches, whose watcher slots are the API's), then the
    // API.
    if (http_) http_->Stop();
    StopLeading();
    if (api_) api_->SetCore(nullptr);
    core_.reset();
    http_.reset();
  }
  int port() const override { return port_; }

  Status ReloadTokens() override {
    Result<config::ClusterConfig> config = config::LoadClusterFile(args_.config);
    if (!config.ok()) return config.status();
    if (Status st = CheckTokens(*config, args_); !st.ok()) return st;
    api_->SetTokens(config->server.tokens);
    return Status::Ok();
  }

  // The configuration's tokens: refused written in the file itself outside --dev; warned about
  // when there are none, for the examples' tokens (outside --dev), and for user tokens that may
  // use any priority class.
  static Status CheckTokens(const config::ClusterConfig& config, const ServerArgs& args) {
    if (config.server.tokens.empty()) {
      fmt::print(stderr, "warning: {}: no server.tokens; every API call will be refused (401)\n",
                 args.config);
    }
    for (std::size_t i = 0; i < config.server.tokens.size(); ++i) {
      const config::TokenSpec& t = config.server.tokens[i];
      if (t.inline_secret && !args.dev) {
        return Status::InvalidArgument(
            fmt::format("{}: server.tokens[{}] ({}): a token written in the configuration is for "
                        "development only (arbiter server --dev); give token_sha256 (arbiter "
                        "token new) or token_file",
                        args.config, i, t.name),
            "--config");
      }
      if (const std::string_view example = config::ExampleToken(t); !example.empty() && !args.dev) {
        fmt::print(stderr,
                   "warning: {}: server.tokens[{}] ({}) is the example token '{}', published "
                   "with the examples: anyone who has read them can call the server as {}; give "
                   "it a secret of its own (arbiter token new)\n",
                   args.config, i, t.name, example, t.name);
      }
      if (t.role == config::TokenSpec::Role::kUser && t.priority_classes.empty()) {
        fmt::print(stderr,
                   "warning: {}: the user token {} may give its jobs any priority class; list "
                   "its priority_classes (docs/security.md)\n",
                   args.config, t.name);
      }
    }
    return Status::Ok();
  }

  Status Start(const ServerArgs& args, const std::function<void(int)>& listening) {
    args_ = args;
    Result<config::ClusterConfig> config = config::LoadClusterFile(args.config);
    if (!config.ok()) return config.status();
    if (Status st = CheckTokens(*config, args); !st.ok()) return st;
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
    std::string host = args.listen.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
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
    // With a shared store the node key is shared too (every server must accept every node's
    // credential), kept in the database.
    Result<std::string> node_key = std::string();
    if (store::IsPostgresUrl(args.store)) {
      Result<std::unique_ptr<store::LeaderElection>> election =
          store::LeaderElection::Open({.url = args.store,
                                       .id = ServerId(),
                                       .address = "",
                                       .lease = std::chrono::milliseconds(args.lease_ms)});
      if (!election.ok()) return election.status();
      election_ = std::move(election).value();
      node_key = election_->SharedSecret("node-credentials.key", crypto::RandomHex(32));
    } else if (!args.store.empty()) {
      return Status::InvalidArgument(
          fmt::format("expected a PostgreSQL connection string (postgresql://...), got '{}'; "
                      "the SQLite store's directory is --data",
                      args.store),
          "--store");
    } else {
      node_key = LoadOrCreateNodeKey(args.data);
    }
    if (!node_key.ok()) return node_key.status();
    api_ = std::make_unique<Api>(*config, std::move(node_key).value());
    TlsClientSettings agent_tls;
    agent_tls.ca_file = args.agent_ca;
    api_->SetTls(std::move(agent_tls));

    // A few threads, whatever the number of connections: I/O on one per processor (at most 4),
    // handlers on `threads` (default: processors + 2), and a few for requests that wait on an
    // agent's log server.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    net::HttpServerOptions options;
    options.host = host;
    options.port = port;
    options.io_threads = std::min(cores, 4);
    options.lanes = {args.threads > 0 ? args.threads : cores + 2, 2, 2};  // users, agents, logs
    options.max_body_bytes = static_cast<std::size_t>(config->server.max_body_bytes);
    options.max_header_bytes = kMaxHeaderBytes;
    options.tls_cert = args.tls_cert;
    options.tls_key = args.tls_key;
    options.tls_client_ca = args.tls_client_ca;
    options.error_response = [api = api_.get()](int status, std::string_view what) {
      return api->Refusal(status, what);
    };
    http_ = std::make_unique<HttpServer>(std::move(options));
    api_->Register(*http_);
    if (Status st = http_->Listen(); !st.ok()) {
      if (st.field() == "--tls-cert") return st;
      return Status::FromCode(
          StatusCode::kUnavailable,
          fmt::format("cannot listen on {}: the address is in use (another server?) or not this "
                      "machine's",
                      args.listen),
          "--listen");
    }
    port_ = http_->port();
    if (listening) listening(port_);

    if (election_) {
      // A standby until it leads: the campaign runs on a thread of its own.
      election_->set_address(Advertised(args, host, port_));
      api_->SetStandby("");
      config_ = std::move(config).value();
      // The follower first: the campaign's thread may lead at once, and Lead joins it.
      follow_thread_ = std::thread([this] { Follow(); });
      leader_thread_ = std::thread([this] { Campaign(); });
      return Status::Ok();
    }
    Result<std::unique_ptr<store::Store>> store = store::OpenSqliteStore({.dir = args.data});
    if (!store.ok()) return store.status();
    CoreOptions core_options;
    core_options.virtual_nodes = args.virtual_nodes;
    core_options.check_invariants = args.check_invariants;
    Result<std::unique_ptr<Core>> core =
        Core::Open(*config, std::move(store).value(), std::move(core_options));
    if (!core.ok()) return core.status();
    core_ = std::move(core).value();
    api_->SetCore(core_.get());
    return Status::Ok();
  }

 private:
  // This server's identity among the servers of a shared store: host, process and a random part
  // (a restarted process is another server).
  static std::string ServerId() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return fmt::format("{}:{}:{}", host, ::getpid(), crypto::RandomHex(4));
  }
  static std::string Advertised(const ServerArgs& args, const std::string& host, int port) {
    if (!args.advertise.empty()) return args.advertise;
    std::string h = host;
    if (h.empty() || h == "0.0.0.0" || h == "::") {
      char name[256] = {};
      ::gethostname(name, sizeof name - 1);
      h = name;
    }
    if (h.find(':') != std::string::npos) h = "[" + h + "]";
    return fmt::format("{}://{}:{}", args.tls_cert.empty() ? "http" : "https", h, port);
  }

  using Clock = std::chrono::steady_clock;

  // The lease's timing (docs/design/ha.md, "Timing"): renewed every fifth of the lease; a leader
  // answers as the leader only until half a lease after it sent its last renewal that succeeded,
  // and steps down once a renewal has not succeeded by then. A standby deposes it a whole lease
  // after that renewal reached the database, so the two never overlap.
  std::chrono::milliseconds RenewEvery() const {
    return std::chrono::milliseconds(std::max<Millis>(args_.lease_ms / 5, 100));
  }
  std::chrono::milliseconds RenewDeadline() const {
    return std::chrono::milliseconds(args_.lease_ms / 2);
  }
  static Millis ToMillis(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }

  // The leadership loop (a shared store): try to lead 4 times a second, telling the API who
  // leads meanwhile; once leading, lead until the lease is lost or the server stops. A deposed
  // leader never leads again in this process.
  void Campaign() {
    const auto poll = std::chrono::milliseconds(250);
    std::string last_error;
    std::unique_lock lock(leader_mu_);
    while (!stopping_) {
      lock.unlock();
      const Clock::time_point attempt = Clock::now();
      Result<store::LeaderView> view = election_->Campaign();
      lock.lock();
      if (stopping_) return;
      if (!view.ok()) {
        if (view.status().message() != last_error) {
          last_error = view.status().message();
          fmt::print(stderr, "arbiter server: cannot reach the store: {}\n", last_error);
        }
        api_->SetStandby("");
        leader_cv_.wait_for(lock, poll);
        continue;
      }
      last_error.clear();
      if (!view->leading) {
        api_->SetStandby(view->address);
        leader_cv_.wait_for(lock, poll);
        continue;
      }
      lock.unlock();
      Lead(view->epoch, attempt);
      return;
    }
  }

  // While standing by: a warm copy of the active jobs (Core::Warm), read once and caught up
  // every second on a read-only connection of its own, so that a takeover reads only what
  // changed since (docs/design/ha.md, "Warm standbys"). Ends when this server leads (Lead joins
  // it and takes the copy) or stops.
  void Follow() {
    std::unique_ptr<store::Store> reader;
    std::string said;
    std::unique_lock lock(leader_mu_);
    while (!stopping_ && !follow_stop_) {
      lock.unlock();
      Status st = Status::Ok();
      if (!reader) {
        store::PostgresOptions options;
        options.url = args_.store;
        options.read_only = true;
        Result<std::unique_ptr<store::Store>> opened = store::OpenPostgresStore(options);
        if (opened.ok()) {
          reader = std::move(opened).value();
        } else {
          st = opened.status();
        }
      }
      if (st.ok() && !warm_) {
        const auto t0 = Clock::now();
        Result<std::unique_ptr<Core::Warm>> loaded =
            Core::Warm::Load(config_, *reader, &follow_cancel_);
        if (loaded.ok()) {
          warm_ = std::move(loaded).value();
          fmt::print("arbiter server: standing by with {} active jobs in memory ({:.2f} s)\n",
                     warm_->jobs(), std::chrono::duration<double>(Clock::now() - t0).count());
          std::fflush(stdout);
        } else {
          st = loaded.status();
        }
      } else if (st.ok()) {
        st = warm_->CatchUp(*reader);
        if (!st.ok()) warm_.reset();  // read whole again next time
      }
      api_->SetWarmJobs(warm_ ? static_cast<std::int64_t>(warm_->jobs()) : -1);
      if (!st.ok() && !follow_cancel_) {
        reader.reset();
        if (st.message() != said) {
          said = st.message();
          fmt::print(stderr, "arbiter server: standby: cannot follow the store: {}\n", said);
        }
      }
      lock.lock();
      leader_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || follow_stop_; });
    }
  }

  // Leads with `epoch`, won by the attempt sent at `won_at`, until the lease is lost or the
  // server stops. The lease is renewed on a thread of its own from the start, so that a recovery
  // longer than the lease does not lose it; the store's connections belong to the term, and
  // losing the lease ends them (Lose).
  void Lead(std::uint64_t epoch, Clock::time_point won_at) {
    std::shared_ptr<store::Severance> severance = std::make_shared<store::Severance>();
    {
      std::lock_guard lock(leader_mu_);
      severance_ = severance;
      api_->ExtendLease(ToMillis(won_at + RenewDeadline()));
      api_->SetLeading();
      lease_thread_ = std::thread([this, epoch, won_at] { KeepLease(epoch, won_at); });
    }
    // The standby's copy, as far as it got: a load under way is cancelled (the recovery then
    // reads every job).
    {
      std::lock_guard lock(leader_mu_);
      follow_stop_ = true;
    }
    follow_cancel_ = true;
    leader_cv_.notify_all();
    if (follow_thread_.joinable()) follow_thread_.join();
    std::unique_ptr<Core::Warm> warm = std::move(warm_);
    api_->SetWarmJobs(-1);
    fmt::print("arbiter server: leading (epoch {}), recovering from the store{}\n", epoch,
               warm ? fmt::format(" (standby's copy: {} active jobs)", warm->jobs()) : "");
    std::fflush(stdout);
    store::PostgresOptions options;
    options.url = args_.store;
    options.epoch = epoch;
    options.severance = severance;
    options.on_fenced = [this, epoch] {
      Lose(Status::Unavailable(fmt::format(
          "lost the leadership (epoch {}): a write was fenced; another server leads", epoch)));
    };
    Result<std::unique_ptr<store::Store>> store = store::OpenPostgresStore(options);
    if (!store.ok()) return Lose(store.status());
    CoreOptions core_options;
    core_options.virtual_nodes = args_.virtual_nodes;
    core_options.check_invariants = args_.check_invariants;
    core_options.epoch = epoch;
    Result<std::unique_ptr<Core>> core =
        Core::Open(config_, std::move(store).value(), std::move(core_options), std::move(warm));
    if (!core.ok()) return Lose(core.status());
    {
      std::lock_guard lock(leader_mu_);
      if (stopping_ || lost_) return;  // the core recovered for nothing: destroyed here
      core_ = std::move(core).value();
      api_->SetCore(core_.get());
      fmt::print("arbiter server: ready, leading (epoch {})\n", epoch);
      std::fflush(stdout);
    }
    std::unique_lock lock(leader_mu_);
    leader_cv_.wait(lock, [&] { return stopping_ || lost_; });
    if (stopping_) return;
    // Deposed: no cycle more. The core itself stays until the server is destroyed (after its
    // connections, which may still hold it); its writes are fenced by the epoch and its
    // connections are severed, so the loop stops at once.
    Core* c = core_.get();
    lock.unlock();
    if (c) c->Stop();
  }

  // Renews the lease every fifth of it, each renewal waiting at most until half a lease after
  // the last one that succeeded was sent (`last`: at first the winning attempt's start). A
  // renewal that fails, or has no answer by then, ends the leadership.
  void KeepLease(std::uint64_t epoch, Clock::time_point last) {
    std::unique_lock lock(leader_mu_);
    for (;;) {
      leader_cv_.wait_for(lock, RenewEvery(), [&] { return stopping_ || lost_; });
      if (stopping_ || lost_) return;
      lock.unlock();
      const Clock::time_point sent = Clock::now();
      if (sent >= last + RenewDeadline()) {  // this thread itself was held up (a stopped process)
        return Lose(Status::Unavailable(fmt::format(
            "lost the leadership (epoch {}): no renewal succeeded within {} ms (half the lease)",
            epoch, RenewDeadline().count())));
      }
      const Status renewed = election_->Renew(last + RenewDeadline());
      if (!renewed.ok()) return Lose(renewed);
      last = sent;
      api_->ExtendLease(ToMillis(sent + RenewDeadline()));
      lock.lock();
    }
  }

  // The lease is lost (a renewal failed or came too late, a write was fenced, the recovery
  // failed): at once, the API answers 503 naming no leader, the term's database connections are
  // ended (calls held on them fail over to the client, which retries elsewhere), and `lost` is
  // told (the process exits within a second). Once; from any thread.
  void Lose(const Status& why) {
    std::shared_ptr<store::Severance> severance;
    {
      std::lock_guard lock(leader_mu_);
      if (lost_ || stopping_) return;
      lost_ = true;
      severance = severance_;
      api_->SetDeposed();
    }
    leader_cv_.notify_all();
    if (severance) severance->Sever();
    fmt::print(stderr, "arbiter server: {}\n", why.message());
    std::fflush(stderr);
    if (args_.lost) args_.lost(why);
  }

  void StopLeading() {
    {
      std::lock_guard lock(leader_mu_);
      stopping_ = true;
      // A recovery under way is cut short; a leader's core keeps its connections to save its
      // last figures.
      if (!core_ && severance_) severance_->Sever();
    }
    follow_cancel_ = true;
    leader_cv_.notify_all();
    if (leader_thread_.joinable()) leader_thread_.join();
    if (lease_thread_.joinable()) lease_thread_.join();
    if (follow_thread_.joinable()) follow_thread_.join();
  }

  // Destroyed in the order the destructor says.
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<Core> core_;
  int port_ = 0;
  // With a shared store: the election, and the thread that campaigns and leads.
  std::unique_ptr<store::LeaderElection> election_;
  config::ClusterConfig config_;
  ServerArgs args_;
  std::mutex leader_mu_;
  std::condition_variable leader_cv_;
  bool stopping_ = false;                        // GUARDED_BY(leader_mu_)
  bool lost_ = false;                            // GUARDED_BY(leader_mu_)
  std::shared_ptr<store::Severance> severance_;  // GUARDED_BY(leader_mu_); the term's
  std::thread leader_thread_;                    // campaigns, then leads
  std::thread lease_thread_;                     // renews the lease while leading
  bool follow_stop_ = false;                     // GUARDED_BY(leader_mu_)
  std::atomic<bool> follow_cancel_{false};       // a warm load under way ends
  std::unique_ptr<Core::Warm> warm_;             // the follower's; Lead's once it is joined
  std::thread follow_thread_;                    // a standby's Follow
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

int RunServer(const ServerArgs& given) {
  // Signals are taken by sigwait below; every thread started from here on has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A lost leadership wakes the sigwait below the same way, with `lost` set.
  static std::atomic<bool> lost{false};
  ServerArgs args = given;
  args.lost = [](const Status&) {
    lost = true;
    ::kill(::getpid(), SIGTERM);
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::string host = args.listen.substr(0, args.listen.rfind(':'));
  auto start = [&] {
    return Server::Start(args, [&](int port) {
      fmt::print("arbiter server {}: listening on {}://{}:{}\n", arbiter::Version(),
                 args.tls_cert.empty() ? "http" : "https", host, port);
      std::fflush(stdout);
    });
  };
  Result<std::unique_ptr<Server>> server = start();
  // A shared store that cannot be reached yet (an outage, a database starting after the
  // servers): wait for it, trying again after 0.5 s, doubling up to 5 s, rather than exit and
  // spend a supervisor's start limit. A signal still stops the wait.
  std::chrono::milliseconds backoff(500);
  std::string said;
  while (!server.ok() && store::IsPostgresUrl(args.store) &&
         server.status().code() == StatusCode::kUnavailable && server.status().field().empty()) {
    if (server.status().message() != said) {
      said = server.status().message();
      fmt::print(stderr,
                 "arbiter server: waiting for the store: {} (trying again until it answers)\n",
                 said);
      std::fflush(stderr);
    }
    const timespec wait{static_cast<time_t>(backoff.count() / 1000),
                        static_cast<long>(backoff.count() % 1000) * 1000000L};
    const int got = sigtimedwait(&signals, nullptr, &wait);
    if (got == SIGINT || got == SIGTERM) {
      fmt::print("arbiter server: {} received while waiting for the store, stopping\n",
                 got == SIGINT ? "SIGINT" : "SIGTERM");
      return 0;
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    server = start();
  }
  if (!server.ok()) {
    fmt::print(stderr, "error: {}\n", server.status().message());
    // A bad command line is a usage error (2), as for every command.
    return server.status().field() == "--listen" ? 2 : 1;
  }
  if (store::IsPostgresUrl(args.store)) {
    fmt::print(
        "arbiter server: standing by on the shared store; it leads once no other server "
        "does\n");
  } else {
    fmt::print("arbiter server: ready ({} in {:.2f} s){}\n", args.data,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               args.virtual_nodes ? ", virtual nodes" : "");
  }
  std::fflush(stdout);
  int sig = 0;
  // SIGHUP reloads the configuration's tokens (rotation without a restart); a configuration that
  // does not load keeps the tokens in use.
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    if (Status st = (*server)->ReloadTokens(); !st.ok()) {
      fmt::print(stderr, "arbiter server: SIGHUP: the tokens were not reloaded: {}\n",
                 st.message());
    } else {
      fmt::print("arbiter server: SIGHUP: tokens reloaded from {}\n", args.config);
    }
    std::fflush(stdout);
  }
  if (lost) {
    fmt::print(stderr,
               "arbiter server: stopping: it no longer leads (a supervisor restarts it as a "
               "standby)\n");
    std::fflush(stderr);
    // Within a second, whatever its connections still wait for: nothing it holds needs saving
    // (its writes are fenced, its database connections severed).
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::fflush(nullptr);
      std::_Exit(3);
    }).detach();
    server->reset();
    return 3;
  }
  fmt::print("arbiter server: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server->reset();
  return 0;
}

}  // namespace arbiter::server
