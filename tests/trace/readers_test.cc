// The readers of PAI 2020, Helios, SWF and sacct, the openb variants' column sets, the task split
// option and the error cap every reader shares (docs/traces.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.h"

namespace arbiter::trace {
namespace {

const std::string kTraces = std::string(ARBITER_SOURCE_DIR) + "/data/traces/";
constexpr Millis kSecond = 1000;

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

Trace MustRead(std::string_view text, Format format, const ReadOptions& options = {}) {
  Result<Trace> trace = ReadTrace(text, format, "t.csv", options);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? *trace : Trace{};
}

Trace MustReadFile(const std::string& path, std::string_view format = "",
                   const ReadOptions& options = {}) {
  Result<Trace> trace = ReadTraceFile(path, format, options);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? *trace : Trace{};
}

std::string ReadError(std::string_view text, Format format, const ReadOptions& options = {}) {
  Result<Trace> trace = ReadTrace(text, format, "t.csv", options);
  EXPECT_FALSE(trace.ok());
  return trace.ok() ? std::string() : trace.status().message();
}

const TraceJob* Find(const Trace& trace, std::string_view name) {
  for (const TraceJob& job : trace.jobs) {
    if (job.name == name) return &job;
  }
  return nullptr;
}

std::vector<std::pair<std::int64_t, std::string>> Problems(const Trace& trace) {
  std::vector<std::pair<std::int64_t, std::string>> problems;
  for (const BadRow& row : trace.bad_rows) problems.emplace_back(row.line, row.problem);
  return problems;
}

std::int64_t Skipped(const Trace& trace, std::string_view reason) {
  for (const RowCount& count : trace.skipped) {
    if (count.kind == reason) return count.rows;
  }
  return 0;
}

// ---- Formats and detection ----

TEST(TraceNewFormats, NamesDetectionAndShippedFiles) {
  for (Format format : {Format::kPai, Format::kHelios, Format::kSwf, Format::kSacct}) {
    Result<Format> parsed = ParseFormat(FormatName(format));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, format);
  }
  EXPECT_TRUE(HasSubstr(ParseFormat("slurm").status().message(), "pai, helios, swf, sacct"));
  const std::pair<std::string_view, Format> texts[] = {
      {"job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time\n", Format::kHelios},
      {"job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu\n",
       Format::kPai},
      {"; Version: 2.2\n    1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", Format::kSwf},
      {"1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", Format::kSwf},
      {"JobID|State|Submit|Start|End\n", Format::kSacct},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", Format::kOpenb},
  };
  for (const auto& [text, format] : texts) {
    Result<Format> detected = DetectFormat(text);
    ASSERT_TRUE(detected.ok()) << text << ": " << detected.status().message();
    EXPECT_EQ(*detected, format) << text;
  }
  const std::pair<const char*, Format> files[] = {
      {"helios/cluster_log.csv", Format::kHelios},
      {"swf/NASA-iPSC-1993-3.1-cln.first60.swf", Format::kSwf},
      {"sacct/made-gpu-states.txt", Format::kSacct},
      {"openb/openb_pod_list_variant_columns.csv", Format::kOpenb},
      {"pai/pai_task_table.csv", Format::kPai},  // by its file name: upstream has no header
      {"pai", Format::kPai},                     // the folder
  };
  for (const auto& [file, format] : files) {
    Result<Trace> detected = ReadTraceFile(kTraces + file);
    Result<Trace> named = ReadTraceFile(kTraces + file, FormatName(format));
    ASSERT_TRUE(detected.ok()) << file << ": " << detected.status().message();
    ASSERT_TRUE(named.ok()) << file << ": " << named.status().message();
    EXPECT_EQ(detected->jobs.size(), named->jobs.size()) << file;
    EXPECT_FALSE(detected->jobs.empty()) << file;
    EXPECT_EQ(detected->bad_row_count, 0) << file;
  }
}

// ---- The error cap ----

TEST(TraceErrorCap, ListsFiveOfEachKindAndCountsTheRest) {
  // The openb variant columns with 9,000 rows of one bad kind and 3 of another.
  std::string text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\n";
  for (int i = 0; i < 9000; ++i) text += "p,1000,1024,1,500,\n";  // creation_time: empty
  for (int i = 0; i < 3; ++i) text += "q,1000,1024,1,500,x\n";    // creation_time: not a number
  text += "r,1000,1024,1,500,7\n";
  const Trace trace = MustRead(text, Format::kOpenb);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.bad_row_count, 9003);
  ASSERT_EQ(trace.bad_rows.size(), 8u);  // 5 + 3
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(trace.bad_rows[i].line, i + 2);
    EXPECT_EQ(trace.bad_rows[i].problem, "creation_time: empty");
  }
  EXPECT_EQ(trace.bad_rows[5].problem, "creation_time: not a number: \"x\"");
  ASSERT_EQ(trace.more_bad_rows.size(), 1u);
  EXPECT_EQ(trace.more_bad_rows[0].kind, "creation_time: empty");
  EXPECT_EQ(trace.more_bad_rows[0].rows, 8995);
  EXPECT_EQ(trace.more_bad_rows[0].first_line, 7);
  EXPECT_EQ(trace.more_bad_rows[0].last_line, 9001);
  const std::vector<std::string> lines = DescribeBadRows(trace, "pods.csv");
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[0], "pods.csv:2: creation_time: empty");
  EXPECT_EQ(lines[8], "pods.csv: 8995 more rows with \"creation_time: empty\" (lines 7 to 9001)");

  // Values in quotes do not make kinds of their own; the cap is an option (0: list every row).
  std::string values = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  for (int i = 0; i < 7; ++i) values += "p,1000,1024," + std::to_string(9 + i) + ",1000\n";
  ReadOptions two;
  two.max_bad_rows_per_kind = 2;
  const Trace capped = MustRead(values, Format::kOpenb, two);
  EXPECT_EQ(capped.bad_rows.size(), 2u);
  ASSERT_EQ(capped.more_bad_rows.size(), 1u);
  EXPECT_EQ(capped.more_bad_rows[0].kind, "num_gpu: must be at most 8");
  EXPECT_EQ(capped.more_bad_rows[0].rows, 5);
  ReadOptions all;
  all.max_bad_rows_per_kind = 0;
  const Trace listed = MustRead(values, Format::kOpenb, all);
  EXPECT_EQ(listed.bad_rows.size(), 7u);
  EXPECT_TRUE(listed.more_bad_rows.empty());
  ReadOptions negative;
  negative.max_bad_rows_per_kind = -1;
  EXPECT_TRUE(HasSubstr(ReadError(values, Format::kOpenb, negative), "must not be negative"));
}

