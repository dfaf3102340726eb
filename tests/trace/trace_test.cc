#include "trace/trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trace/readers.h"

namespace arbiter::trace {
namespace {

const std::string kTraces = std::string(ARBITER_SOURCE_DIR) + "/data/traces/";

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

Trace MustRead(std::string_view text, Format format, std::int64_t gpus_per_node = 8) {
  Result<Trace> trace = ReadTrace(text, format, "t.csv", gpus_per_node);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? *trace : Trace{};
}

Trace MustReadFile(const std::string& path, std::string_view format = "") {
  Result<Trace> trace = ReadTraceFile(path, format);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? *trace : Trace{};
}

std::string ReadError(std::string_view text, Format format) {
  Result<Trace> trace = ReadTrace(text, format, "t.csv");
  EXPECT_FALSE(trace.ok());
  return trace.ok() ? std::string() : trace.status().message();
}

bool SortedBySubmit(const Trace& trace) {
  return std::is_sorted(trace.jobs.begin(), trace.jobs.end(),
                        [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
}

std::int64_t TotalMilliGpu(const Trace& trace) {
  std::int64_t total = 0;
  for (const TraceJob& job : trace.jobs) total += job.tasks * job.gpu_per_task.value();
  return total;
}

const TraceJob* Find(const Trace& trace, std::string_view name) {
  for (const TraceJob& job : trace.jobs) {
    if (job.name == name) return &job;
  }
  return nullptr;
}

constexpr Millis kSecond = 1000;

// ---- Formats and detection ----

TEST(TraceFormat, NamesRoundTrip) {
  for (Format format :
       {Format::kPhilly, Format::kTiresias, Format::kOpenb, Format::kCsv, Format::kJson}) {
    Result<Format> parsed = ParseFormat(FormatName(format));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, format);
  }
  Result<Format> unknown = ParseFormat("alibaba");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(HasSubstr(unknown.status().message(), "\"alibaba\""));
  EXPECT_TRUE(HasSubstr(unknown.status().message(), "philly, tiresias, openb, csv, json"));
}

TEST(TraceFormat, DetectsByHeader) {
  auto detect = [](std::string_view text) {
    Result<Format> format = DetectFormat(text);
    EXPECT_TRUE(format.ok()) << text << ": " << format.status().message();
    return format.ok() ? *format : Format::kCsv;
  };
  EXPECT_EQ(detect("timestamp,duration,num_gpus,gpu_time,cluster\n"), Format::kPhilly);
  EXPECT_EQ(detect("\n\r\njob_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n"),
            Format::kTiresias);
  EXPECT_EQ(detect("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"), Format::kOpenb);
  EXPECT_EQ(detect("name,duration,submit,gpus\na,1,2,3\n"), Format::kCsv);
  EXPECT_EQ(detect("  \n {\"jobs\": []}"), Format::kJson);
  EXPECT_EQ(detect("[]"), Format::kJson);
}

TEST(TraceFormat, DetectFailsListingTheFormats) {
  for (std::string_view text : {"", "  \n\r\n"}) {
    Result<Format> format = DetectFormat(text);
    ASSERT_FALSE(format.ok());
    EXPECT_TRUE(HasSubstr(format.status().message(), "empty"));
  }
  Result<Format> format = DetectFormat("a,b,c\n1,2,3\n");
  ASSERT_FALSE(format.ok());
  for (const char* part : {"\"a,b,c\"", "philly", "tiresias", "openb", "csv", "json"}) {
    EXPECT_TRUE(HasSubstr(format.status().message(), part));
  }
}

TEST(TraceFormat, DetectsTheShippedFiles) {
  const std::pair<const char*, Format> files[] = {
      {"philly/philly_first2000.csv", Format::kPhilly},
      {"tiresias/60_job.csv", Format::kTiresias},
      {"openb/openb_pod_list_default.csv", Format::kOpenb},
  };
  for (const auto& [file, format] : files) {
    Result<Trace> detected = ReadTraceFile(kTraces + file);
    Result<Trace> named = ReadTraceFile(kTraces + file, FormatName(format));
    ASSERT_TRUE(detected.ok()) << detected.status().message();
    ASSERT_TRUE(named.ok()) << named.status().message();
    EXPECT_EQ(detected->jobs.size(), named->jobs.size()) << file;
  }
}

TEST(TraceFile, MissingFileAndBadFormatName) {
  Result<Trace> missing = ReadTraceFile(kTraces + "no-such-file.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(HasSubstr(missing.status().message(), "no-such-file.csv: cannot open"));
  Result<Trace> bad_format = ReadTraceFile(kTraces + "tiresias/60_job.csv", "pholly");
  ASSERT_FALSE(bad_format.ok());
  EXPECT_TRUE(HasSubstr(bad_format.status().message(), "60_job.csv: unknown trace format"));
  Result<Trace> bad_node_count = ReadTrace("job_id,num_gpu,submit_time,duration\n",
                                           Format::kTiresias, "t.csv", /*gpus_per_node=*/0);
  ASSERT_FALSE(bad_node_count.ok());
  EXPECT_TRUE(HasSubstr(bad_node_count.status().message(), "at least 1"));
}

// ---- Splitting whole-GPU jobs into tasks ----

TEST(TraceGpusPerTask, FitsANodeOrSplitsByTheLargestDivisor) {
  EXPECT_EQ(GpusPerTask(1, 8), 1);
  EXPECT_EQ(GpusPerTask(3, 8), 3);
  EXPECT_EQ(GpusPerTask(8, 8), 8);
  EXPECT_EQ(GpusPerTask(16, 8), 8);
  EXPECT_EQ(GpusPerTask(12, 8), 6);
  EXPECT_EQ(GpusPerTask(128, 8), 8);
  EXPECT_EQ(GpusPerTask(13, 8), 1);  // prime: 13 tasks of one GPU
  EXPECT_EQ(GpusPerTask(8, 4), 4);
  EXPECT_EQ(GpusPerTask(0, 8), 0);
  EXPECT_EQ(GpusPerTask(5, 0), 1);  // a node count below one counts as one
}

// ---- Philly ----

TEST(TracePhilly, ParsesUtcTimestampsWithCivilArithmetic) {
  auto parse = [](std::string_view text) {
    Millis ms = -1;
    EXPECT_TRUE(internal::ParseUtcTimestamp(text, &ms)) << text;
    return ms;
  };
  EXPECT_EQ(parse("1970-01-01 00:00:00"), 0);
  EXPECT_EQ(parse("1969-12-31 23:59:59"), -1000);
  EXPECT_EQ(parse("2000-03-01 00:00:00"), 951868800 * kSecond);
  EXPECT_EQ(parse("2016-02-29 12:00:00"), 1456747200 * kSecond);
  EXPECT_EQ(parse("2017-10-09 07:01:55"), 1507532515 * kSecond);
  EXPECT_EQ(parse("2017-10-09T07:01:55"), 1507532515 * kSecond);
  Millis ms = 0;
  for (std::string_view bad :
       {"2017-02-29 00:00:00", "1900-02-29 00:00:00", "2017-13-01 00:00:00", "2017-10-09 24:00:00",
        "2017-10-09 07:60:00", "2017-10-09", "2017/10/09 07:01:55", "2017-10-09 07:01:5x", ""}) {
    EXPECT_FALSE(internal::ParseUtcTimestamp(bad, &ms)) << bad;
  }
}

TEST(TracePhilly, ReadsTheShippedSample) {
  const Trace trace = MustReadFile(kTraces + "philly/philly_first2000.csv");
  ASSERT_EQ(trace.jobs.size(), 2000u);
  EXPECT_TRUE(trace.bad_rows.empty());
  EXPECT_TRUE(SortedBySubmit(trace));
  // The earliest submission (2017-09-07 09:57:50) is on line 1986; the latest, 2017-10-09
  // 07:01:55, on line 2.
  EXPECT_EQ(trace.jobs.front().name, "philly-1986");
  EXPECT_EQ(trace.jobs.front().line, 1986);
  EXPECT_EQ(trace.jobs.front().submit, 0);
  EXPECT_EQ(trace.jobs.front().queue, "6214e9");
  EXPECT_EQ(trace.jobs.front().duration, 2643038 * kSecond);
  const TraceJob* latest = Find(trace, "philly-2");
  ASSERT_NE(latest, nullptr);
  EXPECT_EQ(latest->submit, 2754245 * kSecond);
  EXPECT_EQ(latest->duration, 66 * kSecond);
  EXPECT_EQ(latest->queue, "11cb48");
  EXPECT_EQ(trace.jobs.back().submit, 2754245 * kSecond);
  // 1, 2, 4 and 8 GPUs: each fits an 8-GPU node as one task; 2,319 GPUs in all.
  std::set<std::int64_t> shapes;
  for (const TraceJob& job : trace.jobs) {
    EXPECT_EQ(job.tasks, 1);
    shapes.insert(job.gpu_per_task.value());
  }
  EXPECT_EQ(shapes, (std::set<std::int64_t>{1000, 2000, 4000, 8000}));
  EXPECT_EQ(TotalMilliGpu(trace), 2319 * 1000);
}

TEST(TracePhilly, SplitsJobsLargerThanANode) {
  const Trace trace = MustRead(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-01 00:00:10,10.0,16,160.0,vc1\n"
      "2017-10-01 00:00:20,20.5,12,240.0,vc2\n"
      "2017-10-01 00:00:30,30,3,90.0,vc3\n"
      "2017-10-01 00:00:40,40,8,90.0,vc3\n",
      Format::kPhilly);
  ASSERT_EQ(trace.jobs.size(), 4u);
  EXPECT_EQ(trace.jobs[0].tasks, 2);
  EXPECT_EQ(trace.jobs[0].gpu_per_task, MilliGpu(8000));
  EXPECT_EQ(trace.jobs[1].tasks, 2);
  EXPECT_EQ(trace.jobs[1].gpu_per_task, MilliGpu(6000));
  EXPECT_EQ(trace.jobs[1].duration, 20500);
  EXPECT_EQ(trace.jobs[2].tasks, 1);
  EXPECT_EQ(trace.jobs[2].gpu_per_task, MilliGpu(3000));
  EXPECT_EQ(trace.jobs[3].tasks, 1);
  // On 4-GPU nodes the 8-GPU job becomes 2 tasks of 4 and the 3-GPU job stays one task.
  const Trace small = MustRead(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-01 00:00:30,30,3,90.0,vc3\n"
      "2017-10-01 00:00:40,40,8,90.0,vc3\n",
      Format::kPhilly, /*gpus_per_node=*/4);
  ASSERT_EQ(small.jobs.size(), 2u);
  EXPECT_EQ(small.jobs[0].tasks, 1);
  EXPECT_EQ(small.jobs[1].tasks, 2);
  EXPECT_EQ(small.jobs[1].gpu_per_task, MilliGpu(4000));
}

TEST(TracePhilly, SortsUnsortedRowsStablyAndMakesTimesRelative) {
  const Trace trace = MustRead(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-02 00:00:00,1,1,1,a\n"
      "2017-10-01 23:59:00,1,1,1,b\n"
      "2017-10-02 00:00:00,1,1,1,c\n"
      "2017-10-01 23:58:00,1,1,1,d\n",
      Format::kPhilly);
  ASSERT_EQ(trace.jobs.size(), 4u);
  std::vector<std::string> queues;
  std::vector<Millis> submits;
  for (const TraceJob& job : trace.jobs) {
    queues.push_back(job.queue);
    submits.push_back(job.submit);
  }
  EXPECT_EQ(queues, (std::vector<std::string>{"d", "b", "a", "c"}));  // a before c: file order
  EXPECT_EQ(submits, (std::vector<Millis>{0, 60 * kSecond, 120 * kSecond, 120 * kSecond}));
  EXPECT_EQ(trace.jobs[0].name, "philly-5");
}

TEST(TracePhilly, ReportsBadRowsWithLineAndColumn) {
  const Trace trace = MustRead(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"  // 1
      "2017-10-01 00:00:00,10,x,1,a\n"                  // 2
      "\n"                                              // 3: blank, skipped
      "2017-10-01 00:00:05,10,0,1,a\n"                  // 4: no GPU
      "2017-10-01 00:00:06,-3,1,1,a\n"                  // 5
      "yesterday,10,1,1,a\n"                            // 6
      "2017-10-01 00:00:07,10,1,1\n"                    // 7: a column short
      "2017-10-01 00:00:08,ten,1,1,a\n"                 // 8
      "2017-10-01 00:00:09,10,1.5,1,a\n"                // 9
      "2017-10-01 00:00:10,10,2,1,a\n",                 // 10: good
      Format::kPhilly);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].line, 10);
  EXPECT_EQ(trace.jobs[0].submit, 0);
  ASSERT_EQ(trace.bad_rows.size(), 7u);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {2, "num_gpus: not a number: \"x\""},
      {4, "num_gpus: must be at least 1: \"0\""},
      {5, "duration: negative: \"-3\""},
      {6, "timestamp: not a date and time (YYYY-MM-DD HH:MM:SS): \"yesterday\""},
      {7, "expected 5 columns, found 4"},
      {8, "duration: not a number: \"ten\""},
      {9, "num_gpus: not a whole number: \"1.5\""},
  };
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(trace.bad_rows[i].line, expected[i].first);
    EXPECT_EQ(trace.bad_rows[i].problem, expected[i].second);
  }
}

