// End-to-end test helpers: a real `arbiter server` process on a free loopback port, an HTTP
// client for its API, and the `arbiter` command run against it. Waits poll with generous
// deadlines (the tests run on loaded 2-core machines); nothing asserts on elapsed time.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace arbiter::testing {

using Json = nlohmann::json;

inline constexpr auto kDeadline = std::chrono::seconds(60);

// A fresh directory under the system's temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("arbiter-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = (path_ / name).string();
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// Polls `done` until it holds or the deadline passes; returns whether it held.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::seconds deadline = kDeadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

class ServerProcess {
 public:
  // Starts `arbiter server --config CONFIG --data DATA --listen 127.0.0.1:0 EXTRA...` and waits
  // until it answers /readyz (or only /healthz, for a server that may stand by: `wait_ready`
  // false).
  ServerProcess(const std::string& config, const std::string& data,
                std::vector<std::string> extra = {"--virtual-nodes"},
                const std::string& listen = "127.0.0.1:0", bool wait_ready = true) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      // The server dies with the test process, however that ends (a failed assertion, a
      // timeout's kill): no server is left running on the machine.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      // --dev: the tests' configurations write their tokens in the file.
      // --check-invariants: every cycle's plan is checked (CheckPlan); a violation stops the
      // server, which fails the test.
      std::vector<std::string> args = {
          ARBITER_BINARY, "server",   "--config", config,  "--data",
          data,           "--listen", listen,     "--dev", "--check-invariants"};
      for (std::string& e : extra) args.push_back(std::move(e));
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(ARBITER_BINARY, argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    // The first line names the port.
    std::string line;
    const auto end = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c;
      if (::read(out_, &c, 1) != 1) break;
      if (c == '\n') {
        const auto at = line.rfind(':');
        if (line.find("listening on") != std::string::npos && at != std::string::npos) {
          port_ = std::stoi(line.substr(at + 1));
        }
        break;
      }
      line += c;
    }
    if (port_ == 0) return;
    ready_ = WaitFor([&] {
      httplib::Client client(listen.substr(0, listen.rfind(':')), port_);
      auto res = client.Get(wait_ready ? "/readyz" : "/healthz");
      return res && res->status == 200;
    });
  }
  ~ServerProcess() { Stop(SIGTERM); }

  // Waits up to `deadline` for the server to exit by itself; returns its exit status, or -1 when
  // it is still running (or was killed by a signal).
  int WaitExit(std::chrono::seconds deadline) {
    if (pid_ <= 0) return -1;
    int status = 0;
    if (!WaitFor([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, deadline)) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  pid_t pid() const { return pid_; }

  bool ready() const { return ready_; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Stops the server with `sig` and waits for it; returns its exit status (-1 if killed).
  int Stop(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    // A server that does not stop is killed (and the test sees -1), not waited for forever.
    const bool exited = WaitFor([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; });
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      status = -1;
    }
    pid_ = -1;
    if (out_ >= 0) ::close(out_);
    out_ = -1;
    return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
  bool ready_ = false;
};

struct Reply {
  int status = 0;  // 0: no answer
  Json body;
};

// One API call with a bearer token (none when empty).
inline Reply CallAt(const std::string& host, int port, const std::string& token,
                    const std::string& method, const std::string& path,
                    const std::string& body = "") {
  httplib::Client client(host, port);
  client.set_read_timeout(std::chrono::seconds(60));
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  httplib::Result res = method == "GET"      ? client.Get(path, headers)
                        : method == "DELETE" ? client.Delete(path, headers)
                        : method == "PUT"    ? client.Put(path, headers, body, "application/json")
                        : method == "PATCH"  ? client.Patch(path, headers, body, "application/json")
                                             : client.Post(path, headers, body, "application/json");
  if (!res) return {};
  return {res->status, Json::parse(res->body, nullptr, false)};
}

inline Reply Call(int port, const std::string& token, const std::string& method,
                  const std::string& path, const std::string& body = "") {
  return CallAt("127.0.0.1", port, token, method, path, body);
}

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs the arbiter command with ARBITER_SERVER and ARBITER_TOKEN set (and no client file), or
// with the client file `client_file` alone when `server` is empty.
inline CommandResult RunCli(const std::string& server, const std::string& token,
                            const std::string& args, const std::string& client_file = "") {
  const std::string env =
      server.empty()
          ? "env -u ARBITER_SERVER -u ARBITER_TOKEN ARBITER_CONFIG=" + client_file
          : "ARBITER_CONFIG=/nonexistent ARBITER_SERVER=" + server + " ARBITER_TOKEN=" + token;
  // A command that hangs fails the test instead of holding it forever.
  const std::string command = env + " timeout 120 " + ARBITER_BINARY + " " + args + " 2>&1";
  CommandResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace arbiter::testing
