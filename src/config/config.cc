// The cluster file: topology levels, scheduler options, priority classes, nodes and the queue tree.

#include "config/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/loaders.h"
#include "config/reader.h"
#include "crypto/crypto.h"
#include "job/limits.h"

namespace arbiter::config {
namespace {

using internal::Entries;
using internal::Entry;
using internal::Map;
using internal::ReadFile;
using internal::UnknownName;
using internal::Value;

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int32_t kInt32Min = std::numeric_limits<std::int32_t>::min();
// Bounds that keep a typo ("count: 80000000") from exhausting memory.
constexpr std::int64_t kMaxNodes = 1 << 20;
// The state's maximum (placement keeps per-node arrays of it): a node with more is refused here,
// with its line, rather than by ClusterState::Create without one.
constexpr auto kMaxDevices = static_cast<std::int64_t>(kMaxDevicesPerNode);

// A node name or domain name with placeholders: {i} is the node's index within its entry, {i/N}
// that index divided by N, {i%N} its remainder by N.
class NameTemplate {
 public:
  explicit NameTemplate(const Value& value) {
    std::string text = value.NonEmptyString();
    std::string literal;
    for (std::size_t pos = 0; pos < text.size(); ++pos) {
      char c = text[pos];
      if (c == '}') value.Fail(fmt::format("unmatched '}}' in '{}'", text));
      if (c != '{') {
        literal += c;
        continue;
      }
      std::size_t close = text.find('}', pos);
      if (close == std::string::npos) value.Fail(fmt::format("unclosed '{{' in '{}'", text));
      std::string inner = text.substr(pos + 1, close - pos - 1);
      Part part{std::move(literal), Op::kIndex, 1};
      literal.clear();
      if (inner != "i") {
        bool ok = inner.size() > 2 && inner[0] == 'i' && (inner[1] == '/' || inner[1] == '%');
        const char* first = inner.data() + 2;
        const char* last = inner.data() + inner.size();
        if (ok) {
          auto [end, ec] = std::from_chars(first, last, part.n);
          ok = ec == std::errc() && end == last && part.n >= 1;
        }
        if (!ok) {
          value.Fail(fmt::format(
              "unknown placeholder '{{{}}}' in '{}' (expected {{i}}, {{i/N}} or {{i%N}}, N >= 1)",
              inner, text));
        }
        part.op = inner[1] == '/' ? Op::kDiv : Op::kMod;
      }
      parts_.push_back(std::move(part));
      pos = close;
    }
    tail_ = std::move(literal);
  }

  bool has_placeholder() const { return !parts_.empty(); }

  std::string Expand(std::int64_t index) const {
    std::string out;
    for (const Part& p : parts_) {
      out += p.literal;
      std::int64_t v = p.op == Op::kDiv ? index / p.n : p.op == Op::kMod ? index % p.n : index;
      out += std::to_string(v);
    }
    out += tail_;
    return out;
  }

