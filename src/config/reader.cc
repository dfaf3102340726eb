#include "config/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/config.h"
#include "job/names.h"

namespace arbiter::config::internal {
namespace {

// yaml-cpp marks are 0-based; a node built without a position has line -1.
std::string Position(const std::string& file, const YAML::Mark& mark) {
  int line = mark.line < 0 ? 0 : mark.line;
  int column = mark.line < 0 ? 0 : mark.column;
  return fmt::format("{}:{}:{}", file, line + 1, column + 1);
}

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
  }
  return "nothing";
}

std::string Join(const std::vector<std::string>& names, std::size_t cap) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < cap; ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  if (names.size() > cap) out += fmt::format(", ... ({} more)", names.size() - cap);
  return out;
}

}  // namespace

// ---- Value ----

void Value::Fail(std::string_view problem) const {
  if (path_.empty()) throw LoadError{fmt::format("{}: {}", Position(*file_, mark_), problem)};
  throw LoadError{fmt::format("{}: {}: {}", Position(*file_, mark_), path_, problem)};
}

void Value::FailWith(const Status& status) const {
  throw LoadError{fmt::format("{}: {}", Position(*file_, mark_), status.message()), status.code()};
}

void Value::FailAt(std::string_view suffix, std::string_view problem, StatusCode code) const {
  std::string path = path_ + std::string(suffix);
  if (path_.empty() && !suffix.empty() && suffix.front() == '.') path = suffix.substr(1);
  if (path.empty()) throw LoadError{fmt::format("{}: {}", Position(*file_, mark_), problem), code};
  throw LoadError{fmt::format("{}: {}: {}", Position(*file_, mark_), path, problem), code};
}

Value Value::Element(const YAML::Node& node, std::size_t index) const {
  YAML::Mark mark = node.Mark();
  if (node.IsNull() || mark.line < 0) mark = mark_;
  return Value(file_, node, fmt::format("{}[{}]", path_, index), mark);
}

Value Value::Field(const YAML::Node& node, std::string_view key, YAML::Mark key_mark) const {
  // A missing value (`key:`) is positioned by yaml-cpp at the next token; the key is clearer.
  YAML::Mark mark = node.Mark();
  if (node.IsNull() || mark.line < 0) mark = key_mark;
  std::string path = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  return Value(file_, node, std::move(path), mark);
}

const std::string& Value::Scalar(std::string_view expected) const {
  if (!node_.IsScalar()) Fail(fmt::format("expected {}, got {}", expected, KindName(node_)));
  return node_.Scalar();
}

std::string Value::String() const { return Scalar("a string"); }

std::string Value::NonEmptyString() const {
  std::string s = Scalar("a string");
  if (s.empty()) Fail("must not be empty");
  return s;
}

std::int64_t Value::Int(std::int64_t min, std::int64_t max) const {
  const std::string& s = Scalar("an integer");
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) Fail(fmt::format("too large, got {}", s));
  if (ec != std::errc() || end != s.data() + s.size()) {
    Fail(fmt::format("expected an integer, got '{}'", s));
  }
  if (v < min) {
    if (min == 0) Fail(fmt::format("must not be negative, got {}", v));
    Fail(fmt::format("must be at least {}, got {}", min, v));
  }
  if (v > max) Fail(fmt::format("must be at most {}, got {}", max, v));
  return v;
}

std::int32_t Value::Int32(std::int32_t min, std::int32_t max) const {
  return static_cast<std::int32_t>(Int(min, max));
}

bool Value::Bool() const {
  const std::string& s = Scalar("true or false");
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  Fail(fmt::format("expected true or false, got '{}'", s));
}

double Value::Number(double min) const {
  const std::string& s = Scalar("a number");
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    Fail(fmt::format("expected a number, got '{}'", s));
  }
  if (v < min) {
    if (min == 0) Fail(fmt::format("must not be negative, got {}", s));
    Fail(fmt::format("must be at least {}, got {}", min, s));
  }
  return v;
}

MilliGpu Value::Gpus() const {
  Result<MilliGpu> r = ParseGpus(Scalar("a GPU count"), path_);
  if (!r.ok()) FailWith(r.status());
  return *r;
}

MilliGpu Value::QuotaGpus() const {
  Result<MilliGpu> r = ParseQuotaGpus(Scalar("a GPU count"), path_);
  if (!r.ok()) FailWith(r.status());
  return *r;
}

MilliCpu Value::Cpu() const {
  Result<MilliCpu> r = ParseCpu(Scalar("a CPU amount"), path_);
  if (!r.ok()) FailWith(r.status());
  return *r;
}

std::int64_t Value::MiB() const {
  Result<std::int64_t> r = ParseMiB(Scalar("a memory size"), path_);
  if (!r.ok()) FailWith(r.status());
  return *r;
}

