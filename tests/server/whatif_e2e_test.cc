// End to end: a workload driven through a real server on virtual nodes, recorded with
// `arbiter history`, replayed with `arbiter whatif` under the server's own configuration: the
// replay starts every job the server started, in the same order, within the bound docs/whatif.md
// gives; and a proposed configuration is compared with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "config/snapshot.h"
#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";

constexpr const char* kCluster = R"(
priority_classes:
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: main}
  - {name: other}
nodes:
  - name: g-{i}
    count: 2
    gpus: {model: G, count: 4, memory: 40Gi}
    cpu: 32
    memory: 256Gi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
  cycle_min_interval: 20ms
  cycle_period: 500ms
)";

// The same queues with `main` weighing more, no backfill reservation; no nodes (they stay).
constexpr const char* kProposed = R"(
priority_classes:
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: main, weight: 3}
  - {name: other}
scheduler:
  backfill: {reservations: 0}
)";

TEST(WhatifE2e, ReplayingAServersHistoryUnderItsConfigurationReproducesItsStarts) {
  TempDir dir;
  const std::string config = dir.Write("cluster.yaml", kCluster);
  ServerProcess server(config, (dir.path() / "data").string());
  ASSERT_TRUE(server.ready()) << "the server did not start";
  const int port = server.port();
  // Ten jobs of one node each (4 GPUs), 300 ms apart, running 1.0 s to 1.9 s: two run at a time,
  // the others wait their turn; every decision is apart from the next by far more than a cycle.
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 10; ++i) {
    const Json body = {{"name", "job-" + std::to_string(i)},
                       {"queue", i % 3 == 0 ? "other" : "main"},
                       {"priority_class", "low"},
                       {"runtime_estimate_ms", 1000 + 100 * ((i * 7) % 10)},
                       {"groups", Json::array({{{"tasks", 1}, {"gpu_milli", 4000}}})}};
    Reply r = Call(port, kAdmin, "POST", "/v1/jobs", body.dump());
    ASSERT_EQ(r.status, 201) << r.body.dump();
    ids.push_back(r.body["id"].get<std::uint64_t>());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_TRUE(WaitFor([&] {
    return std::all_of(ids.begin(), ids.end(), [&](std::uint64_t id) {
      return Call(port, kAdmin, "GET", "/v1/jobs/" + std::to_string(id))
                 .body["status"]
                 .value("state", "?") == "completed";
    });
  }));

  const std::string history = (dir.path() / "history.json").string();
  CommandResult taken = RunCli(server.address(), kAdmin, "history -o " + history);
  ASSERT_EQ(taken.status, 0) << taken.output;
  {
    std::ifstream in(history);
    const Json file = Json::parse(in, nullptr, false);
    EXPECT_EQ(file.value("history_version", 0), 1);
    EXPECT_EQ(file["jobs"].size(), 10u);
    EXPECT_NE(file.value("snapshot", "").find("snapshot_version: 1"), std::string::npos);
  }

  const std::string proposed = dir.Write("proposed.yaml", kProposed);
  const std::string html = (dir.path() / "whatif.html").string();
  CommandResult replay = RunCli("", "",
                                "whatif --history " + history + " --config " + config +
                                    " --proposed " + proposed + " --html " + html);
  ASSERT_EQ(replay.status, 0) << replay.output;
  // Every job replayed with its observed running time, every start reproduced.
  EXPECT_NE(replay.output.find("10 jobs replayed, 10 with their observed running time"),
            std::string::npos)
      << replay.output;
  std::smatch m;
  const std::regex fidelity(
      R"((\d+) jobs started in both; start-time error mean ([0-9.]+) s, p99 ([0-9.]+) s, max ([0-9.]+) s)");
  ASSERT_TRUE(std::regex_search(replay.output, m, fidelity)) << replay.output;
  std::printf("whatif %s\n", m[0].str().c_str());  // the measurement docs/whatif.md quotes
  EXPECT_EQ(m[1].str(), "10");
  EXPECT_EQ(replay.output.find("started only in the record"), std::string::npos) << replay.output;
  // The bound of docs/whatif.md for a workload whose decisions are far apart: a start differs
  // by the server's cycle and reporting delays, accumulated along the queue of waiting jobs.
  EXPECT_LE(std::stod(m[2].str()), 0.5) << replay.output;
  EXPECT_LE(std::stod(m[4].str()), 1.0) << replay.output;
  // Per-queue deltas of the proposal, and the report of both runs.
  for (const char* part : {"wait mean", "wait p99", "JCT mean", "evictions", "GPU-hours lost",
                           "utilisation", "proposed", "report: "}) {
    EXPECT_NE(replay.output.find(part), std::string::npos) << part << "\n" << replay.output;
  }
  EXPECT_TRUE(std::filesystem::exists(html));

  // Issue 42, item 8. The window's times as whatif prints them (milliseconds and all) are taken
  // back; a proposal that is the current configuration says it changes no decision; a window
  // that ends while jobs still wait says how many the figures leave out.
  std::smatch w;
  ASSERT_TRUE(std::regex_search(replay.output, w, std::regex(R"(window (\S+) to (\S+) )")))
      << replay.output;
  const std::string since = w[1].str(), until = w[2].str();
  CommandResult same =
      RunCli("", "",
             "whatif --history " + history + " --config " + config + " --proposed " + config +
                 " --since " + since + " --until " + until);
  ASSERT_EQ(same.status, 0) << same.output;
  EXPECT_NE(same.output.find("the proposal changes no decision in this window"), std::string::npos)
      << same.output;
  Result<Millis> start = config::ParseSnapshotTime(since, "since");
  ASSERT_TRUE(start.ok()) << start.status().message();
  CommandResult early = RunCli("", "",
                               "whatif --history " + history + " --config " + config + " --since " +
                                   since + " --until " + std::to_string(*start + 1500) + "ms");
  ASSERT_EQ(early.status, 0) << early.output;
  EXPECT_NE(early.output.find("still pending at the window's end in the record (no start to "
                              "compare: not in these figures)"),
            std::string::npos)
      << early.output;
}

TEST(WhatifCommand, RefusesAFileThatIsNotAHistory) {
  TempDir dir;
  const std::string file = dir.Write("h.json", R"({"history_version": 2})");
  CommandResult r = RunCli("", "", "whatif --history " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("history_version: expected 1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace arbiter::testing
