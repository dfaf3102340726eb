// Moving a server's SQLite store to PostgreSQL (`arbiter admin migrate-store`): every table
// copied as it is (the same job ids, event sequence numbers, records, quotas, node states and
// fair-share usage) and the node key, so the nodes' credentials stay valid
// (docs/operations.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "arbiter/status.h"

namespace arbiter::store {

struct CopyCounts {
  std::uint64_t jobs = 0, events = 0, queue_quotas = 0, node_states = 0, queue_usage = 0;
};

// Copies the SQLite store of `dir` (migrated to this build's schema first) into the PostgreSQL
// database `url` (migrated too), in one transaction. Refuses, changing nothing, when a server
// holds either store (the directory's lock; the database's leader lock) or when the database
// already holds jobs or events. `progress` is told each table as it is copied.
Result<CopyCounts> CopySqliteToPostgres(const std::string& dir, const std::string& url,
                                        const std::function<void(std::string_view)>& progress);

}  // namespace arbiter::store