bool Value::BareNumber() const {
  if (!node_.IsScalar()) return false;
  const std::string& s = node_.Scalar();
  return !s.empty() && std::isdigit(static_cast<unsigned char>(s.back())) != 0;
}

Millis Value::Duration() const {
  Result<Millis> r = ParseDuration(Scalar("a duration"), path_);
  if (!r.ok()) FailWith(r.status());
  return *r;
}

std::size_t Value::Choice(std::initializer_list<std::string_view> names) const {
  const std::string& s = Scalar("a string");
  std::size_t i = 0;
  std::vector<std::string> all;
  for (std::string_view name : names) {
    if (s == name) return i;
    all.emplace_back(name);
    ++i;
  }
  Fail(fmt::format("expected one of: {}; got '{}'", Join(all, all.size()), s));
}

std::vector<Value> Value::Items() const {
  std::vector<Value> out;
  if (node_.IsNull()) return out;
  if (!node_.IsSequence()) Fail(fmt::format("expected a list, got {}", KindName(node_)));
  std::size_t i = 0;
  for (const YAML::Node& item : node_) out.push_back(Element(item, i++));
  return out;
}

Labels Value::StringMap() const {
  Labels out;
  for (const Entry& e : Entries(*this)) out[e.key] = e.value.String();
  return out;
}

// ---- Mappings ----

std::vector<Entry> Entries(const Value& map) {
  std::vector<Entry> out;
  const YAML::Node& node = map.node();
  if (node.IsNull()) return out;
  if (!node.IsMap()) map.Fail(fmt::format("expected a mapping, got {}", KindName(node)));
  for (const auto& kv : node) {
    YAML::Mark key_mark = kv.first.Mark();
    if (key_mark.line < 0) key_mark = map.mark();
    if (!kv.first.IsScalar()) {
      map.WithMark(key_mark).Fail("field names must be plain strings");
    }
    std::string key = kv.first.Scalar();
    for (const Entry& e : out) {
      if (e.key == key) {
        map.Field(kv.first, key, key_mark)
            .Fail(fmt::format("repeated field '{}' (first at line {})", key,
                              e.key_value.mark().line + 1));
      }
    }
    Value key_value = map.Field(kv.first, key, key_mark);
    Value value = map.Field(kv.second, key, key_mark);
    out.push_back(Entry{std::move(key), std::move(key_value), std::move(value)});
  }
  return out;
}

Map::Map(const Value& value, std::span<const std::string_view> fields)
    : self_(value), entries_(Entries(value)) {
  for (const Entry& e : entries_) {
    if (std::find(fields.begin(), fields.end(), e.key) != fields.end()) continue;
    std::vector<std::string> known(fields.begin(), fields.end());
    e.key_value.Fail(UnknownName("field", e.key, known, "expected one of"));
  }
}

const Entry* Map::FindEntry(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

const Value* Map::Find(std::string_view key) const {
  const Entry* e = FindEntry(key);
  return e == nullptr ? nullptr : &e->value;
}

const Value& Map::Key(std::string_view key) const {
  const Entry* e = FindEntry(key);
  if (e == nullptr) self_.Fail(fmt::format("missing required field '{}'", key));
  return e->key_value;
}

const Value& Map::Get(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) self_.Fail(fmt::format("missing required field '{}'", key));
  return *v;
}

// ---- Documents ----

Status ParseDocument(std::string_view yaml, const std::string& file_name,
                     const std::function<void(const Value& root)>& load) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    YAML::Mark mark = root.Mark();
    if (root.IsNull() || mark.line < 0) mark = YAML::Mark();
    load(Value(&file_name, root, "", mark));
  } catch (const LoadError& e) {
    // The position comes first (`FILE:LINE:COL: PATH: problem`), so the path stays in the text.
    return Status::FromCode(e.code, e.message);
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(
        fmt::format("{}: syntax error: {}", Position(file_name, e.mark), e.msg));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: {}", Position(file_name, e.mark), e.msg));
  }
  return Status::Ok();
}

static Status FileError(const std::string& path, std::string_view what, int error) {
  std::string message = fmt::format("{}: cannot {}: {}", path, what, std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return Status::NotFound(std::move(message));
    case EACCES:
    case EPERM:
      return Status::PermissionDenied(std::move(message));
    default:
      return Status::Unavailable(std::move(message));
  }
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError(path, "open", errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return FileError(path, "read", errno);
  return text.str();
}

// ---- Names ----

std::optional<std::string> Suggest(std::string_view name, const std::vector<std::string>& known) {
  return job::Suggest(name, known);
}

std::string UnknownName(std::string_view what, std::string_view name,
                        const std::vector<std::string>& known, std::string_view list_label) {
  return job::UnknownName(what, name, known, list_label);
}

}  // namespace arbiter::config::internal
