// JSON of the store's records. Encoding builds nlohmann::json values. Decoding reads the text
// once, straight into the records, with a small strict pull parser (Reader): no document tree,
// and a field's path is written out only for an error. Recovery decodes every stored job, so
// this is what bounds the time of a restart. Errors are thrown as a private DecodeError inside
// this file only; every public function returns a Status.
#include "store/codec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "job/limits.h"

namespace arbiter::store {
namespace {

using nlohmann::json;

// A decoding error: the path of the field ("groups[0].tasks"; empty for the whole text) and the
// problem.
struct DecodeError {
  std::string field;
  std::string detail;
};

// Where a value is, as a chain on the stack; written out ("groups[0].tasks") only for an error.
struct Path {
  static constexpr std::size_t kNoIndex = ~std::size_t{0};
  const Path* parent = nullptr;
  std::string_view key;  // a field; for the root, the caller's prefix
  std::size_t index = kNoIndex;

  std::string Str() const {
    std::string out = parent != nullptr ? parent->Str() : std::string();
    if (index != kNoIndex) return fmt::format("{}[{}]", out, index);
    if (out.empty()) return std::string(key);
    if (key.empty()) return out;
    return fmt::format("{}.{}", out, key);
  }
};

Path Field(const Path& p, std::string_view key) { return {&p, key, Path::kNoIndex}; }
Path Element(const Path& p, std::size_t i) { return {&p, {}, i}; }

[[noreturn]] void Fail(const Path& p, std::string_view problem) {
  throw DecodeError{p.Str(), std::string(problem)};
}

[[noreturn]] void Unknown(const Path& p, std::string_view key,
                          std::initializer_list<const char*> known) {
  Fail(Field(p, key), fmt::format("unknown field (known: {})", fmt::join(known, ", ")));
}

// A strict JSON pull parser over one text. Each Read* call consumes one value.
class Reader {
 public:
  Reader(std::string_view text, const Path& root) : text_(text), root_(root) {}

  std::string ReadString(const Path& p) {
    SkipWs();
    if (Peek() != '"') Fail(p, fmt::format("must be a string, got {}", Shown()));
    std::string out;
    ScanString(out);
    return out;
  }