TEST(TraceErrorCap, EveryReaderSharesIt) {
  // Rows with the wrong number of columns are capped alike in every format (the bad values each
  // reader finds are capped by the same code, tested above with openb).
  const std::pair<Format, std::string> cases[] = {
      {Format::kPhilly, "timestamp,duration,num_gpus\n"},
      {Format::kTiresias, "job_id,num_gpu,submit_time,duration\n"},
      {Format::kCsv, "submit,duration\n"},
      {Format::kHelios, "job_id,gpu_num,submit_time,duration\n"},
  };
  for (const auto& [format, header] : cases) {
    std::string text = header;
    for (int i = 0; i < 20; ++i) text += "1\n";
    const Trace trace = MustRead(text, format);
    EXPECT_EQ(trace.bad_row_count, 20) << FormatName(format);
    EXPECT_EQ(trace.bad_rows.size(), 5u) << FormatName(format);
    ASSERT_EQ(trace.more_bad_rows.size(), 1u) << FormatName(format);
    EXPECT_EQ(trace.more_bad_rows[0].rows, 15) << FormatName(format);
  }
  std::string swf;
  for (int i = 0; i < 12; ++i) swf += "1 2 3\n";
  const Trace trace = MustRead(swf, Format::kSwf);
  EXPECT_EQ(trace.bad_rows.size(), 5u);
  ASSERT_EQ(trace.more_bad_rows.size(), 1u);
  EXPECT_EQ(trace.more_bad_rows[0].kind, "expected 18 fields, found 3");
  EXPECT_EQ(trace.more_bad_rows[0].rows, 7);
}

// ---- openb: the published variants' column sets ----

