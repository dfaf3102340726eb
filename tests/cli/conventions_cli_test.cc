// The arbiter command against a real server: the admin's set-quota (in the cluster file's units)
// and set-priority, refused for a user; -o formats and comma-separated filters; a listing cut
// short says so; errors name the flag typed, not the API's field.
#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";
constexpr const char* kAlice = "alice-token-0001";

constexpr const char* kCluster = R"(
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: main, quota: {G: {nominal: 4, max: 8}}}
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
    - {name: alice, token: alice-token-0001, role: user, queues: [main, other],
       priority_classes: [low]}
  cycle_min_interval: 20ms
  cycle_period: 500ms
)";

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

class ConventionsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.emplace(dir_.Write("cluster.yaml", kCluster), (dir_.path() / "data").string());
    ASSERT_TRUE(server_->ready()) << "the server did not start";
  }
  CommandResult As(const char* token, const std::string& args) {
    return RunCli(server_->address(), token, args);
  }
  Json Quota(const std::string& queue) {
    const Reply r = Call(server_->port(), kAdmin, "GET", "/v1/queues");
    for (const Json& q : r.body["queues"])
      if (q["name"] == queue) return q["quota"];
    return nullptr;
  }
  // Fills both nodes with the admin's job of the non-preemptible class, so that alice's jobs
  // stay pending.
  void Fill() {
    const CommandResult r = As(kAdmin, "submit -q other -p high -n 2 -g 4 -r 10h --sh true");
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_TRUE(WaitFor([&] {
      const Reply jobs = Call(server_->port(), kAdmin, "GET", "/v1/jobs?state=running");
      return jobs.body.contains("jobs") && jobs.body["jobs"].size() == 1;
    }));
  }
  // One of alice's jobs, pending behind the admin's; its id.
  std::string SubmitPending(const std::string& name) {
    const CommandResult r =
        As(kAlice, "submit -q other -p low -g 1 -r 1h --name " + name + " --sh true");
    EXPECT_EQ(r.status, 0) << r.output;
    const std::string after = r.output.substr(r.output.find("job ") + 4);
    return after.substr(0, after.find(' '));
  }

  TempDir dir_;
  std::optional<ServerProcess> server_;
};

TEST_F(ConventionsCli, AdminSetsOneResourceOfAQuotaInTheFilesUnits) {
  const CommandResult set =
      As(kAdmin, "set-quota main gpu --nominal 0.5 --max 500m --borrowing-limit 2");
  ASSERT_EQ(set.status, 0) << set.output;
  EXPECT_TRUE(
      HasSubstr(set.output,
                "queue main: quota G {nominal: 4, max: 8}; gpu {nominal: 0.5, borrowing_limit: "
                "2, max: 0.5}"))
      << set.output;
  // G's limits were kept; gpu's are the ones given.
  const Json quota = Quota("main");
  EXPECT_EQ(quota["G"]["nominal_milli"], 4000) << quota.dump();
  EXPECT_EQ(quota["gpu"]["nominal_milli"], 500) << quota.dump();
  EXPECT_EQ(quota["gpu"]["max_milli"], 500) << quota.dump();

  const CommandResult removed = As(kAdmin, "set-quota main gpu --remove");
  ASSERT_EQ(removed.status, 0) << removed.output;
  EXPECT_FALSE(Quota("main").contains("gpu"));
  // The limits not given keep their values: a max alone never resets the nominal quota (as
  // Slurm's GrpTRES changes that limit alone).
  const CommandResult changed = As(kAdmin, "set-quota main G --nominal 2");
  ASSERT_EQ(changed.status, 0) << changed.output;
  EXPECT_EQ(Quota("main")["G"], (Json{{"nominal_milli", 2000}, {"max_milli", 8000}}));
  const CommandResult capped = As(kAdmin, "set-quota main G --max 6");
  ASSERT_EQ(capped.status, 0) << capped.output;
  EXPECT_EQ(Quota("main")["G"], (Json{{"nominal_milli", 2000}, {"max_milli", 6000}}));
  const CommandResult reset = As(kAdmin, "set-quota main --reset");
  ASSERT_EQ(reset.status, 0) << reset.output;
  EXPECT_TRUE(HasSubstr(reset.output,
                        "queue main: quota G {nominal: 4, max: 8} (the "
                        "configuration's)"))
      << reset.output;
}

