// Binary records of the jobs table (binary.h). The layout, in order (docs/design/store.md):
//
// spec:       format, name, user, queue, priority_class,
//             groups: [name, tasks, gpu_milli, gpu_memory_mib, cpu_milli, memory_mib],
//             gpu_types: [text], topology level, topology mode (0 required, 1 preferred,
//             2 none), node_selector: {text: text},
//             tolerations: [key, operator (0 Equal, 1 Exists), value,
//                           effect (0 any, 1 NoSchedule, 2 PreferNoSchedule)],
//             labels: {text: text}, affinity: [match: {text: text}, level, flags (1 anti,
//             2 required)], submit_time_ms, runtime_estimate_ms, checkpoint_interval_ms,
//             restart_overhead_ms, argv: [text], command, env: {text: text}, max_retries,
//             idempotency_key
// allocation: format, gpu_type,
//             tasks: [group, index, node, cpu_milli, memory_mib,
//                     devices: [device, gpu_milli, gpu_memory_mib]]
#include "store/binary.h"

#include <fmt/format.h>

#include <limits>
#include <string>

namespace arbiter::store {
namespace {

// ---- Encoding ----

class Writer {
 public:
  Writer() { out_.reserve(256); }
  void Byte(std::uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void Uint(std::uint64_t v) {
    while (v >= 0x80) {
      Byte(static_cast<std::uint8_t>(v | 0x80));
      v >>= 7;
    }
    Byte(static_cast<std::uint8_t>(v));
  }
  void Int(std::int64_t v) {
    Uint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
  }
  void Text(std::string_view s) {
    Uint(s.size());
    out_.append(s);
  }
  void Map(const Labels& m) {
    Uint(m.size());
    for (const auto& [k, v] : m) {
      Text(k);
      Text(v);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// ---- Decoding ----

// Where a value is, as a chain on the stack; written out only for an error.
struct Path {
  static constexpr std::size_t kNoIndex = ~std::size_t{0};
  const Path* parent = nullptr;
  std::string_view key;
  std::size_t index = kNoIndex;

  std::string Str() const {
    std::string out = parent != nullptr ? parent->Str() : std::string();
    if (index != kNoIndex) return fmt::format("{}[{}]", out, index);
    if (out.empty()) return std::string(key);
    return fmt::format("{}.{}", out, key);
  }
};
Path Field(const Path& p, std::string_view key) { return {&p, key, Path::kNoIndex}; }
Path Element(const Path& p, std::size_t i) { return {&p, {}, i}; }

struct DecodeError {
  std::string message;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes)
      : p_(bytes.data()), begin_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  [[noreturn]] void Fail(const Path& p, std::string_view problem) const {
    throw DecodeError{fmt::format("{}: {} at byte {}", p.Str(), problem, p_ - begin_ + 1)};
  }

  std::uint8_t Byte(const Path& p) {
    if (p_ == end_) Fail(p, "record cut short");
    return static_cast<std::uint8_t>(*p_++);
  }
  std::uint64_t Uint(const Path& p) {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_) Fail(p, "record cut short");
      const auto b = static_cast<std::uint8_t>(*p_++);
      if (shift == 63 && b > 1) Fail(p, "integer too large");
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
  }
  std::int64_t Int(const Path& p) {
    const std::uint64_t u = Uint(p);
    return static_cast<std::int64_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  std::uint32_t Uint32(const Path& p) {
    const std::uint64_t v = Uint(p);
    if (v > std::numeric_limits<std::uint32_t>::max()) Fail(p, "integer too large");
    return static_cast<std::uint32_t>(v);
  }
  // A count of elements, each at least `min_size` bytes: never more than the bytes left.
  std::size_t Count(const Path& p, std::size_t min_size) {
    const std::uint64_t n = Uint(p);
    if (n > static_cast<std::uint64_t>(end_ - p_) / min_size)
      Fail(p, "list longer than the record");
    return static_cast<std::size_t>(n);
  }
  std::string_view View(const Path& p) {
    const std::uint64_t n = Uint(p);
    if (n > static_cast<std::uint64_t>(end_ - p_)) Fail(p, "text longer than the record");
    std::string_view s(p_, static_cast<std::size_t>(n));
    p_ += n;
    return s;
  }
  void Text(const Path& p, std::string& out) { out.assign(View(p)); }
  void Map(const Path& p, Labels& out) {
    const std::size_t n = Count(p, 2);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view key = View(p);
      out.emplace_hint(out.end(), key, View(Field(p, key)));
    }
  }
  void End(const Path& p) const {
    if (p_ != end_) Fail(p, "unexpected bytes after the record");
  }

 private:
  const char* p_;
  const char* begin_;
  const char* end_;
};

void CheckFormat(Reader& r, const Path& root) {
  const std::uint8_t format = r.Byte(root);
  if (format != kBinaryFormat) {
    r.Fail(root,
           fmt::format("unknown record format {} (this build reads {})", format, kBinaryFormat));
  }
}

template <typename T, typename F>
Status Decode(std::string_view bytes, std::string_view path, T& out, F&& read) {
  try {
    const Path root{nullptr, path, Path::kNoIndex};
    Reader r(bytes);
    CheckFormat(r, root);
    read(r, root, out);
    r.End(root);
    return Status::Ok();
  } catch (const DecodeError& e) {
    // Only the store's own records are decoded here: a bad one is a broken invariant.
    return Status::Internal(e.message);
  }
}

void ReadSpec(Reader& r, const Path& p, job::JobSpec& s) {
  r.Text(Field(p, "name"), s.name);
  r.Text(Field(p, "user"), s.user);
  r.Text(Field(p, "queue"), s.queue);
  r.Text(Field(p, "priority_class"), s.priority_class);
  {
    const Path f = Field(p, "groups");
    const std::size_t n = r.Count(f, 6);
    s.groups.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Path e = Element(f, i);
      TaskGroup& g = s.groups[i];
      r.Text(Field(e, "name"), g.name);
      const std::int64_t tasks = r.Int(Field(e, "tasks"));
      if (tasks > std::numeric_limits<std::int32_t>::max() ||
          tasks < std::numeric_limits<std::int32_t>::min()) {
        r.Fail(Field(e, "tasks"), fmt::format("out of range ({})", tasks));
      }
      g.count = static_cast<std::int32_t>(tasks);
      g.request.gpu = MilliGpu(r.Int(Field(e, "gpu_milli")));
      g.request.gpu_memory = GpuMemMiB(r.Int(Field(e, "gpu_memory_mib")));
      g.request.cpu = MilliCpu(r.Int(Field(e, "cpu_milli")));
      g.request.memory = MemMiB(r.Int(Field(e, "memory_mib")));
    }
  }
  {
    const Path f = Field(p, "gpu_types");
    const std::size_t n = r.Count(f, 1);
    s.gpu_types.resize(n);
    for (std::size_t i = 0; i < n; ++i) r.Text(Element(f, i), s.gpu_types[i]);
  }
  {
    const Path f = Field(p, "topology");
    r.Text(Field(f, "level"), s.topology_level);
    const Path m = Field(f, "mode");
    switch (r.Byte(m)) {
      case 0:
        s.topology_mode = ConstraintMode::kRequired;
        break;
      case 1:
        s.topology_mode = ConstraintMode::kPreferred;
        break;
      case 2:
        s.topology_mode = ConstraintMode::kUnconstrained;
        break;
      default:
        r.Fail(m, "unknown code");
    }
  }
  r.Map(Field(p, "node_selector"), s.node_selector);
  {
    const Path f = Field(p, "tolerations");
    const std::size_t n = r.Count(f, 4);
    s.tolerations.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Path e = Element(f, i);
      Toleration& t = s.tolerations[i];
      r.Text(Field(e, "key"), t.key);
      const Path op = Field(e, "operator");
      const std::uint8_t o = r.Byte(op);
      if (o > 1) r.Fail(op, "unknown code");
      t.op = o == 0 ? Toleration::Op::kEqual : Toleration::Op::kExists;
      r.Text(Field(e, "value"), t.value);
      const Path ef = Field(e, "effect");
      switch (r.Byte(ef)) {
        case 0:
          t.effect.reset();
          break;
        case 1:
          t.effect = TaintEffect::kNoSchedule;
          break;
        case 2:
          t.effect = TaintEffect::kPreferNoSchedule;
          break;
        default:
          r.Fail(ef, "unknown code");
      }
    }
  }
  r.Map(Field(p, "labels"), s.labels);
  {
    const Path f = Field(p, "affinity");
    const std::size_t n = r.Count(f, 3);
    s.affinity.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Path e = Element(f, i);
      job::AffinitySpec& a = s.affinity[i];
      r.Map(Field(e, "match"), a.match);
      r.Text(Field(e, "level"), a.level);
      const Path fl = Field(e, "flags");
      const std::uint8_t flags = r.Byte(fl);
      if (flags > 3) r.Fail(fl, "unknown code");
      a.anti = (flags & 1) != 0;
      a.required = (flags & 2) != 0;
    }
  }
  s.submit_time = r.Int(Field(p, "submit_time_ms"));
  s.runtime_estimate = r.Int(Field(p, "runtime_estimate_ms"));
  s.checkpoint_interval = r.Int(Field(p, "checkpoint_interval_ms"));
  s.restart_overhead = r.Int(Field(p, "restart_overhead_ms"));
  {
    const Path f = Field(p, "argv");
    const std::size_t n = r.Count(f, 1);
    s.argv.resize(n);
    for (std::size_t i = 0; i < n; ++i) r.Text(Element(f, i), s.argv[i]);
  }
  r.Text(Field(p, "command"), s.command);
  r.Map(Field(p, "env"), s.env);
  {
    const Path f = Field(p, "max_retries");
    const std::int64_t v = r.Int(f);
    if (v < 0 || v > std::numeric_limits<std::int32_t>::max()) r.Fail(f, "out of range");
    s.max_retries = static_cast<std::int32_t>(v);
  }
  r.Text(Field(p, "idempotency_key"), s.idempotency_key);
}

void ReadAllocation(Reader& r, const Path& p, job::StoredAllocation& a) {
  r.Text(Field(p, "gpu_type"), a.gpu_type);
  const Path f = Field(p, "tasks");
  const std::size_t n = r.Count(f, 6);
  a.tasks.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Path e = Element(f, i);
    job::StoredTask& t = a.tasks[i];
    t.group = r.Uint32(Field(e, "group"));
    t.index = r.Uint32(Field(e, "index"));
    r.Text(Field(e, "node"), t.node);
    t.cpu = MilliCpu(r.Int(Field(e, "cpu_milli")));
    t.memory = MemMiB(r.Int(Field(e, "memory_mib")));
    const Path df = Field(e, "devices");
    const std::size_t nd = r.Count(df, 3);
    t.devices.resize(nd);
    for (std::size_t k = 0; k < nd; ++k) {
      const Path d = Element(df, k);
      DeviceShare& share = t.devices[k];
      share.device = r.Uint32(Field(d, "device"));
      share.gpu = MilliGpu(r.Int(Field(d, "gpu_milli")));
      share.memory = GpuMemMiB(r.Int(Field(d, "gpu_memory_mib")));
    }
  }
}

}  // namespace