TEST(TracePhilly, AcceptsCrlfAndNoTrailingNewline) {
  const Trace trace = MustRead(
      "timestamp,duration,num_gpus,gpu_time,cluster\r\n"
      "2017-10-01 00:00:00,10,1,1,a\r\n"
      "\r\n"
      "2017-10-01 00:00:05,10.0,2,1,b",
      Format::kPhilly);
  EXPECT_TRUE(trace.bad_rows.empty());
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_EQ(trace.jobs[0].queue, "a");
  EXPECT_EQ(trace.jobs[1].queue, "b");
  EXPECT_EQ(trace.jobs[1].name, "philly-4");
  EXPECT_EQ(trace.jobs[1].submit, 5 * kSecond);
}

TEST(TracePhilly, MissingColumnFailsNamingIt) {
  EXPECT_EQ(ReadError("\ntimestamp,duration,cluster\n2017-10-01 00:00:00,1,a\n", Format::kPhilly),
            "t.csv:2: missing column \"num_gpus\"");
  EXPECT_EQ(ReadError("", Format::kPhilly), "t.csv:1: no header line (the text is empty)");
}

// ---- Tiresias ----

TEST(TraceTiresias, ReadsTheShippedToyTrace) {
  const Trace trace = MustReadFile(kTraces + "tiresias/60_job.csv");
  ASSERT_EQ(trace.jobs.size(), 60u);
  EXPECT_TRUE(trace.bad_rows.empty());
  EXPECT_TRUE(SortedBySubmit(trace));
  EXPECT_EQ(trace.jobs[0].name, "0");
  EXPECT_EQ(trace.jobs[0].submit, 0);
  EXPECT_EQ(trace.jobs[0].duration, 164 * kSecond);
  EXPECT_EQ(trace.jobs[0].gpu_per_task, MilliGpu(1000));
  EXPECT_EQ(trace.jobs[1].name, "1");
  EXPECT_EQ(trace.jobs[1].submit, 30 * kSecond);
  EXPECT_EQ(trace.jobs[1].gpu_per_task, MilliGpu(8000));
  EXPECT_EQ(trace.jobs.back().name, "59");
  EXPECT_EQ(trace.jobs.back().submit, 1779 * kSecond);
  EXPECT_EQ(trace.jobs.back().line, 61);
  EXPECT_EQ(TotalMilliGpu(trace), 170 * 1000);
}