 private:
  enum class Op { kIndex, kDiv, kMod };
  struct Part {
    std::string literal;  // text before the placeholder
    Op op;
    std::int64_t n;
  };
  std::vector<Part> parts_;
  std::string tail_;
};

// Index of `name` in `names`, or -1.
int IndexOf(const std::vector<std::string>& names, const std::string& name) {
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::optional<Millis> ParseUtcTime(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SSZ
  if (text.size() != 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != 'Z')
    return std::nullopt;
  auto field = [&](std::size_t at, std::size_t size, int min, int max) -> std::optional<int> {
    int v = 0;
    auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + size, v);
    if (ec != std::errc() || end != text.data() + at + size || v < min || v > max)
      return std::nullopt;
    return v;
  };
  const auto year = field(0, 4, 1970, 9999), month = field(5, 2, 1, 12), day = field(8, 2, 1, 31),
             hour = field(11, 2, 0, 23), minute = field(14, 2, 0, 59), second = field(17, 2, 0, 60);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const std::time_t t = timegm(&tm);
  if (tm.tm_mday != *day) return std::nullopt;  // 31 February
  return static_cast<Millis>(t) * 1000;
}

std::string_view ExampleToken(const TokenSpec& token) {
  for (std::string_view example : kExampleTokens) {
    if (token.sha256 == crypto::Sha256Hex(example)) return example;
  }
  return {};
}

std::int64_t internal::MemoryMiB(const Value& v, BareMemory::Kind kind,
                                 std::vector<BareMemory>* bare) {
  const std::int64_t mib = v.MiB();
  if (bare != nullptr && v.BareNumber()) bare->push_back({kind, v.path(), v.String(), mib});
  return mib;
}

const char* RoleName(TokenSpec::Role role) {
  switch (role) {
    case TokenSpec::Role::kAdmin:
      return "admin";
    case TokenSpec::Role::kUser:
      return "user";
    case TokenSpec::Role::kAgent:
      return "agent";
    case TokenSpec::Role::kViewer:
      return "viewer";
  }
  return "?";
}

namespace {

class ClusterLoader {
 public:
  ClusterConfig Load(const Value& root) {
    if (!root.node().IsMap()) {
      root.Fail(
          "expected a mapping with fields topology, scheduler, priority_classes, queues, "
          "nodes");
    }
    Map m(root, {"topology", "scheduler", "priority_classes", "queues", "nodes", "gpu_throughput",
                 "server"});
    // Nodes come before queues: quota resources name the GPU models found on nodes.
    if (const Value* v = m.Find("topology")) LoadTopology(*v);
    if (const Value* v = m.Find("scheduler")) LoadScheduler(*v);
    LoadPriorityClasses(m.Get("priority_classes"));
    LoadNodes(m.Get("nodes"));
    LoadQueues(m.Get("queues"));
    if (const Value* v = m.Find("gpu_throughput")) LoadThroughput(*v);
    if (const Value* v = m.Find("server")) LoadServer(*v);
    return std::move(out_);
  }

 private:
  void LoadTopology(const Value& value) {
    Map m(value, {"levels"});
    if (const Value* levels = m.Find("levels")) {
      for (const Value& item : levels->Items()) {
        std::string level = item.NonEmptyString();
        if (level == "node" || level == "nvlink") {
          item.Fail(
              fmt::format("'{}' is implicit (levels end with node, nvlink); list only the "
                          "levels above nodes",
                          level));
        }
        if (IndexOf(levels_, level) >= 0) item.Fail(fmt::format("repeated level '{}'", level));
        levels_.push_back(std::move(level));
      }
    }
    std::vector<std::string> all = levels_;
    all.push_back("node");
    all.push_back("nvlink");
    out_.cluster.topology.levels = std::move(all);
  }

