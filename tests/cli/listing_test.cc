// What the list commands print (src/cli/listing.h): -o's formats and columns, on jobs, queues and
// nodes as the server sends them; and the flag an error names (src/cli/flags.h).
#include "cli/listing.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "cli/flags.h"

namespace arbiter::cli::listing {
namespace {

constexpr Millis kNow = 1'800'000'000'000;

Json TwoJobs() {
  return Json::parse(R"([
    {"id": 1, "gpu_milli": 16000, "tasks": ["h800-0[0-7]", "h800-1[0-7]"],
     "spec": {"name": "finetune", "user": "alice", "queue": "training", "priority_class": "P1",
              "groups": [{"name": "main", "tasks": 2, "gpu_milli": 8000}],
              "gpu_types": ["H800"], "submit_time_ms": 1799999997000},
     "status": {"state": "running", "priority_class": "P1", "start_time_ms": 1799999998000}},
    {"id": 2, "gpu_milli": 500,
     "spec": {"name": "true", "user": "bob", "queue": "batch", "priority_class": "P2",
              "groups": [{"name": "main", "gpu_milli": 500}], "submit_time_ms": 1799999000000},
     "status": {"state": "pending", "priority_class": "P2"},
     "reason": "quota: queue at its borrowing limit"}])");
}

Kind Jobs() {
  return JobsKind([] { return kNow; });
}

std::string Show(std::string_view output, const Kind& kind, const Json& items) {
  Result<Format> f = ParseFormat(output, kind);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? Render(*f, kind, items) : "";
}

TEST(Listing, DefaultTableAlignsItsColumnsAndEndsWithReasonOrNodes) {
  EXPECT_EQ(Show("", Jobs(), TwoJobs()),
            "ID  NAME      USER   QUEUE     CLASS  STATE    GPUS  AGE  REASON / NODES\n"
            " 1  finetune  alice  training  P1     running    16   3s  h800-0[0-7] h800-1[0-7]\n"
            " 2  true      bob    batch     P2     pending   0.5  16m  quota: queue at its "
            "borrowing limit\n");
}

TEST(Listing, WideAddsTasksTypesTimesAndSplitsNodesFromReason) {
  const std::string wide = Show("wide", Jobs(), TwoJobs());
  EXPECT_EQ(wide.substr(0, wide.find('\n')),
            "ID  NAME      USER   QUEUE     CLASS  STATE    TASKS  GPUS  TYPES  AGE  SUBMITTED"
            "             STARTED               NODES                    REASON");
  EXPECT_NE(wide.find("2027-01-15T07:59:57Z"), std::string::npos) << wide;  // submitted
  EXPECT_NE(wide.find("any"), std::string::npos) << wide;                   // job 2's types
}

TEST(Listing, ColumnsByNameInTheGivenOrderCaseInsensitive) {
  EXPECT_EQ(Show("state,ID,queue", Jobs(), TwoJobs()),
            "STATE    ID  QUEUE\n"
            "running   1  training\n"
            "pending   2  batch\n");
}

TEST(Listing, CustomColumnsReadJsonPaths) {
  EXPECT_EQ(Show("custom-columns=JOB:.id,WHO:.spec.user,FIRST:.tasks[0],NONE:.spec.nothing", Jobs(),
                 TwoJobs()),
            "JOB  WHO    FIRST        NONE\n"
            "1    alice  h800-0[0-7]  -\n"
            "2    bob    -            -\n");
}

TEST(Listing, NamePrintsWhatTheOtherCommandsTake) {
  EXPECT_EQ(Show("name", Jobs(), TwoJobs()), "1\n2\n");
  const Json queues = Json::parse(R"([{"name": "training"}, {"name": "batch"}])");
  EXPECT_EQ(Show("name", QueuesKind(), queues), "training\nbatch\n");
  const Json nodes = Json::parse(R"([{"name": "h800-0"}])");
  EXPECT_EQ(Show("name", NodesKind(), nodes), "h800-0\n");
}

TEST(Listing, JsonIsTheServersItems) {
  EXPECT_EQ(Json::parse(Show("json", Jobs(), TwoJobs())), TwoJobs());
}

TEST(Listing, YamlReadsBackAsTheSameValuesWithAmbiguousStringsQuoted) {
  const std::string yaml = Show("yaml", Jobs(), TwoJobs());
  const YAML::Node back = YAML::Load(yaml);
  ASSERT_TRUE(back.IsSequence()) << yaml;
  EXPECT_EQ(back[0]["id"].as<int>(), 1);
  EXPECT_EQ(back[0]["tasks"][1].as<std::string>(), "h800-1[0-7]");
  EXPECT_EQ(back[1]["spec"]["groups"][0]["gpu_milli"].as<int>(), 500);
  // The job named "true" stays a string.
  EXPECT_NE(yaml.find("name: \"true\""), std::string::npos) << yaml;
  EXPECT_EQ(Show("yaml", Jobs(), Json::array()), "[]\n");
}

TEST(Listing, AnUnknownColumnNamesTheFlagAndListsTheColumns) {
  Result<Format> f = ParseFormat("id,colour", Jobs());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().field(), "-o/--output");
  EXPECT_NE(f.status().message().find("unknown output 'colour'"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("id, name, user, queue, class, state"), std::string::npos)
      << f.status().message();
  Result<Format> custom = ParseFormat("custom-columns=ID", Jobs());
  ASSERT_FALSE(custom.ok());
  EXPECT_NE(custom.status().message().find("expected HEADER:.json.path, got 'ID'"),
            std::string::npos);
}

TEST(Listing, QueuesShowUsageAndWideTheQuotaInTheFilesUnits) {
  const Json queues = Json::parse(R"([{"name": "training", "parent": "org", "priority": 0,
    "weight": 3, "jobs": {"pending": 2, "running": 1},
    "quota": {"H800": {"nominal_milli": 48000, "borrowing_limit_milli": 8000},
              "gpu": {"max_milli": 500}},
    "resources": [{"resource": "H800", "usage_milli": 16000, "nominal_milli": 48000,
                   "max_milli": null}]}])");
  EXPECT_EQ(Show("", QueuesKind(), queues),
            "QUEUE     PARENT  PRIO  WEIGHT  PENDING  RUNNING  HELD  GPUS USED / GUARANTEED / MAX\n"
            "training  org        0       3        2        1     0  H800 16/48/-\n");
  EXPECT_EQ(Show("queue,quota", QueuesKind(), queues),
            "QUEUE     QUOTA\n"
            "training  H800 {nominal: 48, borrowing_limit: 8}; gpu {max: 0.5}\n");
}