TEST(TraceTiresias, SplitsAndMakesTimesRelative) {
  const Trace trace = MustRead(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "j1,16,200,1,resnet,100,1\n"
      "j2,12,100,1,vgg,50.5,1\n"
      "j3,3,150,1,vgg,1,1\n"
      "j4,zero,150,1,vgg,1,1\n",
      Format::kTiresias);
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.jobs[0].name, "j2");
  EXPECT_EQ(trace.jobs[0].submit, 0);
  EXPECT_EQ(trace.jobs[0].duration, 50500);
  EXPECT_EQ(trace.jobs[0].tasks, 2);
  EXPECT_EQ(trace.jobs[0].gpu_per_task, MilliGpu(6000));
  EXPECT_EQ(trace.jobs[1].name, "j3");
  EXPECT_EQ(trace.jobs[1].tasks, 1);
  EXPECT_EQ(trace.jobs[1].gpu_per_task, MilliGpu(3000));
  EXPECT_EQ(trace.jobs[2].name, "j1");
  EXPECT_EQ(trace.jobs[2].submit, 100 * kSecond);
  EXPECT_EQ(trace.jobs[2].tasks, 2);
  EXPECT_EQ(trace.jobs[2].gpu_per_task, MilliGpu(8000));
  ASSERT_EQ(trace.bad_rows.size(), 1u);
  EXPECT_EQ(trace.bad_rows[0].line, 5);
  EXPECT_EQ(trace.bad_rows[0].problem, "num_gpu: not a number: \"zero\"");
}

