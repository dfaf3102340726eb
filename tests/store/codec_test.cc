// The store's records: JSON round trips, strict decoding with errors naming the field, the checks
// of specs and events, the job state machine, and the mapping to a ClusterState's ids.
#include "store/codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "job/resolve.h"
#include "store/binary.h"
#include "store/store.h"
#include "testing/builders.h"

namespace arbiter::store {
namespace {

using nlohmann::json;

job::JobSpec FullSpec() {
  job::JobSpec s;
  s.name = "llama-70b";
  s.user = "alice";
  s.queue = "training";
  s.priority_class = "P1";
  TaskGroup launcher;
  launcher.name = "launcher";
  launcher.request.cpu = MilliCpu(4000);
  launcher.request.memory = MemMiB(16384);
  TaskGroup worker;
  worker.name = "worker";
  worker.count = 4;
  worker.request.gpu = MilliGpu(8000);
  worker.request.gpu_memory = GpuMemMiB(81920);
  worker.request.cpu = MilliCpu(96000);
  worker.request.memory = MemMiB(1536 * 1024);
  s.groups = {launcher, worker};
  s.gpu_types = {"H800", "A100-80G"};
  s.topology_level = "leaf";
  s.topology_mode = ConstraintMode::kPreferred;
  s.node_selector = {{"zone", "a"}};
  Toleration t1;
  t1.key = "dedicated";
  t1.value = "training";
  t1.effect = TaintEffect::kPreferNoSchedule;
  Toleration t2;
  t2.op = Toleration::Op::kExists;
  s.tolerations = {t1, t2};
  s.labels = {{"team", "nlp"}, {"app", "llama"}};
  s.affinity = {job::AffinitySpec{{{"app", "data"}}, "leaf", false, false},
                job::AffinitySpec{{{"app", "llama"}}, "node", true, true}};
  s.submit_time = 1'700'000'000'000;
  s.runtime_estimate = 20 * 3600 * 1000;
  s.checkpoint_interval = 3600 * 1000;
  s.restart_overhead = 120'000;
  s.command = "torchrun train.py --config 70b.yaml";
  s.env = {{"NCCL_DEBUG", "INFO"}, {"HF_HOME", "/data/hf"}};
  s.max_retries = 3;
  s.idempotency_key = "req-1";
  return s;
}

job::JobSpec MinimalSpec() {
  job::JobSpec s;
  s.name = "tiny";
  s.user = "bob";
  s.queue = "batch";
  s.priority_class = "P2";
  TaskGroup g;
  g.name = "main";
  s.groups = {g};
  return s;
}

job::StoredAllocation SomeAllocation() {
  job::StoredAllocation a;
  a.gpu_type = "H800";
  job::StoredTask t;
  t.group = 1;
  t.index = 2;
  t.node = "h800-3";
  t.cpu = MilliCpu(96000);
  t.memory = MemMiB(1024);
  t.devices = {{0, MilliGpu(1000), GpuMemMiB(0)}, {1, MilliGpu(500), GpuMemMiB(20480)}};
  a.tasks = {t};
  return a;
}

// The error of decoding `text` as a job spec.
std::string SpecError(const std::string& text, std::string_view path = "") {
  Result<job::JobSpec> r = DecodeJobSpec(text, path);
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? std::string() : r.status().message();
}

TEST(StoreCodec, JobSpecRoundTrip) {
  job::JobSpec exec_form = MinimalSpec();
  exec_form.argv = {"python", "train.py", "--lr", "3e-4 with spaces"};
  for (const job::JobSpec& spec : {FullSpec(), MinimalSpec(), exec_form}) {
    const std::string text = EncodeJobSpec(spec);
    Result<job::JobSpec> back = DecodeJobSpec(text);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_TRUE(*back == spec) << text;
    EXPECT_EQ(EncodeJobSpec(*back), text);
  }
}

TEST(StoreBinaryCodec, JobSpecAndAllocationRoundTrip) {
  job::JobSpec unconstrained = MinimalSpec();
  unconstrained.topology_mode = ConstraintMode::kUnconstrained;
  unconstrained.submit_time = -5;  // signed numbers survive too
  unconstrained.argv = {"python", "train.py", "--lr=3e-4"};
  for (const job::JobSpec& spec : {FullSpec(), MinimalSpec(), unconstrained}) {
    const std::string bytes = EncodeJobSpecBinary(spec);
    EXPECT_EQ(static_cast<std::uint8_t>(bytes[0]), kBinaryFormat);
    job::JobSpec back;
    Status st = DecodeJobSpecBinary(bytes, back);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(back == spec);
    EXPECT_EQ(EncodeJobSpecBinary(back), bytes);
    EXPECT_LT(bytes.size(), EncodeJobSpec(spec).size());
  }
  for (const job::StoredAllocation& a : {SomeAllocation(), job::StoredAllocation{}}) {
    job::StoredAllocation back;
    Status st = DecodeAllocationBinary(EncodeAllocationBinary(a), back);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(back == a);
  }
}

// The bytes and the text of a full spec, as stored: a change to either codec that would make a
// store's records unreadable (a field moved, renamed or encoded otherwise) fails here, before any
// store reads them. A deliberate change adds a format (kBinaryFormat) or a schema version.
std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

TEST(StoreBinaryCodec, AFullSpecEncodesToTheStoredBytes) {
  EXPECT_EQ(Hex(EncodeJobSpecBinary(FullSpec())),
            "01096c6c616d612d37306205616c69636508747261696e696e6702503102086c61756e63686572020000"
            "c03e80800206776f726b657208807d80800a80dc0b8080c00102044838303008413130302d383047046c"
            "6561660101047a6f6e65016102096465646963617465640008747261696e696e67020001000002036170"
            "70056c6c616d61047465616d036e6c700201036170700464617461046c656166000103617070056c6c61"
            "6d61046e6f64650380a0abfef9628088d54480bab70380d30e0023746f72636872756e20747261696e2e"
            "7079202d2d636f6e666967203730622e79616d6c020748465f484f4d45082f646174612f68660a4e4343"
            "4c5f444542554704494e464f06057265712d31");
  EXPECT_EQ(EncodeJobSpec(FullSpec()),
            R"({"affinity":[{"anti":false,"level":"leaf","match":{"app":"data"},)"
            R"("required":false},{"anti":true,"level":"node","match":{"app":"llama"},)"
            R"("required":true}],"checkpoint_interval_ms":3600000,)"
            R"("command":"torchrun train.py --config 70b.yaml",)"
            R"("env":{"HF_HOME":"/data/hf","NCCL_DEBUG":"INFO"},"gpu_types":["H800",)"
            R"("A100-80G"],"groups":[{"cpu_milli":4000,"memory_mib":16384,)"
            R"("name":"launcher","tasks":1},{"cpu_milli":96000,"gpu_memory_mib":81920,)"
            R"("gpu_milli":8000,"memory_mib":1572864,"name":"worker","tasks":4}],)"
            R"("idempotency_key":"req-1","labels":{"app":"llama","team":"nlp"},)"
            R"("max_retries":3,"name":"llama-70b","node_selector":{"zone":"a"},)"
            R"("priority_class":"P1","queue":"training","restart_overhead_ms":120000,)"
            R"("runtime_estimate_ms":72000000,"submit_time_ms":1700000000000,)"
            R"("tolerations":[{"effect":"PreferNoSchedule","key":"dedicated",)"
            R"("value":"training"},{"operator":"Exists"}],"topology":{"level":"leaf",)"
            R"("mode":"preferred"},"user":"alice"})");
}

TEST(StoreBinaryCodec, DamagedRecordsAreErrorsNamingTheField) {
  const std::string bytes = EncodeJobSpecBinary(FullSpec());
  auto error = [](std::string_view record) {
    job::JobSpec out;
    Status st = DecodeJobSpecBinary(record, out, "spec");
    EXPECT_FALSE(st.ok());
    return st.ok() ? std::string() : st.message();
  };
  // Cut anywhere: always an error, never a read past the end.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_NE(error(std::string_view(bytes).substr(0, n)), "") << n;
  }
  EXPECT_EQ(error(""), "spec: record cut short at byte 1");
  EXPECT_EQ(error(bytes.substr(0, 1)), "spec.name: record cut short at byte 2");
  // The name's length (9, "llama-70b") runs past the end of a record cut after 5 bytes.
  EXPECT_EQ(error(bytes.substr(0, 5)), "spec.name: text longer than the record at byte 3");
  EXPECT_EQ(error(bytes + "x"),
            "spec: unexpected bytes after the record at byte " + std::to_string(bytes.size() + 1));
  std::string other = bytes;
  other[0] = 9;
  EXPECT_EQ(error(other), "spec: unknown record format 9 (this build reads 1) at byte 2");
  // The first group's name: after the format, 4 texts and the group count.
  std::size_t at = 1;
  for (const char* text : {"llama-70b", "alice", "training", "P1"}) at += 1 + std::strlen(text);
  std::string group = bytes;
  group[at] = 0x7F;  // 127 groups: more than the record could hold
  EXPECT_EQ(error(group),
            "spec.groups: list longer than the record at byte " + std::to_string(at + 2));

