// Internal to the configuration loader: typed, position-aware access to a parsed YAML document.
//
// A Value is a YAML node together with its field path ("queues[2].quota.H800") and its position.
// Reading a value of the wrong type or with a bad value fails with `FILE:LINE:COL: PATH: problem`.
// Failing throws LoadError, which unwinds the recursive descent to the public entry point
// (ParseCluster, ParseJobs), where it becomes a Status; no exception leaves the library.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/quantity.h"
#include "arbiter/status.h"

namespace arbiter::config::internal {

struct LoadError {
  std::string message;
  StatusCode code = StatusCode::kInvalidArgument;
};

class Value {
 public:
  Value(const std::string* file, YAML::Node node, std::string path, YAML::Mark mark)
      : file_(file), node_(std::move(node)), path_(std::move(path)), mark_(mark) {}

  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  const YAML::Mark& mark() const { return mark_; }
  bool IsNull() const { return node_.IsNull(); }

  // Throws LoadError: `FILE:LINE:COL: PATH: problem` (no `PATH: ` for the document root).
  [[noreturn]] void Fail(std::string_view problem) const;
  // Throws LoadError for a message that already names the field (`PATH: problem`).
  [[noreturn]] void FailWith(const Status& status) const;
  // Throws LoadError at this value's position for a field below it: `suffix` follows the path
  // (".queue", "[2].key", or "" for this value itself); the error keeps `code`.
  [[noreturn]] void FailAt(std::string_view suffix, std::string_view problem,
                           StatusCode code = StatusCode::kInvalidArgument) const;

  // The element of a sequence at `index` and the value of a mapping under `key`, for paths.
  Value Element(const YAML::Node& node, std::size_t index) const;
  Value Field(const YAML::Node& node, std::string_view key, YAML::Mark key_mark) const;
  // This value positioned elsewhere (e.g. at one of its keys).
  Value WithMark(YAML::Mark mark) const { return Value(file_, node_, path_, mark); }
  // Another node (e.g. one merged from several) under this value's path and position.
  Value WithNode(YAML::Node node) const { return Value(file_, std::move(node), path_, mark_); }
  const std::string& file() const { return *file_; }

  // Typed reads; each fails naming the path on a wrong type or value.
  std::string String() const;          // any scalar
  std::string NonEmptyString() const;  // a scalar, not ""
  std::int64_t Int(std::int64_t min, std::int64_t max) const;
  std::int32_t Int32(std::int32_t min, std::int32_t max) const;
  bool Bool() const;                // true | false (also True, TRUE, False, FALSE)
  double Number(double min) const;  // a finite decimal number >= min (weights)
  MilliGpu Gpus() const;
  MilliGpu QuotaGpus() const;  // a queue's quota value (ParseQuotaGpus)
  MilliCpu Cpu() const;
  std::int64_t MiB() const;
  // Whether this scalar is a bare number, written without a unit ("512", not "512Gi").
  bool BareNumber() const;
  Millis Duration() const;
  // One of `names`, returning its index.
  std::size_t Choice(std::initializer_list<std::string_view> names) const;
  // A sequence (null reads as empty).
  std::vector<Value> Items() const;
  // A mapping of scalars to scalars (null reads as empty).
  Labels StringMap() const;

 private:
  // A scalar's text; fails naming `expected` for other node types.
  const std::string& Scalar(std::string_view expected) const;

  const std::string* file_;
  YAML::Node node_;
  std::string path_;
  YAML::Mark mark_;
};

// One entry of a mapping: the key (as a Value positioned at the key, for errors about the key
// itself) and the value.
struct Entry {
  std::string key;
  Value key_value;
  Value value;
};

// The entries of a mapping in file order (null reads as empty); fails on a non-mapping, a
// non-scalar key or a repeated key.
std::vector<Entry> Entries(const Value& map);

// A mapping with a fixed set of fields. Construction fails on a non-mapping, an unknown field
// (suggesting the closest known one) or a repeated field.
class Map {
 public:
  Map(const Value& value, std::span<const std::string_view> fields);
  Map(const Value& value, std::initializer_list<std::string_view> fields)
      : Map(value, std::span<const std::string_view>(fields.begin(), fields.size())) {}

  const Value& self() const { return self_; }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  // The field's value, or nullptr when absent.
  const Value* Find(std::string_view key) const;
  // The field's key, for errors about the field's presence; the field must be present.
  const Value& Key(std::string_view key) const;
  // The field's value; fails `missing required field 'key'` when absent.
  const Value& Get(std::string_view key) const;

 private:
  const Entry* FindEntry(std::string_view key) const;

  Value self_;
  std::vector<Entry> entries_;
};

// Parses `yaml` and runs `load` on the document root, turning LoadError and yaml-cpp exceptions
// into an error Status.
template <typename T>
Result<T> LoadDocument(std::string_view yaml, const std::string& file_name,
                       const std::function<T(const Value& root)>& load);

Status ParseDocument(std::string_view yaml, const std::string& file_name,
                     const std::function<void(const Value& root)>& load);

// Reads a whole file; the error names the file (not found, permission denied or unavailable).
Result<std::string> ReadFile(const std::string& path);

// The candidate closest to `name` by edit distance when it is close enough to be a likely typo.
std::optional<std::string> Suggest(std::string_view name, const std::vector<std::string>& known);
// `unknown WHAT 'name' (known: a, b, c); did you mean 'b'?`, the list capped for long lists.
std::string UnknownName(std::string_view what, std::string_view name,
                        const std::vector<std::string>& known,
                        std::string_view list_label = "known");

template <typename T>
Result<T> LoadDocument(std::string_view yaml, const std::string& file_name,
                       const std::function<T(const Value& root)>& load) {
  std::optional<T> out;
  Status status = ParseDocument(yaml, file_name, [&](const Value& root) { out = load(root); });
  if (!status.ok()) return status;
  return std::move(*out);
}

}  // namespace arbiter::config::internal
