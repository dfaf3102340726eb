// `arbiter agent`: the node agent, like slurmd or a kubelet (docs/design/agent.md). It reports
// the node's devices to the server, runs the tasks the server binds to it (supervisor.h), carries
// out evictions (the checkpoint signal, the grace period, SIGTERM, SIGKILL) and serves the tasks'
// logs to the server.
#pragma once

#include <string>

namespace arbiter::agent {

struct AgentArgs {
  std::string server;            // the server's address: "http://HOST:PORT" or "HOST:PORT"
  std::string token;             // an agent token of the server's configuration
  std::string name;              // the node's name, as configured
  std::string devices = "auto";  // "auto" (NVML) or declared, e.g. "8xH800-80G"
  std::string labels;            // "k=v,k=v": reported with the devices
  std::string work_dir = "arbiter-agent";  // tasks' records, logs and default checkpoints
  std::string listen = "0.0.0.0:0";        // the log server (port 0: any free port)
  std::string address;  // where other nodes and the server reach this one; default: host name
};

// Runs until SIGINT or SIGTERM, which stop the agent but not its tasks: an agent started again
// on the same work directory adopts them. Returns the exit status (2: bad arguments or a token
// the server refuses).
int RunAgent(const AgentArgs& args);

// `arbiter checkpoint`, run by a task: records that its checkpoint is complete, in the marker of
// its checkpoint directory ($ARBITER_CHECKPOINT_DIR), which its agent reports to the server.
int RunCheckpoint();

}  // namespace arbiter::agent