  job::StoredAllocation a;
  std::string alloc = EncodeAllocationBinary(SomeAllocation());
  Status st = DecodeAllocationBinary(alloc.substr(0, alloc.size() - 1), a);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "allocation.tasks[0].devices[1].gpu_memory_mib: record cut short at byte " +
                std::to_string(alloc.size()));
}

TEST(StoreCodec, MinimalSpecLeavesDefaultsOut) {
  EXPECT_EQ(EncodeJobSpec(MinimalSpec()),
            R"({"groups":[{"name":"main","tasks":1}],"name":"tiny","priority_class":"P2",)"
            R"("queue":"batch","user":"bob"})");
}

TEST(StoreCodec, GroupDefaults) {
  Result<job::JobSpec> one = DecodeJobSpec(R"({"name":"a","queue":"q","priority_class":"P",
                                          "groups":[{"gpu_milli":500}]})");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->groups[0].name, "main");
  EXPECT_EQ(one->groups[0].count, 1);
  EXPECT_EQ(one->groups[0].request.gpu, MilliGpu(500));
  Result<job::JobSpec> two = DecodeJobSpec(R"({"name":"a","queue":"q","priority_class":"P",
                                          "groups":[{}, {"tasks": 2}]})");
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(two->groups[0].name, "group-0");
  EXPECT_EQ(two->groups[1].name, "group-1");
  EXPECT_EQ(two->groups[1].count, 2);
}

