// The event feed: events serialized once and shared by every reader, a window of the newest,
// readers woken once per wait.
#include "server/event_feed.h"

#include <gtest/gtest.h>

#include <vector>

namespace arbiter::server {
namespace {

store::Event Submitted(std::uint64_t seq) {
  store::Event e;
  e.seq = seq;
  e.time = 1000 + static_cast<Millis>(seq);
  e.kind = store::EventKind::kSubmitted;
  e.job = seq;
  e.actor = "alice";
  return e;
}

void Publish(EventFeed& feed, std::uint64_t from, std::uint64_t to) {
  std::vector<store::Event> events;
  for (std::uint64_t s = from; s <= to; ++s) events.push_back(Submitted(s));
  feed.Publish(events);
}

TEST(EventFeed, ReadersShareOneSerializationOfEachEvent) {
  EventFeed feed(0, 1 << 20);
  Publish(feed, 1, 3);
  const auto first = feed.Read(0, 10);
  const auto second = feed.Read(1, 10);
  ASSERT_TRUE(first && second);
  ASSERT_EQ(first->size(), 3u);
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*first)[1].frame.get(), (*second)[0].frame.get());  // the same text, not a copy
  EXPECT_EQ((*first)[2].seq, 3u);
  EXPECT_EQ(first->front().frame->rfind("id: 1\nevent: submitted\ndata: {", 0), 0u);
  EXPECT_TRUE(feed.Read(3, 10)->empty());
  EXPECT_EQ(feed.Read(0, 2)->size(), 2u);  // at most the limit
}

TEST(EventFeed, AReaderBeforeTheWindowIsToldToReadTheStore) {
  const std::size_t one =
      EventFeed::Make(Submitted(1)).json->size() + EventFeed::Make(Submitted(1)).frame->size();
  EventFeed feed(0, one * 10);  // about ten events
  Publish(feed, 1, 100);
  EXPECT_EQ(feed.last_seq(), 100u);
  EXPECT_FALSE(feed.Read(0, 10).has_value());  // its events left the window
  EXPECT_FALSE(feed.Read(50, 10).has_value());
  const auto recent = feed.Read(95, 10);
  ASSERT_TRUE(recent.has_value());
  EXPECT_EQ(recent->size(), 5u);
  // A feed started on a store that has events already: its window starts after them.
  EventFeed later(40, 1 << 20);
  EXPECT_FALSE(later.Read(10, 10).has_value());
  EXPECT_TRUE(later.Read(40, 10)->empty());
}

TEST(EventFeed, AWaiterIsWokenOnceByTheNextEventOrAtOnce) {
  EventFeed feed(0, 1 << 20);
  int woken = 0, cancelled = 0;
  feed.Wait(0, [&] { ++woken; });
  const std::uint64_t ticket = feed.Wait(0, [&] { ++cancelled; });
  EXPECT_EQ(feed.waiting(), 2u);
  feed.Cancel(ticket);
  Publish(feed, 1, 1);
  Publish(feed, 2, 2);
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(cancelled, 0);
  EXPECT_EQ(feed.waiting(), 0u);
  feed.Wait(0, [&] { ++woken; });  // there is something after 0 already
  EXPECT_EQ(woken, 2);
}

}  // namespace
}  // namespace arbiter::server