std::string EncodeJobSpecBinary(const job::JobSpec& s) {
  Writer w;
  w.Byte(kBinaryFormat);
  w.Text(s.name);
  w.Text(s.user);
  w.Text(s.queue);
  w.Text(s.priority_class);
  w.Uint(s.groups.size());
  for (const TaskGroup& g : s.groups) {
    w.Text(g.name);
    w.Int(g.count);
    w.Int(g.request.gpu.value());
    w.Int(g.request.gpu_memory.value());
    w.Int(g.request.cpu.value());
    w.Int(g.request.memory.value());
  }
  w.Uint(s.gpu_types.size());
  for (const std::string& t : s.gpu_types) w.Text(t);
  w.Text(s.topology_level);
  w.Byte(s.topology_mode == ConstraintMode::kRequired    ? 0
         : s.topology_mode == ConstraintMode::kPreferred ? 1
                                                         : 2);
  w.Map(s.node_selector);
  w.Uint(s.tolerations.size());
  for (const Toleration& t : s.tolerations) {
    w.Text(t.key);
    w.Byte(t.op == Toleration::Op::kEqual ? 0 : 1);
    w.Text(t.value);
    w.Byte(!t.effect ? 0 : *t.effect == TaintEffect::kNoSchedule ? 1 : 2);
  }
  w.Map(s.labels);
  w.Uint(s.affinity.size());
  for (const job::AffinitySpec& a : s.affinity) {
    w.Map(a.match);
    w.Text(a.level);
    w.Byte(static_cast<std::uint8_t>((a.anti ? 1 : 0) | (a.required ? 2 : 0)));
  }
  w.Int(s.submit_time);
  w.Int(s.runtime_estimate);
  w.Int(s.checkpoint_interval);
  w.Int(s.restart_overhead);
  w.Uint(s.argv.size());
  for (const std::string& a : s.argv) w.Text(a);
  w.Text(s.command);
  w.Map(s.env);
  w.Int(s.max_retries);
  w.Text(s.idempotency_key);
  return w.Take();
}

Status DecodeJobSpecBinary(std::string_view bytes, job::JobSpec& out, std::string_view path) {
  return Decode(bytes, path, out, ReadSpec);
}

std::string EncodeAllocationBinary(const job::StoredAllocation& a) {
  Writer w;
  w.Byte(kBinaryFormat);
  w.Text(a.gpu_type);
  w.Uint(a.tasks.size());
  for (const job::StoredTask& t : a.tasks) {
    w.Uint(t.group);
    w.Uint(t.index);
    w.Text(t.node);
    w.Int(t.cpu.value());
    w.Int(t.memory.value());
    w.Uint(t.devices.size());
    for (const DeviceShare& d : t.devices) {
      w.Uint(d.device);
      w.Int(d.gpu.value());
      w.Int(d.memory.value());
    }
  }
  return w.Take();
}

Status DecodeAllocationBinary(std::string_view bytes, job::StoredAllocation& out,
                              std::string_view path) {
  return Decode(bytes, path, out, ReadAllocation);
}

}  // namespace arbiter::store
