// Following the leader among several servers (docs/api.md, "Several servers"): the one piece that
// decides, for the command's clients (src/cli) and for the node agent (src/agent), which address
// a request goes to next, whether a redirect is followed, and how long to wait before going round
// the list again. Standard library only and header only, so that the command's small front
// (src/cli/front.cc) takes it without linking anything more.
//
// A request goes to the address that answered last (a redirect's target included), else to the
// first of the list. The answer is taken unless it says that this server does not lead, or
// cannot serve it now:
// - no answer (the connection failed, was lost, or its wait ended): the next address;
// - 307 or 308 with an http or https Location: that URL, at once (at most `max_hops` in a row;
//   never from https to plain http, which would send the token in the clear);
// - 503 whose JSON body names a leader in its `leader` member (a standby): that leader;
// - any other 503 (a standby that knows no leader, a leader still recovering, a deposed leader,
//   a write whose commit was cut off): the next address, the same request (so a submission keeps
//   its idempotency key); with one address, that address again after the wait below;
// - an answer the client refuses itself (an agent's sync answer of a lower epoch): the next
//   address.
// Every other answer (2xx, 4xx, 500) is final. After every address of the list has failed once,
// it waits (200 ms, doubling up to 2 s; at least the longest `Retry-After` of that round, up to
// `max_retry_after`) before going round again, until a round ends past the deadline (none:
// forever). So that a server that accepts and never answers cannot hold a request past the
// deadline, the caller bounds each attempt's waits (to connect, for the answer) by Remaining(),
// at least a second, except where the answer is long by design (a long poll); the agent, which
// has no deadline, keeps its requests' own timeouts.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace arbiter::net {

// "http://a:8642, b:8642" -> {"http://a:8642", "http://b:8642"}: each address of a
// comma-separated list, trimmed, "http://" added where it names no scheme, a trailing '/' dropped;
// empty entries are skipped.
inline std::vector<std::string> SplitServers(std::string_view list) {
  std::vector<std::string> out;
  while (true) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t' || item.back() == '/'))
      item.remove_suffix(1);
    if (!item.empty()) {
      std::string address(item);
      if (address.find("://") == std::string::npos) address = "http://" + address;
      out.push_back(std::move(address));
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

// An http or https URL cut into its "scheme://host[:port]" and the rest (the path and query; "/"
// when there is none). nullopt for anything else: another scheme, no host, a space or a control
// character.
struct HttpUrl {
  std::string base;
  std::string path;
};
inline std::optional<HttpUrl> SplitHttpUrl(std::string_view url) {
  for (const char c : url) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '\x7f') return std::nullopt;
  }
  std::size_t scheme_end = 0;
  if (url.rfind("http://", 0) == 0) {
    scheme_end = 7;
  } else if (url.rfind("https://", 0) == 0) {
    scheme_end = 8;
  } else {
    return std::nullopt;
  }
  const std::size_t slash = url.find_first_of("/?#", scheme_end);
  const std::string_view authority = url.substr(scheme_end, slash - scheme_end);
  if (authority.empty() || authority.find('@') != std::string_view::npos ||
      authority.front() == ':')
    return std::nullopt;
  HttpUrl out{std::string(url.substr(0, slash)), "/"};
  if (slash != std::string_view::npos) {
    std::string_view rest = url.substr(slash);
    rest = rest.substr(0, rest.find('#'));
    if (!rest.empty()) out.path = rest.front() == '/' ? std::string(rest) : "/" + std::string(rest);
  }
  return out;
}

// What became of one request to one address.
struct Outcome {
  int status = 0;                     // the HTTP status; 0: no answer
  std::string error;                  // why there is no answer ("Connection", "Read", ...)
  std::string location;               // the Location header of a 307 or 308
  std::optional<std::string> leader;  // the JSON body's `leader` member, when it has one
  std::string message;                // the JSON error's message, said in the summary
  std::string refused;                // not empty: the client does not take this answer, and why
  std::optional<std::chrono::milliseconds> retry_after;  // a 503's Retry-After (ParseRetryAfter)
};

// A Retry-After header's delay in seconds ("1"); nullopt for anything else (an HTTP date, which
// the servers never send, is not read).
inline std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty() || value.size() > 6) return std::nullopt;
  long seconds = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::milliseconds(seconds * 1000);
}

class LeaderFollower {
 public:
  using Clock = std::chrono::steady_clock;
  using Millis = std::chrono::milliseconds;

  struct Settings {
    Millis first_backoff{200};
    Millis max_backoff{2000};
    // How long a request may go round the list; nullopt: forever (the agent). Zero: one round.
    std::optional<Millis> deadline = Millis(15000);
    int max_hops = 4;  // redirects followed in a row
    // The longest wait a 503's Retry-After may ask for before the next round.
    Millis max_retry_after{5000};
  };

  enum class Action {
    kTake,    // the answer is the leader's, final
    kRetry,   // send the request again to base() + path(), after `wait`
    kGiveUp,  // the deadline has passed: Summary() says what each address said
  };
  struct Decision {
    Action action = Action::kTake;
    Millis wait{0};
  };

  LeaderFollower(std::vector<std::string> servers, Settings settings)
      : servers_(std::move(servers)), settings_(settings) {}
  explicit LeaderFollower(std::vector<std::string> servers)
      : LeaderFollower(std::move(servers), {}) {}

  const std::vector<std::string>& servers() const { return servers_; }
  // The address that answered last ("" before any did).
  const std::string& preferred() const { return preferred_; }
  void set_preferred(std::string base) { preferred_ = std::move(base); }