TEST(StoreCodec, DecodingErrorsNameTheField) {
  const std::string head = R"({"name":"a","queue":"q","priority_class":"P",)";
  EXPECT_EQ(SpecError(head + R"("groups":[{"gpus":1}]})"),
            "groups[0].gpus: unknown field (known: name, tasks, gpu_milli, gpu_memory_mib, "
            "cpu_milli, memory_mib)");
  EXPECT_EQ(SpecError(head + R"("groups":[{"tasks":"two"}]})"),
            "groups[0].tasks: must be an integer, got \"two\"");
  EXPECT_EQ(SpecError(head + R"("groups":[{"gpu_milli":0.5}]})"),
            "groups[0].gpu_milli: must be an integer, got 0.5");
  EXPECT_EQ(SpecError(R"({"name":"a","priority_class":"P","groups":[]})"), "queue: is required");
  EXPECT_EQ(SpecError(head + R"("groups":{}})"), "groups: must be a list, got an object");
  EXPECT_EQ(SpecError(head + R"("groups":[],"topology":{"level":"leaf","mode":"strict"}})"),
            "topology.mode: must be one of required, preferred, got \"strict\"");
  EXPECT_EQ(SpecError(head + R"("groups":[],"tolerations":[{"operator":"In"}]})"),
            "tolerations[0].operator: must be one of Equal, Exists, got \"In\"");
  EXPECT_EQ(SpecError(head + R"("groups":[],"labels":{"a":1}})"),
            "labels.a: must be a string, got 1");
  EXPECT_EQ(SpecError(head + R"("groups":[],"colour":"red"})", "jobs[3]"),
            "jobs[3].colour: unknown field (known: name, user, queue, priority_class, groups, "
            "gpu_types, topology, node_selector, tolerations, labels, affinity, submit_time_ms, "
            "runtime_estimate_ms, checkpoint_interval_ms, restart_overhead_ms, argv, command, "
            "env, max_retries, idempotency_key)");
  EXPECT_EQ(SpecError("[1, 2]"), "must be an object, got an array");
  EXPECT_EQ(SpecError(head + R"("groups":[{"tasks":99999999999}]})"),
            "groups[0].tasks: is out of range, got 99999999999");
  EXPECT_EQ(SpecError(head + R"("groups":[],"submit_time_ms":18446744073709551615})"),
            "submit_time_ms: is too large, got 18446744073709551615");
}