  std::int64_t ReadInt(const Path& p) {
    SkipWs();
    const char c = Peek();
    if (c != '-' && (c < '0' || c > '9'))
      Fail(p, fmt::format("must be an integer, got {}", Shown()));
    const std::size_t start = pos_;
    const bool negative = c == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') Malformed("invalid number");
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9') {
      Malformed("invalid number (leading zero)");
    }
    std::uint64_t value = 0;
    bool overflow = false;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) overflow = true;
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ScanNumberRest();
      Fail(p, fmt::format("must be an integer, got {}", text_.substr(start, pos_ - start)));
    }
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (overflow || value > kMax + (negative ? 1 : 0)) {
      Fail(p, fmt::format("is too large, got {}", text_.substr(start, pos_ - start)));
    }
    if (negative)
      return value == kMax + 1 ? std::numeric_limits<std::int64_t>::min()
                               : -static_cast<std::int64_t>(value);
    return static_cast<std::int64_t>(value);
  }

  bool ReadBool(const Path& p) {
    SkipWs();
    if (text_.substr(pos_, 4) == "true") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "false") {
      pos_ += 5;
      return false;
    }
    Fail(p, fmt::format("must be true or false, got {}", Shown()));
  }

  // Calls field(key) for each field; field must read the value.
  template <typename F>
  void ReadObject(const Path& p, F&& field) {
    SkipWs();
    if (Peek() != '{') Fail(p, fmt::format("must be an object, got {}", Shown()));
    ++pos_;
    SkipWs();
    if (Peek() == '}') {
      ++pos_;
      return;
    }
    std::string scratch;  // a key with escapes
    for (;;) {
      SkipWs();
      if (Peek() != '"') Malformed("expected a field name");
      std::string_view key = ScanKey(scratch);
      SkipWs();
      if (Peek() != ':') Malformed("expected ':'");
      ++pos_;
      field(key);
      SkipWs();
      const char c = Peek();
      ++pos_;
      if (c == ',') continue;
      if (c == '}') return;
      --pos_;
      Malformed("expected ',' or '}'");
    }
  }

  // Calls element(i) for each element; element must read the value.
  template <typename F>
  void ReadArray(const Path& p, F&& element) {
    SkipWs();
    if (Peek() != '[') Fail(p, fmt::format("must be a list, got {}", Shown()));
    ++pos_;
    SkipWs();
    if (Peek() == ']') {
      ++pos_;
      return;
    }
    for (std::size_t i = 0;; ++i) {
      element(i);
      SkipWs();
      const char c = Peek();
      ++pos_;
      if (c == ',') continue;
      if (c == ']') return;
      --pos_;
      Malformed("expected ',' or ']'");
    }
  }

  // Only white space may follow the value.
  void End() {
    SkipWs();
    if (pos_ != text_.size()) Malformed("unexpected text after the value");
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void SkipWs() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  [[noreturn]] void Malformed(std::string_view what) const {
    if (pos_ >= text_.size()) what = "unexpected end of the text";
    Fail(root_, fmt::format("malformed JSON at byte {}: {}", pos_ + 1, what));
  }

  // How the next value reads in an error: its text when short, else its kind.
  std::string Shown() {
    const std::size_t start = pos_;
    switch (Peek()) {
      case '{':
        return "an object";
      case '[':
        return "an array";
      case 'n':
        if (text_.substr(pos_, 4) == "null") return "null";
        break;
      case 't':
      case 'f':
        if (text_.substr(pos_, 4) == "true") return "true";
        if (text_.substr(pos_, 5) == "false") return "false";
        break;
      case '"': {
        std::string ignored;
        ScanString(ignored);
        std::string shown(text_.substr(start, pos_ - start));
        pos_ = start;
        if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
        return shown;
      }
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) {
          ++pos_;
          ScanNumberRest();
          std::string shown(text_.substr(start, pos_ - start));
          pos_ = start;
          return shown;
        }
    }
    Malformed("expected a value");
  }

  // The string token from `open` (its '"') to pos_ (past its closing '"') must be UTF-8.
  void CheckUtf8(std::size_t open) {
    const std::string_view raw = text_.substr(open, pos_ - open);
    for (const char ch : raw) {
      if (static_cast<unsigned char>(ch) >= 0x80) {
        if (!job::ValidUtf8(raw)) {
          pos_ = open;
          Malformed("invalid UTF-8 in a string");
        }
        return;
      }
    }
  }

  void ScanNumberRest() {
    while (pos_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
            text_[pos_] == 'e' || text_[pos_] == 'E' || text_[pos_] == '+' || text_[pos_] == '-')) {
      ++pos_;
    }
  }

  // A key: a view of the text, or of `scratch` when it has escapes.
  std::string_view ScanKey(std::string& scratch) {
    const std::size_t start = pos_ + 1;
    std::size_t end = start;
    while (end < text_.size() && text_[end] != '"' && text_[end] != '\\' &&
           static_cast<unsigned char>(text_[end]) >= 0x20) {
      ++end;
    }
    if (end < text_.size() && text_[end] == '"') {
      pos_ = end + 1;
      CheckUtf8(start - 1);
      return text_.substr(start, end - start);
    }
    scratch.clear();
    ScanString(scratch);
    return scratch;
  }

  // At '"': appends the string's value to `out` and moves past it. The raw bytes must be UTF-8.
  void ScanString(std::string& out) {
    const std::size_t open = pos_;
    ++pos_;
    for (;;) {
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\' &&
             static_cast<unsigned char>(text_[pos_]) >= 0x20) {
        ++pos_;
      }
      out.append(text_.substr(start, pos_ - start));
      if (pos_ >= text_.size()) Malformed("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        CheckUtf8(open);
        return;
      }
      if (c != '\\') Malformed("control character in a string");
      ++pos_;
      const char e = Peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          AppendUtf8(out, ScanCodePoint());
          break;
        default:
          --pos_;
          Malformed("invalid escape in a string");
      }
    }
  }

  // After "\u": the code point, joining a surrogate pair.
  std::uint32_t ScanCodePoint() {
    std::uint32_t cp = ScanHex4();
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") Malformed("unpaired surrogate in a string");
      pos_ += 2;
      const std::uint32_t low = ScanHex4();
      if (low < 0xDC00 || low > 0xDFFF) Malformed("invalid surrogate pair in a string");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      Malformed("unpaired surrogate in a string");
    }
    return cp;
  }

  std::uint32_t ScanHex4() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = Peek();
      std::uint32_t d;
      if (c >= '0' && c <= '9') {
        d = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        Malformed("invalid \\u escape in a string");
      }
      v = v * 16 + d;
    }
    return v;
  }

  static void AppendUtf8(std::string& out, std::uint32_t cp) {
    auto byte = [&](std::uint32_t b) { out += static_cast<char>(static_cast<unsigned char>(b)); };
    if (cp < 0x80) {
      byte(cp);
    } else if (cp < 0x800) {
      byte(0xC0 | (cp >> 6));
      byte(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      byte(0xE0 | (cp >> 12));
      byte(0x80 | ((cp >> 6) & 0x3F));
      byte(0x80 | (cp & 0x3F));
    } else {
      byte(0xF0 | (cp >> 18));
      byte(0x80 | ((cp >> 12) & 0x3F));
      byte(0x80 | ((cp >> 6) & 0x3F));
      byte(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  const Path& root_;
  std::size_t pos_ = 0;
};

// ---- Small values ----

std::uint32_t ReadUint32(Reader& r, const Path& p) {
  const std::int64_t v = r.ReadInt(p);
  if (v < 0) Fail(p, fmt::format("must not be negative, got {}", v));
  if (v > std::numeric_limits<std::uint32_t>::max())
    Fail(p, fmt::format("is too large, got {}", v));
  return static_cast<std::uint32_t>(v);
}

std::uint64_t ReadUint(Reader& r, const Path& p) {
  const std::int64_t v = r.ReadInt(p);
  if (v < 0) Fail(p, fmt::format("must not be negative, got {}", v));
  return static_cast<std::uint64_t>(v);
}

Labels ReadStringMap(Reader& r, const Path& p) {
  Labels out;
  r.ReadObject(p, [&](std::string_view key) {
    out.insert_or_assign(std::string(key), r.ReadString(Field(p, key)));
  });
  return out;
}

std::vector<std::string> ReadStringList(Reader& r, const Path& p) {
  std::vector<std::string> out;
  r.ReadArray(p, [&](std::size_t i) { out.push_back(r.ReadString(Element(p, i))); });
  return out;
}

std::vector<Millis> ReadIntList(Reader& r, const Path& p) {
  std::vector<Millis> out;
  r.ReadArray(p, [&](std::size_t i) { out.push_back(r.ReadInt(Element(p, i))); });
  return out;
}

std::size_t ReadChoice(Reader& r, const Path& p, std::initializer_list<const char*> choices) {
  const std::string s = r.ReadString(p);
  std::size_t i = 0;
  for (const char* c : choices) {
    if (s == c) return i;
    ++i;
  }
  Fail(p, fmt::format("must be one of {}, got \"{}\"", fmt::join(choices, ", "), s));
}

// ---- Job spec ----

// Returns whether the group's name was given.
bool ReadGroup(Reader& r, const Path& p, TaskGroup& g) {
  bool named = false;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "name") {
      g.name = r.ReadString(f);
      named = true;
    } else if (key == "tasks") {
      const std::int64_t tasks = r.ReadInt(f);
      if (tasks > std::numeric_limits<std::int32_t>::max() ||
          tasks < std::numeric_limits<std::int32_t>::min()) {
        Fail(f, fmt::format("is out of range, got {}", tasks));
      }
      g.count = static_cast<std::int32_t>(tasks);
    } else if (key == "gpu_milli") {
      g.request.gpu = MilliGpu(r.ReadInt(f));
    } else if (key == "gpu_memory_mib") {
      g.request.gpu_memory = GpuMemMiB(r.ReadInt(f));
    } else if (key == "cpu_milli") {
      g.request.cpu = MilliCpu(r.ReadInt(f));
    } else if (key == "memory_mib") {
      g.request.memory = MemMiB(r.ReadInt(f));
    } else {
      Unknown(p, key, {"name", "tasks", "gpu_milli", "gpu_memory_mib", "cpu_milli", "memory_mib"});
    }
  });
  return named;
}

