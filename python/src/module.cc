// arbiter._arbiter: the simulator, the fill experiment and one planning cycle, from Python. Each
// call runs the same library functions as `arbiter sim`, `arbiter fill` and `arbiter plan`, with
// the interpreter's lock released, and returns what their JSON holds (the Python layer,
// python/arbiter/__init__.py, reads it into dicts). Bad input raises arbiter.Error (a ValueError)
// with the message of the command's error and the field at fault in `field`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/state.h"
#include "arbiter/status.h"
#include "config/config.h"
#include "report/plan.h"
#include "report/report.h"
#include "scenario/scenario.h"
#include "sim/fill.h"
#include "trace/trace.h"

namespace py = pybind11;

namespace arbiter::python {
namespace {

// An error to raise as arbiter.Error: the message for people, the field's path ("" when no one
// field is at fault) and the status code's name.
struct Failure {
  std::string message;
  std::string field;
  std::string code;
};

Failure FailureOf(const Status& status, const std::string& context = "") {
  return Failure{context + status.message(), status.field(), StatusCodeName(status.code())};
}

template <typename T>
T Take(Result<T> result, const std::string& context = "") {
  if (!result.ok()) throw FailureOf(result.status(), context);
  return std::move(result).value();
}

// Input given as a file's path, or as its text with a name for errors.
struct Source {
  std::string path_or_text;
  bool is_text = false;
  std::string name;  // for text: what errors call it
};

// `arbiter sim`: the scenario's configurations named in `runs` (all when empty), as
// report::Json writes them.
std::string Simulate(const Source& scenario, const std::string& base_dir,
                     const std::vector<std::string>& runs, std::optional<std::uint64_t> seed) {
  config::Scenario loaded = Take(
      scenario.is_text ? config::ParseScenario(scenario.path_or_text, scenario.name, base_dir, seed)
                       : config::LoadScenarioFile(scenario.path_or_text, seed));
  const std::vector<const config::SimConfiguration*> chosen =
      Take(config::ChooseConfigurations(loaded, runs), "runs: ");
  const std::vector<sim::RunResult> results = Take(config::SimulateConfigurations(loaded, chosen));
  return report::Json(results, loaded.name);
}

// `arbiter plan`: one cycle over the cluster and its pending jobs at `now_ms` (by default the
// latest submit time), as `arbiter plan --json` prints it.
std::string Plan(const Source& cluster, const Source& jobs, std::optional<Millis> now_ms) {
  config::ClusterConfig config =
      Take(cluster.is_text ? config::ParseCluster(cluster.path_or_text, cluster.name)
                           : config::LoadClusterFile(cluster.path_or_text));
  Cluster built = Take(Cluster::Create(config.cluster),
                       (cluster.is_text ? cluster.name : cluster.path_or_text) + ": ");
  const std::vector<Job> pending =
      Take(jobs.is_text ? config::ParseJobs(jobs.path_or_text, jobs.name, built.state())
                        : config::LoadJobsFile(jobs.path_or_text, built.state()));
  Millis now = 0;
  if (now_ms) {
    now = *now_ms;
  } else {
    for (const Job& j : pending) now = std::max(now, j.submit_time);
  }
  Engine engine(config.engine);
  const arbiter::Plan plan = engine.Schedule(built, pending, now);
  if (Status st = built.Apply(plan, pending); !st.ok()) {
    throw Failure{"internal error: the plan does not apply: " + st.message(), "", "internal"};
  }
  return report::PlanJson(built.state(), pending, plan, TimeStyle::kElapsed);
}

struct FillArgs {
  Source nodes;
  Source pods;
  std::vector<std::string> policies;
  int seeds = 10;
  std::uint64_t seed = 42;
  double inflate = 1.3;
  std::vector<std::string> variants;
  int threads = 0;
};

// `arbiter fill`: every policy over every seed, with the figures of each run.
fill::FillReport Fill(const FillArgs& args) {
  const fill::FillOptions options =
      Take(fill::MakeFillOptions(args.policies, args.seeds, args.seed, args.inflate, args.threads));
  const std::vector<trace::TraceNode> nodes =
      Take(args.nodes.is_text ? trace::ReadOpenbNodes(args.nodes.path_or_text, args.nodes.name)
                              : trace::ReadOpenbNodesFile(args.nodes.path_or_text));
  const trace::Trace pods_trace =
      Take(args.pods.is_text
               ? trace::ReadTrace(args.pods.path_or_text, trace::Format::kOpenb, args.pods.name)
               : trace::ReadTraceFile(args.pods.path_or_text, "openb"));
  if (pods_trace.bad_row_count > 0) {
    std::string lines;
    for (const std::string& line : trace::DescribeBadRows(
             pods_trace, args.pods.is_text ? args.pods.name : args.pods.path_or_text))
      lines += (lines.empty() ? "" : "\n") + line;
    throw Failure{lines, "pods", "invalid_argument"};
  }
  std::vector<fill::Variant> chain;
  for (const std::string& text : args.variants)
    chain.push_back(Take(fill::ParseVariant(text), "variants: "));
  const std::vector<fill::Pod> pods =
      Take(fill::MakeVariants(fill::PodsFromTrace(pods_trace.jobs), nodes, chain), "variants: ");
  return Take(fill::RunFill(nodes, pods, options));
}

py::list Floats(const std::vector<double>& values) {
  py::list out;
  for (double v : values) out.append(v);  // NaN where a step was not reached
  return out;
}

// The fill report as plain data: {"nodes", "gpus", "pods", "steps", "policies": {NAME:
// {"alloc_pct": [...], "failed_pods", "frag_pct", "seconds", "runs": [{"seed", "alloc_pct",
// "pods", "failed_pods", "frag_pct", "seconds"}]}}}.
py::dict FillDict(const fill::FillReport& report, std::uint64_t first_seed) {
  py::dict out;
  out["nodes"] = report.nodes;
  out["gpus"] = report.gpus;
  out["pods"] = report.listed_pods;
  out["steps"] = report.steps;
  py::dict policies;
  for (const fill::PolicyResult& p : report.policies) {
    py::dict policy;
    policy["alloc_pct"] = Floats(p.alloc_pct);
    policy["failed_pods"] = p.failed_pods;
    policy["frag_pct"] = p.frag_pct;
    policy["seconds"] = p.seconds;
    py::list runs;
    for (std::size_t i = 0; i < p.runs.size(); ++i) {
      const fill::RunResult& r = p.runs[i];
      py::dict run;
      run["seed"] = first_seed + i;
      run["alloc_pct"] = Floats(r.alloc_pct);
      run["pods"] = r.pods;
      run["failed_pods"] = r.failed_pods;
      run["frag_pct"] = r.frag_pct;
      run["seconds"] = r.seconds;
      runs.append(std::move(run));
    }
    policy["runs"] = std::move(runs);
    policies[PlacementPolicyName(p.policy)] = std::move(policy);
  }
  out["policies"] = std::move(policies);
  return out;
}

Source MakeSource(std::string value, bool is_text, std::string name) {
  return Source{std::move(value), is_text, std::move(name)};
}

}  // namespace
}  // namespace arbiter::python