// ---- openb ----

TEST(TraceOpenb, ReadsTheShippedPodList) {
  const Trace trace = MustReadFile(kTraces + "openb/openb_pod_list_default.csv");
  ASSERT_EQ(trace.jobs.size(), 8152u);
  EXPECT_TRUE(trace.bad_rows.empty());
  EXPECT_TRUE(SortedBySubmit(trace));
  int fractional = 0, cpu_only = 0, multi = 0;
  for (const TraceJob& job : trace.jobs) {
    EXPECT_EQ(job.tasks, 1);  // pods are never split
    const std::int64_t gpu = job.gpu_per_task.value();
    if (gpu == 0) ++cpu_only;
    if (gpu > 0 && gpu < 1000) ++fractional;
    if (gpu > 1000) ++multi;
    EXPECT_TRUE(gpu < 1000 || gpu % 1000 == 0) << job.name;
    EXPECT_TRUE(job.gpu_models.empty());
  }
  EXPECT_EQ(fractional, 3078);
  EXPECT_EQ(cpu_only, 1088);
  EXPECT_EQ(multi, 44 + 16 + 15);
  EXPECT_EQ(TotalMilliGpu(trace), 6086800);

  const TraceJob* first = Find(trace, "openb-pod-0001");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->line, 3);
  EXPECT_EQ(first->submit, 427061 * kSecond);
  EXPECT_EQ(first->duration, (12902960 - 427061) * kSecond);
  EXPECT_EQ(first->gpu_per_task, MilliGpu(460));
  EXPECT_EQ(first->cpu_per_task, MilliCpu(6000));
  EXPECT_EQ(first->memory_per_task, MemMiB(12288));
  EXPECT_EQ(first->priority_class, "LS");
  const TraceJob* eight = Find(trace, "openb-pod-0017");
  ASSERT_NE(eight, nullptr);
  EXPECT_EQ(eight->gpu_per_task, MilliGpu(8000));
  EXPECT_EQ(eight->priority_class, "Burstable");
  const TraceJob* pending = Find(trace, "openb-pod-0061");  // never scheduled
  ASSERT_NE(pending, nullptr);
  EXPECT_EQ(pending->duration, (10001403 - 10001278) * kSecond);
}