TEST(TraceOpenbVariants, WithoutTimesEveryPodArrivesAtZeroInFileOrderAndNeverEnds) {
  const Trace trace = MustReadFile(kTraces + "openb/openb_pod_list_variant_columns.csv");
  ASSERT_EQ(trace.jobs.size(), 40u);
  EXPECT_EQ(trace.bad_row_count, 0);
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    EXPECT_EQ(trace.jobs[i].line, static_cast<std::int64_t>(i) + 2);  // file order
    EXPECT_EQ(trace.jobs[i].submit, 0);
    EXPECT_EQ(trace.jobs[i].duration, 366LL * 24 * 3600 * kSecond);  // the longest allowed
    EXPECT_EQ(trace.jobs[i].tasks, 1);
    EXPECT_TRUE(trace.jobs[i].gpu_models.empty());
  }
  EXPECT_EQ(trace.jobs[1].name, "openb-pod-0001");
  EXPECT_EQ(trace.jobs[1].gpu_per_task.value(), 460);
  EXPECT_EQ(trace.jobs[1].cpu_per_task.value(), 6000);
  EXPECT_EQ(trace.jobs[1].memory_per_task.value(), 12288);

  const Trace spec = MustReadFile(kTraces + "openb/openb_pod_list_variant_gpu_spec.csv");
  ASSERT_EQ(spec.jobs.size(), 30u);
  EXPECT_EQ(spec.jobs[1].gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(spec.jobs[3].gpu_models, (std::vector<std::string>{"T4"}));
  EXPECT_TRUE(spec.jobs[0].gpu_models.empty());

  // creation_time without deletion_time: submitted then, never ends; deletion_time needs it.
  const Trace created = MustRead(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\na,1,1,0,0,30\nb,1,1,0,0,10\n",
      Format::kOpenb);
  ASSERT_EQ(created.jobs.size(), 2u);
  EXPECT_EQ(created.jobs[0].name, "b");
  EXPECT_EQ(created.jobs[1].submit, 20 * kSecond);
  EXPECT_EQ(
      ReadError("name,cpu_milli,memory_mib,num_gpu,gpu_milli,deletion_time\n", Format::kOpenb),
      "t.csv:1: column \"deletion_time\" without \"creation_time\" (a duration needs both)");
  EXPECT_EQ(ReadError("name,cpu_milli,memory_mib,num_gpu\n", Format::kOpenb),
            "t.csv:1: missing column \"gpu_milli\"");
}

// ---- The task split ----

TEST(TraceTaskSplit, TiresiasWholeJobOnNodesOrOneTaskPerGpu) {
  constexpr std::string_view kText =
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "a,4,0,1,vgg19,100,30\n"
      "b,16,5,1,vgg19,100,30\n"
      "c,1,6,1,vgg19,100,30\n";
  const Trace node = MustRead(kText, Format::kTiresias);
  ReadOptions per_gpu;
  per_gpu.split = TaskSplit::kGpu;
  const Trace gpu = MustRead(kText, Format::kTiresias, per_gpu);
  ASSERT_EQ(node.jobs.size(), 3u);
  ASSERT_EQ(gpu.jobs.size(), 3u);
  EXPECT_EQ(node.jobs[0].tasks, 1);
  EXPECT_EQ(node.jobs[0].gpu_per_task.value(), 4000);
  EXPECT_EQ(node.jobs[1].tasks, 2);
  EXPECT_EQ(node.jobs[1].gpu_per_task.value(), 8000);
  EXPECT_EQ(gpu.jobs[0].tasks, 4);
  EXPECT_EQ(gpu.jobs[1].tasks, 16);
  EXPECT_EQ(gpu.jobs[2].tasks, 1);
  for (const TraceJob& job : gpu.jobs) EXPECT_EQ(job.gpu_per_task.value(), 1000);

  // The shipped toy trace: the same GPUs either way, one task per GPU with `gpu`.
  const Trace toy_node = MustReadFile(kTraces + "tiresias/60_job.csv");
  const Trace toy_gpu = MustReadFile(kTraces + "tiresias/60_job.csv", "", per_gpu);
  ASSERT_EQ(toy_node.jobs.size(), 60u);
  ASSERT_EQ(toy_gpu.jobs.size(), 60u);
  for (std::size_t i = 0; i < 60; ++i) {
    EXPECT_EQ(toy_node.jobs[i].tasks * toy_node.jobs[i].gpu_per_task.value(),
              toy_gpu.jobs[i].tasks * toy_gpu.jobs[i].gpu_per_task.value());
    EXPECT_EQ(toy_gpu.jobs[i].gpu_per_task.value(), 1000);
  }

  EXPECT_EQ(TaskSplitName(TaskSplit::kGpu), std::string("gpu"));
  EXPECT_EQ(*ParseTaskSplit("node"), TaskSplit::kNode);
  EXPECT_TRUE(HasSubstr(ParseTaskSplit("count").status().message(), "unknown task split"));
}

// ---- PAI 2020 ----