  // Starts a request for `path` (with its query): it goes first to the address that answered
  // last, else to the first of the list.
  void Begin(std::string path, Clock::time_point now = Clock::now()) {
    request_path_ = std::move(path);
    path_ = request_path_;
    hops_ = 0;
    failures_ = 0;
    backoff_ = settings_.first_backoff;
    retry_after_ = Millis(0);
    notes_.clear();
    end_ = settings_.deadline ? std::optional(now + *settings_.deadline) : std::nullopt;
    cursor_ = preferred_.empty() ? 0 : -1;
    for (std::size_t i = 0; i < servers_.size() && cursor_ < 0; ++i) {
      if (servers_[i] == preferred_) cursor_ = static_cast<int>(i);
    }
    base_ = cursor_ < 0 ? preferred_ : servers_.empty() ? std::string() : servers_[cursor_];
  }

  // Where the request goes now: the base ("http://host:port") and the path.
  const std::string& base() const { return base_; }
  const std::string& path() const { return path_; }

  // The time left before the deadline (at most `cap`): an attempt's timeouts should not outlast
  // it.
  Millis Remaining(Millis cap, Clock::time_point now = Clock::now()) const {
    if (!end_) return cap;
    return std::clamp(std::chrono::duration_cast<Millis>(*end_ - now), Millis(0), cap);
  }

  // Judges what the request to base() got.
  Decision Judge(const Outcome& o, Clock::time_point now = Clock::now()) {
    const bool redirect = o.status == 307 || o.status == 308;
    if (redirect || (o.status == 503 && o.leader && !o.leader->empty())) {
      const std::string target = redirect ? o.location : *o.leader;
      std::optional<HttpUrl> url = SplitHttpUrl(target);
      const std::string said =
          redirect ? "redirected to " + Quoted(target) : "standby, the leader is " + Quoted(target);
      if (!url) return Next(said + ", not followed: not an http or https URL", now);
      if (base_.rfind("https://", 0) == 0 && url->base.rfind("https://", 0) != 0)
        return Next(said + ", not followed: from https to plain http", now);
      if (hops_ >= settings_.max_hops)
        return Next(said + ", not followed: too many redirects in a row", now);
      Note(said);
      ++hops_;
      base_ = url->base;
      if (redirect) path_ = url->path;  // a standby's 503 names the leader only
      return {Action::kRetry, Millis(0)};
    }
    if (o.status == 0) return Next("no answer (" + (o.error.empty() ? "?" : o.error) + ")", now);
    if (o.status == 503) {
      // Not final: the same request again, here after a wait or at the next address.
      if (o.retry_after)
        retry_after_ = std::max(retry_after_, std::min(*o.retry_after, settings_.max_retry_after));
      const std::string said = o.leader ? "standby, no leader known" : "unavailable (HTTP 503)";
      return Next(said + (o.message.empty() ? "" : ": " + o.message), now);
    }
    if (!o.refused.empty()) return Next(o.refused, now);
    preferred_ = base_;
    return {Action::kTake, Millis(0)};
  }

  // Every address tried in this request and what it said last:
  // "http://a:8642: no answer (Connection); http://b:8642: standby, no leader known".
  std::string Summary() const {
    std::string out;
    for (const auto& [base, said] : notes_) out += (out.empty() ? "" : "; ") + base + ": " + said;
    return out;
  }

 private:
  static std::string Quoted(const std::string& text) {
    std::string out;
    for (const char c : text.substr(0, 200)) {
      out += static_cast<unsigned char>(c) < ' ' || c == '\x7f' ? '?' : c;
    }
    return out;
  }

  void Note(const std::string& said) {
    for (auto& [base, last] : notes_) {
      if (base == base_) {
        last = said;
        return;
      }
    }
    notes_.emplace_back(base_, said);
  }

  Decision GiveUp() const { return {Action::kGiveUp, Millis(0)}; }

  // The address base() failed (or its redirect chain did): the next of the list, after a wait
  // once every address has failed since the last one.
  Decision Next(const std::string& said, Clock::time_point now) {
    Note(said);
    if (preferred_ == base_) preferred_.clear();
    hops_ = 0;
    path_ = request_path_;
    if (servers_.empty()) return GiveUp();
    if (cursor_ < 0) {
      cursor_ = 0;  // the address that answered last, outside the list: then the list in order
    } else {
      cursor_ = (cursor_ + 1) % static_cast<int>(servers_.size());
      ++failures_;
    }
    base_ = servers_[cursor_];
    Millis wait(0);
    if (failures_ >= servers_.size()) {
      failures_ = 0;
      wait = std::max(backoff_, retry_after_);
      backoff_ = std::min(backoff_ * 2, settings_.max_backoff);
      retry_after_ = Millis(0);
    }
    // A round that ends past the deadline is the last; else the next starts at the deadline at
    // the latest. (A round is never cut short: each address is tried in it.)
    if (end_ && wait.count() > 0) {
      if (now >= *end_) return GiveUp();
      wait = std::min(wait, std::chrono::duration_cast<Millis>(*end_ - now));
    }
    return {Action::kRetry, wait};
  }

  std::vector<std::string> servers_;
  Settings settings_;
  std::string preferred_;
  std::string request_path_, path_, base_;
  int cursor_ = 0;  // the address of the list this attempt started from; -1: preferred_
  int hops_ = 0;
  std::size_t failures_ = 0;
  Millis backoff_{0};
  Millis retry_after_{0};  // the longest Retry-After of this round
  std::optional<Clock::time_point> end_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

}  // namespace arbiter::net