constexpr const char* kOpenbHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(TraceOpenb, FractionsModelsAndDurations) {
  const Trace trace = MustRead(std::string(kOpenbHeader) +
                                   "p0,4000,8192,1,250,V100M16|V100M32,BE,Running,100,400,150\n"
                                   "p1,8000,16384,2,1000,,LS,Running,110,200,\n"
                                   "p2,1000,1024,0,0, T4 | | A10 ,Burstable,Running,120,130,0\n"
                                   "p3,1000,1024,1,1000,G2,LS,Running,130,130,130\n",
                               Format::kOpenb);
  ASSERT_EQ(trace.jobs.size(), 4u);
  EXPECT_TRUE(trace.bad_rows.empty());
  const TraceJob& p0 = trace.jobs[0];
  EXPECT_EQ(p0.name, "p0");
  EXPECT_EQ(p0.submit, 0);
  EXPECT_EQ(p0.duration, 250 * kSecond);  // from scheduled_time, not creation_time
  EXPECT_EQ(p0.tasks, 1);
  EXPECT_EQ(p0.gpu_per_task, MilliGpu(250));
  EXPECT_EQ(p0.gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(p0.priority_class, "BE");
  const TraceJob& p1 = trace.jobs[1];
  EXPECT_EQ(p1.submit, 10 * kSecond);
  EXPECT_EQ(p1.duration, 90 * kSecond);  // no scheduled_time: from creation_time
  EXPECT_EQ(p1.tasks, 1);                // one pod of two GPUs, not two tasks
  EXPECT_EQ(p1.gpu_per_task, MilliGpu(2000));
  EXPECT_TRUE(p1.gpu_models.empty());
  const TraceJob& p2 = trace.jobs[2];
  EXPECT_EQ(p2.gpu_per_task, MilliGpu(0));
  EXPECT_EQ(p2.duration, 10 * kSecond);  // scheduled_time 0 is before creation_time
  EXPECT_EQ(p2.gpu_models, (std::vector<std::string>{"T4", "A10"}));
  EXPECT_EQ(trace.jobs[3].duration, 0);
  EXPECT_EQ(trace.jobs[3].gpu_per_task, MilliGpu(1000));
}

TEST(TraceOpenb, BadRows) {
  const Trace trace = MustRead(std::string(kOpenbHeader) +
                                   "a,1000,1024,9,1000,,LS,Running,1,2,1\n"     // 2
                                   "b,1000,1024,2,500,,LS,Running,1,2,1\n"      // 3
                                   "c,1000,1024,1,0,,LS,Running,1,2,1\n"        // 4
                                   "d,1000,1024,0,300,,LS,Running,1,2,1\n"      // 5
                                   "e,1000,1024,1,1500,,LS,Running,1,2,1\n"     // 6
                                   "f,1000,1024,1,500,,LS,Running,10,5,\n"      // 7
                                   "g,1000,1024,1,500,,LS,Running,1,5,8\n"      // 8
                                   "h,-1,1024,1,500,,LS,Running,1,5,2\n"        // 9
                                   "i,1000,1024,1,500,,LS,Running,1,x,2\n"      // 10
                                   "j,1000,1024,1,500,,LS,Running,50,60,55\n",  // 11
                               Format::kOpenb);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].name, "j");
  EXPECT_EQ(trace.jobs[0].submit, 0);  // the earliest valid submission
  EXPECT_EQ(trace.jobs[0].duration, 5 * kSecond);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {2, "num_gpu: must be at most 8: \"9\""},
      {3, "gpu_milli: must be 1000 for a pod of 2 GPUs: \"500\""},
      {4, "gpu_milli: must be at least 1 for a pod with a GPU: \"0\""},
      {5, "gpu_milli: must be 0 for a pod without GPUs: \"300\""},
      {6, "gpu_milli: must be at most 1000: \"1500\""},
      {7, "deletion_time: before the pod started (creation_time): \"5\""},
      {8, "deletion_time: before the pod started (scheduled_time): \"5\""},
      {9, "cpu_milli: negative: \"-1\""},
      {10, "deletion_time: not a number: \"x\""},
  };
  ASSERT_EQ(trace.bad_rows.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(trace.bad_rows[i].line, expected[i].first);
    EXPECT_EQ(trace.bad_rows[i].problem, expected[i].second);
  }
}