TEST(StoreCodec, MalformedJsonGivesTheOffset) {
  const std::string message = SpecError(R"({"name": "a",, })");
  EXPECT_EQ(message.rfind("malformed JSON at byte 14: ", 0), 0u) << message;
  EXPECT_EQ(SpecError("{", "body").rfind("body: malformed JSON at byte 2", 0), 0u);
}

TEST(StoreCodec, StringsSurviveEscapes) {
  job::JobSpec spec = MinimalSpec();
  spec.name = "quote\" backslash\\ slash/ tab\t newline\n bell\x07 caf\xc3\xa9 \xf0\x9f\x98\x80";
  spec.labels = {{"k\"ey", "v\\al"}, {"\xe2\x82\xac", "\x01"}};
  spec.command = std::string("nul\0inside", 10);
  const std::string text = EncodeJobSpec(spec);
  Result<job::JobSpec> back = DecodeJobSpec(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == spec) << text;
  // \u escapes (with a surrogate pair) read as nlohmann reads them.
  const std::string escaped =
      R"({"name":"\u00e9\ud83d\ude00\u20ac\/","queue":"q","priority_class":"P","groups":[]})";
  Result<job::JobSpec> e = DecodeJobSpec(escaped);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->name, json::parse(escaped)["name"].get<std::string>());
  EXPECT_EQ(e->name, "\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac/");
}

TEST(StoreCodec, StrictJsonText) {
  const std::string ok = R"( { "name" : "a" , "queue":"q","priority_class":"P","groups":[ ] } )";
  EXPECT_TRUE(DecodeJobSpec(ok).ok()) << DecodeJobSpec(ok).status().message();
  auto error = [](const std::string& text) {
    Result<job::JobSpec> r = DecodeJobSpec(text);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  const std::string head = R"({"name":"a","queue":"q","priority_class":"P","groups":[])";
  EXPECT_EQ(error(head + "} x"), "malformed JSON at byte 59: unexpected text after the value");
  EXPECT_EQ(error(head + R"(,"submit_time_ms":01})"),
            "malformed JSON at byte 75: invalid number (leading zero)");
  EXPECT_EQ(error(head + R"(,"submit_time_ms":1e3})"),
            "submit_time_ms: must be an integer, got 1e3");
  EXPECT_EQ(error(head + R"(,"command":"a\qb"})"),
            "malformed JSON at byte 71: invalid escape in a string");
  EXPECT_EQ(error(head + R"(,"command":"\ud800"})"),
            "malformed JSON at byte 75: unpaired surrogate in a string");
  EXPECT_EQ(error(head + ",\"command\":\"a\x01\"}"),
            "malformed JSON at byte 70: control character in a string");
  EXPECT_EQ(error(head + R"(,"command":"abc)"),
            "malformed JSON at byte 72: unexpected end of the text");
  EXPECT_EQ(error(head + R"(,"command":null})"), "command: must be a string, got null");
  EXPECT_EQ(error(head + ",\"command\":\"caf\xe9\"}"),
            "malformed JSON at byte 68: invalid UTF-8 in a string");
  EXPECT_EQ(error(head + ",\"labels\":{\"\xc0\xaf\":\"x\"}}"),
            "malformed JSON at byte 68: invalid UTF-8 in a string");
  EXPECT_EQ(error(head + R"(,"command":tru})"), "malformed JSON at byte 68: expected a value");
  EXPECT_EQ(error(head + R"(,"submit_time_ms":-9223372036854775808})"), "ok");
  EXPECT_EQ(error(head + R"(,"submit_time_ms":-9223372036854775809})"),
            "submit_time_ms: is too large, got -9223372036854775809");
  EXPECT_EQ(error(head + R"(,"submit_time_ms":99999999999999999999999})"),
            "submit_time_ms: is too large, got 99999999999999999999999");
  EXPECT_EQ(error(R"({"name":"a","queue":"q","priority_class":"P"})"), "groups: is required");
  EXPECT_EQ(error(head + R"(,"topology":{"mode":"required"}})"), "topology.level: is required");
  EXPECT_EQ(error(head + R"(,"affinity":[{"level":"node"}]})"), "affinity[0].match: is required");
}

TEST(StoreCodec, FromJsonDocumentForTheApi) {
  // The server parses a request body once and hands the document over, with the path of the job.
  json body = json::parse(R"({"jobs":[{"name":"a","queue":"q","priority_class":"P","groups":[{}]},
                                      {"name":"b","queue":"q","priority_class":"P",
                                       "groups":[{"tasks":-1, "gpu_milli": 2500}]}]})");
  Result<job::JobSpec> a = JobSpecFromJson(body["jobs"][0], "jobs[0]");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->groups[0].name, "main");
  Result<job::JobSpec> b = JobSpecFromJson(body["jobs"][1], "jobs[1]");
  ASSERT_TRUE(b.ok()) << b.status().message();
  // Decoding checks shapes and types; ValidateJobSpec the values.
  b->user = "alice";
  EXPECT_EQ(job::ValidateJobSpec(*b).message(), "groups[0].tasks: must be at least 1, got -1");
  Result<job::JobSpec> c = JobSpecFromJson(json::parse(R"({"name":"c"})"), "jobs[2]");
  EXPECT_EQ(c.status().message(), "jobs[2].queue: is required");
}