TEST_F(ConventionsCli, SetQuotaErrorsNameTheFlag) {
  const CommandResult bad = As(kAdmin, "set-quota main G --nominal 4Gi");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(HasSubstr(bad.output, "error: --nominal: invalid GPU count '4Gi'")) << bad.output;
  const CommandResult negative = As(kAdmin, "set-quota main G --max=-1");
  EXPECT_EQ(negative.status, 1);
  EXPECT_TRUE(HasSubstr(negative.output, "error: --max: must not be negative, got -1"))
      << negative.output;
  const CommandResult nothing = As(kAdmin, "set-quota main G");
  EXPECT_EQ(nothing.status, 2);
  EXPECT_TRUE(HasSubstr(nothing.output, "give at least one of --nominal")) << nothing.output;
  const CommandResult queue = As(kAdmin, "set-quota nosuch G --nominal 1");
  EXPECT_EQ(queue.status, 2);
  EXPECT_TRUE(HasSubstr(queue.output, "QUEUE: no queue 'nosuch' (queues: main, other)"))
      << queue.output;
}

TEST_F(ConventionsCli, AUserMayNotSetAQuota) {
  const CommandResult refused = As(kAlice, "set-quota main G --nominal 8");
  EXPECT_EQ(refused.status, 1);
  EXPECT_TRUE(HasSubstr(refused.output, "alice may not change quotas (admin) (HTTP 403)"))
      << refused.output;
  EXPECT_EQ(Quota("main")["G"]["nominal_milli"], 4000);
}

// The quota API itself takes the file's units, and its errors name the field as given.
TEST_F(ConventionsCli, TheQuotaApiTakesTheFilesUnits) {
  const Reply ok = Call(server_->port(), kAdmin, "PUT", "/v1/queues/main/quota",
                        R"({"G": {"nominal": 2, "max": "2.5", "borrowing_limit": "500m"},
                            "gpu": {"max_milli": 9000}})");
  ASSERT_EQ(ok.status, 200) << ok.body.dump();
  EXPECT_EQ(ok.body["quota"]["G"],
            (Json{{"nominal_milli", 2000}, {"max_milli", 2500}, {"borrowing_limit_milli", 500}}));
  EXPECT_EQ(ok.body["quota"]["gpu"]["max_milli"], 9000);
  const Reply bad = Call(server_->port(), kAdmin, "PUT", "/v1/queues/main/quota",
                         R"({"G": {"nominal": "lots"}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "quota.G.nominal") << bad.body.dump();
  const Reply both = Call(server_->port(), kAdmin, "PUT", "/v1/queues/main/quota",
                          R"({"G": {"nominal": 1, "nominal_milli": 1000}})");
  EXPECT_EQ(both.status, 400);
  EXPECT_TRUE(HasSubstr(both.body.dump(), "give nominal or nominal_milli, not both"));
  const Reply kind =
      Call(server_->port(), kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"max": true}})");
  EXPECT_EQ(kind.status, 400);
  EXPECT_TRUE(HasSubstr(kind.body.dump(), "expected GPUs as a number or a string"));
  const Reply unknown =
      Call(server_->port(), kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"maximum": 1}})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body["error"]["field"], "quota.G.maximum") << unknown.body.dump();
}

TEST_F(ConventionsCli, SetPriorityAsAdminAndRefusedForAUsersForbiddenClass) {
  Fill();
  const std::string id = SubmitPending("waits");
  const CommandResult user = As(kAlice, "set-priority " + id + " -p high");
  EXPECT_EQ(user.status, 1);
  EXPECT_TRUE(HasSubstr(user.output, "job " + id +
                                         ": -p/--priority-class: alice may not give a "
                                         "job the priority class 'high'"))
      << user.output;
  const CommandResult admin = As(kAdmin, "set-priority " + id + " -p high");
  ASSERT_EQ(admin.status, 0) << admin.output;
  EXPECT_TRUE(HasSubstr(admin.output, "job " + id + ": priority class high")) << admin.output;
  const Reply job = Call(server_->port(), kAdmin, "GET", "/v1/jobs/" + id);
  EXPECT_EQ(job.body["status"]["priority_class"], "high") << job.body.dump();
  const CommandResult unknown = As(kAdmin, "set-priority " + id + " -p P9");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_TRUE(HasSubstr(unknown.output, "-p/--priority-class: unknown priority class 'P9'"))
      << unknown.output;
  const CommandResult bad_id = As(kAdmin, "set-priority " + id + " x -p low");
  EXPECT_EQ(bad_id.status, 2);
  EXPECT_TRUE(HasSubstr(bad_id.output, "no priority was changed")) << bad_id.output;
}