Toleration ReadToleration(Reader& r, const Path& p) {
  Toleration t;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "key") {
      t.key = r.ReadString(f);
    } else if (key == "operator") {
      t.op = ReadChoice(r, f, {"Equal", "Exists"}) == 0 ? Toleration::Op::kEqual
                                                        : Toleration::Op::kExists;
    } else if (key == "value") {
      t.value = r.ReadString(f);
    } else if (key == "effect") {
      t.effect = ReadChoice(r, f, {"NoSchedule", "PreferNoSchedule"}) == 0
                     ? TaintEffect::kNoSchedule
                     : TaintEffect::kPreferNoSchedule;
    } else {
      Unknown(p, key, {"key", "operator", "value", "effect"});
    }
  });
  return t;
}

job::AffinitySpec ReadAffinity(Reader& r, const Path& p) {
  job::AffinitySpec a;
  bool has_match = false;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "match") {
      a.match = ReadStringMap(r, f);
      has_match = true;
    } else if (key == "level") {
      a.level = r.ReadString(f);
    } else if (key == "anti") {
      a.anti = r.ReadBool(f);
    } else if (key == "required") {
      a.required = r.ReadBool(f);
    } else {
      Unknown(p, key, {"match", "level", "anti", "required"});
    }
  });
  if (!has_match) Fail(Field(p, "match"), "is required");
  return a;
}