TEST(StoreCodec, AllocationStatusEventQuotaRoundTrip) {
  const job::StoredAllocation a = SomeAllocation();
  Result<job::StoredAllocation> a2 = AllocationFromJson(json::parse(AllocationToJson(a).dump()));
  ASSERT_TRUE(a2.ok()) << a2.status().message();
  EXPECT_TRUE(*a2 == a);

  JobStatus st;
  st.state = job::JobState::kRunning;
  st.priority_class = "P0";
  st.allocation = a;
  st.start_time = 10;
  st.first_start_time = 5;
  st.last_checkpoint = 7;
  st.stop_at = 30;
  st.evictions = {6, 8};
  Result<JobStatus> st2 = JobStatusFromJson(json::parse(JobStatusToJson(st).dump()));
  ASSERT_TRUE(st2.ok()) << st2.status().message();
  EXPECT_TRUE(*st2 == st);

  Event e;
  e.seq = 42;
  e.time = 1000;
  e.kind = EventKind::kStarted;
  e.job = 7;
  e.actor = "scheduler";
  e.message = "placed";
  e.allocation = a;
  e.state = job::JobState::kRunning;
  Result<Event> e2 = EventFromJson(json::parse(EventToJson(e).dump()));
  ASSERT_TRUE(e2.ok()) << e2.status().message();
  EXPECT_TRUE(*e2 == e);
  EXPECT_EQ(EventToJson(e)["kind"], "started");

  std::map<std::string, QuotaSpec> quota;
  quota["H800"] = QuotaSpec{MilliGpu(8000), MilliGpu(16000), std::nullopt, MilliGpu(64000)};
  quota["gpu"] = QuotaSpec{MilliGpu(0), std::nullopt, MilliGpu(0), std::nullopt};
  Result<std::map<std::string, QuotaSpec>> q2 =
      QuotaFromJson(json::parse(QuotaToJson(quota).dump()));
  ASSERT_TRUE(q2.ok()) << q2.status().message();
  ASSERT_EQ(q2->size(), 2u);
  EXPECT_EQ(q2->at("H800").nominal, MilliGpu(8000));
  EXPECT_EQ(q2->at("H800").borrowing_limit, MilliGpu(16000));
  EXPECT_FALSE(q2->at("H800").lending_limit.has_value());
  EXPECT_EQ(q2->at("H800").max, MilliGpu(64000));
  EXPECT_EQ(q2->at("gpu").lending_limit, MilliGpu(0));

  Result<job::StoredAllocation> bad = AllocationFromJson(json::parse(R"({"tasks":[{"node":"n",
      "devices":[{"device":-1}]}]})"),
                                                         "allocation");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "allocation.tasks[0].devices[0].device: must not be negative, got -1");
}

