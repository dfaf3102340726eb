#include "loadgen/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>  // mkdtemp
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace arbiter::loadgen {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "arbiter-loadgen-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a temporary directory");
  path_ = pattern;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string FileTail(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() <= bytes ? all : all.substr(all.size() - bytes);
}

std::string ServerProcess::Start(const std::string& binary, const std::string& config,
                                 const std::string& data, const std::string& log) {
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return "cannot write " + log;
  std::vector<std::string> args = {binary, "server",   "--config",    config, "--data",
                                   data,   "--listen", "127.0.0.1:0", "--dev"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(out);
    return "fork failed";
  }
  if (pid_ == 0) {
    // The server dies with the load generator, however that ends.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out);
  // The first line names the port; recovery of an empty store takes well under a second, a
  // large configuration a few.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::string marker = "listening on http://127.0.0.1:";
  while (std::chrono::steady_clock::now() < end) {
    const std::string text = FileTail(log, 1 << 16);
    if (const auto at = text.find(marker); at != std::string::npos) {
      const auto eol = text.find('\n', at);
      if (eol != std::string::npos) {
        port_ = std::atoi(text.substr(at + marker.size(), eol - at - marker.size()).c_str());
        if (port_ > 0) return "";
      }
    }
    if (!Alive()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string tail = FileTail(log, 2000);
  Stop();
  return "the server did not start listening; its output:\n" + tail;
}

bool ServerProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_status_ = status;
    pid_ = -1;
    return false;
  }
  return true;
}

void ServerProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end && Alive())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &exit_status_, 0);
    pid_ = -1;
  }
}

ServerProcess::~ServerProcess() { Stop(); }

std::optional<ProcSample> SampleProcess(pid_t pid) {
  ProcSample s;
  {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    if (!status) return std::nullopt;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Threads:", 0) == 0) s.threads = std::atoll(line.c_str() + 8);
      if (line.rfind("VmRSS:", 0) == 0)
        s.rss_mib = static_cast<double>(std::atoll(line.c_str() + 6)) / 1024;
    }
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return std::nullopt;
  // The command name (field 2) may hold spaces: fields are counted after its closing ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  // Fields 3.. follow; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::atof(field.c_str());
  }
  s.cpu_seconds = ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return s;
}

double SelfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace arbiter::loadgen
