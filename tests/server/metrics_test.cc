// The metrics' text (server/metrics.h): label values and help texts escaped as the Prometheus
// text format says, whatever a queue is named; the server's counters and histograms by name.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace arbiter::server {
namespace {

std::string Text(const Scrape& scrape) {
  std::vector<prometheus::MetricFamily> families;
  scrape.CollectInto(families);
  return MetricsText(families);
}

TEST(MetricsText, EscapesQuotesBackslashesAndNewlinesInLabelValues) {
  Scrape scrape;
  scrape.Gauge("arbiter_queue_held_jobs", "Jobs held, per leaf queue.")
      .Add({{"queue", "team \"a\"\\b\nc {x}=,y"}})
      .Set(2);
  EXPECT_NE(
      Text(scrape).find("arbiter_queue_held_jobs{queue=\"team \\\"a\\\"\\\\b\\nc {x}=,y\"} 2"),
      std::string::npos)
      << Text(scrape);
}

TEST(MetricsText, WritesHelpAndTypeOfEachFamily) {
  Scrape scrape;
  scrape.Gauge("arbiter_nodes", "Nodes.").Add({{"state", "schedulable"}, {"health", "lost"}});
  const std::string text = Text(scrape);
  EXPECT_NE(text.find("# HELP arbiter_nodes Nodes.\n# TYPE arbiter_nodes gauge\n"),
            std::string::npos)
      << text;
  // Labels in name order, whatever order they were given in.
  EXPECT_NE(text.find("arbiter_nodes{health=\"lost\",state=\"schedulable\"} 0\n"),
            std::string::npos)
      << text;
}

TEST(Metrics, CountsEvictionsAndAdmissionsPerLabel) {
  Metrics metrics;
  metrics.Evicted("main", "low", "within_queue", 7200);
  metrics.Evicted("main", "low", "within_queue", 3600);
  metrics.Admitted("main", 42);
  std::vector<prometheus::MetricFamily> families;
  metrics.CollectInto(families);
  const std::string text = MetricsText(families);
  EXPECT_NE(
      text.find(
          "arbiter_evicted_jobs_total{class=\"low\",queue=\"main\",reason=\"within_queue\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("arbiter_lost_gpu_seconds_total{class=\"low\",queue=\"main\",reason="
                      "\"within_queue\"} 10800\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("arbiter_admission_wait_time_seconds_bucket{queue=\"main\",le=\"60\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("arbiter_admitted_jobs_total{queue=\"main\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace arbiter::server