void ReadJobSpec(Reader& r, const Path& p, job::JobSpec& s) {
  bool has_name = false, has_queue = false, has_class = false, has_groups = false;
  std::vector<bool> named;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "name") {
      s.name = r.ReadString(f);
      has_name = true;
    } else if (key == "user") {
      s.user = r.ReadString(f);
    } else if (key == "queue") {
      s.queue = r.ReadString(f);
      has_queue = true;
    } else if (key == "priority_class") {
      s.priority_class = r.ReadString(f);
      has_class = true;
    } else if (key == "groups") {
      has_groups = true;
      s.groups.clear();
      named.clear();
      r.ReadArray(f, [&](std::size_t i) {
        named.push_back(ReadGroup(r, Element(f, i), s.groups.emplace_back()));
      });
    } else if (key == "gpu_types") {
      s.gpu_types = ReadStringList(r, f);
    } else if (key == "topology") {
      bool has_level = false;
      s.topology_mode = ConstraintMode::kRequired;
      r.ReadObject(f, [&](std::string_view tkey) {
        const Path t = Field(f, tkey);
        if (tkey == "level") {
          s.topology_level = r.ReadString(t);
          has_level = true;
        } else if (tkey == "mode") {
          s.topology_mode = ReadChoice(r, t, {"required", "preferred"}) == 0
                                ? ConstraintMode::kRequired
                                : ConstraintMode::kPreferred;
        } else {
          Unknown(f, tkey, {"level", "mode"});
        }
      });
      if (!has_level) Fail(Field(f, "level"), "is required");
    } else if (key == "node_selector") {
      s.node_selector = ReadStringMap(r, f);
    } else if (key == "tolerations") {
      s.tolerations.clear();
      r.ReadArray(
          f, [&](std::size_t i) { s.tolerations.push_back(ReadToleration(r, Element(f, i))); });
    } else if (key == "labels") {
      s.labels = ReadStringMap(r, f);
    } else if (key == "affinity") {
      s.affinity.clear();
      r.ReadArray(f, [&](std::size_t i) { s.affinity.push_back(ReadAffinity(r, Element(f, i))); });
    } else if (key == "submit_time_ms") {
      s.submit_time = r.ReadInt(f);
    } else if (key == "runtime_estimate_ms") {
      s.runtime_estimate = r.ReadInt(f);
    } else if (key == "checkpoint_interval_ms") {
      s.checkpoint_interval = r.ReadInt(f);
    } else if (key == "restart_overhead_ms") {
      s.restart_overhead = r.ReadInt(f);
    } else if (key == "argv") {
      s.argv = ReadStringList(r, f);
    } else if (key == "command") {
      s.command = r.ReadString(f);
    } else if (key == "env") {
      s.env = ReadStringMap(r, f);
    } else if (key == "max_retries") {
      const std::int64_t v = r.ReadInt(f);
      if (v < 0 || v > limits::kMaxRetries) {
        Fail(f, fmt::format("must be 0 to {}, got {}", limits::kMaxRetries, v));
      }
      s.max_retries = static_cast<std::int32_t>(v);
    } else if (key == "idempotency_key") {
      s.idempotency_key = r.ReadString(f);
    } else {
      Unknown(p, key,
              {"name",
               "user",
               "queue",
               "priority_class",
               "groups",
               "gpu_types",
               "topology",
               "node_selector",
               "tolerations",
               "labels",
               "affinity",
               "submit_time_ms",
               "runtime_estimate_ms",
               "checkpoint_interval_ms",
               "restart_overhead_ms",
               "argv",
               "command",
               "env",
               "max_retries",
               "idempotency_key"});
    }
  });
  if (!has_name) Fail(Field(p, "name"), "is required");
  if (!has_queue) Fail(Field(p, "queue"), "is required");
  if (!has_class) Fail(Field(p, "priority_class"), "is required");
  if (!has_groups) Fail(Field(p, "groups"), "is required");
  for (std::size_t i = 0; i < s.groups.size(); ++i) {
    if (!named[i]) s.groups[i].name = limits::DefaultGroupName(i, s.groups.size());
  }
}

