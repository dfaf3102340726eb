#include "agent/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace arbiter::agent {
namespace {

namespace fs = std::filesystem;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "arbiter-supervisor-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = fs::canonical(pattern);
    state_ = (root_ / "state").string();
    Reopen();
  }
  void TearDown() override {
    // Nothing a test started may outlive it.
    if (sup_) {
      for (const TaskStatus& t : sup_->Poll()) {
        if (t.running) (void)sup_->Signal(t.key, SIGKILL);
      }
    }
    sup_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void Reopen() {
    sup_.reset();
    Result<std::unique_ptr<Supervisor>> opened = Supervisor::Open(state_);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    sup_ = std::move(opened).value();
  }

  TaskLaunch Shell(const std::string& key, const std::string& script) {
    TaskLaunch launch;
    launch.key = key;
    launch.argv = {"sh", "-c", script};
    launch.log_path = (root_ / "logs" / (key + ".log")).string();
    return launch;
  }

  std::optional<TaskStatus> Find(const std::string& key) {
    for (const TaskStatus& t : sup_->Poll()) {
      if (t.key == key) return t;
    }
    return std::nullopt;
  }

  // Polls until the task has ended (or 5 s have passed: a failure).
  TaskStatus WaitEnd(const std::string& key) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      std::optional<TaskStatus> t = Find(key);
      if (!t) {
        ADD_FAILURE() << "no task " << key;
        return {};
      }
      if (!t->running) return *t;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "task " << key << " did not end";
    return {};
  }

  static bool WaitForFile(const fs::path& path) {
    for (int i = 0; i < 500 && !fs::exists(path); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return fs::exists(path);
  }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path root_;
  std::string state_;
  std::unique_ptr<Supervisor> sup_;
};

TEST_F(SupervisorTest, ExitCodeAndLog) {
  TaskLaunch launch = Shell("1.0.1", "echo out; echo err >&2; exit 3");
  ASSERT_TRUE(sup_->Start(launch).ok());
  TaskStatus t = WaitEnd("1.0.1");
  EXPECT_FALSE(t.running);
  EXPECT_EQ(t.exit_code, 3);
  EXPECT_EQ(t.signal, 0);
  EXPECT_FALSE(t.lost);
  EXPECT_GT(t.pid, 0);
  EXPECT_GT(t.started_ms, 0);
  EXPECT_GE(t.ended_ms, t.started_ms);
  EXPECT_EQ(Read(launch.log_path), "out\nerr\n");

  // A second run appends to the same log.
  launch.key = "1.0.2";
  ASSERT_TRUE(sup_->Start(launch).ok());
  EXPECT_EQ(WaitEnd("1.0.2").exit_code, 3);
  EXPECT_EQ(Read(launch.log_path), "out\nerr\nout\nerr\n");

  ASSERT_TRUE(sup_->Forget("1.0.1").ok());
  EXPECT_FALSE(fs::exists(fs::path(state_) / "1.0.1"));
  EXPECT_FALSE(Find("1.0.1"));
  EXPECT_TRUE(Find("1.0.2"));
  EXPECT_FALSE(sup_->Forget("1.0.1").ok());
}

TEST_F(SupervisorTest, EnvAndCwd) {
  fs::create_directories(root_ / "work");
  TaskLaunch launch = Shell("env", "echo \"$ARBITER_TEST_VALUE\"; pwd -P; echo \"${HOME:+home}\"");
  launch.env = {{"ARBITER_TEST_VALUE", "a value with spaces"}, {"HOME", "/nowhere"}};
  launch.cwd = (root_ / "work").string();
  ASSERT_TRUE(sup_->Start(launch).ok());
  EXPECT_EQ(WaitEnd("env").exit_code, 0);
  EXPECT_EQ(Read(launch.log_path), "a value with spaces\n" + launch.cwd + "\nhome\n");

  // No cwd: the task's record directory; no log path: "log" in it.
  TaskLaunch defaults;
  defaults.key = "defaults";
  defaults.argv = {"pwd", "-P"};
  ASSERT_TRUE(sup_->Start(defaults).ok());
  EXPECT_EQ(WaitEnd("defaults").exit_code, 0);
  fs::path record = fs::path(state_) / "defaults";
  EXPECT_EQ(Read(record / "log"), record.string() + "\n");
}