TEST(Listing, NodesSayWhenTheirAgentIsNotReady) {
  const Json nodes = Json::parse(R"([{"name": "h800-0", "state": "schedulable",
    "agent": {"state": "lost"}, "gpus": [{"type": "H800"}], "gpu_free_milli": 7500,
    "gpu_milli": 8000, "cpu_free_milli": 190000, "cpu_milli": 192000,
    "memory_free_mib": 1048576, "memory_mib": 2097152, "jobs": [3, 4]}])");
  EXPECT_EQ(Show("node,state,gpus,jobs", NodesKind(), nodes),
            "NODE    STATE                     GPUS FREE  JOBS\n"
            "h800-0  schedulable (agent lost)      7.5/8  3,4\n");
}

TEST(Listing, CommaListsLeaveEmptyValuesOut) {
  EXPECT_EQ(CommaList("pending,running"), (std::vector<std::string>{"pending", "running"}));
  EXPECT_EQ(CommaList("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(CommaList("").empty());
}

// ---- flags.h ----

TEST(FlagOf, NamesTheFlagOfTheCommandThatSetsTheField) {
  EXPECT_EQ(FlagOf("submit", "groups[0].gpu_milli"), "-g/--gpus");
  EXPECT_EQ(FlagOf("submit", "priority_class"), "-p/--priority-class");
  EXPECT_EQ(FlagOf("submit", "env.FOO"), "-e/--env");
  EXPECT_EQ(FlagOf("jobs", "state"), "-s/--state");
  EXPECT_EQ(FlagOf("set-quota", "quota.H800.nominal"), "--nominal");
  EXPECT_EQ(FlagOf("set-quota", "quota.gpu.borrowing_limit"), "--borrowing-limit");
  EXPECT_EQ(FlagOf("set-priority", "priority_class"), "-p/--priority-class");
  // A field no flag of that command sets, or another command's.
  EXPECT_EQ(FlagOf("jobs", "priority_class"), "");
  EXPECT_EQ(FlagOf("submit", "names"), "");
  EXPECT_EQ(FlagOf("set-quota", "quota.H800.nominal_milli"), "");
}

TEST(FlagOf, TheMessageNamesTheFlagInsteadOfTheField) {
  EXPECT_EQ(NameTheFlag("jobs", "state", "state: unknown job state 'done'"),
            "-s/--state: unknown job state 'done'");
  EXPECT_EQ(NameTheFlag("set-quota", "quota.H800.max",
                        "quota.H800.max: invalid GPU count 'x' (expected e.g. 2, 0.5 or 500m)"),
            "--max: invalid GPU count 'x' (expected e.g. 2, 0.5 or 500m)");
  EXPECT_EQ(NameTheFlag("jobs", "cursor", "cursor: bad"), "cursor: bad");
}

}  // namespace
}  // namespace arbiter::cli::listing
