// `arbiter fill`: the fill experiment of "Beware of Fragmentation" (include/sim/fill.h) for one
// or more placement policies; prints the allocation ratio per policy and arrived GPU request, and
// writes the JSON the docs describe (docs/placement.md).
#include "sim/fill.h"

#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "trace/trace.h"

namespace arbiter::cli {

int RunFill(const FillArgs& args) {
  Result<fill::FillOptions> made =
      fill::MakeFillOptions(args.placements, args.seeds, args.seed, args.inflate, args.threads);
  if (!made.ok()) {
    // The flags that give the fields.
    const std::string flag =
        made.status().field() == "policies" ? "--placement" : "--" + made.status().field();
    fmt::print(stderr, "error: {}: {}\n", flag, made.status().detail());
    return 2;
  }
  const fill::FillOptions options = std::move(made).value();

  Result<std::vector<trace::TraceNode>> nodes = trace::ReadOpenbNodesFile(args.nodes);
  if (!nodes.ok()) {
    fmt::print(stderr, "error: {}\n", nodes.status().message());
    return 1;
  }
  Result<trace::Trace> trace = trace::ReadTraceFile(args.pods, "openb");
  if (!trace.ok()) {
    fmt::print(stderr, "error: {}\n", trace.status().message());
    return 1;
  }
  if (trace->bad_row_count > 0) {
    for (const std::string& line : trace::DescribeBadRows(*trace, args.pods))
      fmt::print(stderr, "error: {}\n", line);
    return 1;
  }
  std::vector<fill::Pod> pods = fill::PodsFromTrace(trace->jobs);
  std::string derived;
  std::vector<fill::Variant> chain;
  for (const std::string& text : args.variants) {
    Result<fill::Variant> variant = fill::ParseVariant(text);
    if (!variant.ok()) {
      fmt::print(stderr, "error: --variant: {}\n", variant.status().message());
      return 2;
    }
    chain.push_back(*variant);
    derived += " " + fill::VariantName(*variant);
  }
  Result<std::vector<fill::Pod>> varied = fill::MakeVariants(pods, *nodes, chain);
  if (!varied.ok()) {
    fmt::print(stderr, "error: --variant: {}\n", varied.status().message());
    return 1;
  }
  pods = std::move(*varied);
  std::int64_t gpus = 0, requested = 0;
  for (const trace::TraceNode& n : *nodes) gpus += n.gpus;
  for (const fill::Pod& p : pods) requested += p.total_gpu();
  fmt::print(
      "cluster: {} nodes, {} GPUs; workload:{} {} pods asking {:.1f}% of the GPUs, inflated "
      "to {:.0f}%; {} seed{} from {}\n",
      nodes->size(), gpus, derived.empty() ? "" : derived + ",", pods.size(),
      gpus > 0 ? 100.0 * static_cast<double>(requested) / static_cast<double>(gpus * 1000) : 0.0,
      100 * args.inflate, args.seeds, args.seeds == 1 ? "" : "s", args.seed);

  std::size_t done = 0;
  const std::size_t total = options.policies.size() * static_cast<std::size_t>(args.seeds);
  auto progress = [&](PlacementPolicy, std::uint64_t, const fill::RunResult&) {
    ++done;
    if (!args.quiet) {
      fmt::print(stderr, "\r  {} / {} runs", done, total);
      std::fflush(stderr);
    }
  };
  Result<fill::FillReport> report = fill::RunFill(*nodes, pods, options, progress);
  if (!args.quiet) fmt::print(stderr, "\r{}\r", std::string(30, ' '));
  if (!report.ok()) {
    fmt::print(stderr, "error: {}\n", report.status().message());
    return 1;
  }

  fmt::print(
      "\nGPU allocation ratio (%, mean of {} seed{}) when the arrived GPU request reaches "
      "X% of capacity\n",
      args.seeds, args.seeds == 1 ? "" : "s");
  std::string header = fmt::format("{:<12}", "policy");
  for (int s : report->steps) header += fmt::format(" {:>6}", fmt::format("{}%", s));
  header += fmt::format(" {:>9} {:>9} {:>8}", "failed", "frag@100", "s/run");
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  for (const fill::PolicyResult& r : report->policies) {
    std::string line = fmt::format("{:<12}", PlacementPolicyName(r.policy));
    for (double v : r.alloc_pct)
      line += std::isnan(v) ? fmt::format(" {:>6}", "-") : fmt::format(" {:6.2f}", v);
    line += fmt::format(" {:9.1f} {:8.2f}% {:8.3f}", r.failed_pods, r.frag_pct, r.seconds);
    fmt::print("{}\n", line);
  }
  fmt::print(
      "\nfailed: pods that fit nowhere (mean per run); frag@100: free GPU capacity that no pod "
      "shape of the list can use, in % of all GPUs, when the arrived request reaches 100%\n");

  if (!args.json.empty()) {
    const std::string json = fill::ToJson(*report);
    if (args.json == "-") {
      fmt::print("{}", json);
    } else {
      std::ofstream out(args.json, std::ios::binary);
      out << json;
      out.close();
      if (!out) {
        fmt::print(stderr, "error: {}: cannot write\n", args.json);
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace arbiter::cli