TEST(StoreRecords, ValidateJobSpecNamesTheField) {
  EXPECT_TRUE(job::ValidateJobSpec(FullSpec()).ok()) << job::ValidateJobSpec(FullSpec()).message();
  auto error = [](auto edit) {
    job::JobSpec s = FullSpec();
    edit(s);
    return job::ValidateJobSpec(s).message();
  };
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups[1].count = 0; }),
            "groups[1].tasks: must be at least 1, got 0");
  EXPECT_EQ(error([](job::JobSpec& s) { s.argv = {"python"}; }),
            "argv: give either argv (no shell) or command (run by /bin/sh -c), not both");
  EXPECT_EQ(error([](job::JobSpec& s) {
              s.command.clear();
              s.argv = {""};
            }),
            "argv[0]: must name the program to run");
  EXPECT_EQ(error([](job::JobSpec& s) { s.env["A=B"] = "x"; }),
            "env: a variable's name must be non-empty, without '=' or control characters");
  EXPECT_EQ(error([](job::JobSpec& s) { s.max_retries = -1; }),
            "max_retries: must not be negative, got -1");
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups[1].count = -3; }),
            "groups[1].tasks: must be at least 1, got -3");
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups[1].request.gpu = MilliGpu(1500); }),
            "groups[1].gpu_milli: above 1 GPU must be a whole number (a task takes a share of one "
            "GPU or whole GPUs), got 1.5 GPUs");
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups[0].request.cpu = MilliCpu(-1); }),
            "groups[0].cpu_milli: must not be negative, got -1");
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups[0].request.gpu_memory = GpuMemMiB(10); }),
            "groups[0].gpu_memory_mib: needs GPUs: GPU memory is asked per device of a task with "
            "GPUs");
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups[1].name = "launcher"; }),
            "groups[1].name: duplicate group name 'launcher'");
  EXPECT_EQ(error([](job::JobSpec& s) { s.groups.clear(); }),
            "groups: give at least one task group");
  // The submitter is the store's to require (Submit), not the spec's: a jobs file has none.
  EXPECT_EQ(error([](job::JobSpec& s) { s.user.clear(); }), "");
  EXPECT_EQ(error([](job::JobSpec& s) { s.queue.clear(); }), "queue: must not be empty");
  EXPECT_EQ(error([](job::JobSpec& s) { s.tolerations[1].value = "x"; }),
            "tolerations[1].value: operator Exists matches any value; leave 'value' out");
  EXPECT_EQ(error([](job::JobSpec& s) { s.tolerations[0].key.clear(); }),
            "tolerations[0].key: operator Equal needs a key (an empty key with operator Exists "
            "tolerates all)");
  EXPECT_EQ(error([](job::JobSpec& s) { s.affinity[0].match.clear(); }),
            "affinity[0].match: give at least one label to match");
  EXPECT_EQ(error([](job::JobSpec& s) { s.runtime_estimate = -5; }),
            "runtime_estimate_ms: must not be negative, got -5");
  EXPECT_EQ(error([](job::JobSpec& s) { s.labels["team"] = "n\xffp"; }),
            "labels.team: is not valid UTF-8");
  EXPECT_EQ(error([](job::JobSpec& s) { s.name = "\xed\xa0\x80"; }),  // a surrogate
            "name: is not valid UTF-8");
  // Encoding never throws, whatever the bytes.
  job::JobSpec bad = FullSpec();
  bad.command = "\xff\xfe";
  EXPECT_NE(EncodeJobSpec(bad).find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
}

Event Ev(EventKind kind, Millis time = 0) {
  Event e;
  e.kind = kind;
  e.job = 1;
  e.time = time;
  if (kind == EventKind::kStarted) e.allocation = SomeAllocation();
  return e;
}

