// The terminal comparison: one column per run, right-aligned, wide enough for the run's name.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/common.h"
#include "report/report.h"

namespace arbiter::report {

std::string Table(std::span<const sim::RunResult> runs) {
  if (runs.empty()) return "(no runs)\n";
  const std::vector<internal::Row> rows = internal::HeadlineRows(runs);

  constexpr std::size_t kIndent = 2;
  std::size_t label_width = 0;
  std::vector<std::size_t> widths(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) widths[i] = runs[i].name.size();
  for (const internal::Row& row : rows) {
    if (row.heading) continue;
    label_width = std::max(label_width, row.label.size() + (row.indented ? kIndent : 0));
    for (std::size_t i = 0; i < row.cells.size(); ++i) {
      widths[i] = std::max(widths[i], row.cells[i].size());
    }
  }

  std::string out;
  auto line = [&](const std::string& label, const std::vector<std::string>& cells) {
    std::string text = fmt::format("{:<{}}", label, label_width);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      text += fmt::format("  {:>{}}", cells[i], widths[i]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text;
    out += '\n';
  };

  std::vector<std::string> names;
  std::vector<std::string> rules;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    names.push_back(runs[i].name);
    rules.push_back(std::string(widths[i], '-'));
  }
  line("", names);
  line(std::string(label_width, '-'), rules);
  for (const internal::Row& row : rows) {
    if (row.heading) {
      out += '\n';
      out += row.label;
      out += '\n';
      continue;
    }
    line(row.indented ? std::string(kIndent, ' ') + row.label : row.label, row.cells);
  }
  return out;
}

}  // namespace arbiter::report
