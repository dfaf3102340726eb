// End-to-end test helper: a real `arbiter agent` process for a server of server_process.h, with
// declared devices, its own work directory and a log server on a free loopback port.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "server/server_process.h"

namespace arbiter::testing {

class AgentProcess {
 public:
  // `address`: the agent's own (its log server listens there); `wrapper`: a command the agent
  // runs under (e.g. `ip netns exec NS`).
  AgentProcess(const std::string& server, const std::string& token, const std::string& name,
               const std::string& devices, const std::string& work_dir,
               const std::string& address = "127.0.0.1", std::vector<std::string> wrapper = {}) {
    const std::string out = work_dir + ".out";
    pid_ = ::fork();
    if (pid_ == 0) {
      // The agent dies with the test process, however that ends (its tasks are its own
      // concern: they outlive agents by design).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      std::vector<std::string> args = std::move(wrapper);
      for (const std::string& a :
           {std::string(ARBITER_BINARY), std::string("agent"), std::string("--server"), server,
            std::string("--token"), token, std::string("--name"), name, std::string("--devices"),
            devices, std::string("--work-dir"), work_dir, std::string("--listen"), address + ":0",
            std::string("--address"), address}) {
        args.push_back(a);
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~AgentProcess() { Stop(SIGTERM); }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // Stops the agent with `sig` and waits for it (its tasks keep running either way).
  void Stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    if (!WaitFor([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; })) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace arbiter::testing