TEST(StoreRecords, JobStateMachine) {
  JobStatus st;
  st.priority_class = "P1";
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kHeld)).ok());
  EXPECT_EQ(st.state, job::JobState::kHeld);
  EXPECT_EQ(ApplyEvent(st, Ev(EventKind::kStarted)).message(),
            "job is held; only a pending job can start");
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kReleased)).ok());
  Event prio = Ev(EventKind::kPriorityChanged);
  prio.priority_class = "P0";
  ASSERT_TRUE(ApplyEvent(st, prio).ok());
  EXPECT_EQ(st.priority_class, "P0");
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kStarted, 100)).ok());
  EXPECT_EQ(st.state, job::JobState::kRunning);
  EXPECT_TRUE(st.allocation == SomeAllocation());
  EXPECT_EQ(st.start_time, 100);
  EXPECT_EQ(st.first_start_time, 100);
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kCheckpointed, 150)).ok());
  Event signal = Ev(EventKind::kEvictionSignalled, 160);
  signal.stop_at = 190;
  ASSERT_TRUE(ApplyEvent(st, signal).ok());
  EXPECT_EQ(st.stop_at, 190);
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kEvicted, 190)).ok());
  EXPECT_EQ(st.state, job::JobState::kPending);
  EXPECT_TRUE(st.allocation.empty());
  EXPECT_EQ(st.stop_at, -1);
  EXPECT_EQ(st.evictions, std::vector<Millis>{190});
  EXPECT_EQ(ApplyEvent(st, Ev(EventKind::kCheckpointed)).message(),
            "job is pending; only a running job checkpoints");
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kStarted, 200)).ok());
  EXPECT_EQ(st.start_time, 200);
  EXPECT_EQ(st.first_start_time, 100);
  EXPECT_EQ(st.last_checkpoint, 150);
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kRequeued, 210)).ok());
  EXPECT_EQ(st.evictions.size(), 1u);  // a requeue is not an eviction
  ASSERT_TRUE(ApplyEvent(st, Ev(EventKind::kStarted, 220)).ok());
  Event done = Ev(EventKind::kCompleted, 300);
  done.message = "exit 0";
  ASSERT_TRUE(ApplyEvent(st, done).ok());
  EXPECT_EQ(st.state, job::JobState::kCompleted);
  EXPECT_EQ(st.end_time, 300);
  EXPECT_EQ(st.message, "exit 0");
  EXPECT_TRUE(st.allocation.empty());
  const JobStatus before = st;
  EXPECT_EQ(ApplyEvent(st, Ev(EventKind::kCancelled)).message(),
            "job is completed; it has already finished");
  EXPECT_EQ(ApplyEvent(st, prio).message(),
            "job is completed; a finished job keeps its priority class");
  EXPECT_TRUE(st == before);

  JobStatus pending;
  ASSERT_TRUE(ApplyEvent(pending, Ev(EventKind::kCancelled, 5)).ok());
  EXPECT_EQ(pending.state, job::JobState::kCancelled);
}

TEST(StoreRecords, ValidateEventNamesTheField) {
  Event e = Ev(EventKind::kStarted);
  EXPECT_TRUE(ValidateEvent(e).ok());
  e.allocation = {};
  EXPECT_EQ(ValidateEvent(e, "events[2]").message(),
            "events[2].allocation: must have at least one task");
  EXPECT_EQ(ValidateEvent(Ev(EventKind::kSubmitted)).message(),
            "event.kind: 'submitted' is recorded by Submit, not appended");
  EXPECT_EQ(ValidateEvent(Ev(EventKind::kNodeCordoned)).message(),
            "event.kind: 'node_cordoned' is recorded by the store's own operation, not appended");
  Event no_job = Ev(EventKind::kHeld);
  no_job.job = 0;
  EXPECT_EQ(ValidateEvent(no_job).message(), "event.job: must be a job id");
  EXPECT_EQ(ValidateEvent(Ev(EventKind::kPriorityChanged)).message(),
            "event.priority_class: must name the new priority class");
  Event held = Ev(EventKind::kHeld);
  held.allocation = SomeAllocation();
  EXPECT_EQ(ValidateEvent(held).message(),
            "event.allocation: only a 'started' event has an allocation");
  Event signal = Ev(EventKind::kEvictionSignalled, 100);
  signal.stop_at = 50;
  EXPECT_EQ(ValidateEvent(signal).message(),
            "event.stop_at: must not be before the event's time 100, got 50");
}