TEST_F(SupervisorTest, SignalReachesTheWholeProcessGroup) {
  // The task's child traps SIGTERM and notes it; the task waits for the child, then exits 5.
  // Both traps are set before the child says it is ready.
  fs::path noted = root_ / "noted", ready = root_ / "ready";
  std::string child = "trap 'echo child-got-TERM > " + noted.string() + "; exit 0' TERM; touch " +
                      ready.string() + "; while :; do sleep 0.02; done";
  TaskLaunch launch = Shell("group", "trap 'wait; exit 5' TERM; sh -c \"" + child + "\" & wait");
  ASSERT_TRUE(sup_->Start(launch).ok());
  ASSERT_TRUE(WaitForFile(ready));
  ASSERT_TRUE(sup_->Signal("group", SIGTERM).ok());
  TaskStatus t = WaitEnd("group");
  EXPECT_EQ(t.exit_code, 5);
  EXPECT_EQ(Read(noted), "child-got-TERM\n");
}

TEST_F(SupervisorTest, KilledBySignal) {
  TaskLaunch launch = Shell("killed", "exec sleep 30");
  ASSERT_TRUE(sup_->Start(launch).ok());
  std::optional<TaskStatus> running = Find("killed");
  ASSERT_TRUE(running);
  EXPECT_TRUE(running->running);
  EXPECT_FALSE(sup_->Forget("killed").ok());  // still running
  ASSERT_TRUE(sup_->Signal("killed", SIGKILL).ok());
  TaskStatus t = WaitEnd("killed");
  EXPECT_EQ(t.signal, SIGKILL);
  EXPECT_EQ(t.exit_code, -1);
  EXPECT_TRUE(sup_->Signal("killed", SIGTERM).ok());  // ended: a no-op
  EXPECT_FALSE(sup_->Signal("no-such-task", SIGTERM).ok());
}

TEST_F(SupervisorTest, TrappedSignalEndsTheTaskCleanly) {
  fs::path noted = root_ / "usr1", ready = root_ / "ready";
  TaskLaunch launch =
      Shell("usr1", "trap 'echo got-USR1 > " + noted.string() + "; exit 0' USR1; touch " +
                        ready.string() + "; while :; do sleep 0.02; done");
  ASSERT_TRUE(sup_->Start(launch).ok());
  ASSERT_TRUE(WaitForFile(ready));
  ASSERT_TRUE(sup_->Signal("usr1", SIGUSR1).ok());
  TaskStatus t = WaitEnd("usr1");
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_EQ(t.signal, 0);
  EXPECT_EQ(Read(noted), "got-USR1\n");
}

