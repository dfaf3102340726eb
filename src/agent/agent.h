// `arbiter agent`: the node agent, like slurmd or a kubelet (docs/design/agent.md). It reports
// the node's devices to the server, runs the tasks the server binds to it (supervisor.h), carries
// out evictions (the checkpoint signal, the grace period, SIGTERM, SIGKILL) and serves the tasks'
// logs to the server.
#pragma once

#include <string>

namespace arbiter::agent {

struct AgentArgs {
  // The server's address: "https://HOST:PORT", "http://HOST:PORT", "HOST:PORT"; or several,
  // separated by commas (servers sharing one store, one leading: the agent follows the leader).
  std::string server;
  // The join token (an agent token of the server's configuration), exchanged at the first
  // registration for the node's own credential, which the agent keeps in its work directory
  // (node-credential, mode 0600) and uses from then on. From `token` (the command line: visible
  // to every user of the machine in `ps`; development), `token_file`, or the environment
  // (ARBITER_AGENT_TOKEN). Not needed once the work directory holds a credential.
  std::string token;
  std::string token_file;
  std::string name;                        // the node's name, as configured
  std::string devices = "auto";            // "auto" (NVML) or declared, e.g. "8xH800-80G"
  std::string labels;                      // "k=v,k=v": reported with the devices
  std::string work_dir = "arbiter-agent";  // tasks' records, logs and default checkpoints
  // The log server's HOST:PORT; default ADDRESS:0 (the node's own address, any free port).
  std::string listen;
  std::string address;  // where other nodes and the server reach this one; default: host name
  // TLS: the CA file that signs the server's certificate (an https server); the agent's own
  // certificate and key, shown to the server when it asks for one and served by the log server
  // (which then speaks https).
  std::string ca_file, tls_cert, tls_key;
};

// Runs until SIGINT or SIGTERM, which stop the agent but not its tasks: an agent started again
// on the same work directory adopts them. Returns the exit status (2: bad arguments or a token
// the server refuses).
int RunAgent(const AgentArgs& args);

// `arbiter checkpoint`, run by a task: records that its checkpoint is complete, in the marker of
// its checkpoint directory ($ARBITER_CHECKPOINT_DIR), which its agent reports to the server.
int RunCheckpoint();

}  // namespace arbiter::agent
