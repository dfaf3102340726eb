// A stand-in for NVML, for the discovery tests: four "NVIDIA H800 80GB HBM3" devices. By default
// devices 0 and 1 are linked to each other by NVLink, and 2 and 3 too. FAKE_NVML_MODE (read by
// nvmlInit_v2) changes that: "switch": devices 0-2 have links to an NVSwitch and 3 has none;
// "nodriver": nvmlInit_v2 fails as without a driver; "broken": it fails otherwise.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
struct Memory {
  unsigned long long total, free, used;
};

constexpr unsigned kCount = 4;
constexpr unsigned kBus[kCount] = {0x18, 0x2a, 0x3a, 0x5d};
constexpr unsigned kSwitchBus = 0xa0;
bool g_switch = false;
int g_devices[kCount] = {0, 1, 2, 3};

int Index(void* device) { return static_cast<int>(static_cast<int*>(device) - g_devices); }

void Fill(PciInfo* pci, unsigned bus) {
  std::memset(pci, 0, sizeof(*pci));
  pci->bus = bus;
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", bus);
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* mode = std::getenv("FAKE_NVML_MODE");
  g_switch = mode != nullptr && std::strcmp(mode, "switch") == 0;
  if (mode != nullptr && std::strcmp(mode, "nodriver") == 0) return 9;
  if (mode != nullptr && std::strcmp(mode, "broken") == 0) return 999;
  return 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) {
  return r == 9 ? "Driver Not Loaded" : r == 0 ? "Success" : "Unknown Error";
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kCount;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= kCount) return 2;
  *device = &g_devices[index];
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned length) {
  std::snprintf(name, length, "NVIDIA H800 80GB HBM3");
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, Memory* memory) {
  memory->total = 85520809984ULL;
  memory->free = memory->total;
  memory->used = 0;
  return 0;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "GPU-fake-%d", Index(device));
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* pci) {
  Fill(pci, kBus[Index(device)]);
  return 0;
}
int nvmlDeviceGetNvLinkState(void* device, unsigned link, int* active) {
  if (link >= 4) return 2;
  *active = g_switch ? (Index(device) < 3 ? 1 : 0) : (link < 2 ? 1 : 0);
  return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned link, PciInfo* pci) {
  if (link >= 4) return 2;
  int i = Index(device);
  Fill(pci, g_switch ? kSwitchBus : kBus[i ^ 1]);
  return 0;
}

}  // extern "C"