TEST_F(SupervisorTest, StartFailuresLeaveNoRecord) {
  TaskLaunch missing;
  missing.key = "missing";
  missing.argv = {"arbiter-no-such-program"};
  Status st = sup_->Start(missing);
  EXPECT_EQ(st.message(), "argv[0]: \"arbiter-no-such-program\": not found in PATH");

  missing.argv = {(root_ / "no-such-program").string()};
  st = sup_->Start(missing);
  EXPECT_NE(st.message().find("argv[0]: "), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st.message();

  missing.argv = {"true"};
  missing.cwd = (root_ / "no-such-dir").string();
  st = sup_->Start(missing);
  EXPECT_EQ(st.message(), "cwd: \"" + missing.cwd + "\": No such file or directory");

  EXPECT_TRUE(sup_->Poll().empty());
  EXPECT_FALSE(fs::exists(fs::path(state_) / "missing"));

  TaskLaunch bad = Shell("a/b", "true");
  EXPECT_NE(sup_->Start(bad).message().find("key: \"a/b\": may hold only"), std::string::npos);
  bad.key = "..";
  EXPECT_FALSE(sup_->Start(bad).ok());
  bad.key = "ok";
  bad.argv.clear();
  EXPECT_EQ(sup_->Start(bad).message(), "argv: empty");

  TaskLaunch twice = Shell("twice", "true");
  ASSERT_TRUE(sup_->Start(twice).ok());
  EXPECT_EQ(sup_->Start(twice).message(), "key: \"twice\": a task with this key exists");
}

TEST_F(SupervisorTest, AdoptsTasksAfterTheAgentRestarts) {
  ASSERT_TRUE(sup_->Start(Shell("long", "exec sleep 30")).ok());
  ASSERT_TRUE(sup_->Start(Shell("short", "sleep 0.1; exit 4")).ok());
  int pid = Find("long")->pid;

  // One Supervisor per directory.
  EXPECT_FALSE(Supervisor::Open(state_).ok());

  sup_.reset();  // the agent goes away; its tasks do not
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Reopen();
  std::optional<TaskStatus> long_task = Find("long");
  ASSERT_TRUE(long_task);
  EXPECT_TRUE(long_task->running);
  EXPECT_EQ(long_task->pid, pid);
  // It ended while no agent watched; the shim's record says how.
  TaskStatus short_task = WaitEnd("short");
  EXPECT_EQ(short_task.exit_code, 4);
  EXPECT_FALSE(short_task.lost);

  ASSERT_TRUE(sup_->Signal("long", SIGTERM).ok());
  TaskStatus t = WaitEnd("long");
  EXPECT_EQ(t.signal, SIGTERM);
  EXPECT_EQ(t.pid, pid);
}

TEST_F(SupervisorTest, TasksSurviveTheAgentKilled) {
  sup_.reset();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    // A stand-in agent: starts a task, says so, waits to be killed.
    Result<std::unique_ptr<Supervisor>> sup = Supervisor::Open(state_);
    if (!sup.ok() || !(*sup)->Start(Shell("survivor", "exec sleep 30")).ok()) _exit(1);
    char byte = 'y';
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 'n';
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  kill(agent, SIGKILL);
  waitpid(agent, nullptr, 0);

  Reopen();
  std::optional<TaskStatus> t = Find("survivor");
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->running);
  EXPECT_EQ(kill(t->pid, 0), 0);
  ASSERT_TRUE(sup_->Signal("survivor", SIGKILL).ok());
  EXPECT_EQ(WaitEnd("survivor").signal, SIGKILL);
}

TEST_F(SupervisorTest, ATaskWhoseShimWasKilledRunsOnThenIsLost) {
  ASSERT_TRUE(sup_->Start(Shell("orphan", "exec sleep 30")).ok());
  // The record: task pid, its start time, shim pid, its start time, start ms.
  std::istringstream record(Read(fs::path(state_) / "orphan" / "task"));
  long task_pid = 0, task_ticks = 0, shim_pid = 0;
  ASSERT_TRUE(record >> task_pid >> task_ticks >> shim_pid);
  ASSERT_EQ(kill(static_cast<pid_t>(shim_pid), SIGKILL), 0);
  auto shim_dead = [&] {
    std::string stat = Read("/proc/" + std::to_string(shim_pid) + "/stat");
    std::size_t paren = stat.rfind(')');
    return paren == std::string::npos || stat.compare(paren, 3, ") Z") == 0;
  };
  for (int i = 0; i < 500 && !shim_dead(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(shim_dead());
  std::optional<TaskStatus> t = Find("orphan");
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->running);  // no shim, but the task lives and can still be signalled
  ASSERT_TRUE(sup_->Signal("orphan", SIGKILL).ok());
  TaskStatus ended = WaitEnd("orphan");
  EXPECT_TRUE(ended.lost);
  EXPECT_EQ(ended.exit_code, -1);
  EXPECT_EQ(ended.signal, 0);
}

TEST_F(SupervisorTest, ARecordWithoutATaskIsLost) {
  sup_.reset();
  fs::create_directories(fs::path(state_) / "half-started");
  Reopen();
  std::optional<TaskStatus> t = Find("half-started");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->running);
  EXPECT_TRUE(t->lost);
  EXPECT_TRUE(sup_->Forget("half-started").ok());
}

}  // namespace
}  // namespace arbiter::agent
