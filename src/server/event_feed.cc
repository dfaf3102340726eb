#include "server/event_feed.h"

#include <fmt/format.h>

#include "store/codec.h"

namespace arbiter::server {

EventFeed::Item EventFeed::Make(const store::Event& event) {
  Item item;
  item.seq = event.seq;
  item.job = event.job;
  auto json = std::make_shared<std::string>(store::Dump(store::EventToJson(event)));
  item.frame = std::make_shared<const std::string>(fmt::format(
      "id: {}\nevent: {}\ndata: {}\n\n", event.seq, store::EventKindName(event.kind), *json));
  item.json = std::move(json);
  return item;
}

EventFeed::EventFeed(std::uint64_t last_seq, std::size_t max_bytes)
    : max_bytes_(max_bytes), last_seq_(last_seq) {}

void EventFeed::Publish(std::span<const store::Event> events) {
  if (events.empty()) return;
  // Serialized outside the lock: readers are not held up by it.
  std::vector<Item> items;
  items.reserve(events.size());
  for (const store::Event& e : events) items.push_back(Make(e));
  std::map<std::uint64_t, std::function<void()>> wake;
  {
    std::lock_guard lock(mu_);
    for (Item& item : items) {
      if (item.seq <= last_seq_) continue;
      if (item.seq != last_seq_ + 1) {
        // A gap (cannot happen: the store publishes every commit in order): start the window
        // afresh, so that it stays consecutive.
        window_.clear();
        bytes_ = 0;
      }
      last_seq_ = item.seq;
      bytes_ += item.json->size() + item.frame->size();
      window_.push_back(std::move(item));
    }
    while (bytes_ > max_bytes_ && window_.size() > 1) {
      bytes_ -= window_.front().json->size() + window_.front().frame->size();
      window_.pop_front();
    }
    wake.swap(waiters_);
  }
  for (auto& [ticket, fn] : wake) fn();
}

std::optional<std::vector<EventFeed::Item>> EventFeed::Read(std::uint64_t cursor,
                                                            std::size_t limit) const {
  std::lock_guard lock(mu_);
  std::vector<Item> out;
  if (cursor >= last_seq_) return out;
  const std::uint64_t first = window_.empty() ? last_seq_ + 1 : window_.front().seq;
  if (cursor + 1 < first) return std::nullopt;
  for (std::size_t i = cursor + 1 - first; i < window_.size() && out.size() < limit; ++i) {
    out.push_back(window_[i]);
  }
  return out;
}

std::uint64_t EventFeed::last_seq() const {
  std::lock_guard lock(mu_);
  return last_seq_;
}

std::uint64_t EventFeed::Wait(std::uint64_t cursor, std::function<void()> wake) {
  {
    std::lock_guard lock(mu_);
    if (cursor >= last_seq_) {
      const std::uint64_t ticket = next_ticket_++;
      waiters_.emplace(ticket, std::move(wake));
      return ticket;
    }
  }
  wake();
  return 0;
}

void EventFeed::Cancel(std::uint64_t ticket) {
  std::function<void()> dropped;  // destroyed outside the lock
  std::lock_guard lock(mu_);
  auto it = waiters_.find(ticket);
  if (it == waiters_.end()) return;
  dropped.swap(it->second);
  waiters_.erase(it);
}

std::size_t EventFeed::waiting() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

}  // namespace arbiter::server