  void LoadScheduler(const Value& value) {
    Map m(value, {"ordering", "fair_share_half_life", "fair_share_period", "score_candidates",
                  "placement", "preemption", "backfill"});
    if (const Value* v = m.Find("ordering")) {
      Map o(*v, {"policy", "priority_class_weight", "queue_priority_weight", "fair_share_weight",
                 "age_weight", "max_age", "starvation_wait", "las_thresholds", "starvation_factor",
                 "gittins_quantum", "gittins_window", "ftf_lease", "gavel_round", "heterogeneity"});
      OrderingWeights& w = out_.engine.ordering;
      const Value* policy = o.Find("policy");
      if (policy) {
        constexpr OrderPolicy kPolicies[] = {OrderPolicy::kMultifactor,
                                             OrderPolicy::kLas,
                                             OrderPolicy::kLas2d,
                                             OrderPolicy::kGittins,
                                             OrderPolicy::kFinishTimeFairness,
                                             OrderPolicy::kGavel};
        w.policy =
            kPolicies[policy->Choice({"multifactor", "las", "las-2d", "gittins", "ftf", "gavel"})];
      }
      if (const Value* x = o.Find("las_thresholds")) {
        // Durations: time run (las), or GPU-time (las-2d, gittins: 1h is one GPU-hour).
        w.las_thresholds.clear();
        for (const Value& item : x->Items()) {
          const Millis t = PositiveDuration(item);
          if (!w.las_thresholds.empty() && t <= w.las_thresholds.back())
            item.Fail("thresholds must ascend");
          w.las_thresholds.push_back(t);
        }
      }
      if (const Value* x = o.Find("starvation_factor")) w.starvation_factor = x->Number(0);
      if (const Value* x = o.Find("gittins_quantum")) w.gittins_quantum = PositiveDuration(*x);
      if (const Value* x = o.Find("ftf_lease")) w.ftf_lease = PositiveDuration(*x);
      if (const Value* x = o.Find("gavel_round")) w.gavel_round = PositiveDuration(*x);
      if (const Value* x = o.Find("heterogeneity")) {
        constexpr HeterogeneityPolicy kHeterogeneity[] = {HeterogeneityPolicy::kOff,
                                                          HeterogeneityPolicy::kMaxThroughput,
                                                          HeterogeneityPolicy::kMaxMinFairness};
        w.heterogeneity = kHeterogeneity[x->Choice({"none", "max-throughput", "max-min-fairness"})];
        if (w.heterogeneity == HeterogeneityPolicy::kMaxMinFairness && !IsLas(w.policy) &&
            w.policy != OrderPolicy::kGavel) {
          x->Fail(
              "max-min-fairness counts a least-attained-service order's service, or is the "
              "objective of Gavel's allocation: it needs policy las, las-2d, gittins or gavel");
        }
      }
      if (w.policy == OrderPolicy::kGavel && w.heterogeneity == HeterogeneityPolicy::kOff) {
        policy->Fail(
            "gavel allocates by an objective: set heterogeneity to max-min-fairness or "
            "max-throughput");
      }
      if (const Value* x = o.Find("gittins_window"))
        w.gittins_window = static_cast<std::int32_t>(x->Int(1, 1000000));
      if (const Value* x = o.Find("priority_class_weight")) w.priority_class = x->Number(0);
      if (const Value* x = o.Find("queue_priority_weight")) w.queue_priority = x->Number(0);
      if (const Value* x = o.Find("fair_share_weight")) w.fair_share = x->Number(0);
      if (const Value* x = o.Find("age_weight")) w.age = x->Number(0);
      if (const Value* x = o.Find("max_age")) w.max_age = PositiveDuration(*x);
      if (const Value* x = o.Find("starvation_wait")) {
        w.starvation_wait = x->Duration();
        if (w.starvation_wait > 0 && w.policy != OrderPolicy::kMultifactor)
          x->Fail(fmt::format(
              "starvation_wait orders the multifactor policy's jobs, not {}'s{}",
              OrderPolicyName(w.policy),
              IsLas(w.policy) ? " (its starvation promotion is starvation_factor)" : ""));
      }
    }
    if (const Value* v = m.Find("fair_share_half_life")) {
      out_.cluster.fair_share_half_life = PositiveDuration(*v);
    }
    if (const Value* v = m.Find("fair_share_period")) {
      out_.cluster.fair_share_period = v->Duration();
    }
    if (const Value* v = m.Find("score_candidates")) {
      out_.engine.score_candidates = v->Int32(1, 1 << 16);
    }
    if (const Value* v = m.Find("placement")) LoadPlacement(*v);
    if (const Value* v = m.Find("preemption")) {
      Map p(*v, {"enabled", "max_gpus_per_cycle", "max_loss_per_gpu", "max_attempts_per_cycle"});
      PreemptionOptions& o = out_.engine.preemption;
      if (const Value* x = p.Find("enabled")) o.enabled = x->Bool();
      if (const Value* x = p.Find("max_gpus_per_cycle")) o.max_gpus_per_cycle = x->Gpus().value();
      if (const Value* x = p.Find("max_loss_per_gpu")) o.max_loss_per_gpu = x->Duration();
      if (const Value* x = p.Find("max_attempts_per_cycle"))
        o.max_attempts_per_cycle = x->Int32(0, 1 << 20);
    }
    if (const Value* v = m.Find("backfill")) {
      Map b(*v, {"reservations", "overrun_grace", "default_runtime", "max_attempts"});
      BackfillOptions& o = out_.engine.backfill;
      if (const Value* x = b.Find("reservations")) o.reservations = x->Int32(0, 1 << 16);
      if (const Value* x = b.Find("overrun_grace")) o.overrun_grace = PositiveDuration(*x);
      if (const Value* x = b.Find("default_runtime")) o.default_runtime = PositiveDuration(*x);
      if (const Value* x = b.Find("max_attempts")) o.max_attempts = x->Int32(1, 1 << 20);
    }
  }

