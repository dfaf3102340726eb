// Binary records of the SQLite store's jobs (schema version 2): a job's spec and its allocation
// as compact bytes, which recovery decodes several times faster than their JSON (no field names
// to scan, no numbers to parse from text). docs/design/store.md gives the layout.
//
// A record starts with its format byte (kBinaryFormat); integers are LEB128 varints (signed ones
// zigzag-encoded), a text is its length then its bytes, a list or map its length then its
// elements (a map's in key order), enums are the codes the layout names (not C++ enum values).
// Decoding checks every length against the record and the record's end; an error names the field
// and the byte (`spec.groups[0].name: record cut short at byte 12`), with `path` before it.
// The texts are not checked again for UTF-8: the store writes only specs that passed
// ValidateJobSpec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "arbiter/status.h"
#include "store/store.h"

namespace arbiter::store {

inline constexpr std::uint8_t kBinaryFormat = 1;

std::string EncodeJobSpecBinary(const job::JobSpec& spec);
// Into an existing (empty) record.
Status DecodeJobSpecBinary(std::string_view bytes, job::JobSpec& out,
                           std::string_view path = "spec");

std::string EncodeAllocationBinary(const job::StoredAllocation& allocation);
Status DecodeAllocationBinary(std::string_view bytes, job::StoredAllocation& out,
                              std::string_view path = "allocation");

}  // namespace arbiter::store
