// End to end: a live event stream whose reader does not keep up falls behind the server's window of
// recent events (`server.event_window_bytes`, small here) and is ended with `event: dropped` and
// the cursor to resume from; read from that cursor, the events that followed come back whole, and
// meanwhile the stream held nothing up and gave its watcher slot back.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";

// One watcher per token, so that a long poll tells whether the stream still holds its slot.
constexpr const char* kCluster = R"(
priority_classes:
  - {name: normal, value: 10}
queues:
  - {name: main}
nodes:
  - name: n-{i}
    count: 2
    gpus: {model: G, count: 2, memory: 40Gi}
    cpu: 4
    memory: 16Gi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
  max_watchers_per_token: 1
  event_window_bytes: 65536
)";

// A stream reader on a raw socket with a small receive buffer, which reads only when told.
class StreamReader {
 public:
  StreamReader(int port, std::uint64_t cursor) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int small = 4096;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const std::string request = "GET /v1/events/stream?cursor=" + std::to_string(cursor) +
                                " HTTP/1.1\r\nHost: arbiter\r\nAuthorization: Bearer " + kAdmin +
                                "\r\n\r\n";
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(request.size())) {
      Close();
    }
  }
  ~StreamReader() { Close(); }
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  // Reads until `done(text)` holds, the server closes, or `timeout` passes; the text so far.
  const std::string& ReadUntil(const std::function<bool(const std::string&)>& done,
                               std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (fd_ >= 0 && !done(text_) && std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[65536];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      text_.append(buffer, static_cast<std::size_t>(n));
    }
    return text_;
  }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  std::string text_;
};

// The `id:` of every message of a server-sent event stream, in order.
std::vector<std::uint64_t> MessageIds(const std::string& text) {
  std::vector<std::uint64_t> ids;
  for (std::size_t at = text.find("\nid: "); at != std::string::npos;
       at = text.find("\nid: ", at + 1)) {
    ids.push_back(std::stoull(text.substr(at + 5, text.find('\n', at + 5) - at - 5)));
  }
  return ids;
}

TEST(EventStream, AReaderBehindTheWindowIsDroppedWithACursorThatLosesNothing) {
  TempDir dir;
  ServerProcess server(dir.Write("cluster.yaml", kCluster), (dir.path() / "data").string());
  ASSERT_TRUE(server.ready());
  const int port = server.port();
  const std::uint64_t start =
      Call(port, kAdmin, "GET", "/v1/events?cursor=0&limit=10000").body["cursor"];
  StreamReader reader(port, start);
  ASSERT_NE(reader
                .ReadUntil([](const std::string& t) { return t.find("\r\n\r\n") != t.npos; },
                           std::chrono::seconds(30))
                .find("HTTP/1.1 200"),
            std::string::npos);
  // The stream holds the token's only watcher slot: a long poll is refused.
  const std::string poll = "/v1/events?cursor=0&limit=1&wait=1";
  ASSERT_EQ(Call(port, kAdmin, "GET", poll).status, 429);

  // Events of about 1 KiB (a cordon's reason), in rounds, until the server has given the slot
  // back: the stream, not read, fell behind the window and was ended. Far more than the window
  // and the sockets' buffers together, yet the writes went on at their pace throughout.
  httplib::Client client("127.0.0.1", port);
  const httplib::Headers auth{{"Authorization", std::string("Bearer ") + kAdmin}};
  const std::string reason(1000, 'r');
  int changes = 0;
  bool slot_back = false;
  for (int round = 0; round < 60 && !slot_back; ++round) {
    for (int i = 0; i < 100; ++i, changes += 2) {
      const Json body{{"reason", reason}};
      auto cordoned = client.Post("/v1/nodes/n-0/cordon", auth, body.dump(), "application/json");
      ASSERT_TRUE(cordoned && cordoned->status == 200) << (cordoned ? cordoned->body : "");
      auto back = client.Post("/v1/nodes/n-0/uncordon", auth, "{}", "application/json");
      ASSERT_TRUE(back && back->status == 200) << (back ? back->body : "");
    }
    slot_back = Call(port, kAdmin, "GET", poll).status == 200;
  }
  ASSERT_TRUE(slot_back) << "the stream still held its slot after " << changes << " events";

  // What the stream sent: contiguous events from the start, then `event: dropped` with the
  // cursor of the last one sent. Read to the blank line that ends that message: its data may
  // come in a later segment than its first line.
  const std::string& text = reader.ReadUntil(
      [](const std::string& t) {
        const std::size_t at = t.find("event: dropped\ndata: ");
        return at != t.npos && t.find("\n\n", at) != t.npos;
      },
      std::chrono::seconds(30));
  const std::size_t dropped = text.find("event: dropped\ndata: ");
  ASSERT_NE(dropped, std::string::npos) << text.substr(0, 2000);
  const std::string data = text.substr(dropped + 21, text.find('\n', dropped + 21) - dropped - 21);
  const Json drop = Json::parse(data, nullptr, false);
  ASSERT_TRUE(drop.contains("cursor")) << data;
  const std::uint64_t cursor = drop["cursor"];
  EXPECT_NE(drop.value("message", "").find("reconnect with ?cursor="), std::string::npos) << data;
  // (Possibly none: the window may have moved on while the stream gathered its first write.)
  const std::vector<std::uint64_t> ids = MessageIds(text.substr(0, dropped));
  for (std::size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], start + 1 + i);
  EXPECT_EQ(cursor, ids.empty() ? start : ids.back());
  EXPECT_LT(cursor, start + static_cast<std::uint64_t>(changes));

  // Resumed from the cursor: every event after it, from the store, in order, none missing.
  std::uint64_t next = cursor;
  while (next < start + static_cast<std::uint64_t>(changes)) {
    const Reply page =
        Call(port, kAdmin, "GET", "/v1/events?limit=10000&cursor=" + std::to_string(next));
    ASSERT_EQ(page.status, 200);
    ASSERT_FALSE(page.body["events"].empty());
    for (const Json& e : page.body["events"]) {
      ASSERT_EQ(e["seq"].get<std::uint64_t>(), next + 1);
      EXPECT_EQ(e["target"], "n-0");
      next = e["seq"];
    }
  }
}

}  // namespace
}  // namespace arbiter::testing