TEST(TracePai, ReadsTheShippedTablesJoined) {
  const Trace trace = MustReadFile(kTraces + "pai");
  EXPECT_EQ(trace.bad_row_count, 0) << (trace.bad_rows.empty() ? "" : trace.bad_rows[0].problem);
  ASSERT_EQ(trace.jobs.size(), 11u);  // 13 tasks, one Running, one Waiting
  EXPECT_EQ(Skipped(trace, "still running when the trace ends (status Running)"), 1);
  EXPECT_EQ(Skipped(trace, "never started (status Waiting)"), 1);
  // The earliest submission (the job table's start_time 1739100) is 0.
  const TraceJob* first = Find(trace, "4f057009a5d481acec67b088/tensorflow");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->submit, 0);
  EXPECT_EQ(first->duration, 38 * kSecond);  // the task's end - its start
  EXPECT_EQ(first->user, "58540f191766");
  EXPECT_EQ(first->gpu_per_task.value(), 500);       // 50 %
  EXPECT_EQ(first->cpu_per_task.value(), 6000);      // 600 %
  EXPECT_EQ(first->memory_per_task.value(), 30000);  // 29.296875 GiB
  EXPECT_EQ(first->gpu_models, std::vector<std::string>{"MISC"});
  // ps and worker of one job: two jobs, submitted when the job was.
  const TraceJob* ps = Find(trace, "af724763f4f5d0beef445849/ps");
  const TraceJob* worker = Find(trace, "af724763f4f5d0beef445849/worker");
  ASSERT_NE(ps, nullptr);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(ps->submit, (2081000 - 1739100) * kSecond);
  EXPECT_EQ(worker->submit, ps->submit);
  EXPECT_EQ(ps->gpu_per_task.value(), 0);  // empty plan_gpu: a CPU task
  EXPECT_TRUE(ps->gpu_models.empty());
  EXPECT_EQ(worker->tasks, 2);
  EXPECT_EQ(worker->gpu_per_task.value(), 500);
  EXPECT_EQ(worker->gpu_models, std::vector<std::string>{"T4"});
  const TraceJob* eight = Find(trace, "0c1d2e3f4a5b6c7d8e9f0a1b/worker");
  ASSERT_NE(eight, nullptr);
  EXPECT_EQ(eight->gpu_per_task.value(), 8000);
  const TraceJob* odd = Find(trace, "2e3f4a5b6c7d8e9f0a1b2c3d/tensorflow");
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(odd->gpu_per_task.value(), 2000);  // 150 %: rounded up to whole GPUs
  const TraceJob* failed = Find(trace, "1d2e3f4a5b6c7d8e9f0a1b2c/worker");
  ASSERT_NE(failed, nullptr);  // a failed task ran, and is replayed
  EXPECT_EQ(failed->tasks, 4);
  EXPECT_EQ(failed->duration, 360 * kSecond);

  // The task table by its name: the job table beside it is joined too.
  const Trace beside = MustReadFile(kTraces + "pai/pai_task_table.csv");
  ASSERT_EQ(beside.jobs.size(), trace.jobs.size());
  for (std::size_t i = 0; i < beside.jobs.size(); ++i) {
    EXPECT_EQ(beside.jobs[i].name, trace.jobs[i].name);
    EXPECT_EQ(beside.jobs[i].submit, trace.jobs[i].submit);
  }
}