// ---- Allocation ----

void ReadAllocation(Reader& r, const Path& p, job::StoredAllocation& a) {
  bool has_tasks = false;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "gpu_type") {
      a.gpu_type = r.ReadString(f);
    } else if (key == "tasks") {
      has_tasks = true;
      a.tasks.clear();
      r.ReadArray(f, [&](std::size_t i) {
        const Path tp = Element(f, i);
        job::StoredTask& task = a.tasks.emplace_back();
        bool has_node = false;
        r.ReadObject(tp, [&](std::string_view tkey) {
          const Path t = Field(tp, tkey);
          if (tkey == "group") {
            task.group = ReadUint32(r, t);
          } else if (tkey == "index") {
            task.index = ReadUint32(r, t);
          } else if (tkey == "node") {
            task.node = r.ReadString(t);
            has_node = true;
          } else if (tkey == "cpu_milli") {
            task.cpu = MilliCpu(r.ReadInt(t));
          } else if (tkey == "memory_mib") {
            task.memory = MemMiB(r.ReadInt(t));
          } else if (tkey == "devices") {
            task.devices.clear();
            r.ReadArray(t, [&](std::size_t k) {
              const Path dp = Element(t, k);
              DeviceShare& d = task.devices.emplace_back();
              d.gpu = MilliGpu(kMilliPerGpu);
              bool has_device = false;
              r.ReadObject(dp, [&](std::string_view dkey) {
                const Path q = Field(dp, dkey);
                if (dkey == "device") {
                  d.device = ReadUint32(r, q);
                  has_device = true;
                } else if (dkey == "gpu_milli") {
                  d.gpu = MilliGpu(r.ReadInt(q));
                } else if (dkey == "gpu_memory_mib") {
                  d.memory = GpuMemMiB(r.ReadInt(q));
                } else {
                  Unknown(dp, dkey, {"device", "gpu_milli", "gpu_memory_mib"});
                }
              });
              if (!has_device) Fail(Field(dp, "device"), "is required");
            });
          } else {
            Unknown(tp, tkey, {"group", "index", "node", "cpu_milli", "memory_mib", "devices"});
          }
        });
        if (!has_node) Fail(Field(tp, "node"), "is required");
      });
    } else {
      Unknown(p, key, {"gpu_type", "tasks"});
    }
  });
  if (!has_tasks) Fail(Field(p, "tasks"), "is required");
}

// ---- Status ----

job::JobState ReadState(Reader& r, const Path& p) {
  const std::string name = r.ReadString(p);
  std::optional<job::JobState> s = job::ParseJobState(name);
  if (!s) Fail(p, fmt::format("unknown job state \"{}\"", name));
  return *s;
}

void ReadStatus(Reader& r, const Path& p, JobStatus& s) {
  bool has_state = false;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "state") {
      s.state = ReadState(r, f);
      has_state = true;
    } else if (key == "priority_class") {
      s.priority_class = r.ReadString(f);
    } else if (key == "allocation") {
      ReadAllocation(r, f, s.allocation);
    } else if (key == "start_time_ms") {
      s.start_time = r.ReadInt(f);
    } else if (key == "first_start_time_ms") {
      s.first_start_time = r.ReadInt(f);
    } else if (key == "last_checkpoint_ms") {
      s.last_checkpoint = r.ReadInt(f);
    } else if (key == "stop_at_ms") {
      s.stop_at = r.ReadInt(f);
    } else if (key == "evictions_ms") {
      s.evictions = ReadIntList(r, f);
    } else if (key == "retries") {
      s.retries = static_cast<std::int32_t>(std::clamp<std::int64_t>(r.ReadInt(f), 0, 1000000));
    } else if (key == "end_time_ms") {
      s.end_time = r.ReadInt(f);
    } else if (key == "message") {
      s.message = r.ReadString(f);
    } else {
      Unknown(p, key,
              {"state", "priority_class", "allocation", "start_time_ms", "first_start_time_ms",
               "last_checkpoint_ms", "stop_at_ms", "evictions_ms", "retries", "end_time_ms",
               "message"});
    }
  });
  if (!has_state) Fail(Field(p, "state"), "is required");
}

