// What a node has: its GPUs (from NVML, or as declared on the agent's command line) and its
// processors and memory (docs/design/agent.md, "Devices").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/status.h"

namespace arbiter::agent {

struct GpuInfo {
  std::string model;  // short, as the cluster configuration names GPU types: "H800"
  std::string name;   // as reported, e.g. "NVIDIA H800 80GB HBM3"
  std::int64_t memory_mib = 0;
  std::string uuid;      // "GPU-..." from NVML; "declared-N" for declared devices
  int nvlink_group = 0;  // devices connected by NVLink (directly or through NVSwitch) share it
};

struct HostInfo {
  std::string hostname;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
};

// The GPUs NVML reports, with NVML loaded at run time from `library`: devices whose NVLinks
// reach one another (directly, or through NVSwitches) share an NVLink group; groups are numbered
// from 0 in device order.
Result<std::vector<GpuInfo>> DiscoverNvml(const std::string& library = "libnvidia-ml.so.1");

// Declared devices: comma-separated entries COUNTxMODEL[-MEMORYG], e.g. "8xH800-80G",
// "2xA100-40G,4xL40S-48G", "4xA100" (memory 0: unknown); "none" or "" for no GPUs. Each entry is
// one NVLink group. Errors name the field "devices" and the entry.
Result<std::vector<GpuInfo>> ParseDeclaredDevices(std::string_view text);

struct Devices {
  std::vector<GpuInfo> gpus;
  std::string warning;  // non-empty when "auto" found no NVML: why there are no GPUs
};
// `spec` "auto": NVML, or no GPUs and a warning when NVML (or its driver) is not there; any other
// spec is parsed by ParseDeclaredDevices.
Result<Devices> DiscoverDevices(std::string_view spec,
                                const std::string& library = "libnvidia-ml.so.1");

// The host name; the processors online times 1000, or less when a cgroup v2 cpu.max on the
// agent's cgroup path limits it; /proc/meminfo's MemTotal, or less when a cgroup memory.max does.
HostInfo DiscoverHost();

// The GPU type as the cluster configuration names it, from NVML's name:
// "NVIDIA H800 80GB HBM3" -> "H800", "NVIDIA A100-SXM4-80GB" -> "A100", "Tesla V100-SXM2-32GB"
// -> "V100", "NVIDIA GeForce RTX 4090" -> "RTX4090", "NVIDIA RTX A6000" -> "A6000".
std::string ShortModel(std::string_view nvml_name);

}  // namespace arbiter::agent
