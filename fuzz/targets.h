// The bodies of the libFuzzer targets (fuzz/NAME_fuzz.cc), one function per parser of input that
// crosses a trust boundary or comes from a user's file. They are compiled into each fuzzer (clang,
// -fsanitize=fuzzer,address,undefined: `make fuzz`) and into the normal test executable, where
// tests/fuzz/regressions_test.cc runs every seed and every crash input found (fuzz/corpus/NAME/,
// fuzz/regressions/NAME/) through them, so that `make test` keeps each crash fixed.
//
// Each body feeds the input to the parser as its caller does, ignores the errors a bad input must
// give, and checks what must hold for every input (FuzzCheck): what decodes encodes again to the
// same value, the two readers of one format agree. A broken check aborts, as a crash does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace arbiter::fuzz {

// A job spec as the server's Submit reads it (store::DecodeJobSpec, ValidateJobSpec, ToJob
// against a small cluster), and as store::ParseJson + JobSpecFromJson read it.
void FuzzJobSpec(const std::uint8_t* data, std::size_t size);
// A PATCH /v1/jobs/ID body ({"priority_class": ...}) as http.cc checks it.
void FuzzPriorityPatch(const std::uint8_t* data, std::size_t size);
// A PUT /v1/queues/Q/quota body: store::ParseJson + QuotaFromJson, and DecodeQuota.
void FuzzQuota(const std::uint8_t* data, std::size_t size);
// A cluster file (config::ParseCluster), then ClusterState::Create on what it loads.
void FuzzClusterYaml(const std::uint8_t* data, std::size_t size);
// A jobs file against a small cluster (config::ParseJobs), and as `submit -f` reads it
// (config::ParseJobSpecs).
void FuzzJobsYaml(const std::uint8_t* data, std::size_t size);
// A cluster snapshot (config::ParseSnapshot, which builds its state); what loads writes again
// (config::WriteSnapshot) to a text that loads to the same snapshot and writes the same text.
void FuzzSnapshotYaml(const std::uint8_t* data, std::size_t size);
// A simulator scenario (config::ParseScenario), trace files relative to a folder that does not
// exist.
void FuzzScenarioYaml(const std::uint8_t* data, std::size_t size);
// Each trace reader (trace::ReadTrace with its format); openb also as a node list.
void FuzzTracePhilly(const std::uint8_t* data, std::size_t size);
void FuzzTraceTiresias(const std::uint8_t* data, std::size_t size);
void FuzzTraceOpenb(const std::uint8_t* data, std::size_t size);
void FuzzTraceCsv(const std::uint8_t* data, std::size_t size);
void FuzzTraceJson(const std::uint8_t* data, std::size_t size);
void FuzzTracePai(const std::uint8_t* data, std::size_t size);  // also with itself as job table
void FuzzTraceHelios(const std::uint8_t* data, std::size_t size);
void FuzzTraceSwf(const std::uint8_t* data, std::size_t size);
void FuzzTraceSacct(const std::uint8_t* data, std::size_t size);
// The store's binary records (store::DecodeJobSpecBinary, DecodeAllocationBinary).
void FuzzBinaryRecords(const std::uint8_t* data, std::size_t size);
// The quantity parsers: config::ParseDuration, ParseGpus, ParseCpu, ParseMiB.
void FuzzQuantity(const std::uint8_t* data, std::size_t size);
// A node agent's register and sync bodies (server::ParseRegisterBody, ParseSyncBody), and the
// log URL's host (server::UrlHost).
void FuzzAgentRegister(const std::uint8_t* data, std::size_t size);
void FuzzAgentSync(const std::uint8_t* data, std::size_t size);
// The command's client file (client.yaml: server, token, token_file, ca_file), read as
// src/cli/client.cc reads it.
void FuzzClientConfig(const std::uint8_t* data, std::size_t size);

// A target by its name ("job_spec", the NAME of fuzz/NAME_fuzz.cc and fuzz/corpus/NAME/);
// nullptr for an unknown name.
using FuzzFunction = void (*)(const std::uint8_t* data, std::size_t size);
FuzzFunction FindTarget(std::string_view name);

}  // namespace arbiter::fuzz
