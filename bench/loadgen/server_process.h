// The server under load: an `arbiter server` child process on a loopback port (or the pid of one
// already running), and what /proc says of it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace arbiter::loadgen {

// A fresh temporary directory (TMPDIR or /tmp), removed with everything in it unless kept.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// `BIN server --config CONFIG --data DATA --listen 127.0.0.1:0 --dev`, its standard output and
// error in LOG. Start returns once the process printed `arbiter server: listening on
// http://127.0.0.1:PORT` (the port), or fails with the log's tail; the destructor stops it
// (SIGTERM, SIGKILL 10 s later) and reaps it.
class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // An empty string on success, else what went wrong.
  std::string Start(const std::string& binary, const std::string& config, const std::string& data,
                    const std::string& log);
  void Stop();
  // Whether the process is still running (reaps it when it is not).
  bool Alive();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = 0;
};

// What /proc/PID/status and /proc/PID/stat say of a process.
struct ProcSample {
  std::int64_t threads = 0;
  double rss_mib = 0;
  double cpu_seconds = 0;  // user + system, all threads
};
std::optional<ProcSample> SampleProcess(pid_t pid);

// The processor seconds (user + system) this process has used.
double SelfCpuSeconds();

// The last `bytes` of a file (a log), or "".
std::string FileTail(const std::string& path, std::size_t bytes);

}  // namespace arbiter::loadgen