  // gpu_throughput: {label: model, workloads: {resnet50: {V100: 1, K80: 0.3}, ...}}. The state
  // checks the rows against the cluster's GPU models (ClusterState::Create).
  void LoadThroughput(const Value& value) {
    Map m(value, {"label", "workloads"});
    ThroughputSpec& t = out_.cluster.throughput;
    if (const Value* v = m.Find("label")) t.label = v->NonEmptyString();
    for (const Entry& row : Entries(m.Get("workloads"))) {
      ThroughputRow out{row.key, {}};
      for (const Entry& cell : Entries(row.value)) {
        const double x = cell.value.Number(0);
        if (x <= 0) cell.value.Fail("must be positive (the work a GPU of this model does)");
        out.by_model[cell.key] = x;
      }
      if (out.by_model.empty()) row.value.Fail("expected a throughput for each GPU model");
      t.rows.push_back(std::move(out));
    }
  }

  // `placement: best-fit`, or `placement: {policy: random, seed: 7}`.
  void LoadPlacement(const Value& value) {
    PlacementOptions& o = out_.engine.placement;
    auto policy = [](const Value& v) {
      return kAllPlacementPolicies[v.Choice({"arbiter", "random", "best-fit", "packing",
                                             "dot-product", "clustering", "fgd", "frag"})];
    };
    if (!value.node().IsMap()) {
      o.policy = policy(value);
      return;
    }
    Map p(value, {"policy", "seed"});
    if (const Value* x = p.Find("policy")) o.policy = policy(*x);
    if (const Value* x = p.Find("seed")) {
      o.seed = static_cast<std::uint64_t>(x->Int(0, std::numeric_limits<std::int64_t>::max()));
    }
  }

