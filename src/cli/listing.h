// What the list commands (`arbiter jobs`, `queues`, `nodes`) print, chosen with `-o`: one
// mechanism for the three. A list command describes its items' columns (a name for `-o`, a
// header, how to read its value from the item's JSON as the server sends it, whether the default
// table and `-o wide` show it); `ParseFormat` reads `-o`, `Render` prints the items:
//
//   (none)      the default table            wide       every column marked wide
//   json        the items as a JSON array    yaml       the same as YAML
//   name        what the other commands take (a job's id, a queue's or node's name), one a line
//   id,state    these columns, in this order (names as `arbiter COMMAND --help` lists them)
//   custom-columns=ID:.id,STATE:.status.state   a header and a JSON path per column
//
// Header-only, so that the command's small front (front.cc) and the tests share it without a
// library of its own; it uses only what the client already links (nlohmann's JSON, yaml-cpp's
// emitter, fmt).
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/quantity.h"
#include "arbiter/status.h"
#include "job/limits.h"

namespace arbiter::cli::listing {

using Json = nlohmann::json;

struct Column {
  std::string name;    // as -o names it: "state"
  std::string header;  // "STATE"
  std::function<std::string(const Json&)> value;
  bool right = false;      // aligned right (numbers)
  bool in_default = true;  // in the default table
  bool in_wide = true;     // in -o wide
};

// What a list command lists.
struct Kind {
  std::string what;  // "jobs": the answer's key and the notices' word
  std::vector<Column> columns;
  std::string name_column;  // the column -o name prints
};

struct Format {
  enum class Style : std::uint8_t { kTable, kJson, kYaml, kName };
  Style style = Style::kTable;
  // kTable: the columns shown, in order; a custom column has a JSON path instead of an index.
  struct Shown {
    std::string header;
    std::ptrdiff_t column = -1;  // index into Kind::columns, or -1 for `path`
    std::string path;            // custom-columns: ".status.state"
  };
  std::vector<Shown> shown;
};

// The value at `path` (".spec.name", ".tasks[0]", "." for the item itself) of `item`, or null.
inline Json AtPath(const Json& item, std::string_view path) {
  const Json* at = &item;
  std::size_t i = 0;
  if (!path.empty() && path[0] == '.') i = 1;
  while (i < path.size()) {
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      if (close == std::string_view::npos || !at->is_array()) return nullptr;
      std::size_t index = 0;
      for (std::size_t k = i + 1; k < close; ++k) {
        if (!std::isdigit(static_cast<unsigned char>(path[k]))) return nullptr;
        index = index * 10 + static_cast<std::size_t>(path[k] - '0');
      }
      if (index >= at->size()) return nullptr;
      at = &(*at)[index];
      i = close + 1;
      if (i < path.size() && path[i] == '.') ++i;
      continue;
    }
    std::size_t end = path.find_first_of(".[", i);
    if (end == std::string_view::npos) end = path.size();
    const std::string key(path.substr(i, end - i));
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    i = end < path.size() && path[end] == '.' ? end + 1 : end;
  }
  return *at;
}

// A JSON value as a table cell: a string as is, null as "-", anything else as compact JSON.
inline std::string Cell(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

inline std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The column names of `kind`, for help and errors: "id, name, user, ...".
inline std::string ColumnNames(const Kind& kind) {
  std::string out;
  for (const Column& c : kind.columns) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

// Reads `-o`'s value. `flag` names the flag in errors ("-o/--output").
inline Result<Format> ParseFormat(std::string_view text, const Kind& kind,
                                  std::string_view flag = "-o/--output") {
  Format f;
  auto bad = [&](std::string problem) {
    return Status::InvalidArgument(std::move(problem), std::string(flag));
  };
  const std::string lower = Lower(text);
  if (lower.empty() || lower == "wide") {
    for (std::size_t i = 0; i < kind.columns.size(); ++i) {
      const Column& c = kind.columns[i];
      if (lower.empty() ? c.in_default : c.in_wide)
        f.shown.push_back({c.header, static_cast<std::ptrdiff_t>(i), {}});
    }
    return f;
  }
  if (lower == "json") {
    f.style = Format::Style::kJson;
    return f;
  }
  if (lower == "yaml") {
    f.style = Format::Style::kYaml;
    return f;
  }
  if (lower == "name") {
    f.style = Format::Style::kName;
    return f;
  }
  auto split = [](std::string_view s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= s.size()) {
      std::size_t end = s.find(',', start);
      if (end == std::string_view::npos) end = s.size();
      out.emplace_back(s.substr(start, end - start));
      start = end + 1;
    }
    return out;
  };
  constexpr std::string_view kCustom = "custom-columns=";
  if (lower.rfind(kCustom, 0) == 0) {
    for (const std::string& spec : split(text.substr(kCustom.size()))) {
      const std::size_t colon = spec.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
        return bad(fmt::format("custom-columns: expected HEADER:.json.path, got '{}'", spec));
      }
      f.shown.push_back({spec.substr(0, colon), -1, spec.substr(colon + 1)});
    }
    return f;
  }
  for (const std::string& name : split(text)) {
    const std::string wanted = Lower(name);
    const auto it = std::find_if(kind.columns.begin(), kind.columns.end(),
                                 [&](const Column& c) { return c.name == wanted; });
    if (it == kind.columns.end()) {
      return bad(fmt::format(
          "unknown output '{}' (json, yaml, wide, name, custom-columns=HEADER:.path,... or "
          "columns separated by commas: {})",
          name, ColumnNames(kind)));
    }
    f.shown.push_back({it->header, it - kind.columns.begin(), {}});
  }
  return f;
}

