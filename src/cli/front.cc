// The arbiter command's front. The commands that talk to the server over plain HTTP (submit, jobs,
// job, cancel, hold, release, set-priority, logs, queues, set-quota, nodes, cordon, uncordon,
// drain, snapshot, history) run here, in
// a program that loads no shared library but the C library and initialises only what the command
// uses: its start costs a fraction of a millisecond, where the whole program (`arbiter-full`: the
// server, the agent, the simulator; OpenSSL, cpp-httplib, SQLite, yaml-cpp, fmt, libstdc++)
// spent several in the dynamic loader and the libraries' initialisers. Every other command, and a
// client command for an https server, runs the whole program, installed next to this one, with
// the same arguments (as git runs git-remote-https).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/http.h"

namespace arbiter::cli {

// The front runs the whole program when any server given is https (NeedsWholeProgram); only a
// plain http server's redirect to an https leader comes here, which the front cannot follow: the
// address counts as failed (list the https servers in --server to reach them).
HttpAnswer SendHttps(const std::string& /*server*/, const std::string& /*ca_file*/,
                     const HttpRequest& /*request*/) {
  HttpAnswer answer;
  answer.error = "https from a plain http server's redirect: give the https servers in --server";
  return answer;
}

namespace {

// Replaces this process with the whole program, `arbiter-full` in this program's folder, with
// the same arguments. Returns only when it cannot.
int RunWholeProgram(char** argv) {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) {
    std::fprintf(stderr, "error: cannot find the arbiter program: %s\n", std::strerror(errno));
    return 2;
  }
  path.resize(static_cast<std::size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "arbiter-full";
  ::execv(path.c_str(), argv);
  std::fprintf(stderr, "error: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return 2;
}

}  // namespace
}  // namespace arbiter::cli

int main(int argc, char** argv) {
  if (argc >= 2 && arbiter::cli::IsClientCommand(argv[1])) {
    // The same command line as the whole program's (main.cc), with only this subcommand.
    CLI::App app{"arbiter: a GPU-cluster job scheduler"};
    app.require_subcommand(1);
    arbiter::cli::ClientCommands client = arbiter::cli::AddClientCommands(app, nullptr, argv[1]);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    if (!arbiter::cli::NeedsWholeProgram(client)) {
      if (std::optional<int> status = arbiter::cli::RunClientCommand(client)) return *status;
    }
  }
  return arbiter::cli::RunWholeProgram(argv);
}