TEST(TracePai, TaskTableAloneHeaderAndBadRows) {
  // With a header; without the job table a task is submitted at its launch and has no user.
  const Trace trace = MustRead(
      "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
      "j1,worker,2,Terminated,100,160,400,15,50,T4\n"   // 2
      "j2,worker,0,Terminated,100,160,400,15,50,T4\n"   // 3
      "j3,worker,1,Terminated,100,90,400,15,50,T4\n"    // 4
      "j4,worker,1,Terminated,100,160,400,15,x,T4\n"    // 5
      ",worker,1,Terminated,100,160,400,15,50,T4\n"     // 6
      "j6,worker,1,Terminated,,160,400,15,50,T4\n"      // 7
      "j7,worker,1,Terminated,100,160,-400,15,50,T4\n"  // 8
      "j8,worker,1,Terminated,100,160,400,15,50\n",     // 9
      Format::kPai);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].name, "j1/worker");
  EXPECT_EQ(trace.jobs[0].submit, 0);
  EXPECT_EQ(trace.jobs[0].duration, 60 * kSecond);
  EXPECT_TRUE(trace.jobs[0].user.empty());
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {3, "inst_num: must be at least 1: \"0\""},
      {4, "end_time: before start_time: \"90\""},
      {5, "plan_gpu: not a number: \"x\""},
      {6, "job_name: empty"},
      {7, "start_time: empty"},
      {8, "plan_cpu: negative: \"-400\""},
      {9, "expected 10 columns, found 9"},
  };
  EXPECT_EQ(Problems(trace), expected);

  // Joined with a job table: a task whose job is missing, or whose job row is bad.
  Result<Trace> joined = ReadPaiTables(
      "a,worker,1,Terminated,100,160,400,15,50,T4\n"
      "b,worker,1,Terminated,100,160,400,15,50,T4\n"
      "c,worker,1,Terminated,100,160,400,15,50,T4\n",
      "tasks.csv",
      "a,id-a,u1,Terminated,90,160\n"
      "b,id-b,u2,Terminated,soon,160\n",
      "jobs.csv");
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  ASSERT_EQ(joined->jobs.size(), 1u);
  EXPECT_EQ(joined->jobs[0].user, "u1");
  const std::vector<std::pair<std::int64_t, std::string>> join_problems = {
      {2,
       "job_name: the job's row in jobs.csv (line 2) is bad: start_time: not a number: "
       "\"soon\""},
      {3, "job_name: not in the job table: \"c\""},
  };
  EXPECT_EQ(Problems(*joined), join_problems);
  // A job table row that cannot be split fails the read; the job table alone is refused.
  Result<Trace> broken = ReadPaiTables("a,worker,1,Terminated,100,160,400,15,50,T4\n", "tasks.csv",
                                       "a,id-a,u1\n", "jobs.csv");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message(), "jobs.csv:1: expected 6 columns, found 3");
  EXPECT_TRUE(
      HasSubstr(ReadError("job_name,inst_id,user,status,start_time,end_time\n", Format::kPai),
                "this is PAI's job table"));
  Result<Trace> no_folder = ReadTraceFile(kTraces + "helios", "pai");
  ASSERT_FALSE(no_folder.ok());
  EXPECT_TRUE(
      HasSubstr(no_folder.status().message(), "a pai trace folder holds pai_task_table.csv"));
}

// ---- Helios ----

TEST(TraceHelios, ReadsTheShippedLog) {
  const Trace trace = MustReadFile(kTraces + "helios/cluster_log.csv");
  EXPECT_EQ(trace.bad_row_count, 0);
  ASSERT_EQ(trace.jobs.size(), 9u);  // 10 rows, one cancelled before it ran
  EXPECT_EQ(Skipped(trace, "cancelled before it ran (state CANCELLED, duration 0)"), 1);
  const TraceJob* first = Find(trace, "1425511");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->submit, 0);
  EXPECT_EQ(first->duration, 36848 * kSecond);
  EXPECT_EQ(first->user, "uXBbc");
  EXPECT_EQ(first->queue, "vcJkd");
  EXPECT_EQ(first->gpu_per_task.value(), 1000);
  EXPECT_EQ(first->cpu_per_task.value(), 1000);
  const TraceJob* two_nodes = Find(trace, "1425515");
  ASSERT_NE(two_nodes, nullptr);
  EXPECT_EQ(two_nodes->submit, 119 * kSecond);
  EXPECT_EQ(two_nodes->tasks, 2);  // node_num
  EXPECT_EQ(two_nodes->gpu_per_task.value(), 8000);
  EXPECT_EQ(two_nodes->cpu_per_task.value(), 32000);
  const TraceJob* three = Find(trace, "1425518");
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->tasks, 3);  // 12 GPUs on 3 nodes
  EXPECT_EQ(three->gpu_per_task.value(), 4000);
  const TraceJob* cpu_job = Find(trace, "1425514");
  ASSERT_NE(cpu_job, nullptr);  // a CPU job stays, without GPUs
  EXPECT_EQ(cpu_job->gpu_per_task.value(), 0);
  EXPECT_EQ(cpu_job->cpu_per_task.value(), 4000);
  ReadOptions per_gpu;
  per_gpu.split = TaskSplit::kGpu;
  const Trace split = MustReadFile(kTraces + "helios/cluster_log.csv", "", per_gpu);
  EXPECT_EQ(Find(split, "1425515")->tasks, 16);
  EXPECT_EQ(Find(split, "1425515")->cpu_per_task.value(), 4000);
}