// ---- Event ----

void ReadEvent(Reader& r, const Path& p, Event& e) {
  bool has_time = false, has_kind = false;
  r.ReadObject(p, [&](std::string_view key) {
    const Path f = Field(p, key);
    if (key == "seq") {
      e.seq = ReadUint(r, f);
    } else if (key == "time_ms") {
      e.time = r.ReadInt(f);
      has_time = true;
    } else if (key == "kind") {
      const std::string name = r.ReadString(f);
      std::optional<EventKind> kind = ParseEventKind(name);
      if (!kind) Fail(f, fmt::format("unknown event kind \"{}\"", name));
      e.kind = *kind;
      has_kind = true;
    } else if (key == "job") {
      e.job = ReadUint(r, f);
    } else if (key == "target") {
      e.target = r.ReadString(f);
    } else if (key == "actor") {
      e.actor = r.ReadString(f);
    } else if (key == "message") {
      e.message = r.ReadString(f);
    } else if (key == "priority_class") {
      e.priority_class = r.ReadString(f);
    } else if (key == "allocation") {
      ReadAllocation(r, f, e.allocation);
    } else if (key == "stop_at_ms") {
      e.stop_at = r.ReadInt(f);
    } else if (key == "state") {
      e.state = ReadState(r, f);
    } else {
      Unknown(p, key,
              {"seq", "time_ms", "kind", "job", "target", "actor", "message", "priority_class",
               "allocation", "stop_at_ms", "state"});
    }
  });
  if (!has_time) Fail(Field(p, "time_ms"), "is required");
  if (!has_kind) Fail(Field(p, "kind"), "is required");
}

// ---- Quota ----

void ReadQuota(Reader& r, const Path& p, std::map<std::string, QuotaSpec>& out) {
  r.ReadObject(p, [&](std::string_view resource) {
    const Path rp = Field(p, resource);
    QuotaSpec q;
    r.ReadObject(rp, [&](std::string_view key) {
      const Path f = Field(rp, key);
      // Every quota value in [0, kMaxQuotaMilli]: the queue tree's sums never overflow.
      auto value = [&] {
        const std::int64_t v = r.ReadInt(f);
        if (v < 0 || v > limits::kMaxQuotaMilli) {
          Fail(f, fmt::format("must be 0 to {} (milli-GPU), got {}", limits::kMaxQuotaMilli, v));
        }
        return MilliGpu(v);
      };
      if (key == "nominal_milli") {
        q.nominal = value();
      } else if (key == "borrowing_limit_milli") {
        q.borrowing_limit = value();
      } else if (key == "lending_limit_milli") {
        q.lending_limit = value();
      } else if (key == "max_milli") {
        q.max = value();
      } else {
        Unknown(rp, key,
                {"nominal_milli", "borrowing_limit_milli", "lending_limit_milli", "max_milli"});
      }
    });
    out.insert_or_assign(std::string(resource), q);
  });
}

// Decodes one whole text into `out` with `read`.
template <typename T, typename F>
Status DecodeInto(std::string_view text, std::string_view path, T& out, F&& read) {
  try {
    const Path root{nullptr, path, Path::kNoIndex};
    Reader r(text, root);
    read(r, root, out);
    r.End();
    return Status::Ok();
  } catch (const DecodeError& e) {
    return Status::InvalidArgument(e.detail, e.field);
  }
}

template <typename T, typename F>
Result<T> DecodeText(std::string_view text, std::string_view path, F&& read) {
  T out{};
  if (Status s = DecodeInto(text, path, out, read); !s.ok()) return s;
  return out;
}

void PutTime(json& j, const char* key, Millis t) {
  if (t >= 0) j[key] = t;
}

}  // namespace

// ---- Decoding ----