  // `server:`: tokens and the server's limits. Runs after the queues (user tokens name them).
  void LoadServer(const Value& value) {
    Map m(value, {"tokens", "cycle_min_interval", "cycle_period", "max_active_jobs_per_user",
                  "max_active_gpus_per_user", "max_body_bytes", "max_watchers",
                  "max_watchers_per_token", "event_window_bytes", "node_lost_timeout",
                  "agent_sync_wait", "kill_after", "checkpoint_root"});
    ServerConfig& s = out_.server;
    if (const Value* v = m.Find("cycle_min_interval")) s.cycle_min_interval = v->Duration();
    if (const Value* v = m.Find("cycle_period")) s.cycle_period = PositiveDuration(*v);
    if (const Value* v = m.Find("max_active_jobs_per_user"))
      s.max_active_jobs_per_user = v->Int(0, std::numeric_limits<std::int64_t>::max());
    if (const Value* v = m.Find("max_active_gpus_per_user"))
      s.max_active_gpu_milli_per_user = v->Gpus().value();
    if (const Value* v = m.Find("max_body_bytes")) s.max_body_bytes = v->Int(1024, 1LL << 32);
    if (const Value* v = m.Find("max_watchers")) s.max_watchers = v->Int(1, 1000000);
    if (const Value* v = m.Find("max_watchers_per_token"))
      s.max_watchers_per_token = v->Int(1, 1000000);
    if (const Value* v = m.Find("event_window_bytes"))
      s.event_window_bytes = v->Int(64 << 10, 1LL << 34);
    if (const Value* v = m.Find("node_lost_timeout")) s.node_lost_timeout = PositiveDuration(*v);
    if (const Value* v = m.Find("agent_sync_wait")) s.agent_sync_wait = PositiveDuration(*v);
    if (const Value* v = m.Find("kill_after")) s.kill_after = v->Duration();
    if (const Value* v = m.Find("checkpoint_root")) s.checkpoint_root = v->NonEmptyString();
    std::vector<std::string> queues;
    for (const QueueSpec& q : out_.cluster.queues) queues.push_back(q.name);
    std::map<std::string, int> names, secrets;  // -> line
    if (const Value* tokens = m.Find("tokens")) {
      for (const Value& item : tokens->Items()) {
        Map t(item, {"name", "token", "token_sha256", "token_file", "role", "queues",
                     "priority_classes", "nodes", "expires"});
        TokenSpec spec;
        const Value& name = t.Get("name");
        spec.name = name.NonEmptyString();
        if (auto [it, fresh] = names.emplace(spec.name, name.mark().line + 1); !fresh)
          name.Fail(
              fmt::format("duplicate token name '{}' (first at line {})", spec.name, it->second));
        const int given = t.Has("token") + t.Has("token_sha256") + t.Has("token_file");
        if (given != 1) {
          item.Fail(given == 0 ? "give the secret: token_sha256 (its SHA-256, from `arbiter token "
                                 "new`), token_file (a file holding it) or token (development)"
                               : "give one of token_sha256, token_file and token");
        }
        const Value& token = t.Has("token")          ? t.Get("token")
                             : t.Has("token_sha256") ? t.Get("token_sha256")
                                                     : t.Get("token_file");
        if (t.Has("token_sha256")) {
          spec.sha256 = token.NonEmptyString();
          if (!crypto::IsSha256Hex(spec.sha256))
            token.Fail("must be a SHA-256 digest: 64 hex digits (arbiter token hash)");
          std::transform(spec.sha256.begin(), spec.sha256.end(), spec.sha256.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        } else {
          std::string secret;
          if (t.Has("token_file")) {
            std::filesystem::path path = token.NonEmptyString();
            if (path.is_relative()) path = std::filesystem::path(token.file()).parent_path() / path;
            Result<std::string> text = ReadFile(path.string());
            if (!text.ok()) token.Fail(text.status().message());
            secret = *text;
            while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r'))
              secret.pop_back();
          } else {
            secret = token.NonEmptyString();
            spec.inline_secret = true;
          }
          if (secret.size() < 16) token.Fail("a token must be at least 16 characters");
          if (limits::FindUnprintable(secret) != std::string_view::npos ||
              secret.find(' ') != std::string::npos)
            token.Fail("a token is printable characters without spaces");
          spec.sha256 = crypto::Sha256Hex(secret);
        }
        if (auto [it, fresh] = secrets.emplace(spec.sha256, token.mark().line + 1); !fresh)
          token.Fail(fmt::format("the same token is given at line {}", it->second));
        spec.role = static_cast<TokenSpec::Role>(
            t.Get("role").Choice({"admin", "user", "agent", "viewer"}));
        if (const Value* v = t.Find("priority_classes")) {
          if (spec.role != TokenSpec::Role::kUser)
            v->Fail("only a user token is limited to priority classes");
          std::vector<std::string> known;
          for (const PriorityClassSpec& pc : out_.cluster.priority_classes)
            known.push_back(pc.name);
          for (const Value& c : v->Items()) {
            std::string name_c = c.NonEmptyString();
            if (IndexOf(known, name_c) < 0) c.Fail(UnknownName("priority class", name_c, known));
            spec.priority_classes.push_back(std::move(name_c));
          }
        }
        if (const Value* v = t.Find("nodes")) {
          if (spec.role != TokenSpec::Role::kAgent) v->Fail("only an agent token names nodes");
          for (const Value& n : v->Items()) spec.nodes.push_back(n.NonEmptyString());
        }
        if (const Value* v = t.Find("expires")) {
          std::optional<Millis> at = ParseUtcTime(v->NonEmptyString());
          if (!at) v->Fail("expected a UTC time as YYYY-MM-DDTHH:MM:SSZ");
          spec.expires = *at;
        }
        if (const Value* q = t.Find("queues")) {
          if (spec.role != TokenSpec::Role::kUser)
            q->Fail("only a user token is limited to queues");
          for (const Value& item_q : q->Items()) {
            std::string queue = item_q.NonEmptyString();
            if (IndexOf(queues, queue) < 0) item_q.Fail(UnknownName("queue", queue, queues));
            spec.queues.push_back(std::move(queue));
          }
        }
        s.tokens.push_back(std::move(spec));
      }
    }
  }

  // Whether the class's or queue's work may be evicted: `preemptible`, or the alias
  // `preemptable` (the queues' spelling before both took one), which lint notes.
  const Value* Preemptible(const Map& m) {
    const Value* alias = m.Find("preemptable");
    if (alias == nullptr) return m.Find("preemptible");
    if (m.Has("preemptible")) {
      m.Key("preemptable").Fail("give preemptible or its alias preemptable, not both");
    }
    out_.aliases.push_back({alias->path(), "preemptible"});
    return alias;
  }

  static Millis PositiveDuration(const Value& v) {
    Millis d = v.Duration();
    if (d <= 0) v.Fail(fmt::format("must be positive, got {}", v.String()));
    return d;
  }

  void LoadPriorityClasses(const Value& value) {
    std::vector<Value> items = value.Items();
    if (items.empty()) value.Fail("list at least one priority class");
    std::map<std::string, int> seen;  // name -> line
    for (const Value& item : items) {
      Map m(item, {"name", "value", "preemptible", "preemptable", "min_runtime", "grace_period",
                   "checkpoint_signal", "max_evictions", "eviction_window", "eviction_cooldown"});
      PriorityClassSpec pc;
      const Value& name = m.Get("name");
      pc.name = name.NonEmptyString();
      if (auto [it, fresh] = seen.emplace(pc.name, name.mark().line + 1); !fresh) {
        name.Fail(
            fmt::format("duplicate priority class '{}' (first at line {})", pc.name, it->second));
      }
      pc.value = m.Get("value").Int32(kInt32Min, kInt32Max);
      if (const Value* v = Preemptible(m)) pc.preemptible = v->Bool();
      if (const Value* v = m.Find("min_runtime")) pc.min_runtime = v->Duration();
      if (const Value* v = m.Find("grace_period")) pc.grace_period = v->Duration();
      if (const Value* v = m.Find("checkpoint_signal")) {
        pc.checkpoint_signal = v->NonEmptyString();
        if (pc.checkpoint_signal.rfind("SIG", 0) != 0) {
          v->Fail(fmt::format("expected a signal name such as SIGUSR1, got '{}'",
                              pc.checkpoint_signal));
        }
      }
      if (const Value* v = m.Find("max_evictions")) pc.max_evictions = v->Int32(0, kInt32Max);
      if (const Value* v = m.Find("eviction_window")) pc.eviction_window = PositiveDuration(*v);
      if (const Value* v = m.Find("eviction_cooldown")) pc.eviction_cooldown = v->Duration();
      out_.cluster.priority_classes.push_back(std::move(pc));
    }
  }

  // ---- Nodes ----

  std::vector<DeviceSpec> LoadDevices(const Map& m) {
    std::vector<DeviceSpec> devices;
    const Value* gpus = m.Find("gpus");
    const Value* list = m.Find("devices");
    if (gpus != nullptr && list != nullptr) {
      m.Key("devices").Fail("give either 'gpus' (identical devices) or 'devices', not both");
    }
    if (gpus != nullptr) {
      Map g(*gpus, {"model", "count", "memory", "nvlink_group_size"});
      DeviceSpec d;
      d.type = GpuModel(g.Get("model"));
      std::int64_t count = g.Get("count").Int(1, kMaxDevices);
      d.memory = DeviceMemory(g.Get("memory"), &out_.bare_memory);
      std::int64_t group_size = count;
      if (const Value* v = g.Find("nvlink_group_size")) {
        group_size = v->Int(1, count);
        if (count % group_size != 0) {
          v->Fail(fmt::format("must divide gpus.count ({}), got {}", count, group_size));
        }
      }
      for (std::int64_t i = 0; i < count; ++i) {
        d.nvlink_group = static_cast<std::uint32_t>(i / group_size);
        devices.push_back(d);
      }
    }
    if (list != nullptr) {
      std::vector<Value> items = list->Items();
      if (items.empty()) list->Fail("list at least one device, or leave 'devices' out");
      if (static_cast<std::int64_t>(items.size()) > kMaxDevices) {
        list->Fail(fmt::format("at most {} devices per node", kMaxDevices));
      }
      for (const Value& item : items) {
        Map dm(item, {"model", "memory", "nvlink_group"});
        DeviceSpec d;
        d.type = GpuModel(dm.Get("model"));
        d.memory = DeviceMemory(dm.Get("memory"), &out_.bare_memory);
        if (const Value* v = dm.Find("nvlink_group")) {
          d.nvlink_group = static_cast<std::uint32_t>(v->Int(0, kMaxDevices - 1));
        }
        devices.push_back(std::move(d));
      }
    }
    return devices;
  }

  std::string GpuModel(const Value& v) {
    std::string model = v.NonEmptyString();
    if (model == kAllGpusResource) {
      v.Fail("'gpu' is reserved (the quota resource for all GPU types together); name the model");
    }
    if (IndexOf(gpu_models_, model) < 0) {
      if (gpu_models_.size() >= kMaxGpuTypes) {
        v.Fail(fmt::format("more than {} GPU models in the cluster", kMaxGpuTypes));
      }
      gpu_models_.push_back(model);
    }
    return model;
  }

  static GpuMemMiB DeviceMemory(const Value& v, std::vector<BareMemory>* bare) {
    std::int64_t mib = internal::MemoryMiB(v, BareMemory::Kind::kDevice, bare);
    if (mib <= 0) v.Fail(fmt::format("must be positive, got {}", v.String()));
    return GpuMemMiB(mib);
  }

  void LoadNodes(const Value& value) {
    std::vector<Value> items = value.Items();
    if (items.empty()) value.Fail("list at least one node");
    // Expanded node name -> the entry's path, for duplicates.
    std::map<std::string, std::string> names;
    for (const Value& item : items) {
      Map m(item, {"name", "count", "gpus", "devices", "cpu", "memory", "labels", "taints",
                   "topology", "cordoned"});
      const Value& name_value = m.Get("name");
      NameTemplate name(name_value);
      std::int64_t count = 1;
      if (const Value* v = m.Find("count")) count = v->Int(1, kMaxNodes);
      if (static_cast<std::int64_t>(out_.cluster.nodes.size()) + count > kMaxNodes) {
        item.Fail(fmt::format("more than {} nodes in the cluster", kMaxNodes));
      }

      NodeSpec spec;
      spec.devices = LoadDevices(m);
      spec.cpu = m.Get("cpu").Cpu();
      spec.memory =
          MemMiB(internal::MemoryMiB(m.Get("memory"), BareMemory::Kind::kNode, &out_.bare_memory));
      if (const Value* v = m.Find("labels")) spec.labels = v->StringMap();
      if (const Value* v = m.Find("taints")) spec.taints = LoadTaints(*v);
      if (const Value* v = m.Find("cordoned")) spec.cordoned = v->Bool();
      std::vector<NameTemplate> domains = LoadNodeTopology(m);

      for (std::int64_t i = 0; i < count; ++i) {
        NodeSpec node = spec;
        node.name = name.Expand(i);
        if (!name.has_placeholder() && count > 1) node.name += fmt::format("-{}", i);
        if (auto [it, fresh] = names.emplace(node.name, item.path()); !fresh) {
          name_value.Fail(
              fmt::format("duplicate node name '{}' (also from {})", node.name, it->second));
        }
        for (const NameTemplate& d : domains) node.domains.push_back(d.Expand(i));
        out_.cluster.nodes.push_back(std::move(node));
      }
    }
  }

  static std::vector<Taint> LoadTaints(const Value& value) {
    std::vector<Taint> taints;
    for (const Value& item : value.Items()) {
      Map m(item, {"key", "value", "effect"});
      Taint t;
      t.key = m.Get("key").NonEmptyString();
      if (const Value* v = m.Find("value")) t.value = v->String();
      if (const Value* v = m.Find("effect")) t.effect = Effect(*v);
      taints.push_back(std::move(t));
    }
    return taints;
  }

  static TaintEffect Effect(const Value& v) {
    return v.Choice({"NoSchedule", "PreferNoSchedule"}) == 0 ? TaintEffect::kNoSchedule
                                                             : TaintEffect::kPreferNoSchedule;
  }

  // The node's domain name template at each declared level, in level order.
  std::vector<NameTemplate> LoadNodeTopology(const Map& m) {
    const Value* value = m.Find("topology");
    if (levels_.empty()) {
      if (value != nullptr) {
        m.Key("topology").Fail("no topology levels are declared (declare them in topology.levels)");
      }
      return {};
    }
    if (value == nullptr) {
      m.self().Fail(fmt::format("missing required field 'topology' (declared levels: {})",
                                JoinNames(levels_)));
    }
    std::vector<std::optional<NameTemplate>> by_level(levels_.size());
    for (const Entry& e : Entries(*value)) {
      int level = IndexOf(levels_, e.key);
      if (level < 0) e.key_value.Fail(UnknownName("topology level", e.key, levels_, "declared"));
      by_level[static_cast<std::size_t>(level)].emplace(e.value);
    }
    std::vector<NameTemplate> out;
    for (std::size_t l = 0; l < levels_.size(); ++l) {
      if (!by_level[l]) {
        value->Fail(fmt::format("missing level '{}' (declared levels: {})", levels_[l],
                                JoinNames(levels_)));
      }
      out.push_back(std::move(*by_level[l]));
    }
    return out;
  }

  // ---- Queues ----

  void LoadQueues(const Value& value) {
    std::vector<Value> items = value.Items();
    if (items.empty()) value.Fail("list at least one queue");
    std::vector<std::string> resources = {kAllGpusResource};
    resources.insert(resources.end(), gpu_models_.begin(), gpu_models_.end());

    std::map<std::string, std::size_t> index;  // name -> position in `items`
    std::vector<std::optional<Value>> parents;
    std::vector<std::string> names;
    for (const Value& item : items) {
      Map m(item,
            {"name", "parent", "weight", "priority", "preemptible", "preemptable",
             "preempt_within_queue", "preempt_lower_priority", "reclaim", "strict_fifo", "quota"});
      QueueSpec q;
      const Value& name = m.Get("name");
      q.name = name.NonEmptyString();
      if (auto [it, fresh] = index.emplace(q.name, names.size()); !fresh) {
        name.Fail(
            fmt::format("duplicate queue '{}' (first at {})", q.name, items[it->second].path()));
      }
      names.push_back(q.name);
      parents.emplace_back();
      if (const Value* v = m.Find("parent")) {
        q.parent = v->NonEmptyString();
        parents.back() = *v;
      }
      if (const Value* v = m.Find("weight")) q.weight = v->Int32(1, kInt32Max);
      if (const Value* v = m.Find("priority")) q.priority = v->Int32(kInt32Min, kInt32Max);
      if (const Value* v = Preemptible(m)) q.preemptable = v->Bool();
      if (const Value* v = m.Find("preempt_within_queue")) q.preempt_within_queue = v->Bool();
      if (const Value* v = m.Find("reclaim")) q.reclaim = v->Bool();
      if (const Value* v = m.Find("strict_fifo")) q.strict_fifo = v->Bool();
      if (const Value* v = m.Find("preempt_lower_priority")) q.preempt_lower_priority = v->Bool();
      if (const Value* v = m.Find("quota")) {
        for (const Entry& e : Entries(*v)) {
          if (IndexOf(resources, e.key) < 0) {
            e.key_value.Fail(UnknownName("quota resource", e.key, resources,
                                         "expected 'gpu' or a GPU model of the nodes"));
          }
          q.quota[e.key] = LoadQuota(e.value);
        }
      }
      out_.cluster.queues.push_back(std::move(q));
    }

    // Parents exist, and following parents from any queue never comes back to it.
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!parents[i]) continue;
      const std::string& parent = out_.cluster.queues[i].parent;
      if (index.count(parent) == 0) parents[i]->Fail(UnknownName("parent queue", parent, names));
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::vector<std::string> chain = {names[i]};
      std::size_t at = i;
      for (std::size_t step = 0; step < items.size() && parents[at]; ++step) {
        at = index.at(out_.cluster.queues[at].parent);
        chain.push_back(names[at]);
        if (at == i) {
          std::string path;
          for (const std::string& n : chain) path += (path.empty() ? "" : " -> ") + n;
          parents[i]->Fail(fmt::format("queue cycle: {}", path));
        }
      }
    }
  }