TEST(TraceOpenbNodes, ReadsTheShippedGpuNodes) {
  Result<std::vector<TraceNode>> nodes =
      ReadOpenbNodesFile(kTraces + "openb/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 1213u);
  std::int64_t gpus = 0;
  std::set<std::string> models;
  for (const TraceNode& node : *nodes) {
    gpus += node.gpus;
    models.insert(node.gpu_model);
  }
  EXPECT_EQ(gpus, 6212);
  EXPECT_EQ(models, (std::set<std::string>{"G2", "T4", "P100", "V100M16", "G3", "V100M32", "A10"}));
  const TraceNode& first = nodes->front();
  EXPECT_EQ(first.name, "openb-node-0000");
  EXPECT_EQ(first.cpu, MilliCpu(64000));
  EXPECT_EQ(first.memory, MemMiB(262144));
  EXPECT_EQ(first.gpus, 2);
  EXPECT_EQ(first.gpu_model, "P100");
}

TEST(TraceOpenbNodes, CpuOnlyNodesAndWholeReadFailures) {
  Result<std::vector<TraceNode>> nodes = ReadOpenbNodes(
      "sn,cpu_milli,memory_mib,gpu,model\r\nn0,32000,262144,0,\r\nn1,96000,786432,8,V100M32\r\n",
      "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].gpus, 0);
  EXPECT_EQ((*nodes)[0].gpu_model, "");
  EXPECT_EQ((*nodes)[1].gpu_model, "V100M32");

  auto error = [](std::string_view text) {
    Result<std::vector<TraceNode>> read = ReadOpenbNodes(text, "nodes.csv");
    EXPECT_FALSE(read.ok()) << text;
    return read.ok() ? std::string() : read.status().message();
  };
  EXPECT_EQ(error("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,x,\n"),
            "nodes.csv:2: gpu: not a number: \"x\"");
  EXPECT_EQ(error("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1,T4\n\nn1,1,1,1\n"),
            "nodes.csv:4: expected 5 columns, found 4");
  EXPECT_EQ(error("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1,T4\nn0,1,1,1,T4\n"),
            "nodes.csv:3: sn: node \"n0\" appears twice (first on line 2)");
  EXPECT_EQ(error("sn,cpu_milli,gpu,model\n"), "nodes.csv:1: missing column \"memory_mib\"");
}

// ---- Arbiter's own CSV ----

TEST(TraceCsv, ReadsAllColumns) {
  const Trace trace = MustRead(
      "name,submit,duration,queue,user,priority_class,kind,tasks,gpus,cpu,memory,gpu_models,"
      "checkpoint_interval\n"
      "pretrain,10.5,3600,training,alice,P1,training,4,8,32,262144,H800|A100-80G,600\n"
      "notebook,0,60,dev,bob,P2,inference,1,0.5,2.5,16384,,\n"
      "\"eval, small\",5,1.25,dev,,,batch,,500m,500m,,,\n",
      Format::kCsv);
  EXPECT_TRUE(trace.bad_rows.empty());
  ASSERT_EQ(trace.jobs.size(), 3u);
  const TraceJob& notebook = trace.jobs[0];
  EXPECT_EQ(notebook.name, "notebook");
  EXPECT_EQ(notebook.submit, 0);
  EXPECT_EQ(notebook.gpu_per_task, MilliGpu(500));
  EXPECT_EQ(notebook.cpu_per_task, MilliCpu(2500));
  EXPECT_EQ(notebook.checkpoint_interval, 0);
  const TraceJob& eval = trace.jobs[1];
  EXPECT_EQ(eval.name, "eval, small");
  EXPECT_EQ(eval.submit, 5 * kSecond);
  EXPECT_EQ(eval.duration, 1250);
  EXPECT_EQ(eval.tasks, 1);
  EXPECT_EQ(eval.gpu_per_task, MilliGpu(500));
  EXPECT_EQ(eval.cpu_per_task, MilliCpu(500));
  EXPECT_EQ(eval.memory_per_task, MemMiB(0));
  EXPECT_EQ(eval.kind, "batch");
  EXPECT_TRUE(eval.user.empty());
  const TraceJob& pretrain = trace.jobs[2];
  EXPECT_EQ(pretrain.submit, 10500);
  EXPECT_EQ(pretrain.duration, 3600 * kSecond);
  EXPECT_EQ(pretrain.queue, "training");
  EXPECT_EQ(pretrain.user, "alice");
  EXPECT_EQ(pretrain.priority_class, "P1");
  EXPECT_EQ(pretrain.kind, "training");
  EXPECT_EQ(pretrain.tasks, 4);
  EXPECT_EQ(pretrain.gpu_per_task, MilliGpu(8000));  // per task, never split
  EXPECT_EQ(pretrain.cpu_per_task, MilliCpu(32000));
  EXPECT_EQ(pretrain.memory_per_task, MemMiB(262144));
  EXPECT_EQ(pretrain.gpu_models, (std::vector<std::string>{"H800", "A100-80G"}));
  EXPECT_EQ(pretrain.checkpoint_interval, 600 * kSecond);
}

TEST(TraceCsv, AnyColumnOrderAndDefaultNames) {
  const Trace trace = MustRead("duration,gpus,submit\n10,16,3\n20,1,1\n", Format::kCsv);
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_EQ(trace.jobs[0].name, "csv-3");
  EXPECT_EQ(trace.jobs[0].submit, 0);
  EXPECT_EQ(trace.jobs[1].name, "csv-2");
  EXPECT_EQ(trace.jobs[1].submit, 2 * kSecond);
  EXPECT_EQ(trace.jobs[1].tasks, 1);
  EXPECT_EQ(trace.jobs[1].gpu_per_task, MilliGpu(16000));
}

TEST(TraceCsv, DecimalsAreExact) {
  const Trace trace = MustRead(
      "name,submit,duration,gpus,cpu,checkpoint_interval\n"
      "a,0,0.0006,0.125,0.001,1e3\n"
      "b,1.5e1,0.0004,125m,1.5,2.5E+1\n"
      "c,0.1,1e-05,1000m,250m,0\n",
      Format::kCsv);
  ASSERT_TRUE(trace.bad_rows.empty()) << trace.bad_rows[0].problem;
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.jobs[0].duration, 1);  // 0.6 ms rounds to 1
  EXPECT_EQ(trace.jobs[0].gpu_per_task, MilliGpu(125));
  EXPECT_EQ(trace.jobs[0].cpu_per_task, MilliCpu(1));
  EXPECT_EQ(trace.jobs[0].checkpoint_interval, 1000 * kSecond);
  EXPECT_EQ(trace.jobs[1].name, "c");
  EXPECT_EQ(trace.jobs[1].submit, 100);
  EXPECT_EQ(trace.jobs[1].duration, 0);
  EXPECT_EQ(trace.jobs[1].gpu_per_task, MilliGpu(1000));
  EXPECT_EQ(trace.jobs[1].cpu_per_task, MilliCpu(250));
  EXPECT_EQ(trace.jobs[2].submit, 15 * kSecond);
  EXPECT_EQ(trace.jobs[2].duration, 0);  // 0.4 ms rounds to 0
  EXPECT_EQ(trace.jobs[2].gpu_per_task, MilliGpu(125));
  EXPECT_EQ(trace.jobs[2].cpu_per_task, MilliCpu(1500));
  EXPECT_EQ(trace.jobs[2].checkpoint_interval, 25 * kSecond);
}

TEST(TraceCsv, BadRows) {
  const Trace trace = MustRead(
      "name,submit,duration,tasks,gpus,memory\n"  // 1
      "a,1,10,1,1.5,0\n"                          // 2: neither a share nor whole GPUs
      "b,1,10,0,1,0\n"                            // 3
      "c,,10,1,1,0\n"                             // 4
      "d,1,10,1,0.3333,0\n"                       // 5
      "e,1,10,1,1,16Gi\n"                         // 6
      "\"f,1,10,1,1,0\n"                          // 7
      "g,-1,10,1,1,0\n"                           // 8
      "h,1,10,1,2,0\n"                            // 9: good
      "i,1,inf,1,1,0\n"                           // 10
      "j,1e99,1,1,1,0\n"                          // 11
      "k,1,1,1,-0.5,0\n",                         // 12
      Format::kCsv);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].name, "h");
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {2,
       "gpus: above 1 GPU must be a whole number (a task takes a share of one GPU or whole GPUs), "
       "got 1.5 GPUs"},
      {3, "tasks: must be at least 1: \"0\""},
      {4, "submit: empty"},
      {5, "gpus: finer than a thousandth: \"0.3333\""},
      {6, "memory: not a number: \"16Gi\""},
      {7, "unterminated quote"},
      {8, "submit: negative: \"-1\""},
      {10, "duration: not a number: \"inf\""},
      {11, "submit: out of range: \"1e99\""},
      {12, "gpus: negative: \"-0.5\""},
  };
  ASSERT_EQ(trace.bad_rows.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(trace.bad_rows[i].line, expected[i].first);
    EXPECT_EQ(trace.bad_rows[i].problem, expected[i].second);
  }
}

