// TLS end to end: a server with a certificate of a test CA (made with the openssl command), the
// arbiter command and an agent verifying it, the agent's log server over https verified by the
// server; and the start-up refusals: plain HTTP off loopback, a port in use, tokens written in
// the configuration outside development mode.
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <filesystem>
#include <fstream>

#include "server/server.h"
#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "tls-admin-token-0001";
constexpr const char* kJoin = "tls-join-token-00001";

std::string Cluster() {
  return std::string(R"(
priority_classes:
  - {name: P1, value: 10}
queues:
  - {name: main}
nodes:
  - {name: n-0, gpus: {model: G, count: 1, memory: 40Gi}, cpu: 1, memory: 1Gi}
server:
  tokens:
    - {name: admin, token: )") +
         kAdmin + R"(, role: admin}
    - {name: join, token: )" +
         kJoin + R"(, role: agent, nodes: [n-0]}
  cycle_min_interval: 20ms
  cycle_period: 200ms
  agent_sync_wait: 200ms
)";
}

// A CA and certificates it signs for 127.0.0.1: server.crt/key and node.crt/key.
bool MakeCertificates(const std::filesystem::path& dir) {
  const std::string d = dir.string();
  std::string command = "cd '" + d +
                        "' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca "
                        "-keyout ca.key -out ca.crt && printf 'subjectAltName=IP:127.0.0.1\\n' > "
                        "san.txt";
  for (const char* name : {"server", "node"}) {
    command += std::string(" && openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout ") +
               name + ".key -out " + name + ".csr && openssl x509 -req -in " + name +
               ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.txt -out " +
               name + ".crt";
  }
  return std::system(("(" + command + ") >/dev/null 2>&1").c_str()) == 0;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeCertificates(dir_.path())) << "openssl could not make certificates";
    config_ = dir_.Write("cluster.yaml", Cluster());
  }

  server::ServerArgs Args() const {
    server::ServerArgs args;
    args.config = config_;
    args.data = (dir_.path() / "data").string();
    args.listen = "127.0.0.1:0";
    args.dev = true;
    args.threads = 8;
    args.check_invariants = true;  // every cycle checked (CheckPlan)
    return args;
  }
  std::string File(const char* name) const { return (dir_.path() / name).string(); }

  TempDir dir_;
  std::string config_;
};