Result<job::JobSpec> DecodeJobSpec(std::string_view text, std::string_view path) {
  return DecodeText<job::JobSpec>(text, path, ReadJobSpec);
}
Status DecodeJobSpecInto(std::string_view text, job::JobSpec& out, std::string_view path) {
  return DecodeInto(text, path, out, ReadJobSpec);
}
Status DecodeAllocationInto(std::string_view text, job::StoredAllocation& out,
                            std::string_view path) {
  return DecodeInto(text, path, out, ReadAllocation);
}
Result<job::StoredAllocation> DecodeAllocation(std::string_view text, std::string_view path) {
  return DecodeText<job::StoredAllocation>(text, path, ReadAllocation);
}
Result<JobStatus> DecodeJobStatus(std::string_view text, std::string_view path) {
  return DecodeText<JobStatus>(text, path, ReadStatus);
}
Result<Event> DecodeEvent(std::string_view text, std::string_view path) {
  return DecodeText<Event>(text, path, ReadEvent);
}
Result<std::map<std::string, QuotaSpec>> DecodeQuota(std::string_view text, std::string_view path) {
  return DecodeText<std::map<std::string, QuotaSpec>>(text, path, ReadQuota);
}
Result<std::vector<Millis>> DecodeMillisList(std::string_view text, std::string_view path) {
  return DecodeText<std::vector<Millis>>(
      text, path,
      [](Reader& r, const Path& p, std::vector<Millis>& out) { out = ReadIntList(r, p); });
}

Result<job::JobSpec> JobSpecFromJson(const json& j, std::string_view path) {
  return DecodeJobSpec(Dump(j), path);
}
Result<job::StoredAllocation> AllocationFromJson(const json& j, std::string_view path) {
  return DecodeAllocation(Dump(j), path);
}
Result<JobStatus> JobStatusFromJson(const json& j, std::string_view path) {
  return DecodeJobStatus(Dump(j), path);
}
Result<Event> EventFromJson(const json& j, std::string_view path) {
  return DecodeEvent(Dump(j), path);
}
Result<std::map<std::string, QuotaSpec>> QuotaFromJson(const json& j, std::string_view path) {
  return DecodeQuota(Dump(j), path);
}

