#include "store/leader.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "store/pg.h"

namespace arbiter::store {

namespace {

// The advisory lock's key as pg_locks shows it: the high and low 32 bits (objsubid 1 marks a
// bigint key).
const std::string kLockHigh = std::to_string(static_cast<std::uint64_t>(pg::kLeaderLockKey) >> 32);
const std::string kLockLow =
    std::to_string(static_cast<std::uint64_t>(pg::kLeaderLockKey) & 0xffffffffu);

// The lease connection gives up on a database that stops answering within half a lease (sent
// data unacknowledged, or no keep-alive answer), so a cut-off leader learns it lost in time.
std::string WithTimeouts(const std::string& url, std::chrono::milliseconds lease) {
  const long long half = std::max<long long>(lease.count() / 2, 500);
  const long long idle = std::max<long long>(half / 1000, 1);
  const bool uri = url.starts_with("postgresql://") || url.starts_with("postgres://");
  const std::string params = fmt::format(
      "tcp_user_timeout={} keepalives=1 keepalives_idle={} keepalives_interval=1 "
      "keepalives_count=2 connect_timeout={}",
      half, idle, std::max<long long>(half / 1000, 2));
  if (!uri) return url + " " + params;
  std::string query = params;
  for (char& c : query) {
    if (c == ' ') c = '&';
  }
  return url + (url.find('?') == std::string::npos ? "?" : "&") + query;
}

using Clock = std::chrono::steady_clock;

}  // namespace

std::string LeaseSessionName(std::string_view id) {
  // PostgreSQL keeps 63 bytes of a name; an id's unique part (process, random) is its end.
  constexpr std::size_t kKeep = 63 - std::string_view("arbiter-lease-").size();
  return fmt::format("arbiter-lease-{}", id.size() > kKeep ? id.substr(id.size() - kKeep) : id);
}

LeaderElection::LeaderElection(LeaderOptions options) : options_(std::move(options)) {}
LeaderElection::~LeaderElection() = default;

Result<std::unique_ptr<LeaderElection>> LeaderElection::Open(const LeaderOptions& options) {
  std::unique_ptr<LeaderElection> e(new LeaderElection(options));
  if (Status st = e->Connect(); !st.ok()) return st;
  if (Status st = pg::Migrate(*e->conn_); !st.ok()) return st;
  return e;
}

Status LeaderElection::Connect() {
  conn_.reset();
  Result<std::unique_ptr<pg::Conn>> conn =
      pg::Conn::Connect(WithTimeouts(options_.url, options_.lease), "--store (leader lease)",
                        LeaseSessionName(options_.id));
  if (!conn.ok()) return conn.status();
  conn_ = std::move(conn).value();
  return Status::Ok();
}

Result<LeaderView> LeaderElection::Campaign() {
  if (!conn_ || conn_->broken()) {
    if (Status st = Connect(); !st.ok()) return st;
  }
  // No statement of an attempt waits longer than a lease: a database path that hangs fails the
  // attempt, which is then repeated on a new connection.
  const Clock::time_point deadline = Clock::now() + options_.lease;
  auto exec = [&](std::string_view sql,
                  std::initializer_list<std::optional<std::string_view>> params,
                  std::string_view what) -> Result<pg::Rows> {
    Result<pg::Rows> rows = conn_->ExecBefore(deadline, sql, params, what);
    if (!rows.ok() && conn_->broken()) conn_.reset();
    return rows;
  };
  Result<pg::Rows> lock = exec("SELECT pg_try_advisory_lock($1)",
                               {std::to_string(pg::kLeaderLockKey)}, "take the leader's lock");
  if (!lock.ok()) return lock.status();
  LeaderView view;
  if (lock->Text(0, 0) == "t") {
    // Holding the lock, this server is the only one that may lead. A batch of the leader before
    // it may still hold the leader row (its fence, FOR SHARE) in a transaction that never ends:
    // that leader stalled mid-batch (a stopped process, a frozen machine), and the epoch's update
    // below would wait for it forever. End such sessions; their batches roll back, unacknowledged,
    // and the deposed leader steps down when it wakes.
    Result<pg::Rows> ended = exec(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'relation' "
        "AND relation = 'leader'::regclass AND mode = 'RowShareLock' "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND pid <> pg_backend_pid()",
        {}, "end a deposed leader's unfinished batch");
    if (!ended.ok()) {
      conn_.reset();
      return ended.status();
    }
    Result<pg::Rows> row = exec(
        "UPDATE leader SET epoch = epoch + 1, holder = $1, address = $2, renewed_at = now() "
        "WHERE id = 1 RETURNING epoch",
        {options_.id, options_.address}, "raise the leader's epoch");
    if (!row.ok() || row->rows() != 1) {
      // The lock is released with the session: drop it, so that another may lead.
      conn_.reset();
      return row.ok() ? Status::Internal("store: the leader row is missing") : row.status();
    }
    epoch_ = static_cast<std::uint64_t>(row->Int(0, 0));
    view.leading = true;
    view.epoch = epoch_;
    view.holder = options_.id;
    view.address = options_.address;
    return view;
  }
  Result<pg::Rows> row = exec(
      "SELECT epoch, holder, address, "
      "(extract(epoch FROM now() - renewed_at) * 1000)::bigint FROM leader WHERE id = 1",
      {}, "read the leader row");
  if (!row.ok()) return row.status();
  if (row->rows() != 1) return Status::Internal("store: the leader row is missing");
  view.epoch = static_cast<std::uint64_t>(row->Int(0, 0));
  view.holder = std::string(row->Text(0, 1));
  const bool expired = row->Int(0, 3) > options_.lease.count();
  if (!expired) view.address = std::string(row->Text(0, 2));
  if (expired && !view.holder.empty()) {
    // The holder's session outlived its leader: end it, so that the lock is free next time. Only
    // the session of the holder this row names (by its application name), and only while the row
    // is still that holder's and still expired, in the same statement: a server that has just
    // taken the lock, whose raised epoch is not visible yet, is another session and is left alone.
    Result<pg::Rows> ended = exec(
        "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a "
        "JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted "
        "AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid AND l.objsubid = 1 "
        "WHERE a.application_name = $3 AND a.pid <> pg_backend_pid() "
        "AND EXISTS (SELECT 1 FROM leader WHERE id = 1 AND epoch = $4 AND holder = $5 "
        "AND now() - renewed_at > $6::bigint * interval '1 millisecond')",
        {kLockHigh, kLockLow, LeaseSessionName(view.holder), std::to_string(view.epoch),
         view.holder, std::to_string(options_.lease.count())},
        "end an expired leader's session");
    if (!ended.ok()) return ended.status();
  }
  return view;
}

Status LeaderElection::Renew(std::chrono::steady_clock::time_point deadline) {
  if (!conn_ || conn_->broken()) {
    return Status::Unavailable(
        "store: the connection that held the leadership broke; another server may lead");
  }
  Result<pg::Rows> row = conn_->ExecBefore(
      deadline,
      "UPDATE leader SET renewed_at = now() WHERE id = 1 AND epoch = $1 AND holder = $2 "
      "RETURNING epoch",
      {std::to_string(epoch_), options_.id}, "renew the leader's lease");
  if (!row.ok()) {
    conn_.reset();
    return Status::Unavailable(
        fmt::format("lost the leadership (epoch {}): {}", epoch_, row.status().message()));
  }
  if (row->rows() != 1) {
    conn_.reset();
    return Status::Unavailable(
        fmt::format("lost the leadership (epoch {}): another server raised the epoch", epoch_));
  }
  return Status::Ok();
}

Result<std::string> LeaderElection::SharedSecret(std::string_view name, std::string_view fresh) {
  if (!conn_ || conn_->broken()) {
    if (Status st = Connect(); !st.ok()) return st;
  }
  // Two servers making it at once: the one that does not insert may not see the other's row in
  // its statement's snapshot, and then reads it on a second try.
  for (int attempt = 0; attempt < 3; ++attempt) {
    Result<pg::Rows> row = conn_->Exec(
        "WITH made AS (INSERT INTO secrets (name, value) VALUES ($1, $2) "
        "ON CONFLICT (name) DO NOTHING RETURNING value) "
        "SELECT value FROM made UNION ALL SELECT value FROM secrets WHERE name = $1",
        {name, fresh}, "read a shared secret");
    if (!row.ok()) return row.status();
    if (row->rows() >= 1) return std::string(row->Text(0, 0));
  }
  return Status::Internal(fmt::format("store: the shared secret {} could not be read", name));
}

}  // namespace arbiter::store