TEST(TraceHelios, BadRowsAndDurationFromTimes) {
  const Trace trace = MustRead(
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time\n"
      "1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:42:01,2020-06-09 18:52:01\n"
      "2,u,vc,x,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:42:01,2020-06-09 18:52:01\n"
      "3,u,vc,1,1,1,DONE,2020-06-09 18:41:01,2020-06-09 18:42:01,2020-06-09 18:52:01\n"
      "4,u,vc,1,1,1,COMPLETED,2020-06-09,2020-06-09 18:42:01,2020-06-09 18:52:01\n"
      "5,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:42:01,2020-06-09 18:32:01\n",
      Format::kHelios);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].duration, 600 * kSecond);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {3, "gpu_num: not a number: \"x\""},
      {4,
       "state: unknown state \"DONE\" (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL or "
       "SUSPENDED)"},
      {5, "submit_time: not a date and time (YYYY-MM-DD HH:MM:SS): \"2020-06-09\""},
      {6, "end_time: before start_time: \"2020-06-09 18:32:01\""},
  };
  EXPECT_EQ(Problems(trace), expected);
  EXPECT_EQ(ReadError("job_id,gpu_num,submit_time,start_time\n", Format::kHelios),
            "t.csv:1: missing column \"duration\" (or both \"start_time\" and \"end_time\")");
}

// ---- SWF ----

TEST(TraceSwf, ReadsTheShippedNasaLog) {
  const Trace trace = MustReadFile(kTraces + "swf/NASA-iPSC-1993-3.1-cln.first60.swf");
  EXPECT_EQ(trace.bad_row_count, 0);
  ASSERT_EQ(trace.jobs.size(), 60u);
  EXPECT_TRUE(trace.skipped.empty());
  const TraceJob& first = trace.jobs.front();
  EXPECT_EQ(first.name, "1");
  EXPECT_EQ(first.line, 33);
  EXPECT_EQ(first.submit, 0);
  EXPECT_EQ(first.duration, 1451 * kSecond);
  EXPECT_EQ(first.user, "user-1");
  EXPECT_TRUE(first.queue.empty());  // -1: unknown
  // 128 processors, one GPU each by default: 16 tasks of 8 GPUs.
  EXPECT_EQ(first.tasks, 16);
  EXPECT_EQ(first.gpu_per_task.value(), 8000);
  const TraceJob* small = Find(trace, "57");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->submit, 25574 * kSecond);
  EXPECT_EQ(small->tasks, 1);
  EXPECT_EQ(small->gpu_per_task.value(), 1000);
  // 32 processors per GPU: the 128-processor job asks for 4 GPUs, one processor for 1.
  ReadOptions coarse;
  coarse.processors_per_gpu = 32;
  const Trace fewer = MustReadFile(kTraces + "swf/NASA-iPSC-1993-3.1-cln.first60.swf", "", coarse);
  EXPECT_EQ(fewer.jobs.front().tasks, 1);
  EXPECT_EQ(fewer.jobs.front().gpu_per_task.value(), 4000);
  EXPECT_EQ(Find(fewer, "57")->gpu_per_task.value(), 1000);
  ReadOptions zero;
  zero.processors_per_gpu = 0;
  EXPECT_TRUE(HasSubstr(ReadError("", Format::kSwf, zero), "processors per GPU must be 1 to"));
}

TEST(TraceSwf, QueuesStatusesAndBadRows) {
  const Trace trace = MustRead(
      "; Queue:  1  batch\n"
      "1 10 -1 100 4 -1 -1 4 -1 -1 1 7 1 -1 1 -1 -1 -1\n"    // 2
      "2 20 -1 100 -1 -1 -1 8 -1 -1 0 7 1 -1 2 -1 -1 -1\n"   // 3: requested processors
      "3 30 -1 -1 4 -1 -1 4 -1 -1 5 7 1 -1 1 -1 -1 -1\n"     // 4: cancelled, never ran
      "4 40 -1 -1 4 -1 -1 4 -1 -1 1 7 1 -1 1 -1 -1 -1\n"     // 5
      "5 50 -1 100 -1 -1 -1 -1 -1 -1 1 7 1 -1 1 -1 -1 -1\n"  // 6
      "6 x -1 100 4 -1 -1 4 -1 -1 1 7 1 -1 1 -1 -1 -1\n"     // 7
      "7 70 -1 100 -7 -1 -1 4 -1 -1 1 7 1 -1 1 -1 -1 -1\n"   // 8
      "8 80 -1 100 4 -1 -1 4 -1 -1 1 7 1\n",                 // 9
      Format::kSwf);
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_EQ(trace.jobs[0].queue, "batch");
  EXPECT_EQ(trace.jobs[0].gpu_per_task.value(), 4000);
  EXPECT_EQ(trace.jobs[1].queue, "queue-2");
  EXPECT_EQ(trace.jobs[1].gpu_per_task.value(), 8000);
  EXPECT_EQ(trace.jobs[1].submit, 10 * kSecond);
  EXPECT_EQ(Skipped(trace, "cancelled before it ran (status 5, no run time or processors)"), 1);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {5, "run time (field 4): unknown (-1)"},
      {6,
       "allocated processors (field 5): no processors (neither allocated nor requested "
       "processors given): \"-1\""},
      {7, "submit time (field 2): not a number: \"x\""},
      {8, "allocated processors (field 5): must be at least -1: \"-7\""},
      {9, "expected 18 fields, found 13"},
  };
  EXPECT_EQ(Problems(trace), expected);
}