// Writes `v` into `out` as YAML. Strings that YAML would read as another type ("true", "12",
// "null", "") are quoted.
inline void EmitYaml(YAML::Emitter& out, const Json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto it = v.begin(); it != v.end(); ++it) {
      out << YAML::Key << it.key() << YAML::Value;
      EmitYaml(out, it.value());
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& e : v) EmitYaml(out, e);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const Json other = Json::parse(s, nullptr, false);
    const std::string lower = Lower(s);
    const bool ambiguous = s.empty() || (!other.is_discarded() && !other.is_string()) ||
                           lower == "yes" || lower == "no" || lower == "on" || lower == "off" ||
                           lower == "~" || lower == "null" || lower == "true" || lower == "false";
    if (ambiguous) out << YAML::DoubleQuoted;
    out << s;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_boolean()) {
    out << v.get<bool>();
  } else if (v.is_number_unsigned()) {
    out << v.get<std::uint64_t>();
  } else if (v.is_number_integer()) {
    out << v.get<std::int64_t>();
  } else {
    out << v.dump();  // a double as JSON writes it, which YAML reads back as the same number
  }
}

inline std::string ToYaml(const Json& v) {
  YAML::Emitter out;
  EmitYaml(out, v);
  return std::string(out.c_str()) + "\n";
}

