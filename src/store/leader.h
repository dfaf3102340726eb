// Leadership of servers sharing one PostgreSQL store: at most one leads, with an epoch that
// every new leader raises and that fences the store's writes (docs/design/ha.md).
//
// The leader holds a session advisory lock (pg::kLeaderLockKey) on a connection of its own, and
// the `leader` row (epoch, holder, address, renewed_at). Taking the lock and raising the epoch
// happen on that connection; the lock goes when the leader's session ends (its process killed,
// its connection broken or terminated), so a standby's next attempt takes it. A leader whose
// session lingers in the database while the leader itself is gone (a network cut the kernel has
// not yet noticed) stops renewing the row: once the row is older than the lease, by the
// database's clock, a standby terminates that session and takes the lock. Holding the lock, it
// also ends a batch of the deposed leader that still holds the leader row (a leader stalled
// mid-batch), which its update of the epoch would otherwise wait for.
//
// The lease's session is named LeaseSessionName(id) in pg_stat_activity, so that a standby ends
// only the session of the holder that the expired row names, never one that has just taken the
// lock and whose raised epoch is not visible yet.
//
// Every statement has a deadline (a lease for a campaign's, the caller's for a renewal): a
// database path that hangs without a TCP error cannot hold a campaign or a renewal longer.
//
// Not thread-safe: one thread at a time campaigns or renews.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "arbiter/status.h"

namespace arbiter::store {

namespace pg {
class Conn;
}

struct LeaderOptions {
  std::string url;      // the PostgreSQL store's connection string
  std::string id;       // this server, unique among them (host, process, random)
  std::string address;  // where clients reach this server (http://HOST:PORT)
  // A leader that has not renewed for this long, by the database's clock, is deposed.
  std::chrono::milliseconds lease{5000};
};

// Who leads, as one attempt saw it.
struct LeaderView {
  bool leading = false;  // this server leads, with `epoch`
  std::uint64_t epoch = 0;
  std::string holder;   // the leader's id ("" when none)
  std::string address;  // the leader's address ("" when none, or its lease ran out)
};

// The application name of the lease's session of the server `id` (at most 63 bytes, as
// PostgreSQL keeps).
std::string LeaseSessionName(std::string_view id);

class LeaderElection {
 public:
  // Connects and migrates the schema (the `leader` row is part of it). Errors name --store.
  static Result<std::unique_ptr<LeaderElection>> Open(const LeaderOptions& options);
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // One attempt to lead: takes the lock and raises the epoch when it is free; else reports who
  // leads, and terminates the session of a leader whose lease ran out. Errors: the database
  // cannot be reached (the attempt is then simply repeated).
  Result<LeaderView> Campaign();
  // The leader renews its lease, waiting for the answer until `deadline`. An error means the
  // leadership is lost: no answer in time, the connection that held the lock broke (so the lock
  // may be another's), or another server raised the epoch.
  Status Renew(std::chrono::steady_clock::time_point deadline);
  // A secret every server of the database shares (e.g. the key of node credentials): the value
  // stored under `name`, or `fresh` stored first when there is none.
  Result<std::string> SharedSecret(std::string_view name, std::string_view fresh);

  const LeaderOptions& options() const { return options_; }
  // Where clients reach this server, once known (a server bound to port 0 knows it after
  // listening); before its first campaign.
  void set_address(std::string address) { options_.address = std::move(address); }

 private:
  explicit LeaderElection(LeaderOptions options);
  Status Connect();

  LeaderOptions options_;
  std::unique_ptr<pg::Conn> conn_;
  std::uint64_t epoch_ = 0;  // while leading
};

}  // namespace arbiter::store