// ---- sacct ----

TEST(TraceSacct, ReadsTheShippedRealOutput) {
  // Written with --noheader: the fields as the sample's parser names them.
  ReadOptions options;
  options.sacct_columns = {
      "State",       "JobID",       "ReqCPUS",      "ReqMem",          "ReqNodes",
      "Constraints", "Submit",      "Eligible",     "Start",           "Elapsed",
      "Suspended",   "End",         "ExitCode",     "DerivedExitCode", "AllocNodes",
      "NCPUS",       "MaxDiskRead", "MaxDiskWrite", "MaxPages",        "MaxRSS",
      "MaxVMSize",   "CPUTime",     "UserCPU",      "SystemCPU",       "TotalCPU"};
  const Trace trace = MustReadFile(kTraces + "sacct/hpc-cost-simulator.sacct-output-v1.excerpt.txt",
                                   "sacct", options);
  EXPECT_EQ(trace.bad_row_count, 0) << (trace.bad_rows.empty() ? "" : trace.bad_rows[0].problem);
  ASSERT_EQ(trace.jobs.size(), 20u);  // 39 lines: 20 jobs and 19 steps
  EXPECT_EQ(Skipped(trace, "job steps (the job's own line is read)"), 19);
  const TraceJob* first = Find(trace, "67108865");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->submit, 0);
  EXPECT_EQ(first->duration, 316 * kSecond);  // Elapsed 00:05:16
  EXPECT_EQ(first->gpu_per_task.value(), 0);  // the cluster tracked no GPUs
  EXPECT_EQ(first->cpu_per_task.value(), 1000);
  EXPECT_EQ(first->memory_per_task.value(), 100);  // ReqMem 100M
  const TraceJob* cancelled = Find(trace, "67108977");
  ASSERT_NE(cancelled, nullptr);  // cancelled after it started: it ran
  EXPECT_EQ(cancelled->duration, 118 * kSecond);
  // Without the columns the output is refused, naming what is missing.
  Result<Trace> headerless =
      ReadTraceFile(kTraces + "sacct/hpc-cost-simulator.sacct-output-v1.excerpt.txt", "sacct");
  ASSERT_FALSE(headerless.ok());
  EXPECT_TRUE(HasSubstr(headerless.status().message(), "missing column \"JobID\""));

  // The --long field set has no times: it cannot be replayed, and the read says why.
  Result<Trace> long_fields = ReadTraceFile(kTraces + "sacct/slurmio.sacct-long.txt");
  ASSERT_FALSE(long_fields.ok());
  EXPECT_TRUE(HasSubstr(long_fields.status().message(),
                        "slurmio.sacct-long.txt:1: missing column \"Submit\""));
}

