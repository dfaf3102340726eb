// The server benchmark: durable submissions per second over HTTP with keep-alive connections and
// concurrent clients, and their latency as a client sees it (request sent to answer read).
#include "server_bench.h"

#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server/server.h"
#include "store/codec.h"
#include "store/store.h"
#include "workload.h"

namespace arbiter::bench {
namespace {

constexpr const char* kCluster = kServerBenchCluster;

std::string Body(int client, std::int64_t i) {
  return "{\"name\":\"job-" + std::to_string(client) + "-" + std::to_string(i) +
         "\",\"queue\":\"training\",\"priority_class\":\"P1\",\"gpu_types\":[\"H800\"],"
         "\"topology\":{\"level\":\"leaf\"},\"runtime_estimate_ms\":14400000,"
         "\"checkpoint_interval_ms\":1800000,\"labels\":{\"team\":\"nlp\"},"
         "\"command\":\"torchrun --nproc-per-node 8 train.py\","
         "\"groups\":[{\"tasks\":2,\"gpu_milli\":8000,\"cpu_milli\":64000,"
         "\"memory_mib\":524288}]}";
}

}  // namespace

namespace {

// A CA and a certificate for 127.0.0.1 it signs, made with the openssl command (Debian's, from the
// deps script) in `dir`: ca.crt, server.crt, server.key.
void MakeCertificates(const std::string& dir) {
  const std::string command =
      "cd '" + dir +
      "' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench-ca "
      "-keyout ca.key -out ca.crt >/dev/null 2>&1 && openssl req -newkey rsa:2048 -nodes "
      "-subj /CN=127.0.0.1 -keyout server.key -out server.csr >/dev/null 2>&1 && "
      "printf 'subjectAltName=IP:127.0.0.1\\n' > san.txt && openssl x509 -req -in server.csr "
      "-CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.txt -out server.crt "
      ">/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) Fail("server bench: openssl could not make certificates");
}

}  // namespace

// Submissions from `clients` keep-alive clients for `seconds`; over TLS (a 2048-bit RSA
// certificate, verified by the clients) when `tls`; on the PostgreSQL store `store` when given
// (the server leads it alone). Prints BENCH NAME_per_s, NAME_p50_us and NAME_p99_us, where NAME
// is `name` then `suffix`.
SubmitFigures RunSubmitClients(int clients, double seconds, const std::string& name,
                               const std::string& suffix, bool tls, const std::string& store) {
  TempDir dir("arbiter-server-bench");
  const std::string config = dir.path() + "/cluster.yaml";
  std::ofstream(config) << kCluster;
  server::ServerArgs args;
  args.config = config;
  args.data = dir.path() + "/data";
  args.dev = true;  // the token is written in the configuration
  args.listen = "127.0.0.1:0";
  args.virtual_nodes = true;  // nodes run in the server: jobs are placed, as on a real cluster
  args.threads = clients + 8;
  args.store = store;
  if (tls) {
    MakeCertificates(dir.path());
    args.tls_cert = dir.path() + "/server.crt";
    args.tls_key = dir.path() + "/server.key";
  }
  Result<std::unique_ptr<server::Server>> server = server::Server::Start(args);
  if (!server.ok()) Fail(server.status().message());
  const int port = (*server)->port();
  if (!store.empty()) {
    // On a shared store the server leads after its first campaign: wait for it.
    httplib::Client probe("127.0.0.1", port);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      httplib::Result ready = probe.Get("/readyz");
      if (ready && ready->status == 200) break;
      if (std::chrono::steady_clock::now() > end) Fail("server bench: the server never led");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::atomic<int> refused{0};
  TimedRun run = RunClosedLoop(clients, seconds, [&](int c) {
    auto client = std::make_shared<httplib::Client>(
        (tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port));
    if (tls) {
      client->set_ca_cert_path(dir.path() + "/ca.crt");
      client->enable_server_certificate_verification(true);
    }
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);  // else Nagle and delayed ACKs add 40 ms a request
    client->set_read_timeout(std::chrono::seconds(30));
    return [&refused, client, c](std::int64_t i) {
      static const httplib::Headers kHeaders{{"Authorization", "Bearer bench-admin-token"}};
      httplib::Result res = client->Post("/v1/jobs", kHeaders, Body(c, i), "application/json");
      if (!res || res->status != 201) {
        if (refused.fetch_add(1) == 0) {
          std::fprintf(stderr, "# server bench: %s\n",
                       res ? (std::to_string(res->status) + " " + res->body).c_str()
                           : httplib::to_string(res.error()).c_str());
        }
      }
    };
  });
  std::vector<double>& all = run.latencies_us;
  const double wall = run.wall_seconds;
  if (refused.load() > 0)
    Fail("server bench: " + std::to_string(refused.load()) + " submissions failed");
  {
    // The cycles that ran meanwhile (they order and explain every pending job).
    httplib::Client client((tls ? "https://127.0.0.1:" : "http://127.0.0.1:") +
                           std::to_string(port));
    client.set_ca_cert_path(dir.path() + "/ca.crt");
    httplib::Result metrics = client.Get("/metrics");
    double sum = 0, count = 0;
    if (metrics) {
      // Each line on its own: the text format fixes no order between a histogram's lines.
      const std::string& text = metrics->body;
      if (std::size_t at = text.find("\narbiter_cycle_duration_seconds_sum ");
          at != std::string::npos)
        std::sscanf(text.c_str() + at, "\narbiter_cycle_duration_seconds_sum %lf", &sum);
      if (std::size_t at = text.find("\narbiter_cycle_duration_seconds_count ");
          at != std::string::npos)
        std::sscanf(text.c_str() + at, "\narbiter_cycle_duration_seconds_count %lf", &count);
    }
    std::printf("# server: %.0f cycles, %.1f ms each on average\n", count,
                count > 0 ? 1000 * sum / count : 0.0);
  }
  std::printf("# server: %d keep-alive clients, %zu durable submissions over HTTP in %.2f s\n",
              clients, all.size(), wall);
  std::printf("BENCH %s_per_s%s %.6g submits/s\n", name.c_str(), suffix.c_str(),
              static_cast<double>(all.size()) / wall);
  std::printf("BENCH %s_p50_us%s %.6g us\n", name.c_str(), suffix.c_str(), Percentile(all, 0.50));
  std::printf("BENCH %s_p99_us%s %.6g us\n", name.c_str(), suffix.c_str(), Percentile(all, 0.99));
  std::fflush(stdout);
  return {static_cast<double>(all.size()) / wall, Percentile(all, 0.50), Percentile(all, 0.99)};
}

namespace {

// A store with `jobs` pending jobs, then the time from Server::Start to ready: open, load,
// resolve every job against the configuration, rebuild the cluster state.
// With ARBITER_BENCH_RECOVERY_KEEP=DIR the store is filled in DIR (kept) instead of a temporary
// directory, and a DIR filled before is used as it is: for profiling the recovery alone.
void RunRecovery(std::int64_t jobs) {
  TempDir temp("arbiter-server-bench");
  const char* keep = std::getenv("ARBITER_BENCH_RECOVERY_KEEP");
  const std::string path = keep != nullptr && *keep != '\0' ? std::string(keep) : temp.path();
  const bool filled = std::filesystem::exists(path + "/data/arbiter.db");
  std::filesystem::create_directories(path);
  const std::string config = path + "/cluster.yaml";
  std::ofstream(config) << kCluster;
  if (!filled) {
    Result<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore({path + "/data"});
    if (!opened.ok()) Fail(opened.status().message());
    constexpr std::int64_t kChunk = 5000;
    for (std::int64_t first = 0; first < jobs; first += kChunk) {
      std::vector<job::JobSpec> specs;
      for (std::int64_t i = first; i < std::min(jobs, first + kChunk); ++i) {
        Result<job::JobSpec> spec = store::DecodeJobSpec(Body(0, i));
        if (!spec.ok()) Fail(spec.status().message());
        spec->user = "bench";
        spec->submit_time = 1'700'000'000'000 + i;
        specs.push_back(std::move(spec).value());
      }
      Result<std::vector<store::Submitted>> r = (*opened)->SubmitBatch(std::move(specs));
      if (!r.ok()) Fail(r.status().message());
    }
  }
  // Timed in a process of its own, as a server starts: this one has allocated and freed much
  // already, which the new process's allocator does not inherit.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) Fail("cannot find this program to run the recovery in a new process");
  self[n] = '\0';
  const std::string command =
      "ARBITER_BENCH_RECOVERY_DIR='" + path + "' '" + self + "' --only server-recovery";
  std::printf("# server recovery: start to ready over %lld pending jobs, in a new process\n",
              static_cast<long long>(jobs));
  std::fflush(stdout);
  if (std::system(command.c_str()) != 0) Fail("the recovery run failed");
}

}  // namespace

void RunServerRecovery(const std::string& dir) {
  server::ServerArgs args;
  args.config = dir + "/cluster.yaml";
  args.data = dir + "/data";
  args.dev = true;  // the token is written in the configuration
  args.listen = "127.0.0.1:0";
  args.virtual_nodes = true;  // nodes run in the server: jobs are placed, as on a real cluster
  // CPU time too (every thread's, user and system): on a machine shared with other work the
  // wall time says as much about the others as about the recovery.
  auto cpu_seconds = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    };
    return seconds(u.ru_utime) + seconds(u.ru_stime);
  };
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<server::Server>> server = server::Server::Start(args);
  if (!server.ok()) Fail(server.status().message());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  std::printf("BENCH server_recovery_s %.6g s\n", seconds);
  std::printf("BENCH server_recovery_cpu_s %.6g s\n", cpu);
  std::fflush(stdout);
  // Not measured, and not to be profiled with it: the first cycle over every recovered job (the
  // loop starts it at once) and tearing the jobs down.
  std::_Exit(0);
}

void RunServerBench(int clients, double seconds, std::int64_t recovery_jobs) {
  RunSubmitClients(16, seconds, "server_submit", "_16_clients", false, "");
  RunSubmitClients(clients, seconds, "server_submit", "", false, "");
  RunSubmitClients(clients, seconds, "server_submit", "_tls", /*tls=*/true, "");
  if (recovery_jobs > 0) RunRecovery(recovery_jobs);
}

}  // namespace arbiter::bench