TEST(TraceCsv, UnknownAndMissingColumnsFailTheRead) {
  EXPECT_EQ(ReadError("name,submit,duration,gpu\n", Format::kCsv),
            "t.csv:1: unknown column \"gpu\" (did you mean \"gpus\"?)");
  EXPECT_TRUE(HasSubstr(ReadError("submit,duration,colour\n", Format::kCsv),
                        "t.csv:1: unknown column \"colour\" (known: name, submit, duration"));
  EXPECT_EQ(ReadError("name,submit\n", Format::kCsv), "t.csv:1: missing column \"duration\"");
  EXPECT_EQ(ReadError("name,submit,submit\n", Format::kCsv),
            "t.csv:1: header: column \"submit\" appears twice");
}

// ---- Arbiter's own JSON ----

TEST(TraceJson, ReadsJobs) {
  const Trace trace = MustRead(R"({"jobs": [
      {"name": "pretrain", "submit": 10.5, "duration": 3600, "queue": "training",
       "user": "alice", "priority_class": "P1", "kind": "training", "tasks": 4, "gpus": 8,
       "cpu": 32, "memory": 262144, "gpu_models": ["H800", "A100-80G"],
       "checkpoint_interval": 600},
      {"submit": 0, "duration": 60, "gpus": "500m", "cpu": "0.5", "gpu_models": "T4|A10"},
      {"name": "half", "submit": 1, "duration": 1, "gpus": 0.5, "user": null}
    ]})",
                               Format::kJson);
  EXPECT_TRUE(trace.bad_rows.empty());
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.jobs[0].name, "json-2");
  EXPECT_EQ(trace.jobs[0].line, 2);
  EXPECT_EQ(trace.jobs[0].gpu_per_task, MilliGpu(500));
  EXPECT_EQ(trace.jobs[0].cpu_per_task, MilliCpu(500));
  EXPECT_EQ(trace.jobs[0].gpu_models, (std::vector<std::string>{"T4", "A10"}));
  EXPECT_EQ(trace.jobs[1].name, "half");
  EXPECT_EQ(trace.jobs[1].gpu_per_task, MilliGpu(500));
  const TraceJob& pretrain = trace.jobs[2];
  EXPECT_EQ(pretrain.line, 1);
  EXPECT_EQ(pretrain.submit, 10500);
  EXPECT_EQ(pretrain.duration, 3600 * kSecond);
  EXPECT_EQ(pretrain.queue, "training");
  EXPECT_EQ(pretrain.user, "alice");
  EXPECT_EQ(pretrain.priority_class, "P1");
  EXPECT_EQ(pretrain.kind, "training");
  EXPECT_EQ(pretrain.tasks, 4);
  EXPECT_EQ(pretrain.gpu_per_task, MilliGpu(8000));
  EXPECT_EQ(pretrain.cpu_per_task, MilliCpu(32000));
  EXPECT_EQ(pretrain.memory_per_task, MemMiB(262144));
  EXPECT_EQ(pretrain.gpu_models, (std::vector<std::string>{"H800", "A100-80G"}));
  EXPECT_EQ(pretrain.checkpoint_interval, 600 * kSecond);

  const Trace bare =
      MustRead(R"([{"submit": 5, "duration": 1}, {"submit": 2, "duration": 1}])", Format::kJson);
  ASSERT_EQ(bare.jobs.size(), 2u);
  EXPECT_EQ(bare.jobs[0].name, "json-2");
  EXPECT_EQ(bare.jobs[1].submit, 3 * kSecond);
}

