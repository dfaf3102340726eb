// The bodies node agents send (docs/api.md, "Node agents"), read into types before anything is
// looked at: a malformed body is refused whole, naming the field, and changes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/status.h"

namespace arbiter::server {

// What a node agent says of one of its tasks.
struct TaskReport {
  JobId job = 0;
  std::uint32_t rank = 0;
  Millis run = 0;  // the run it belongs to: the job's start time
  bool running = true;
  int exit_code = -1;      // ended normally
  int signal = 0;          // ended by a signal
  bool lost = false;       // its end is unknown
  Millis checkpoint = -1;  // its latest finished checkpoint, if any
};

struct ReportedDevice {
  std::string model, name, uuid;
  std::int64_t memory_mib = 0;
  std::int64_t nvlink_group = -1;
};

// POST /v1/nodes/NAME/register: {"devices": [{"model", "name", "memory_mib", "uuid",
// "nvlink_group"}], "cpu_milli", "memory_mib", "hostname", "address", "log_url", "labels"}.
struct RegisterBody {
  std::vector<ReportedDevice> devices;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  std::string hostname;
  std::string address;  // where others reach the node (MASTER_ADDR); must be the caller's own
  std::string log_url;  // http(s)://ADDRESS:PORT of its log server
  Labels labels;
};
Result<RegisterBody> ParseRegisterBody(std::string_view text);

// POST /v1/nodes/NAME/sync: {"revision", "tasks": [{"job", "rank", "run", "running",
// "exit_code", "signal", "lost", "checkpoint_ms"}]}: the revision the agent's last answer gave
// ("" at first) and the reports that changed since.
struct SyncBody {
  std::string revision;
  std::vector<TaskReport> reports;
};
Result<SyncBody> ParseSyncBody(std::string_view text);

// Whether `address` (an IP address or a host name) is `peer`, the address a request came from:
// the same IP, or a name that resolves to it. An agent may give only its own address.
bool AddressIsPeer(const std::string& address, const std::string& peer);

// The host of an "http://HOST:PORT" or "https://HOST:PORT" URL without a path, else "".
std::string UrlHost(std::string_view url);

}  // namespace arbiter::server