TEST_F(ConventionsCli, ListingsOutputsFiltersAndTruncation) {
  Fill();
  const std::string a = SubmitPending("first");
  const std::string b = SubmitPending("second");
  const std::string c = SubmitPending("third");
  ASSERT_EQ(As(kAlice, "hold " + a + " " + b).status, 0);

  const CommandResult names = As(kAlice, "jobs -o name -u alice");
  ASSERT_EQ(names.status, 0) << names.output;
  EXPECT_EQ(names.output, a + "\n" + b + "\n" + c + "\n");

  const CommandResult columns = As(kAlice, "jobs -o name,state -s held");
  ASSERT_EQ(columns.status, 0) << columns.output;
  EXPECT_EQ(columns.output,
            "NAME    STATE\n"
            "first   held\n"
            "second  held\n");
  const CommandResult two_states = As(kAlice, "jobs -o name -s held,pending -u alice");
  EXPECT_EQ(two_states.output, a + "\n" + b + "\n" + c + "\n");

  const CommandResult yaml = As(kAlice, "jobs -o yaml -q other,main -u alice --limit 1");
  ASSERT_EQ(yaml.status, 0) << yaml.output;
  EXPECT_TRUE(HasSubstr(yaml.output, "\n  id: " + a + "\n")) << yaml.output;
  EXPECT_TRUE(HasSubstr(yaml.output,
                        "note: listed the first 1 jobs only, more match: give "
                        "--limit"))
      << yaml.output;
  const CommandResult all = As(kAlice, "jobs --limit 4");
  EXPECT_FALSE(HasSubstr(all.output, "note:")) << all.output;

  const CommandResult json = As(kAlice, "queues -o json");
  ASSERT_EQ(json.status, 0) << json.output;
  const Json queues = Json::parse(json.output, nullptr, false);
  ASSERT_TRUE(queues.is_array()) << json.output;
  EXPECT_EQ(queues[0]["name"], "main");
  const CommandResult nodes = As(kAlice, "nodes -o wide");
  ASSERT_EQ(nodes.status, 0) << nodes.output;
  EXPECT_TRUE(HasSubstr(nodes.output, "REASON")) << nodes.output;
}

TEST_F(ConventionsCli, ErrorsNameTheFlagTyped) {
  const CommandResult state = As(kAlice, "jobs -s pending,done");
  EXPECT_EQ(state.status, 2);
  EXPECT_TRUE(HasSubstr(state.output, "error: -s/--state: unknown job state 'done'"))
      << state.output;
  const CommandResult output = As(kAlice, "jobs -o colour");
  EXPECT_EQ(output.status, 2);
  EXPECT_TRUE(HasSubstr(output.output, "error: -o/--output: unknown output 'colour'"))
      << output.output;
  // The server's refusal of a flag's value names the flag, not the job spec's field.
  const CommandResult queue = As(kAlice, "submit -q nosuch -p low -g 1 --sh true");
  EXPECT_EQ(queue.status, 1);
  EXPECT_TRUE(HasSubstr(queue.output, "-q/--queue: ")) << queue.output;
  const CommandResult gpus = As(kAlice, "submit -q main -p low -g 1.5 --sh true");
  EXPECT_EQ(gpus.status, 2);
  EXPECT_TRUE(HasSubstr(gpus.output, "error: -g/--gpus: ")) << gpus.output;
}

// --watch prints the listing again when something happens, until it is stopped.
TEST_F(ConventionsCli, WatchPrintsAgainOnChange) {
  const std::string out = (dir_.path() / "watch.txt").string();
  const std::string command = "ARBITER_CONFIG=/nonexistent ARBITER_SERVER=" + server_->address() +
                              " ARBITER_TOKEN=" + kAlice + " timeout 60 " + ARBITER_BINARY +
                              " jobs -w -o id -u alice > " + out + " 2>&1 & echo $!";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char pid_text[32] = {};
  ASSERT_NE(std::fgets(pid_text, sizeof pid_text, pipe), nullptr);
  ::pclose(pipe);
  const pid_t pid = std::stoi(pid_text);
  auto text = [&] {
    std::ifstream in(out);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // The first listing (a header alone), then, once a job is submitted, a second with the job.
  ASSERT_TRUE(WaitFor([&] { return text() == "ID\n"; })) << text();
  const std::string id = SubmitPending("watched");
  EXPECT_TRUE(WaitFor([&] {
    const std::string t = text();
    const std::size_t second = t.find("\nID\n");
    return second != std::string::npos && t.find(id + "\n", second) != std::string::npos;
  })) << text();
  ::kill(pid, SIGINT);
}

}  // namespace
}  // namespace arbiter::testing
