// Declarative scheduling scenarios: each file in tests/scenarios/ is a cluster (the first YAML
// document, in the cluster file format) followed by one document per cycle, with the jobs that
// arrive before it (jobs file format) and what the cycle must decide:
//
//   jobs: [...]
//   expect:
//     placed:   {job-name: {nodes: [node, ...], type: H800, devices: {node: [0, 1]}}, ...}
//     unplaced: {job-name: {stage: place, cause: "insufficient GPU", verdict: wait,
//                           message: "substring of the reason"}, ...}
//     placed_count: 3
//
// Jobs not placed stay pending into the next cycle; placed jobs keep running until a cycle
// document lists them under `finish:`. `now:` in a cycle document sets the cycle's time (default:
// the latest submit time so far). `unplaced` expectations may also give `reserved: 36000s`, the
// start of the job's backfill reservation.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "arbiter/engine.h"
#include "config/config.h"

namespace arbiter {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> SplitDocuments(const std::string& text) {
  std::vector<std::string> docs;
  std::string current, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (line == "---") {
      docs.push_back(current);
      current.clear();
    } else {
      current += line + "\n";
    }
  }
  docs.push_back(current);
  return docs;
}

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(ARBITER_SOURCE_DIR) / "tests" / "scenarios")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class YamlScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(YamlScenario, DecidesAsExpected) {
  const fs::path path = fs::path(ARBITER_SOURCE_DIR) / "tests" / "scenarios" / GetParam();
  std::ifstream file(path);
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::vector<std::string> docs = SplitDocuments(buffer.str());
  ASSERT_GE(docs.size(), 2u) << "a scenario needs a cluster and at least one cycle";

  Result<config::ClusterConfig> cfg = config::ParseCluster(docs[0], GetParam());
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  Result<ClusterState> created = ClusterState::Create(cfg->cluster);
  ASSERT_TRUE(created.ok()) << created.status().message();
  ClusterState& state = created.value();
  Engine engine(cfg->engine);

  std::vector<Job> pending;
  JobId next_id = 1;
  Millis now = 0;
  for (std::size_t cycle = 1; cycle < docs.size(); ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    YAML::Node doc = YAML::Load(docs[cycle]);
    YAML::Node expect = doc["expect"];
    doc.remove("expect");
    if (doc["now"]) {
      Result<Millis> t = config::ParseDuration(doc["now"].as<std::string>(), "now");
      ASSERT_TRUE(t.ok()) << t.status().message();
      now = *t;
      doc.remove("now");
    }
    if (doc["finish"]) {  // running jobs that end before this cycle
      for (const auto& name : doc["finish"]) {
        JobId id = 0;
        for (const auto& [rid, r] : state.running()) {
          if (r.job.name == name.as<std::string>()) id = rid;
        }
        ASSERT_NE(id, 0u) << name.as<std::string>() << " is not running";
        ASSERT_TRUE(state.Unbind(id, now).ok());
      }
      doc.remove("finish");
    }
    if (doc["jobs"]) {
      YAML::Emitter out;
      out << doc;
      Result<std::vector<Job>> jobs = config::ParseJobs(out.c_str(), GetParam(), state, next_id);
      ASSERT_TRUE(jobs.ok()) << jobs.status().message();
      for (Job& j : *jobs) {
        now = std::max(now, j.submit_time);
        next_id = std::max(next_id, j.id + 1);
        pending.push_back(std::move(j));
      }
    }

    Plan plan = engine.Schedule(state, pending, now);
    ASSERT_TRUE(state.CheckInvariants().ok()) << "the cycle did not restore the state";
    ASSERT_TRUE(state.Apply(plan, pending).ok());
    ASSERT_TRUE(state.CheckInvariants().ok());

    std::map<std::string, const Bind*> placed;
    std::map<std::string, const Unplaced*> unplaced;
    for (const Bind& b : plan.binds) placed[pending[b.pending_index].name] = &b;
    for (const Unplaced& u : plan.unplaced) unplaced[pending[u.pending_index].name] = &u;
    std::string summary;
    for (const auto& [name, u] : unplaced) summary += "\n  " + name + ": " + u->reason.Describe();

    if (expect && expect["placed_count"]) {
      EXPECT_EQ(plan.binds.size(), expect["placed_count"].as<std::size_t>()) << summary;
    }
    if (expect && expect["placed"]) {
      for (const auto& item : expect["placed"]) {
        const std::string name = item.first.as<std::string>();
        auto it = placed.find(name);
        ASSERT_NE(it, placed.end()) << name << " was not placed" << summary;
        const Allocation& a = it->second->allocation;
        const YAML::Node want = item.second;
        if (!want || !want.IsMap()) continue;
        if (want["nodes"]) {
          std::set<std::string> got, expected;
          for (const TaskAllocation& t : a.tasks) got.insert(state.node(t.node).name);
          for (const auto& n : want["nodes"]) expected.insert(n.as<std::string>());
          EXPECT_EQ(got, expected) << name;
        }
        if (want["type"]) {
          EXPECT_EQ(state.gpu_type_name(a.gpu_type), want["type"].as<std::string>()) << name;
        }
        if (want["devices"]) {
          for (const auto& node : want["devices"]) {
            std::vector<std::uint32_t> got;
            for (const TaskAllocation& t : a.tasks) {
              if (state.node(t.node).name != node.first.as<std::string>()) continue;
              for (const DeviceShare& d : t.devices) got.push_back(d.device);
            }
            std::sort(got.begin(), got.end());
            EXPECT_EQ(got, node.second.as<std::vector<std::uint32_t>>())
                << name << " on " << node.first.as<std::string>();
          }
        }
      }
    }
    if (expect && expect["unplaced"]) {
      for (const auto& item : expect["unplaced"]) {
        const std::string name = item.first.as<std::string>();
        auto it = unplaced.find(name);
        ASSERT_NE(it, unplaced.end()) << name << " was placed";
        const Reason& r = it->second->reason;
        const YAML::Node want = item.second;
        if (!want || !want.IsMap()) continue;
        if (want["stage"]) {
          EXPECT_EQ(StageName(r.stage), want["stage"].as<std::string>())
              << name << ": " << r.Describe();
        }
        if (want["cause"]) {
          EXPECT_EQ(CauseName(r.cause), want["cause"].as<std::string>())
              << name << ": " << r.Describe();
        }
        if (want["verdict"]) {
          EXPECT_EQ(r.verdict == Verdict::kNever ? "never" : "wait",
                    want["verdict"].as<std::string>())
              << name << ": " << r.Describe();
        }
        if (want["reserved"]) {
          Result<Millis> t = config::ParseDuration(want["reserved"].as<std::string>(), "reserved");
          ASSERT_TRUE(t.ok()) << t.status().message();
          EXPECT_EQ(r.reserved_start, *t) << name << ": " << r.Describe();
        }
        if (want["message"]) {
          EXPECT_NE(r.Describe().find(want["message"].as<std::string>()), std::string::npos)
              << name << ": " << r.Describe();
        }
      }
    }

    std::set<JobId> bound;
    for (const Bind& b : plan.binds) bound.insert(b.job);
    std::erase_if(pending, [&](const Job& j) { return bound.count(j.id) > 0; });
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, YamlScenario, ::testing::ValuesIn(ScenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param.substr(0, param.param.size() - 5);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace arbiter