  static QuotaSpec LoadQuota(const Value& value) {
    Map m(value, {"nominal", "borrowing_limit", "lending_limit", "max"});
    if (!m.Has("nominal") && !m.Has("borrowing_limit") && !m.Has("lending_limit") &&
        !m.Has("max")) {
      value.Fail("give at least one of nominal, borrowing_limit, lending_limit, max");
    }
    QuotaSpec q;
    auto gpus = [](const Value& v) { return v.QuotaGpus(); };
    if (const Value* v = m.Find("nominal")) q.nominal = gpus(*v);
    if (const Value* v = m.Find("borrowing_limit")) q.borrowing_limit = gpus(*v);
    if (const Value* v = m.Find("lending_limit")) q.lending_limit = gpus(*v);
    if (const Value* v = m.Find("max")) q.max = gpus(*v);
    return q;
  }

  std::vector<std::string> levels_;      // operator levels, outermost first
  std::vector<std::string> gpu_models_;  // in order of first appearance
  ClusterConfig out_;
};

}  // namespace

ClusterConfig internal::LoadClusterValue(const Value& root) { return ClusterLoader().Load(root); }

Result<ClusterConfig> ParseCluster(std::string_view yaml, const std::string& file_name) {
  return internal::LoadDocument<ClusterConfig>(
      yaml, file_name, [](const Value& root) { return ClusterLoader().Load(root); });
}

Result<ClusterConfig> LoadClusterFile(const std::string& path) {
  Result<std::string> text = internal::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseCluster(*text, path);
}

}  // namespace arbiter::config