TEST(TraceJson, BadJobs) {
  const Trace trace = MustRead(R"({"jobs": [
      {"submit": 1, "duration": 1, "gpu": 1},
      {"submit": "soon", "duration": 1},
      {"duration": 1},
      {"submit": 1, "duration": -2},
      {"submit": 1, "duration": 1, "tasks": 1.5},
      {"submit": 1, "duration": 1, "queue": 7},
      [1, 2],
      {"submit": 1, "duration": 1}
    ]})",
                               Format::kJson);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].line, 8);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {1, "unknown field \"gpu\" (did you mean \"gpus\"?)"},
      {2, "submit: not a number: \"soon\""},
      {3, "submit: missing"},
      {4, "duration: negative: \"-2\""},
      {5, "tasks: not a whole number: \"1.5\""},
      {6, "queue: not a string: 7"},
      {7, "job: not an object: [1,2]"},
  };
  ASSERT_EQ(trace.bad_rows.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(trace.bad_rows[i].line, expected[i].first);
    EXPECT_EQ(trace.bad_rows[i].problem, expected[i].second);
  }
}

TEST(TraceJson, MalformedJsonFailsWithThePosition) {
  const std::string error =
      ReadError("{\"jobs\": [\n  {\"submit\": 1,\n   \"duration\": }\n]}", Format::kJson);
  EXPECT_TRUE(HasSubstr(error, "t.csv:3: malformed JSON: ")) << error;
  EXPECT_TRUE(HasSubstr(error, "line 3")) << error;
  EXPECT_EQ(ReadError(R"({"jobs": {}})", Format::kJson), "t.csv:1: \"jobs\": not an array");
  EXPECT_EQ(ReadError(R"({"job": []})", Format::kJson),
            "t.csv:1: unknown top-level field \"job\" (expected \"jobs\")");
  EXPECT_EQ(ReadError("{}", Format::kJson), "t.csv:1: no \"jobs\" field");
  EXPECT_EQ(ReadError("42", Format::kJson),
            "t.csv:1: expected {\"jobs\": [...]} or an array of jobs");
}

// The trace readers keep the limits of every reader of jobs (job/limits.h): a row outside them
// is a bad row naming the field, never a job.
TEST(TraceLimits, RowsOutsideTheJobLimitsAreBadRows) {
  const std::string long_name(300, 'n');
  Trace t = MustRead(
      "name,submit,duration,gpus,queue\n"
      "ok,0,10,1,q\n" +
          long_name +
          ",1,10,1,q\n"
          "gpu-share,2,10,1.5,q\n",
      Format::kCsv);
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_EQ(t.jobs[0].name, "ok");
  ASSERT_EQ(t.bad_rows.size(), 2u);
  EXPECT_EQ(t.bad_rows[0].line, 3);
  EXPECT_EQ(t.bad_rows[0].problem, "name: must be at most 253 bytes long, got 300");
  EXPECT_EQ(t.bad_rows[1].line, 4);
  EXPECT_EQ(t.bad_rows[1].problem,
            "gpus: above 1 GPU must be a whole number (a task takes a share of one GPU or whole "
            "GPUs), got 1.5 GPUs");
}

}  // namespace
}  // namespace arbiter::trace
