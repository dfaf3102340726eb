// The one set of limits on what a job may ask for, whoever reads it: jobs files and `arbiter
// submit -f` (YAML), the server's API (JSON), scenarios' job templates and the trace readers.
// store::ValidateJobSpec checks a job against them; the trace readers check each row's values
// against them. They keep a typo or a hostile request from exhausting memory or overflowing a
// sum; they are not capacity checks (the engine says when a job can never fit). To tighten a
// limit, change it here: every reader follows.
//
// Header-only (constants and small checks without fmt) so that every library may use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "arbiter/model.h"
#include "arbiter/quantity.h"
#include "arbiter/state.h"
#include "arbiter/status.h"

namespace arbiter::limits {

// Texts: names (job, group, queue, class, GPU type, topology level), label keys and values,
// toleration keys and values. Bytes of UTF-8.
inline constexpr std::size_t kMaxNameBytes = 256;
// Label maps (labels, node_selector, an affinity term's match) and tolerations.
inline constexpr std::size_t kMaxLabels = 64;
inline constexpr std::size_t kMaxTolerations = 64;
inline constexpr std::size_t kMaxAffinityTerms = 16;
// Task groups of a job, and tasks: of one group and of the whole job (a gang).
inline constexpr std::size_t kMaxGroups = 64;
inline constexpr std::int64_t kMaxTasksPerJob = 1'000'000;
// A jobs file's `replicas` (copies of one entry).
inline constexpr std::int64_t kMaxReplicas = 1 << 16;
// What one task asks: at most the devices a node may have (a task runs on one node), CPU and
// memory (MiB, per task; GPU memory per device).
inline constexpr std::int64_t kMaxGpuMilliPerTask =
    static_cast<std::int64_t>(kMaxDevicesPerNode) * kMilliPerGpu;
inline constexpr std::int64_t kMaxCpuMilliPerTask = 1'000'000'000'000;
inline constexpr std::int64_t kMaxMemoryMiB = 1'000'000'000'000;
// A trace row's GPUs before it is split into tasks (whole GPUs of the whole job).
inline constexpr std::int64_t kMaxGpusPerJob = 1'000'000;
// Durations and times (submit time, runtime estimate, checkpoint interval, restart overhead):
// about 31,700 years in milliseconds.
inline constexpr Millis kMaxDuration = 1'000'000'000'000'000;
// What a task runs: argv elements, environment variables, and all their bytes together (with the
// shell command).
inline constexpr std::size_t kMaxArgs = 4096;
inline constexpr std::size_t kMaxEnv = 1024;
inline constexpr std::size_t kMaxCommandBytes = 256 * 1024;
inline constexpr std::int32_t kMaxRetries = 1'000'000;

// The name a task group gets when it has none: "main" when it is the job's only group, else
// "group-K" (its index).
inline std::string DefaultGroupName(std::size_t index, std::size_t groups) {
  return groups == 1 ? std::string("main") : "group-" + std::to_string(index);
}

// Milli-GPU as GPUs: "2", "1.5", "0.25".
inline std::string FormatGpus(std::int64_t milli) {
  std::string out = std::to_string(milli / kMilliPerGpu);
  if (std::int64_t frac = milli % kMilliPerGpu; frac != 0) {
    std::string digits = std::to_string(kMilliPerGpu + (frac < 0 ? -frac : frac)).substr(1);
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

// Checks of one value, shared by the validator and the trace readers. Each returns an
// invalid-argument Status naming `field`.

// A count in [min, max].
inline Status CheckCount(std::string_view field, std::int64_t value, std::int64_t min,
                         std::int64_t max) {
  if (value < min) {
    return Status::InvalidArgument(
        (min == 0 ? std::string("must not be negative, got ")
                  : "must be at least " + std::to_string(min) + ", got ") +
            std::to_string(value),
        std::string(field));
  }
  if (value > max) {
    return Status::InvalidArgument(
        "must be at most " + std::to_string(max) + ", got " + std::to_string(value),
        std::string(field));
  }
  return Status::Ok();
}

// A duration or time in milliseconds: 0 to kMaxDuration.
inline Status CheckDuration(std::string_view field, Millis value) {
  return CheckCount(field, value, 0, kMaxDuration);
}

// A text of at most kMaxNameBytes; `required`: not empty either.
inline Status CheckName(std::string_view field, std::string_view text, bool required) {
  if (required && text.empty())
    return Status::InvalidArgument("must not be empty", std::string(field));
  if (text.size() > kMaxNameBytes) {
    return Status::InvalidArgument("must be at most " + std::to_string(kMaxNameBytes) +
                                       " bytes long, got " + std::to_string(text.size()),
                                   std::string(field));
  }
  return Status::Ok();
}

// A task's GPUs in milli-GPU: 0, a share of one device (1..999) or whole devices, at most
// kMaxGpuMilliPerTask.
inline Status CheckTaskGpus(std::string_view field, std::int64_t milli) {
  if (Status s = CheckCount(field, milli, 0, kMaxGpuMilliPerTask); !s.ok()) return s;
  if (milli > kMilliPerGpu && milli % kMilliPerGpu != 0) {
    return Status::InvalidArgument(
        "above 1 GPU must be a whole number (a task takes a share of one GPU or whole GPUs), "
        "got " +
            FormatGpus(milli) + " GPUs",
        std::string(field));
  }
  return Status::Ok();
}

}  // namespace arbiter::limits
