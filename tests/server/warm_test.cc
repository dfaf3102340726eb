// A standby's warm copy of the active jobs (Core::Warm, docs/design/ha.md "Warm standbys"): a
// takeover that starts from a copy caught up with the store recovers exactly what a recovery
// that reads every job does, and the recent finished jobs come back for the listings.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "server/core.h"
#include "server/server_process.h"
#include "store/fixtures.h"
#include "store/store.h"

namespace arbiter::server {
namespace {

using store::fixtures::JobEvent;
using store::fixtures::Spec;

// A start on `node`, each task with the request's CPU and whole devices with their memory
// (store::fixtures::Start leaves both 0).
store::Event Start(JobId job, Millis time, const std::string& node) {
  store::Event e = store::fixtures::Start(job, time, node);
  for (job::StoredTask& t : e.allocation.tasks) {
    t.cpu = MilliCpu(32000);
    for (DeviceShare& d : t.devices) d.memory = GpuMemMiB(80 * 1024);
  }
  std::uint32_t next = 0;  // the two tasks on distinct devices
  for (job::StoredTask& t : e.allocation.tasks) {
    for (DeviceShare& d : t.devices) d.device = next++;
  }
  return e;
}
using testing::TempDir;
using testing::WaitFor;

constexpr const char* kCluster = R"(
priority_classes:
  - {name: P1, value: 10}
queues:
  - {name: training}
nodes:
  - name: n{i}
    count: 1
    gpus: {model: H800, count: 16, memory: 80Gi}
    cpu: 256
    memory: 2Ti
)";

config::ClusterConfig Config() {
  Result<config::ClusterConfig> c = config::ParseCluster(kCluster, "cluster.yaml");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : config::ClusterConfig();
}

std::unique_ptr<store::Store> Open(const TempDir& dir) {
  Result<std::unique_ptr<store::Store>> s = store::OpenSqliteStore({.dir = dir.path().string()});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

// One node of 16 GPUs, and jobs of 2 tasks of 8: the running one fills it, so the cores below
// place nothing (what they list depends on the store alone).

// Every job the core lists (active, and the recent finished once they are read again), without
// the listing's cursor.
nlohmann::json Jobs(Core& core) {
  nlohmann::json listed;
  EXPECT_TRUE(WaitFor([&] {
    Answer a = core.ListJobs({});
    listed = a.body;
    return a.ok() && !listed.value("partial", false);
  }));
  listed.erase("cursor");
  return listed;
}

TEST(WarmStandby, ATakeoverFromACaughtUpCopyRecoversWhatAWholeReadDoes) {
  TempDir dir;
  const config::ClusterConfig config = Config();
  std::unique_ptr<Core::Warm> warm;
  {
    std::unique_ptr<store::Store> store = Open(dir);
    ASSERT_NE(store, nullptr);
    for (int i = 1; i <= 4; ++i)
      ASSERT_TRUE(store->Submit(Spec("before-" + std::to_string(i))).ok());
    ASSERT_TRUE(store->Append({Start(1, 2000, "n0")}).ok());
    Result<std::unique_ptr<Core::Warm>> loaded = Core::Warm::Load(config, *store);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    warm = std::move(loaded).value();
    EXPECT_EQ(warm->jobs(), 4u);
    // What the old leader did after the copy was read: a job finished, one started, one was
    // submitted, one cancelled.
    ASSERT_TRUE(store->Append({JobEvent(1, store::EventKind::kCompleted, 3000)}).ok());
    ASSERT_TRUE(store->Append({Start(2, 3000, "n0")}).ok());
    ASSERT_TRUE(store->Submit(Spec("after")).ok());
    ASSERT_TRUE(store->Append({JobEvent(3, store::EventKind::kCancelled, 3500, "alice")}).ok());
    ASSERT_TRUE(warm->CatchUp(*store).ok());
    EXPECT_EQ(warm->jobs(), 3u);                    // 2 (running), 4, 5
    ASSERT_TRUE(store->Submit(Spec("last")).ok());  // caught up only by the takeover itself
  }
  CoreOptions options;
  options.now = [] { return Millis(10'000); };
  nlohmann::json from_copy, from_store;
  {
    Result<std::unique_ptr<Core>> core = Core::Open(config, Open(dir), options, std::move(warm));
    ASSERT_TRUE(core.ok()) << core.status().message();
    (*core)->Stop();
    from_copy = Jobs(**core);
  }
  {
    Result<std::unique_ptr<Core>> core = Core::Open(config, Open(dir), options);
    ASSERT_TRUE(core.ok()) << core.status().message();
    (*core)->Stop();
    from_store = Jobs(**core);
  }
  EXPECT_EQ(from_copy, from_store);
  std::vector<std::pair<std::uint64_t, std::string>> states;
  for (const nlohmann::json& j : from_store["jobs"]) {
    states.emplace_back(j["id"].get<std::uint64_t>(), j["status"]["state"].get<std::string>());
  }
  const std::vector<std::pair<std::uint64_t, std::string>> expected = {
      {1, "completed"}, {2, "running"}, {3, "cancelled"},
      {4, "pending"},   {5, "pending"}, {6, "pending"}};
  EXPECT_EQ(states, expected);
}

}  // namespace
}  // namespace arbiter::server