Result<json> ParseJson(std::string_view text, std::string_view path) {
  if (const std::size_t at = limits::FindTooDeep(text); at != std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("nested deeper than {} levels (at byte {})", limits::kMaxJsonDepth, at),
        std::string(path));
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> after "] ".
    if (std::size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return Status::InvalidArgument(fmt::format("malformed JSON at byte {}: {}", e.byte, what),
                                   std::string(path));
  } catch (const json::exception& e) {
    // A number too large for a double ("1e400": out_of_range.406), or another refusal of the
    // parser's: malformed all the same.
    std::string what = e.what();
    if (std::size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return Status::InvalidArgument(fmt::format("malformed JSON: {}", limits::Printable(what)),
                                   std::string(path));
  }
}

// ---- Encoding ----

json JobSpecToJson(const job::JobSpec& s) {
  json j;
  j["name"] = s.name;
  if (!s.user.empty()) j["user"] = s.user;
  j["queue"] = s.queue;
  j["priority_class"] = s.priority_class;
  json groups = json::array();
  for (const TaskGroup& g : s.groups) {
    json o;
    o["name"] = g.name;
    o["tasks"] = g.count;
    if (g.request.gpu.value() != 0) o["gpu_milli"] = g.request.gpu.value();
    if (g.request.gpu_memory.value() != 0) o["gpu_memory_mib"] = g.request.gpu_memory.value();
    if (g.request.cpu.value() != 0) o["cpu_milli"] = g.request.cpu.value();
    if (g.request.memory.value() != 0) o["memory_mib"] = g.request.memory.value();
    groups.push_back(std::move(o));
  }
  j["groups"] = std::move(groups);
  if (!s.gpu_types.empty()) j["gpu_types"] = s.gpu_types;
  if (!s.topology_level.empty()) {
    j["topology"] = {
        {"level", s.topology_level},
        {"mode", s.topology_mode == ConstraintMode::kPreferred ? "preferred" : "required"}};
  }
  if (!s.node_selector.empty()) j["node_selector"] = s.node_selector;
  if (!s.tolerations.empty()) {
    json a = json::array();
    for (const Toleration& t : s.tolerations) {
      json o;
      if (!t.key.empty()) o["key"] = t.key;
      if (t.op == Toleration::Op::kExists) o["operator"] = "Exists";
      if (!t.value.empty()) o["value"] = t.value;
      if (t.effect) {
        o["effect"] = *t.effect == TaintEffect::kNoSchedule ? "NoSchedule" : "PreferNoSchedule";
      }
      a.push_back(std::move(o));
    }
    j["tolerations"] = std::move(a);
  }
  if (!s.labels.empty()) j["labels"] = s.labels;
  if (!s.affinity.empty()) {
    json a = json::array();
    for (const job::AffinitySpec& t : s.affinity) {
      a.push_back(
          {{"match", t.match}, {"level", t.level}, {"anti", t.anti}, {"required", t.required}});
    }
    j["affinity"] = std::move(a);
  }
  if (s.submit_time != 0) j["submit_time_ms"] = s.submit_time;
  if (s.runtime_estimate != 0) j["runtime_estimate_ms"] = s.runtime_estimate;
  if (s.checkpoint_interval != 0) j["checkpoint_interval_ms"] = s.checkpoint_interval;
  if (s.restart_overhead != 0) j["restart_overhead_ms"] = s.restart_overhead;
  if (!s.argv.empty()) j["argv"] = s.argv;
  if (!s.command.empty()) j["command"] = s.command;
  if (!s.env.empty()) j["env"] = s.env;
  if (s.max_retries != 0) j["max_retries"] = s.max_retries;
  if (!s.idempotency_key.empty()) j["idempotency_key"] = s.idempotency_key;
  return j;
}

json AllocationToJson(const job::StoredAllocation& a) {
  json j;
  if (!a.gpu_type.empty()) j["gpu_type"] = a.gpu_type;
  json tasks = json::array();
  for (const job::StoredTask& t : a.tasks) {
    json o;
    o["group"] = t.group;
    o["index"] = t.index;
    o["node"] = t.node;
    if (t.cpu.value() != 0) o["cpu_milli"] = t.cpu.value();
    if (t.memory.value() != 0) o["memory_mib"] = t.memory.value();
    if (!t.devices.empty()) {
      json devices = json::array();
      for (const DeviceShare& d : t.devices) {
        json dj;
        dj["device"] = d.device;
        if (d.gpu.value() != kMilliPerGpu) dj["gpu_milli"] = d.gpu.value();
        if (d.memory.value() != 0) dj["gpu_memory_mib"] = d.memory.value();
        devices.push_back(std::move(dj));
      }
      o["devices"] = std::move(devices);
    }
    tasks.push_back(std::move(o));
  }
  j["tasks"] = std::move(tasks);
  return j;
}

json JobStatusToJson(const JobStatus& s) {
  json j;
  j["state"] = job::JobStateName(s.state);
  if (!s.priority_class.empty()) j["priority_class"] = s.priority_class;
  if (!s.allocation.empty()) j["allocation"] = AllocationToJson(s.allocation);
  PutTime(j, "start_time_ms", s.start_time);
  PutTime(j, "first_start_time_ms", s.first_start_time);
  PutTime(j, "last_checkpoint_ms", s.last_checkpoint);
  PutTime(j, "stop_at_ms", s.stop_at);
  if (!s.evictions.empty()) j["evictions_ms"] = s.evictions;
  if (s.retries != 0) j["retries"] = s.retries;
  PutTime(j, "end_time_ms", s.end_time);
  if (!s.message.empty()) j["message"] = s.message;
  return j;
}

json StoredJobToJson(const StoredJob& job) {
  return {
      {"id", job.id}, {"spec", JobSpecToJson(job.spec)}, {"status", JobStatusToJson(job.status)}};
}

json EventToJson(const Event& e) {
  json j;
  j["seq"] = e.seq;
  j["time_ms"] = e.time;
  j["kind"] = EventKindName(e.kind);
  if (e.job != 0) j["job"] = e.job;
  if (!e.target.empty()) j["target"] = e.target;
  if (!e.actor.empty()) j["actor"] = e.actor;
  if (!e.message.empty()) j["message"] = e.message;
  if (!e.priority_class.empty()) j["priority_class"] = e.priority_class;
  if (!e.allocation.empty()) j["allocation"] = AllocationToJson(e.allocation);
  PutTime(j, "stop_at_ms", e.stop_at);
  if (IsJobEvent(e.kind)) j["state"] = job::JobStateName(e.state);
  return j;
}

json QuotaToJson(const std::map<std::string, QuotaSpec>& quota) {
  json j = json::object();
  for (const auto& [resource, q] : quota) {
    json o;
    o["nominal_milli"] = q.nominal.value();
    if (q.borrowing_limit) o["borrowing_limit_milli"] = q.borrowing_limit->value();
    if (q.lending_limit) o["lending_limit_milli"] = q.lending_limit->value();
    if (q.max) o["max_milli"] = q.max->value();
    j[resource] = std::move(o);
  }
  return j;
}

std::string EncodeJobSpec(const job::JobSpec& spec) { return Dump(JobSpecToJson(spec)); }

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace arbiter::store