TEST(StoreRecords, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(EventKind::kNodeLost); ++i) {
    const auto kind = static_cast<EventKind>(i);
    EXPECT_EQ(ParseEventKind(EventKindName(kind)), kind);
  }
  for (int i = 0; i <= static_cast<int>(job::JobState::kCancelled); ++i) {
    const auto state = static_cast<job::JobState>(i);
    EXPECT_EQ(job::ParseJobState(job::JobStateName(state)), state);
  }
  EXPECT_FALSE(job::ParseJobState("sleeping").has_value());
}

TEST(StoreResolve, JobAndAllocationAgainstAClusterState) {
  ClusterSpec cluster = testing::Cluster({"leaf"});
  testing::Add(cluster, testing::Nodes("h800", 2, "H800", 8, 0, {"leaf-0"}));
  testing::Add(cluster, testing::Nodes("l40s", 2, "L40S", 4, 0, {"leaf-1"}));
  cluster.queues = {testing::Queue("root"), testing::Queue("training", "root"),
                    testing::Queue("batch", "root")};
  ClusterState state = testing::MakeState(cluster);

  job::JobSpec spec = FullSpec();
  spec.gpu_types = {"H800"};
  spec.affinity[0].level = "leaf";
  Result<Job> job = job::ToJob(9, spec, state);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->id, 9u);
  EXPECT_EQ(state.queue(job->queue).spec.name, "training");
  EXPECT_EQ(state.priority_class(job->priority_class).name, "P1");
  EXPECT_EQ(job->topology.level, state.topology().LevelIndex("leaf"));
  EXPECT_EQ(job->topology.mode, ConstraintMode::kPreferred);
  EXPECT_TRUE(job->gpu_types.Contains(*state.FindGpuType("H800")));
  // The current priority class wins over the submitted one.
  Result<Job> p0 = job::ToJob(9, spec, state, "P0");
  ASSERT_TRUE(p0.ok());
  EXPECT_EQ(state.priority_class(p0->priority_class).name, "P0");
  // And back to names.
  job::JobSpec back = job::ToSpec(*job, state);
  // What the agents run is not the engine's.
  back.command = spec.command;
  back.env = spec.env;
  back.max_retries = spec.max_retries;
  back.idempotency_key = spec.idempotency_key;
  EXPECT_TRUE(back == spec) << JobSpecToJson(back).dump() << "\n" << JobSpecToJson(spec).dump();

  auto error = [&](auto edit) {
    job::JobSpec s = spec;
    edit(s);
    Result<Job> r = job::ToJob(1, s, state);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error([](job::JobSpec& s) { s.queue = "trainin"; }),
            "queue: unknown leaf queue 'trainin' (known: training, batch); did you mean "
            "'training'?");
  EXPECT_EQ(error([](job::JobSpec& s) { s.queue = "root"; }),
            "queue: queue 'root' has child queues; jobs go to leaf queues (training, batch)");
  EXPECT_EQ(error([](job::JobSpec& s) { s.priority_class = "P9"; }),
            "priority_class: unknown priority class 'P9' (known: P0, P1, P2); did you mean 'P0'?");
  EXPECT_EQ(error([](job::JobSpec& s) { s.gpu_types = {"B200"}; }),
            "gpu_types[0]: unknown GPU type 'B200' (known: H800, L40S)");
  EXPECT_EQ(error([](job::JobSpec& s) { s.topology_level = "rack"; }),
            "topology.level: unknown topology level 'rack' (known: leaf, node, nvlink)");

  job::StoredAllocation stored = SomeAllocation();
  stored.tasks[0].node = "h800-1";
  Result<Allocation> alloc = job::ToAllocation(stored, state);
  ASSERT_TRUE(alloc.ok()) << alloc.status().message();
  EXPECT_EQ(state.node(alloc->tasks[0].node).name, "h800-1");
  EXPECT_TRUE(job::ToStoredAllocation(*alloc, state) == stored);
  stored.tasks[0].node = "h900-1";
  EXPECT_EQ(job::ToAllocation(stored, state).status().message(),
            "allocation.tasks[0].node: unknown node 'h900-1'");
  stored.tasks[0].node = "l40s-0";
  stored.tasks[0].devices[1].device = 4;
  EXPECT_EQ(job::ToAllocation(stored, state).status().message(),
            "allocation.tasks[0].devices[1].device: node 'l40s-0' has 4 devices, got index 4");
}

}  // namespace
}  // namespace arbiter::store
