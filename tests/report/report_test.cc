#include "report/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "report/common.h"

namespace arbiter::report {
namespace {

constexpr Millis kHour = 3600 * kMillisPerSecond;

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

sim::JobRecord Job(JobId id, std::string name, std::string queue, sim::WorkKind kind, Millis submit,
                   Millis first_start, Millis end) {
  sim::JobRecord job;
  job.id = id;
  job.name = std::move(name);
  job.queue = std::move(queue);
  job.priority_class = "P1";
  job.workload = "synthetic";
  job.kind = kind;
  job.gpus = 8;
  job.submit = submit;
  job.first_start = first_start;
  job.end = end;
  return job;
}

// Two queues (training with a guarantee of 16 GPUs, batch with none), one service, three
// samples an hour apart, three jobs.
sim::RunResult MakeRun(std::string name) {
  sim::RunResult run;
  run.name = std::move(name);
  run.horizon = 2 * kHour;
  run.total_gpus = 32;
  run.gpu_allocation = 0.8;
  run.gpu_utilization = 0.723;
  run.events = 1234;
  run.cycles = 56;
  run.overall.jobs_submitted = 3;
  run.overall.jobs_completed = 2;
  // count, mean, p50, p95, p99, max
  run.overall.wait = {3, 60, 45, 110, 120, 120};
  run.overall.jct = {2, 5400, 3600, 7000, 7200, 7200};
  run.overall.training_completion = {2, 6300, 6000, 7200, 7200, 7200};
  run.overall.longest_wait_s = 1800;
  run.overall.evictions = 4;
  run.overall.gpu_hours_lost = 2.5;
  run.overall.gpu_hours_allocated = 51.2;
  run.overall.gpu_hours_useful = 48.7;

  sim::GroupMetrics training;
  training.jobs_submitted = 2;
  training.jobs_completed = 1;
  training.wait = {2, 30, 30, 60, 60, 60};
  training.guarantee_gpus = 16;
  training.mean_gpus = 12;
  training.evictions = 3;
  training.gpu_hours_lost = 2;
  training.below_guarantee_hours = 0.5;
  run.queues["training"] = training;
  sim::GroupMetrics batch;
  batch.jobs_submitted = 1;
  batch.jobs_completed = 1;
  batch.mean_gpus = 4;
  run.queues["batch"] = batch;
  run.queue_names = {"training", "batch"};
  run.classes["P1"] = run.overall;
  run.workloads["synthetic"] = run.overall;

  sim::ServiceMetrics chat;
  chat.name = "chat";
  chat.queue = "batch";
  chat.requests = 1e6;
  chat.latency_p50_ms = 80;
  chat.latency_p99_ms = 812;
  chat.slo_miss_minutes = 12;
  chat.timeout_fraction = 0.01;
  chat.mean_replicas_wanted = 4;
  chat.mean_replicas_serving = 3.5;
  chat.slo_ms = 250;
  chat.latency_window = kHour;
  chat.latency_p99_by_window_ms = {300, 1500};  // the second hour misses the SLO
  chat.latency_p99_worst_window_ms = 1500;
  chat.windows_over_slo = 1;
  run.services.push_back(chat);
  run.gpu_types = {"H800", "A100"};
  run.gpu_type_totals = {16, 16};

  for (int i = 0; i <= 2; ++i) {
    sim::Sample s;
    s.t = i * kHour;
    s.allocated_gpus = 8.0 * i;
    s.healthy_gpus = 32;
    s.pending_jobs = 2 - i;
    s.running_jobs = i;
    s.queue_allocated_gpus = {4.0 * i, 4.0 * i};
    s.type_allocated_gpus = {8.0 * i, 0};
    s.queue_pending = {1, 2 - i};
    s.service_latency_p99_ms = {100.0 + i};
    s.service_replicas = {3};
    run.series.push_back(s);
  }

  run.jobs.push_back(Job(1, "pretrain", "training", sim::WorkKind::kTraining, 0, 60'000, kHour));
  run.jobs.push_back(Job(2, "finetune, v2", "training", sim::WorkKind::kTraining, 0, -1, -1));
  run.jobs.push_back(Job(3, "etl", "batch", sim::WorkKind::kBatch, 0, 0, 2 * kHour));
  run.jobs[0].evictions = 2;
  run.jobs[0].gpu_hours_lost = 1.5;
  return run;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::filesystem::path FreshDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

// ---- Units ----

TEST(ReportFormat, HumanUnits) {
  EXPECT_EQ(internal::FormatSeconds(0), "0 s");
  EXPECT_EQ(internal::FormatSeconds(0.812), "812 ms");
  EXPECT_EQ(internal::FormatSeconds(4.5), "4.5 s");
  EXPECT_EQ(internal::FormatSeconds(45), "45 s");
  EXPECT_EQ(internal::FormatSeconds(750), "12.5 min");
  EXPECT_EQ(internal::FormatSeconds(3.2 * 3600), "3.2 h");
  EXPECT_EQ(internal::FormatSeconds(4.5 * 86400), "4.5 d");
  EXPECT_EQ(internal::FormatSeconds(std::nan("")), "-");
  EXPECT_EQ(internal::FormatMillis(812), "812 ms");
  EXPECT_EQ(internal::FormatMillis(2500), "2.5 s");
  EXPECT_EQ(internal::FormatPercent(0.723), "72.3 %");
  EXPECT_EQ(internal::FormatNumber(16), "16");
  EXPECT_EQ(internal::FormatNumber(2.54), "2.5");
}

TEST(ReportDownsample, KeepsShortSeriesAndBoundsLongOnes) {
  std::vector<internal::Point> points;
  for (int i = 0; i < 10; ++i) points.push_back({double(i), double(i)});
  EXPECT_EQ(internal::Downsample(points, 600, internal::Reduce::kMean).size(), 10u);

  points.clear();
  for (int i = 0; i < 6000; ++i) points.push_back({double(i), i == 4321 ? 1000.0 : 1.0});
  const auto mean = internal::Downsample(points, 600, internal::Reduce::kMean);
  const auto max = internal::Downsample(points, 600, internal::Reduce::kMax);
  EXPECT_EQ(mean.size(), 600u);
  ASSERT_EQ(max.size(), 600u);
  EXPECT_DOUBLE_EQ(mean.front().x, 4.5);
  bool peak_kept = false;
  for (const internal::Point& p : max) peak_kept = peak_kept || (p.x == 4321 && p.y == 1000);
  EXPECT_TRUE(peak_kept);
}

// ---- Table ----

TEST(ReportTable, OneColumnPerRunWideEnoughForItsName) {
  std::vector<sim::RunResult> runs = {MakeRun("baseline"), MakeRun("a-rather-long-run-name")};
  runs[1].gpu_utilization = 0.5;
  const std::string table = Table(runs);
  const std::vector<std::string> lines = Lines(table);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_TRUE(HasSubstr(lines[0], "baseline"));
  EXPECT_TRUE(HasSubstr(lines[0], "a-rather-long-run-name"));
  // Every value line is as long as the header: right-aligned columns.
  for (const std::string& line : lines) {
    if (line.rfind("GPU utilisation", 0) == 0) {
      EXPECT_EQ(line.size(), lines[0].size());
      EXPECT_TRUE(HasSubstr(line, "72.3 %"));
      EXPECT_TRUE(HasSubstr(line, "50.0 %"));
    }
  }
  EXPECT_TRUE(HasSubstr(table, "latency P99 chat"));
  EXPECT_TRUE(HasSubstr(table, "812 ms"));
  EXPECT_TRUE(HasSubstr(table, "SLO miss chat"));
  EXPECT_TRUE(HasSubstr(table, "12.0 min"));
  EXPECT_TRUE(HasSubstr(table, "training JCT mean"));
  EXPECT_TRUE(HasSubstr(table, "1.0 h"));     // the one completed training job
  EXPECT_TRUE(HasSubstr(table, "1.8 h"));     // training completion mean 6300 s
  EXPECT_TRUE(HasSubstr(table, "2.0 min"));   // wait P99
  EXPECT_TRUE(HasSubstr(table, "30.0 min"));  // longest wait
  EXPECT_TRUE(HasSubstr(table, "2 / 3"));
  EXPECT_TRUE(HasSubstr(table, "queue training"));
  EXPECT_TRUE(HasSubstr(table, "queue batch"));
  EXPECT_TRUE(HasSubstr(table, "12 / 16 (75 %)"));
  // Per-hour latency; JCT and wait mean, median and P95.
  EXPECT_TRUE(HasSubstr(table, "latency P99 worst hour chat"));
  EXPECT_TRUE(HasSubstr(table, "1.5 s"));
  EXPECT_TRUE(HasSubstr(table, "hours over SLO chat"));
  EXPECT_TRUE(HasSubstr(table, "1 / 2"));
  for (const char* row :
       {"JCT mean", "JCT median", "JCT P95", "wait mean", "wait median", "wait P95"}) {
    EXPECT_TRUE(HasSubstr(table, std::string("\n") + row + " ")) << row;
  }
  for (const std::string& line : Lines(table)) {
    if (line.rfind("JCT P95", 0) == 0) {
      EXPECT_TRUE(HasSubstr(line, "1.9 h"));  // 7000 s
    }
    if (line.rfind("wait P95", 0) == 0) {
      EXPECT_TRUE(HasSubstr(line, "1.8 min"));  // 110 s
    }
    if (line.rfind("wait median", 0) == 0) {
      EXPECT_TRUE(HasSubstr(line, "45 s"));
    }
  }
}

TEST(ReportTable, MissingValuesAsDash) {
  sim::RunResult empty;
  empty.name = "empty";
  std::vector<sim::RunResult> runs = {MakeRun("full"), empty};
  const std::string table = Table(runs);
  for (const std::string& line : Lines(table)) {
    if (line.rfind("training JCT mean", 0) == 0 || line.rfind("latency P99 chat", 0) == 0 ||
        line.rfind("wait P99", 0) == 0 || line.rfind("  mean GPUs", 0) == 0 ||
        line.rfind("latency P99 worst hour chat", 0) == 0 || line.rfind("JCT P95", 0) == 0 ||
        line.rfind("wait median", 0) == 0) {
      EXPECT_EQ(line.back(), '-') << line;
    }
  }
  EXPECT_EQ(Table(std::vector<sim::RunResult>{}), "(no runs)\n");
}

// ---- JSON ----

TEST(ReportJson, ShapeAndDefinitions) {
  std::vector<sim::RunResult> runs = {MakeRun("baseline")};
  sim::ServiceMetrics search = runs[0].services[0];
  search.name = "search";
  search.latency_p50_ms = 90;
  search.latency_p99_ms = 300;
  search.slo_miss_minutes = 3;
  search.slo_ms = 100;
  search.latency_p99_by_window_ms = {900, std::numeric_limits<double>::quiet_NaN()};
  search.latency_p99_worst_window_ms = 900;
  search.windows_over_slo = 2;
  runs[0].services.push_back(search);
  const std::string text = Json(runs, "diurnal");
  const nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_TRUE(HasSubstr(text, "\n  \"runs\""));  // indented by 2
  EXPECT_EQ(json["scenario"], "diurnal");
  ASSERT_EQ(json["runs"].size(), 1u);
  const nlohmann::json& run = json["runs"][0];
  EXPECT_EQ(run["name"], "baseline");
  EXPECT_DOUBLE_EQ(run["horizon_s"].get<double>(), 7200);
  EXPECT_DOUBLE_EQ(run["total_gpus"].get<double>(), 32);
  EXPECT_EQ(run["events"], 1234);
  EXPECT_EQ(run["cycles"], 56);

  const nlohmann::json& m = run["metrics"];
  EXPECT_DOUBLE_EQ(m["gpu_utilization"].get<double>(), 0.723);
  EXPECT_DOUBLE_EQ(m["gpu_allocation"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(m["inference_latency_p50_ms"].get<double>(), 90);
  EXPECT_DOUBLE_EQ(m["inference_latency_p99_ms"].get<double>(), 812);
  EXPECT_DOUBLE_EQ(m["slo_miss_minutes"].get<double>(), 15);
  EXPECT_DOUBLE_EQ(m["training_jct_mean_s"].get<double>(), 3600);
  EXPECT_DOUBLE_EQ(m["training_completion_s"].get<double>(), 6300);
  EXPECT_EQ(m["evictions"], 4);
  EXPECT_DOUBLE_EQ(m["gpu_hours_lost"].get<double>(), 2.5);
  EXPECT_EQ(m["jobs_completed"], 2);
  EXPECT_EQ(m["jobs_submitted"], 3);
  EXPECT_DOUBLE_EQ(m["wait_mean_s"].get<double>(), 60);
  EXPECT_DOUBLE_EQ(m["wait_p50_s"].get<double>(), 45);
  EXPECT_DOUBLE_EQ(m["wait_p99_s"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(m["jct_mean_s"].get<double>(), 5400);
  EXPECT_DOUBLE_EQ(m["jct_p50_s"].get<double>(), 3600);
  EXPECT_DOUBLE_EQ(m["jct_p99_s"].get<double>(), 7200);
  EXPECT_DOUBLE_EQ(m["jct_p95_s"].get<double>(), 7000);
  EXPECT_DOUBLE_EQ(m["wait_p95_s"].get<double>(), 110);
  // The worst hour over the services: chat's second hour (search's worst hour is 900 ms); the
  // hours over the SLO add up over the services.
  EXPECT_DOUBLE_EQ(m["inference_latency_p99_worst_hour_ms"].get<double>(), 1500);
  EXPECT_EQ(m["inference_hours_over_slo"], 3);
  EXPECT_DOUBLE_EQ(m["longest_wait_s"].get<double>(), 1800);
  EXPECT_EQ(m["failures"], 0);
  EXPECT_DOUBLE_EQ(m["gpu_hours_allocated"].get<double>(), 51.2);
  EXPECT_DOUBLE_EQ(m["gpu_hours_useful"].get<double>(), 48.7);
  EXPECT_EQ(m.size(), 25u);

  const nlohmann::json& training = run["queues"]["training"];
  EXPECT_DOUBLE_EQ(training["guarantee_gpus"].get<double>(), 16);
  EXPECT_DOUBLE_EQ(training["mean_gpus"].get<double>(), 12);
  EXPECT_DOUBLE_EQ(training["share_of_guarantee"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(training["below_guarantee_hours"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(training["wait_p99_s"].get<double>(), 60);
  EXPECT_TRUE(training["jct_mean_s"].is_null());  // nothing completed in the distribution
  EXPECT_TRUE(run["queues"]["batch"]["share_of_guarantee"].is_null());
  // The group keys that come from services and job records: chat's queue is batch.
  EXPECT_EQ(run["queues"]["batch"]["inference_latency_p99_ms"],
            run["services"][0]["latency_p99_ms"]);
  EXPECT_EQ(run["queues"]["training"]["inference_latency_p99_ms"], 0);
  EXPECT_EQ(run["queues"]["training"]["slo_miss_minutes"], 0);
  ASSERT_TRUE(run["queues"]["training"]["gpu_utilization"].is_number());
  EXPECT_LE(run["queues"]["training"]["gpu_utilization"].get<double>(),
            m["gpu_utilization"].get<double>() + 1e-9);
  EXPECT_EQ(run["classes"]["P1"]["jobs_submitted"], 3);
  EXPECT_FALSE(run["classes"]["P1"].contains("guarantee_gpus"));
  EXPECT_EQ(run["workloads"]["synthetic"]["evictions"], 4);

  ASSERT_EQ(run["services"].size(), 2u);
  const nlohmann::json& chat = run["services"][0];
  EXPECT_EQ(chat["name"], "chat");
  EXPECT_EQ(chat["queue"], "batch");
  EXPECT_DOUBLE_EQ(chat["requests"].get<double>(), 1e6);
  EXPECT_DOUBLE_EQ(chat["latency_p50_ms"].get<double>(), 80);
  EXPECT_DOUBLE_EQ(chat["latency_p99_ms"].get<double>(), 812);
  EXPECT_DOUBLE_EQ(chat["slo_miss_minutes"].get<double>(), 12);
  EXPECT_DOUBLE_EQ(chat["timeout_fraction"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(chat["mean_replicas_wanted"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(chat["mean_replicas_serving"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(chat["slo_ms"].get<double>(), 250);
  EXPECT_DOUBLE_EQ(chat["latency_window_s"].get<double>(), 3600);
  EXPECT_EQ(chat["latency_p99_by_hour_ms"], nlohmann::json::parse("[300.0, 1500.0]"));
  EXPECT_DOUBLE_EQ(chat["latency_p99_worst_hour_ms"].get<double>(), 1500);
  EXPECT_EQ(chat["hours_over_slo"], 1);
  // An hour without requests is null.
  EXPECT_TRUE(run["services"][1]["latency_p99_by_hour_ms"][1].is_null());
  // The queue of neither service: no latency.
  EXPECT_EQ(run["queues"]["training"]["inference_latency_p99_worst_hour_ms"], 0);
  EXPECT_EQ(run["queues"]["training"]["inference_hours_over_slo"], 0);
  EXPECT_EQ(run["queues"]["batch"]["inference_latency_p99_worst_hour_ms"], 1500);

  // Each GPU model's GPUs and allocation over the run: samples at 1 h and 2 h hold 8 and 16
  // H800 (the one at 0 covers no time): (8 + 16) / 2 / 16.
  EXPECT_DOUBLE_EQ(run["gpu_types"]["H800"]["gpus"].get<double>(), 16);
  EXPECT_DOUBLE_EQ(run["gpu_types"]["H800"]["gpu_allocation"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(run["gpu_types"]["A100"]["gpu_allocation"].get<double>(), 0);
}

TEST(ReportJson, NonFiniteAndMissingAsNull) {
  sim::RunResult run = MakeRun("odd");
  run.gpu_utilization = std::numeric_limits<double>::quiet_NaN();
  run.overall.gpu_hours_lost = std::numeric_limits<double>::infinity();
  run.services.clear();
  run.jobs.clear();
  run.overall.wait = {};
  const std::string text = Json(std::vector<sim::RunResult>{run}, "s");
  for (const char* bad : {": nan", ": -nan", "NaN", ": inf", ": -inf", "Infinity"}) {
    EXPECT_EQ(text.find(bad), std::string::npos) << bad;
  }
  const nlohmann::json m = nlohmann::json::parse(text)["runs"][0]["metrics"];
  EXPECT_TRUE(m["gpu_utilization"].is_null());
  EXPECT_TRUE(m["gpu_hours_lost"].is_null());
  EXPECT_TRUE(m["training_jct_mean_s"].is_null());
  EXPECT_TRUE(m["wait_p99_s"].is_null());
  EXPECT_DOUBLE_EQ(m["inference_latency_p99_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(m["slo_miss_minutes"].get<double>(), 0);
}

// ---- CSV ----

TEST(ReportCsv, WritesSeriesAndJobs) {
  const std::filesystem::path dir = FreshDir("report_csv") / "nested";
  const std::vector<sim::RunResult> runs = {MakeRun("baseline")};
  const Status status = WriteCsv(runs, dir.string());
  ASSERT_TRUE(status.ok()) << status.message();

  const std::vector<std::string> series = Lines(ReadFile(dir / "baseline-series.csv"));
  ASSERT_EQ(series.size(), 4u);
  EXPECT_EQ(series[0],
            "t_s,allocated_gpus,busy_gpus,healthy_gpus,pending_jobs,running_jobs,alloc_training,"
            "pending_training,alloc_batch,pending_batch,p99_ms_chat,replicas_chat,"
            "type_alloc_H800,type_alloc_A100");
  EXPECT_EQ(series[1], "0,0,0,32,2,0,0,1,0,2,100,3,0,0");
  EXPECT_EQ(series[2], "3600,8,0,32,1,1,4,1,4,1,101,3,8,0");

  const std::vector<std::string> jobs = Lines(ReadFile(dir / "baseline-jobs.csv"));
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0],
            "id,name,queue,priority_class,workload,kind,gpus,submit_s,first_start_s,end_s,wait_s,"
            "jct_s,evictions,failures,gpu_hours_lost");
  EXPECT_EQ(jobs[1], "1,pretrain,training,P1,synthetic,training,8,0,60,3600,60,3600,2,0,1.5");
  EXPECT_EQ(jobs[2], "2,\"finetune, v2\",training,P1,synthetic,training,8,0,,,,,0,0,0");
  EXPECT_EQ(jobs[3], "3,etl,batch,P1,synthetic,batch,8,0,0,7200,0,7200,0,0,0");
}

TEST(ReportCsv, QuotesAndSafeFileNames) {
  const std::filesystem::path dir = FreshDir("report_csv_names");
  std::vector<sim::RunResult> runs = {MakeRun("fair/share"), MakeRun("fair share")};
  runs[0].jobs[0].name = "say \"hi\"";
  ASSERT_TRUE(WriteCsv(runs, dir.string()).ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "fair_share-series.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "fair_share-jobs.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "fair_share-2-series.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "fair_share-2-jobs.csv"));
  EXPECT_TRUE(HasSubstr(ReadFile(dir / "fair_share-jobs.csv"), "1,\"say \"\"hi\"\"\",training"));
}

TEST(ReportCsv, ErrorNamesThePath) {
  const std::filesystem::path dir = FreshDir("report_csv_error");
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "not-a-directory";
  std::ofstream(file) << "x";
  const Status status =
      WriteCsv(std::vector<sim::RunResult>{MakeRun("r")}, (file / "out").string());
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(HasSubstr(status.message(), (file / "out").string()));
}

// ---- HTML ----

TEST(ReportHtml, SelfContainedWithChartsOfEveryRunAndQueue) {
  std::vector<sim::RunResult> runs = {MakeRun("baseline"), MakeRun("arbiter")};
  const std::string html = Html(runs, "diurnal");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(HasSubstr(html, "<svg"));
  EXPECT_TRUE(HasSubstr(html, "diurnal"));
  for (const char* part :
       {"baseline", "arbiter", "training", "batch", "chat", "GPU allocation", "Pending jobs",
        "P99 latency", "JCT CDF", "GPU utilisation", "GPU allocation per GPU model",
        "H800 (16 GPUs)", "A100 (16 GPUs)", "P99 per hour: chat"}) {
    EXPECT_TRUE(HasSubstr(html, part)) << part;
  }
  // The only URL is the SVG namespace.
  const std::string kXmlns = "xmlns=\"http://www.w3.org/2000/svg\"";
  std::size_t urls = 0;
  for (const char* scheme : {"http://", "https://"}) {
    for (std::size_t at = html.find(scheme); at != std::string::npos;
         at = html.find(scheme, at + 1)) {
      ++urls;
      ASSERT_GE(at, 7u);
      EXPECT_EQ(html.compare(at - 7, kXmlns.size(), kXmlns), 0) << html.substr(at, 40);
    }
  }
  EXPECT_GT(urls, 0u);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
}

TEST(ReportHtml, RunsDifferInDashPatternShownInTheLegend) {
  std::vector<sim::RunResult> runs = {MakeRun("baseline"), MakeRun("arbiter"), MakeRun("third")};
  const std::string html = Html(runs, "s");
  // The first run is solid, the second and third dashed, each pattern its own; lines and legend
  // keys alike.
  for (const char* dash : {"stroke-dasharray=\"9 4\"", "stroke-dasharray=\"2 3\""}) {
    EXPECT_TRUE(HasSubstr(html, std::string("<path class=\"line\"")));
    std::size_t lines = 0;
    std::size_t keys = 0;
    for (std::size_t at = html.find(dash); at != std::string::npos; at = html.find(dash, at + 1)) {
      const std::size_t open = html.rfind('<', at);
      if (html.compare(open, 18, "<path class=\"line\"") == 0) ++lines;
      if (html.compare(open, 16, "<line class=\"key") == 0) ++keys;
    }
    EXPECT_GT(lines, 0u) << dash;
    EXPECT_EQ(keys, lines) << dash;  // every chart's legend shows each of its lines' pattern
  }
  // The run list and the table's header show each run's colour and pattern.
  EXPECT_TRUE(HasSubstr(html, "<svg class=\"swatch\""));
}

TEST(ReportHtml, SloOnLatencyChartsAndP99PerHour) {
  const std::string html = Html(std::vector<sim::RunResult>{MakeRun("baseline")}, "s");
  // A rule at the SLO on the latency chart and on the per-hour one, labelled.
  std::size_t rules = 0;
  for (std::size_t at = html.find("<line class=\"slo\""); at != std::string::npos;
       at = html.find("<line class=\"slo\"", at + 1)) {
    ++rules;
  }
  EXPECT_EQ(rules, 2u);
  EXPECT_TRUE(HasSubstr(html, ">SLO 250 ms</text>"));
  EXPECT_TRUE(HasSubstr(html, "P99 per hour: chat"));
  EXPECT_TRUE(HasSubstr(html, "baseline (worst 1.5 s, 1 / 2 over SLO)"));
  EXPECT_TRUE(HasSubstr(html, "latency P99 worst hour chat"));
}

TEST(ReportHtml, AnEmptyPanelSaysWhy) {
  sim::RunResult run = MakeRun("baseline");
  run.services.clear();
  for (sim::Sample& s : run.series) s.service_latency_p99_ms.clear();
  run.queue_names.push_back("idle");  // no job at all
  run.queue_names.push_back("serving");
  for (sim::Sample& s : run.series) {
    s.queue_pending.resize(4, 0);
    s.queue_allocated_gpus.resize(4, 0);
  }
  run.jobs.push_back(Job(4, "chat-0", "serving", sim::WorkKind::kInference, 0, 0, -1));
  run.jobs.push_back(Job(5, "stuck", "batch", sim::WorkKind::kBatch, 0, -1, -1));
  run.jobs[2].end = -1;  // etl: batch now has no completed job
  const std::string html = Html(std::vector<sim::RunResult>{run}, "s");
  EXPECT_TRUE(HasSubstr(html, "No inference service in this scenario"));
  EXPECT_TRUE(HasSubstr(html, ">no job was submitted to this queue</text>"));
  EXPECT_TRUE(HasSubstr(html, ">inference replicas only: they never complete</text>"));
  EXPECT_TRUE(HasSubstr(html, ">no job of this queue completed</text>"));
  EXPECT_EQ(html.find(">no data<"), std::string::npos);

  run.series.clear();
  const std::string unsampled = Html(std::vector<sim::RunResult>{run}, "s");
  EXPECT_TRUE(HasSubstr(unsampled, "no samples: the scenario&#39;s sample_interval is 0"));
}

TEST(ReportHtml, EscapesNames) {
  std::vector<sim::RunResult> runs = {MakeRun("a<b&c")};
  runs[0].queue_names.push_back("q\"<x>");
  const std::string html = Html(runs, "s<cript>");
  EXPECT_TRUE(HasSubstr(html, "a&lt;b&amp;c"));
  EXPECT_EQ(html.find("a<b&c"), std::string::npos);
  EXPECT_TRUE(HasSubstr(html, "q&quot;&lt;x&gt;"));
  EXPECT_EQ(html.find("<x>"), std::string::npos);
  EXPECT_EQ(html.find("s<cript>"), std::string::npos);
}

TEST(ReportHtml, LinesHaveAtMost600Points) {
  sim::RunResult run = MakeRun("long");
  run.series.clear();
  for (int i = 0; i < 5000; ++i) {
    sim::Sample s;
    s.t = i * 60 * kMillisPerSecond;
    s.allocated_gpus = i % 32;
    s.busy_gpus = i % 16;
    s.queue_pending = {i % 7, 1};
    s.queue_allocated_gpus = {1, 1};
    s.type_allocated_gpus = {double(i % 16), 1};
    s.service_latency_p99_ms = {10.0 + i % 100};
    s.service_replicas = {2};
    run.series.push_back(s);
  }
  run.horizon = 5000 * 60 * kMillisPerSecond;
  const std::string html = Html(std::vector<sim::RunResult>{run}, "long");
  std::size_t paths = 0;
  for (std::size_t at = html.find(" d=\""); at != std::string::npos;
       at = html.find(" d=\"", at + 1)) {
    const std::size_t end = html.find('"', at + 4);
    const std::string d = html.substr(at + 4, end - at - 4);
    std::size_t points = 0;
    for (const char c : d) points += (c == 'M' || c == 'L' || c == 'V') ? 1 : 0;
    EXPECT_LE(points, 600u);
    EXPECT_GT(points, 1u);
    ++paths;
  }
  // Allocation, utilisation, two GPU models, two pending charts, one latency chart and one per
  // hour, two JCT CDFs.
  EXPECT_EQ(paths, 10u);
}

}  // namespace
}  // namespace arbiter::report
