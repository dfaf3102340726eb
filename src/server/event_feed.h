// The event stream as the API serves it (GET /v1/events, /v1/events/stream): the most recent
// events in memory, each serialized once when it is committed and shared by every reader, and the
// readers waiting for the next one. A reader behind the window reads from the store instead; a
// stream that falls behind it while live is dropped with the cursor to resume from
// (docs/design/server.md, "Watches").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "store/store.h"

namespace arbiter::server {

class EventFeed {
 public:
  // One event, serialized: its JSON (as /v1/events lists it) and its server-sent-events frame.
  struct Item {
    std::uint64_t seq = 0;
    JobId job = 0;  // a job's event: its job (GET /v1/events?job=)
    std::shared_ptr<const std::string> json, frame;
  };
  static Item Make(const store::Event& event);

  // `last_seq`: where the store stands when the feed starts (the window starts after it);
  // `max_bytes`: the window keeps the newest events within this many bytes.
  EventFeed(std::uint64_t last_seq, std::size_t max_bytes);

  // Events committed, in seq order (the store's commit listener).
  void Publish(std::span<const store::Event> events);

  // The events after `cursor`, at most `limit`, from memory; nullopt when `cursor` is before the
  // window (the older events are read from the store).
  std::optional<std::vector<Item>> Read(std::uint64_t cursor, std::size_t limit) const;
  std::uint64_t last_seq() const;

  // Calls `wake` once (on the publishing thread, without the feed's lock) when an event after
  // `cursor` is published, at once when there is one already. Returns a ticket for Cancel.
  std::uint64_t Wait(std::uint64_t cursor, std::function<void()> wake);
  // Forgets a waiter that has not been woken (no-op otherwise).
  void Cancel(std::uint64_t ticket);
  std::size_t waiting() const;

 private:
  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<Item> window_;                                 // GUARDED_BY(mu_): consecutive seqs
  std::size_t bytes_ = 0;                                   // GUARDED_BY(mu_)
  std::uint64_t last_seq_;                                  // GUARDED_BY(mu_)
  std::uint64_t next_ticket_ = 1;                           // GUARDED_BY(mu_)
  std::map<std::uint64_t, std::function<void()>> waiters_;  // GUARDED_BY(mu_)
};

}  // namespace arbiter::server