// The items (`items`: a JSON array of what the server listed) as `format` says.
inline std::string Render(const Format& format, const Kind& kind, const Json& items) {
  switch (format.style) {
    case Format::Style::kJson:
      return items.dump(2) + "\n";
    case Format::Style::kYaml:
      return items.empty() ? "[]\n" : ToYaml(items);
    case Format::Style::kName: {
      const auto it = std::find_if(kind.columns.begin(), kind.columns.end(),
                                   [&](const Column& c) { return c.name == kind.name_column; });
      std::string out;
      for (const Json& item : items)
        out += (it == kind.columns.end() ? "" : it->value(item)) + "\n";
      return out;
    }
    case Format::Style::kTable:
      break;
  }
  const std::size_t n = format.shown.size();
  std::vector<std::vector<std::string>> rows;
  rows.reserve(items.size() + 1);
  std::vector<std::string> header;
  for (const Format::Shown& s : format.shown) header.push_back(s.header);
  rows.push_back(std::move(header));
  for (const Json& item : items) {
    std::vector<std::string> row;
    for (const Format::Shown& s : format.shown) {
      row.push_back(s.column >= 0 ? kind.columns[static_cast<std::size_t>(s.column)].value(item)
                                  : Cell(AtPath(item, s.path)));
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> width(n, 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < n; ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < n; ++c) {
      const bool right = format.shown[c].column >= 0 &&
                         kind.columns[static_cast<std::size_t>(format.shown[c].column)].right;
      const bool last = c + 1 == n;
      if (c > 0) line += "  ";
      if (right) {
        line += std::string(width[c] - row[c].size(), ' ') + row[c];
      } else {
        line += row[c];
        if (!last) line += std::string(width[c] - row[c].size(), ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();  // an empty last cell
    out += line + "\n";
  }
  return out;
}

// The values of a comma-separated flag (`-s pending,running`), the empty ones left out.
inline std::vector<std::string> CommaList(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// ---- The list commands' columns ----

inline std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
inline std::int64_t Int(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<std::int64_t>()
                                                                        : 0;
}
inline std::string Gpus(std::int64_t milli) { return limits::FormatGpus(milli); }

// A job's age for the narrow column: its largest unit only (`42s`, `5m`, `3h`, `2d`).
inline std::string Age(Millis since, Millis now) {
  const Millis s = std::max<Millis>(0, (now - since) / 1000);
  if (s < 120) return fmt::format("{}s", s);
  if (s < 7200) return fmt::format("{}m", s / 60);
  if (s < 172800) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

// Where a running job's tasks run: "h800-0[0-7] h800-1[0-7]".
inline std::string Where(const Json& job) {
  std::string out;
  if (job.contains("tasks") && job["tasks"].is_array())
    for (const Json& t : job["tasks"]) out += (out.empty() ? "" : " ") + Cell(t);
  return out;
}

inline std::string Moment(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return "-";
  return FormatTime(j[key].get<Millis>(), TimeStyle::kCalendar);
}

// `arbiter jobs`; `now` gives the moment (Unix ms) the ages are counted to.
inline Kind JobsKind(std::function<Millis()> now) {
  auto spec = [](const Json& j) -> const Json& { return j["spec"]; };
  auto status = [](const Json& j) -> const Json& { return j["status"]; };
  auto state = [status](const Json& j) {
    const std::string s = Str(status(j), "state");
    return s.empty() ? std::string("pending") : s;
  };
  Kind k;
  k.what = "jobs";
  k.name_column = "id";
  auto add = [&](const char* name, const char* header, std::function<std::string(const Json&)> f,
                 bool right, bool in_default, bool in_wide) {
    k.columns.push_back({name, header, std::move(f), right, in_default, in_wide});
  };
  add(
      "id", "ID", [](const Json& j) { return Cell(j["id"]); }, true, true, true);
  add(
      "name", "NAME", [=](const Json& j) { return Str(spec(j), "name"); }, false, true, true);
  add(
      "user", "USER", [=](const Json& j) { return Str(spec(j), "user"); }, false, true, true);
  add(
      "queue", "QUEUE", [=](const Json& j) { return Str(spec(j), "queue"); }, false, true, true);
  add(
      "class", "CLASS",
      [=](const Json& j) {
        const std::string c = Str(status(j), "priority_class");
        return c.empty() ? Str(spec(j), "priority_class") : c;
      },
      false, true, true);
  add("state", "STATE", state, false, true, true);
  add(
      "tasks", "TASKS",
      [=](const Json& j) {
        std::int64_t n = 0;
        if (spec(j).contains("groups"))
          for (const Json& g : spec(j)["groups"]) n += g.contains("tasks") ? Int(g, "tasks") : 1;
        return std::to_string(n);
      },
      true, false, true);
  add(
      "gpus", "GPUS", [](const Json& j) { return Gpus(Int(j, "gpu_milli")); }, true, true, true);
  add(
      "types", "TYPES",
      [=](const Json& j) {
        std::string out;
        if (spec(j).contains("gpu_types"))
          for (const Json& t : spec(j)["gpu_types"]) out += (out.empty() ? "" : ",") + Cell(t);
        return out.empty() ? std::string("any") : out;
      },
      false, false, true);
  add(
      "age", "AGE", [=](const Json& j) { return Age(Int(spec(j), "submit_time_ms"), now()); }, true,
      true, true);
  add(
      "submitted", "SUBMITTED", [=](const Json& j) { return Moment(spec(j), "submit_time_ms"); },
      false, false, true);
  add(
      "started", "STARTED", [=](const Json& j) { return Moment(status(j), "start_time_ms"); },
      false, false, true);
  // A running job's nodes, or its reason while it is evicted; any other job's reason.
  add(
      "detail", "REASON / NODES",
      [=](const Json& j) {
        if (j.contains("reason")) return Str(j, "reason");
        return state(j) == "running" ? Where(j) : std::string();
      },
      false, true, false);
  add(
      "nodes", "NODES", [](const Json& j) { return Where(j); }, false, false, true);
  add(
      "reason", "REASON", [](const Json& j) { return Str(j, "reason"); }, false, false, true);
  return k;
}

// `arbiter queues`.
inline Kind QueuesKind() {
  Kind k;
  k.what = "queues";
  k.name_column = "queue";
  auto add = [&](const char* name, const char* header, std::function<std::string(const Json&)> f,
                 bool right, bool in_default, bool in_wide) {
    k.columns.push_back({name, header, std::move(f), right, in_default, in_wide});
  };
  auto jobs = [](const char* state) {
    return [state](const Json& q) {
      return q.contains("jobs") ? std::to_string(Int(q["jobs"], state)) : std::string("0");
    };
  };
  add(
      "queue", "QUEUE", [](const Json& q) { return Str(q, "name"); }, false, true, true);
  add(
      "parent", "PARENT",
      [](const Json& q) {
        const std::string p = Str(q, "parent");
        return p.empty() ? std::string("-") : p;
      },
      false, true, true);
  add(
      "priority", "PRIO", [](const Json& q) { return std::to_string(Int(q, "priority")); }, true,
      true, true);
  add(
      "weight", "WEIGHT", [](const Json& q) { return std::to_string(Int(q, "weight")); }, true,
      true, true);
  add("pending", "PENDING", jobs("pending"), true, true, true);
  add("running", "RUNNING", jobs("running"), true, true, true);
  add("held", "HELD", jobs("held"), true, true, true);
  // Per resource: used / guaranteed (the subtree's nominal) / max, "-" where there is no limit.
  add(
      "usage", "GPUS USED / GUARANTEED / MAX",
      [](const Json& q) {
        std::string out;
        if (!q.contains("resources")) return out;
        for (const Json& r : q["resources"]) {
          auto milli = [&](const char* key) {
            return r.contains(key) && r[key].is_number_integer() ? Gpus(r[key].get<std::int64_t>())
                                                                 : std::string("-");
          };
          out += fmt::format("{}{} {}/{}/{}", out.empty() ? "" : ", ", Str(r, "resource"),
                             milli("usage_milli"), milli("nominal_milli"), milli("max_milli"));
        }
        return out;
      },
      false, true, true);
  // The quota in force, as the cluster file writes it (set-quota changes it).
  add(
      "quota", "QUOTA",
      [](const Json& q) {
        std::string out;
        if (!q.contains("quota") || !q["quota"].is_object()) return std::string("-");
        for (auto it = q["quota"].begin(); it != q["quota"].end(); ++it) {
          std::string limits;
          for (const char* f : {"nominal", "borrowing_limit", "lending_limit", "max"}) {
            const std::string key = std::string(f) + "_milli";
            if (it.value().contains(key) && it.value()[key].is_number_integer())
              limits += fmt::format("{}{}: {}", limits.empty() ? "" : ", ", f,
                                    Gpus(it.value()[key].get<std::int64_t>()));
          }
          out += fmt::format("{}{} {{{}}}", out.empty() ? "" : "; ", it.key(), limits);
        }
        return out.empty() ? std::string("-") : out;
      },
      false, false, true);
  return k;
}

// `arbiter nodes`.
inline Kind NodesKind() {
  Kind k;
  k.what = "nodes";
  k.name_column = "node";
  auto add = [&](const char* name, const char* header, std::function<std::string(const Json&)> f,
                 bool right, bool in_default, bool in_wide) {
    k.columns.push_back({name, header, std::move(f), right, in_default, in_wide});
  };
  add(
      "node", "NODE", [](const Json& n) { return Str(n, "name"); }, false, true, true);
  // An agent's node that is not ready says so: "schedulable (agent lost)".
  add(
      "state", "STATE",
      [](const Json& n) {
        std::string state = Str(n, "state");
        if (n.contains("agent") && n["agent"].is_object() && Str(n["agent"], "state") != "ready")
          state += " (agent " + Str(n["agent"], "state") + ")";
        return state;
      },
      false, true, true);
  add(
      "gpu_type", "GPU TYPE",
      [](const Json& n) {
        return n.contains("gpus") && n["gpus"].is_array() && !n["gpus"].empty()
                   ? Str(n["gpus"][0], "type")
                   : std::string("-");
      },
      false, true, true);
  add(
      "gpus", "GPUS FREE",
      [](const Json& n) {
        return Gpus(Int(n, "gpu_free_milli")) + "/" + Gpus(Int(n, "gpu_milli"));
      },
      true, true, true);
  add(
      "cpu", "CPU FREE",
      [](const Json& n) {
        return Gpus(Int(n, "cpu_free_milli")) + "/" + Gpus(Int(n, "cpu_milli"));
      },
      true, true, true);
  add(
      "memory", "MEM FREE GiB",
      [](const Json& n) {
        return fmt::format("{}/{}", Int(n, "memory_free_mib") / 1024, Int(n, "memory_mib") / 1024);
      },
      true, true, true);
  add(
      "jobs", "JOBS",
      [](const Json& n) {
        std::string out;
        if (n.contains("jobs"))
          for (const Json& id : n["jobs"]) out += (out.empty() ? "" : ",") + Cell(id);
        return out.empty() ? std::string("-") : out;
      },
      false, true, true);
  add(
      "reason", "REASON",
      [](const Json& n) {
        const std::string r = Str(n, "reason");
        return r.empty() ? std::string("-") : r;
      },
      false, false, true);
  return k;
}

}  // namespace arbiter::cli::listing