TEST(TraceSacct, StatesGpusAndMemory) {
  const Trace trace = MustReadFile(kTraces + "sacct/made-gpu-states.txt");
  EXPECT_EQ(trace.bad_row_count, 0) << (trace.bad_rows.empty() ? "" : trace.bad_rows[0].problem);
  std::set<std::string> names;
  for (const TraceJob& job : trace.jobs) names.insert(job.name);
  EXPECT_EQ(names, (std::set<std::string>{"1001", "1003", "1006", "1007_1", "1007_2", "1008",
                                          "1009", "1010"}));
  EXPECT_EQ(Skipped(trace, "job steps (the job's own line is read)"), 2);
  EXPECT_EQ(Skipped(trace, "never started (Start Unknown, State CANCELLED)"), 1);
  EXPECT_EQ(Skipped(trace, "not ended (State PENDING)"), 1);
  EXPECT_EQ(Skipped(trace, "not ended (State RUNNING)"), 1);
  EXPECT_EQ(Skipped(trace, "not ended (State REQUEUED)"), 1);
  const TraceJob* pretrain = Find(trace, "1001");
  EXPECT_EQ(pretrain->submit, 0);
  EXPECT_EQ(pretrain->duration, 12 * 3600 * kSecond);
  EXPECT_EQ(pretrain->tasks, 1);
  EXPECT_EQ(pretrain->gpu_per_task.value(), 8000);
  EXPECT_EQ(pretrain->gpu_models, std::vector<std::string>{"a100"});
  EXPECT_EQ(pretrain->cpu_per_task.value(), 64000);
  EXPECT_EQ(pretrain->memory_per_task.value(), 512 * 1024);
  EXPECT_EQ(pretrain->user, "alice");
  EXPECT_EQ(pretrain->queue, "gpu");
  const TraceJob* cancelled = Find(trace, "1003");
  EXPECT_EQ(cancelled->duration, 30 * 60 * kSecond);  // Elapsed 30:00
  EXPECT_EQ(cancelled->gpu_per_task.value(), 2000);
  const TraceJob* ddp = Find(trace, "1006");
  EXPECT_EQ(ddp->tasks, 2);  // 16 GPUs on 2 nodes
  EXPECT_EQ(ddp->gpu_per_task.value(), 8000);
  EXPECT_EQ(ddp->memory_per_task.value(), 512 * 1024);
  EXPECT_EQ(Find(trace, "1007_1")->duration, (26 * 3600 + 3 * 60 + 4) * kSecond);
  EXPECT_EQ(Find(trace, "1007_2")->gpu_models, std::vector<std::string>{"h100"});
  EXPECT_EQ(Find(trace, "1007_2")->gpu_per_task.value(), 1000);
  const TraceJob* cpu_job = Find(trace, "1008");
  EXPECT_EQ(cpu_job->gpu_per_task.value(), 0);
  EXPECT_EQ(cpu_job->tasks, 2);  // one task per node
  EXPECT_EQ(cpu_job->cpu_per_task.value(), 32000);
  EXPECT_EQ(cpu_job->memory_per_task.value(), 128000);  // mem=250G over 2 nodes
  EXPECT_EQ(Find(trace, "1010")->queue, "scavenger");
  ReadOptions per_gpu;
  per_gpu.split = TaskSplit::kGpu;
  const Trace split = MustReadFile(kTraces + "sacct/made-gpu-states.txt", "", per_gpu);
  EXPECT_EQ(Find(split, "1006")->tasks, 16);
  EXPECT_EQ(Find(split, "1006")->cpu_per_task.value(), 8000);
}

TEST(TraceSacct, BadRowsTrailingSeparatorAndElapsed) {
  const Trace trace = MustRead(
      "JobID|State|Submit|Start|End|Elapsed|AllocTRES|ReqMem|\n"
      "1|COMPLETED|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00|gres/"
      "gpu=1|1G|\n"
      "2|DONE|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00||1G|\n"
      "3|FAILED|yesterday|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00||1G|\n"
      "4|FAILED|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|1:2:3:4||1G|\n"
      "5|FAILED|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00|gres/gpu=x|1G|\n"
      "6|FAILED|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00||lots|\n"
      "7|FAILED|2024-03-01T08:00:00|2024-03-01T08:02:00|2024-03-01T08:01:00|||1G|\n"
      "8|FAILED|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00|cpu|1G|\n"
      "9||2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:00||1G|\n"
      "10|COMPLETED|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00|01:30.5||2Gn|\n",
      Format::kSacct);
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_EQ(trace.jobs[0].gpu_per_task.value(), 1000);
  EXPECT_EQ(trace.jobs[0].memory_per_task.value(), 1024);
  EXPECT_EQ(trace.jobs[1].duration, 90500);
  EXPECT_EQ(trace.jobs[1].memory_per_task.value(), 2048);
  const std::vector<std::pair<std::int64_t, std::string>> expected = {
      {3, "State: unknown state \"DONE\""},
      {4, "Submit: not a date and time (YYYY-MM-DD HH:MM:SS): \"yesterday\""},
      {5, "Elapsed: not a duration ([DD-[HH:]]MM:SS): \"1:2:3:4\""},
      {6, "AllocTRES gres/gpu: not a number: \"x\""},
      {7, "ReqMem: not an amount of memory ([number][K|M|G|T][c|n]): \"lots\""},
      {8, "End: before Start: \"2024-03-01T08:01:00\""},
      {9, "AllocTRES: not a TRES list (name=count,...): \"cpu\""},
      {10, "State: empty"},
  };
  EXPECT_EQ(Problems(trace), expected);
  EXPECT_TRUE(HasSubstr(ReadError("State|Submit|Start|End\n", Format::kSacct),
                        "t.csv:1: missing column \"JobID\""));
  EXPECT_EQ(ReadError("JobID|Submit|End\n", Format::kSacct), "t.csv:1: missing column \"Start\"");
}

}  // namespace
}  // namespace arbiter::trace