PYBIND11_MODULE(_arbiter, m) {
  using namespace arbiter::python;
  m.doc() = "Arbiter's simulator, fill experiment and planning cycle (see the arbiter package)";

  static py::exception<Failure> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Failure& f) {
      const auto type = py::reinterpret_borrow<py::object>(error.ptr());
      py::object instance = type(f.message);
      instance.attr("field") = f.field;
      instance.attr("code") = f.code;
      PyErr_SetObject(error.ptr(), instance.ptr());
    }
  });

  m.def(
      "simulate",
      [](std::string scenario, bool is_text, std::string name, std::string base_dir,
         std::vector<std::string> runs, std::optional<std::uint64_t> seed) {
        std::string json;
        {
          py::gil_scoped_release release;
          json = Simulate(MakeSource(std::move(scenario), is_text, std::move(name)), base_dir, runs,
                          seed);
        }
        return json;
      },
      py::arg("scenario"), py::arg("is_text"), py::arg("name"), py::arg("base_dir"),
      py::arg("runs"), py::arg("seed"),
      "Runs a scenario (a file's path, or YAML text); returns the JSON of `arbiter sim --json`.");

  m.def(
      "plan",
      [](std::string cluster, bool cluster_is_text, std::string jobs, bool jobs_is_text,
         std::optional<std::int64_t> now_ms) {
        std::string json;
        {
          py::gil_scoped_release release;
          json = Plan(MakeSource(std::move(cluster), cluster_is_text, "cluster"),
                      MakeSource(std::move(jobs), jobs_is_text, "jobs"), now_ms);
        }
        return json;
      },
      py::arg("cluster"), py::arg("cluster_is_text"), py::arg("jobs"), py::arg("jobs_is_text"),
      py::arg("now_ms"),
      "One scheduling cycle (paths or YAML text); returns the JSON of `arbiter plan --json`.");

  m.def(
      "fill",
      [](std::string nodes, bool nodes_is_text, std::string pods, bool pods_is_text,
         std::vector<std::string> policies, int seeds, std::uint64_t seed, double inflate,
         std::vector<std::string> variants, int threads) {
        FillArgs args{MakeSource(std::move(nodes), nodes_is_text, "nodes"),
                      MakeSource(std::move(pods), pods_is_text, "pods"),
                      std::move(policies),
                      seeds,
                      seed,
                      inflate,
                      std::move(variants),
                      threads};
        std::optional<arbiter::fill::FillReport> report;
        {
          py::gil_scoped_release release;
          report = Fill(args);
        }
        return FillDict(*report, seed);
      },
      py::arg("nodes"), py::arg("nodes_is_text"), py::arg("pods"), py::arg("pods_is_text"),
      py::arg("policies"), py::arg("seeds"), py::arg("seed"), py::arg("inflate"),
      py::arg("variants"), py::arg("threads"),
      "The fill experiment (openb node and pod lists: paths or CSV text); returns a dict.");
}
