#include "agent/discovery.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

namespace arbiter::agent {
namespace {

// ---- The part of NVML's C interface used here, declared from its public documentation. ----
using NvmlReturn = int;  // nvmlReturn_t
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlErrorDriverNotLoaded = 9;
constexpr NvmlReturn kNvmlErrorLibraryNotFound = 12;
using NvmlDevice = struct NvmlDeviceOpaque*;  // nvmlDevice_t
struct NvmlMemory {                           // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
constexpr unsigned kNvmlNameSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlUuidSize = 96;  // more than NVML_DEVICE_UUID_V2_BUFFER_SIZE
// NVML_NVLINK_MAX_LINKS has grown with each generation (6, 12, 18); asking past a device's last
// link only returns an error.
constexpr unsigned kMaxNvLinks = 18;
constexpr int kNvmlFeatureEnabled = 1;

struct Nvml {
  void* lib = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*handle)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*pci)(NvmlDevice, NvmlPciInfo*) = nullptr;
  // Optional: without them every device is a group of its own.
  NvmlReturn (*link_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*link_remote_pci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;

  ~Nvml() {
    if (lib != nullptr) dlclose(lib);
  }
  std::string Error(NvmlReturn r) const {
    const char* s = error_string != nullptr ? error_string(r) : nullptr;
    return s != nullptr ? std::string(s) : fmt::format("error {}", r);
  }
};

template <typename F>
bool Bind(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  return fn != nullptr;
}

struct PciKey {
  unsigned domain, bus, device;
  bool operator<(const PciKey& o) const {
    return std::tie(domain, bus, device) < std::tie(o.domain, o.bus, o.device);
  }
};

int Find(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// `absent` is set when there is no NVML to ask (no library, or no driver behind it).
Result<std::vector<GpuInfo>> QueryNvml(const std::string& library, bool& absent) {
  absent = false;
  Nvml nvml;
  nvml.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml.lib == nullptr) {
    absent = true;
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("NVML: {} not found (no NVIDIA driver?)", library));
  }
  const char* missing = nullptr;
  auto need = [&](const char* symbol, auto& fn) {
    if (!Bind(nvml.lib, symbol, fn) && missing == nullptr) missing = symbol;
  };
  need("nvmlInit_v2", nvml.init);
  need("nvmlShutdown", nvml.shutdown);
  need("nvmlErrorString", nvml.error_string);
  need("nvmlDeviceGetCount_v2", nvml.count);
  need("nvmlDeviceGetHandleByIndex_v2", nvml.handle);
  need("nvmlDeviceGetName", nvml.name);
  need("nvmlDeviceGetMemoryInfo", nvml.memory);
  need("nvmlDeviceGetUUID", nvml.uuid);
  need("nvmlDeviceGetPciInfo_v3", nvml.pci);
  if (missing != nullptr) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("NVML: {} has no {} (driver too old?)", library, missing));
  }
  Bind(nvml.lib, "nvmlDeviceGetNvLinkState", nvml.link_state);
  Bind(nvml.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", nvml.link_remote_pci);

  if (NvmlReturn r = nvml.init(); r != kNvmlSuccess) {
    absent = r == kNvmlErrorDriverNotLoaded || r == kNvmlErrorLibraryNotFound;
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("NVML: nvmlInit_v2 failed: {}", nvml.Error(r)));
  }
  struct Shutdown {
    Nvml& nvml;
    ~Shutdown() { nvml.shutdown(); }
  } shutdown{nvml};

  unsigned count = 0;
  if (NvmlReturn r = nvml.count(&count); r != kNvmlSuccess) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("NVML: nvmlDeviceGetCount_v2 failed: {}", nvml.Error(r)));
  }
  std::vector<GpuInfo> gpus(count);
  std::vector<NvmlDevice> handles(count);
  std::map<PciKey, int> by_pci;
  for (unsigned i = 0; i < count; ++i) {
    auto fail = [&](const char* call, NvmlReturn r) {
      return Status::FromCode(
          StatusCode::kUnavailable,
          fmt::format("NVML: device {}: {} failed: {}", i, call, nvml.Error(r)));
    };
    if (NvmlReturn r = nvml.handle(i, &handles[i]); r != kNvmlSuccess) {
      return fail("nvmlDeviceGetHandleByIndex_v2", r);
    }
    char text[std::max(kNvmlNameSize, kNvmlUuidSize)] = {};
    if (NvmlReturn r = nvml.name(handles[i], text, kNvmlNameSize); r != kNvmlSuccess) {
      return fail("nvmlDeviceGetName", r);
    }
    gpus[i].name = text;
    gpus[i].model = ShortModel(gpus[i].name);
    NvmlMemory memory{};
    if (NvmlReturn r = nvml.memory(handles[i], &memory); r != kNvmlSuccess) {
      return fail("nvmlDeviceGetMemoryInfo", r);
    }
    gpus[i].memory_mib = static_cast<std::int64_t>(memory.total / (1024 * 1024));
    std::fill(std::begin(text), std::end(text), '\0');
    if (NvmlReturn r = nvml.uuid(handles[i], text, kNvmlUuidSize); r != kNvmlSuccess) {
      return fail("nvmlDeviceGetUUID", r);
    }
    gpus[i].uuid = text;
    NvmlPciInfo pci{};
    if (NvmlReturn r = nvml.pci(handles[i], &pci); r != kNvmlSuccess) {
      return fail("nvmlDeviceGetPciInfo_v3", r);
    }
    by_pci[{pci.domain, pci.bus, pci.device}] = static_cast<int>(i);
  }

  // NVLink groups: a link to another GPU joins the two; a link to anything else is a link to an
  // NVSwitch, and every GPU on the switches is reachable from every other.
  std::vector<int> parent(count);
  std::iota(parent.begin(), parent.end(), 0);
  int first_on_switch = -1;
  if (nvml.link_state != nullptr && nvml.link_remote_pci != nullptr) {
    for (unsigned i = 0; i < count; ++i) {
      for (unsigned link = 0; link < kMaxNvLinks; ++link) {
        int active = 0;
        if (nvml.link_state(handles[i], link, &active) != kNvmlSuccess) continue;
        if (active != kNvmlFeatureEnabled) continue;
        NvmlPciInfo remote{};
        if (nvml.link_remote_pci(handles[i], link, &remote) != kNvmlSuccess) continue;
        int other = static_cast<int>(i);
        if (auto it = by_pci.find({remote.domain, remote.bus, remote.device}); it != by_pci.end()) {
          other = it->second;
        } else if (first_on_switch < 0) {
          first_on_switch = static_cast<int>(i);
        } else {
          other = first_on_switch;
        }
        parent[Find(parent, static_cast<int>(i))] = Find(parent, other);
      }
    }
  }
  std::map<int, int> group_of_root;
  for (unsigned i = 0; i < count; ++i) {
    int root = Find(parent, static_cast<int>(i));
    auto [it, added] = group_of_root.emplace(root, static_cast<int>(group_of_root.size()));
    gpus[i].nvlink_group = it->second;
  }
  return gpus;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool ParseInt(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  if (in) ss << in.rdbuf();
  return ss.str();
}