// An agent process over https: it verifies the server with ca.crt and serves its logs with
// node.crt (which the server verifies with --agent-ca).
pid_t StartAgent(const std::string& server, const std::filesystem::path& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string out = (dir / "agent.out").string();
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::setenv("ARBITER_AGENT_TOKEN", kJoin, 1);
    std::vector<std::string> args = {ARBITER_BINARY, "agent",
                                     "--server",     server,
                                     "--name",       "n-0",
                                     "--devices",    "1xG-40G",
                                     "--work-dir",   (dir / "agent").string(),
                                     "--address",    "127.0.0.1",
                                     "--ca-file",    (dir / "ca.crt").string(),
                                     "--tls-cert",   (dir / "node.crt").string(),
                                     "--tls-key",    (dir / "node.key").string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(ARBITER_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

TEST_F(TlsTest, ClientsAndAgentsVerifyTheServerAndTheServerVerifiesTheLogServer) {
  server::ServerArgs args = Args();
  args.tls_cert = File("server.crt");
  args.tls_key = File("server.key");
  args.agent_ca = File("ca.crt");
  Result<std::unique_ptr<server::Server>> server = server::Server::Start(args);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const std::string url = "https://127.0.0.1:" + std::to_string((*server)->port());

  httplib::Client verified(url);
  verified.set_ca_cert_path(File("ca.crt"));
  verified.enable_server_certificate_verification(true);
  const httplib::Headers admin{{"Authorization", std::string("Bearer ") + kAdmin}};
  httplib::Result nodes = verified.Get("/v1/nodes", admin);
  ASSERT_TRUE(nodes) << httplib::to_string(nodes.error());
  EXPECT_EQ(nodes->status, 200);
  // Without the CA the certificate is not trusted; plain HTTP gets no answer from a TLS port.
  httplib::Client unverified(url);
  unverified.enable_server_certificate_verification(true);
  EXPECT_FALSE(unverified.Get("/healthz"));
  httplib::Client plain("127.0.0.1", (*server)->port());
  httplib::Result spoken = plain.Get("/healthz");
  EXPECT_TRUE(!spoken || spoken->status != 200);

  // The command, with the CA and a token from a file.
  const std::string token_file = dir_.Write("admin.token", std::string(kAdmin) + "\n");
  CommandResult listed =
      RunCli(url, "", "nodes --ca-file " + File("ca.crt") + " --token-file " + token_file);
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_NE(listed.output.find("n-0"), std::string::npos) << listed.output;
  CommandResult refused = RunCli(url, kAdmin, "nodes");
  EXPECT_NE(refused.status, 0) << refused.output;

  // An agent over https, its log server over https: a task's log comes back through both.
  const pid_t agent = StartAgent(url, dir_.path());
  auto agent_output = [&] {
    std::ifstream in(dir_.path() / "agent.out");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  ASSERT_TRUE(WaitFor([&] {
    httplib::Result r = verified.Get("/v1/nodes", admin);
    return r && r->body.find("\"ready\"") != std::string::npos;
  })) << verified.Get("/v1/nodes", admin)->body
      << "\n"
      << agent_output();
  httplib::Result submitted = verified.Post(
      "/v1/jobs", admin,
      R"({"name": "hello", "queue": "main", "priority_class": "P1", "command": "echo hello-over-tls",
          "groups": [{"tasks": 1, "gpu_milli": 1000}]})",
      "application/json");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 201) << submitted->body;
  const std::string id = std::to_string(Json::parse(submitted->body)["id"].get<std::uint64_t>());
  EXPECT_TRUE(WaitFor([&] {
    httplib::Result log = verified.Get("/v1/jobs/" + id + "/logs", admin);
    return log && log->status == 200 && log->body.find("hello-over-tls") != std::string::npos;
  }));
  // The log server takes only the node's log token: not the join token, not an admin's.
  // The agent says where its log server is when it starts.
  std::string log_url;
  {
    std::ifstream in(dir_.path() / "agent.out");
    for (std::string line; std::getline(in, line);) {
      if (const auto at = line.find("logs on "); at != std::string::npos)
        log_url = line.substr(at + 8);
    }
  }
  EXPECT_EQ(log_url.rfind("https://127.0.0.1:", 0), 0u) << log_url;
  if (!log_url.empty()) {
    httplib::Client direct(log_url);
    direct.set_ca_cert_path(File("ca.crt"));
    for (const char* token : {kJoin, kAdmin}) {
      httplib::Result r =
          direct.Get("/logs/" + id + "/0", {{"Authorization", std::string("Bearer ") + token}});
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 401);
    }
  }
  ::kill(agent, SIGTERM);
  ::waitpid(agent, nullptr, 0);
}

TEST_F(TlsTest, PlainHttpOffLoopbackPortsInUseAndTokensInTheFileAreRefused) {
  server::ServerArgs open = Args();
  open.listen = "0.0.0.0:0";
  Result<std::unique_ptr<server::Server>> refused = server::Server::Start(open);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "--listen");
  EXPECT_NE(refused.status().message().find("--insecure-http"), std::string::npos);
  open.insecure_http = true;
  {
    Result<std::unique_ptr<server::Server>> insecure = server::Server::Start(open);
    EXPECT_TRUE(insecure.ok()) << insecure.status().message();
  }

  Result<std::unique_ptr<server::Server>> first = server::Server::Start(Args());
  ASSERT_TRUE(first.ok()) << first.status().message();
  server::ServerArgs second = Args();
  second.listen = "127.0.0.1:" + std::to_string((*first)->port());
  second.data = (dir_.path() / "data-2").string();
  Result<std::unique_ptr<server::Server>> twin = server::Server::Start(second);
  ASSERT_FALSE(twin.ok());
  EXPECT_EQ(twin.status().field(), "--listen");
  EXPECT_NE(twin.status().message().find("in use"), std::string::npos) << twin.status().message();
  EXPECT_EQ(Call((*first)->port(), "", "GET", "/healthz").status, 200);

  server::ServerArgs production = Args();
  production.dev = false;
  production.data = (dir_.path() / "data-3").string();
  Result<std::unique_ptr<server::Server>> dev_tokens = server::Server::Start(production);
  ASSERT_FALSE(dev_tokens.ok());
  EXPECT_NE(dev_tokens.status().message().find("server.tokens[0] (admin): a token written in the "
                                               "configuration is for development only"),
            std::string::npos)
      << dev_tokens.status().message();
}

}  // namespace
}  // namespace arbiter::testing