// The agent's cgroup v2 path ("/system.slice/arbiter-agent.service"), or empty.
std::string OwnCgroup() {
  std::istringstream in(ReadFile("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

}  // namespace

Result<std::vector<GpuInfo>> DiscoverNvml(const std::string& library) {
  bool absent = false;
  return QueryNvml(library, absent);
}

Result<std::vector<GpuInfo>> ParseDeclaredDevices(std::string_view text) {
  std::vector<GpuInfo> gpus;
  text = Trim(text);
  if (text.empty() || text == "none") return gpus;
  int group = 0;
  while (true) {
    std::size_t comma = text.find(',');
    std::string_view entry = Trim(text.substr(0, comma));
    auto fail = [&](const std::string& problem) {
      return Status::FromCode(StatusCode::kInvalidArgument,
                              fmt::format("\"{}\": {}", entry, problem), "devices");
    };
    std::size_t x = entry.find('x');
    std::int64_t count = 0;
    if (x == std::string_view::npos || !ParseInt(entry.substr(0, x), count)) {
      return fail("must be COUNTxMODEL or COUNTxMODEL-MEMORYG, e.g. 8xH800-80G");
    }
    if (count < 1 || count > 1024) {
      return fail(fmt::format("count must be 1 to 1024, got {}", count));
    }
    std::string_view model = entry.substr(x + 1);
    std::int64_t memory_gib = 0;
    if (std::size_t dash = model.rfind('-'); dash != std::string_view::npos) {
      std::string_view memory = model.substr(dash + 1);
      model = model.substr(0, dash);
      if (memory.size() < 2 || memory.back() != 'G' ||
          !ParseInt(memory.substr(0, memory.size() - 1), memory_gib) || memory_gib <= 0) {
        return fail(fmt::format("memory must be a number followed by G, got \"{}\"", memory));
      }
    }
    if (model.empty()) return fail("the model is missing");
    for (char c : model) {
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '.')) {
        return fail(fmt::format("model \"{}\" may hold only letters, digits, '_' and '.'", model));
      }
    }
    for (std::int64_t i = 0; i < count; ++i) {
      GpuInfo gpu;
      gpu.model = std::string(model);
      gpu.name = std::string(model);
      gpu.memory_mib = memory_gib * 1024;
      gpu.uuid = fmt::format("declared-{}", gpus.size());
      gpu.nvlink_group = group;
      gpus.push_back(std::move(gpu));
    }
    ++group;
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return gpus;
}

Result<Devices> DiscoverDevices(std::string_view spec, const std::string& library) {
  Devices devices;
  if (Trim(spec) != "auto") {
    Result<std::vector<GpuInfo>> declared = ParseDeclaredDevices(spec);
    if (!declared.ok()) return declared.status();
    devices.gpus = std::move(declared).value();
    return devices;
  }
  bool absent = false;
  Result<std::vector<GpuInfo>> found = QueryNvml(library, absent);
  if (found.ok()) {
    devices.gpus = std::move(found).value();
  } else if (absent) {
    devices.warning = found.status().message() + "; this node reports no GPUs";
  } else {
    return found.status();
  }
  return devices;
}

HostInfo DiscoverHost() {
  HostInfo host;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) host.hostname = name;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  host.cpu_milli = static_cast<std::int64_t>(std::max(cpus, 1L)) * 1000;

  std::istringstream meminfo(ReadFile("/proc/meminfo"));
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemTotal:") {
      host.memory_mib = kib / 1024;
      break;
    }
  }

  // A container or a systemd slice may allow less than the machine has; every cgroup from the
  // agent's own up to the root limits it.
  // Inside a cgroup namespace the agent's own cgroup reads as "/", and its limits are at the top.
  std::string cgroup = OwnCgroup();
  while (!cgroup.empty()) {
    std::string dir = "/sys/fs/cgroup" + (cgroup == "/" ? std::string() : cgroup);
    std::istringstream cpu_max(ReadFile(dir + "/cpu.max"));
    std::string quota;
    std::int64_t period = 0, quota_us = 0;
    if (cpu_max >> quota >> period && quota != "max" && ParseInt(quota, quota_us) && period > 0) {
      host.cpu_milli =
          std::min(host.cpu_milli, std::max<std::int64_t>(quota_us * 1000 / period, 1));
    }
    std::string memory_max = std::string(Trim(ReadFile(dir + "/memory.max")));
    std::int64_t bytes = 0;
    if (ParseInt(memory_max, bytes) && bytes > 0) {
      host.memory_mib = std::min(host.memory_mib, bytes / (1024 * 1024));
    }
    if (cgroup == "/") break;
    std::size_t slash = cgroup.rfind('/');
    cgroup = slash == 0 || slash == std::string::npos ? "/" : cgroup.substr(0, slash);
  }
  return host;
}

std::string ShortModel(std::string_view nvml_name) {
  std::vector<std::string_view> words;
  std::string_view rest = Trim(nvml_name);
  while (!rest.empty()) {
    std::size_t space = rest.find(' ');
    std::string_view word = rest.substr(0, space);
    if (!word.empty()) words.push_back(word);
    if (space == std::string_view::npos) break;
    rest = rest.substr(space + 1);
  }
  std::size_t i = 0;
  while (i < words.size() && (words[i] == "NVIDIA" || words[i] == "Tesla" ||
                              words[i] == "GeForce" || words[i] == "Quadro")) {
    ++i;
  }
  if (i == words.size()) return std::string(Trim(nvml_name));
  auto base = [](std::string_view word) { return word.substr(0, word.find('-')); };
  std::string_view first = base(words[i]);
  // "RTX 4090" names one model in two words; "RTX A6000" names it in the second.
  if ((first == "RTX" || first == "GTX" || first == "TITAN") && i + 1 < words.size()) {
    std::string_view next = base(words[i + 1]);
    if (!next.empty() && next[0] >= '0' && next[0] <= '9') {
      return std::string(first) + std::string(next);
    }
    return std::string(next);
  }
  return std::string(first);
}

}  // namespace arbiter::agent
