#include "agent/discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>

namespace arbiter::agent {
namespace {

std::string DeclaredError(std::string_view text) {
  Result<std::vector<GpuInfo>> parsed = ParseDeclaredDevices(text);
  EXPECT_FALSE(parsed.ok()) << text;
  return parsed.ok() ? "" : parsed.status().message();
}

TEST(DiscoveryDeclared, OneEntry) {
  Result<std::vector<GpuInfo>> gpus = ParseDeclaredDevices("8xH800-80G");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ((*gpus)[i].model, "H800");
    EXPECT_EQ((*gpus)[i].memory_mib, 80 * 1024);
    EXPECT_EQ((*gpus)[i].uuid, "declared-" + std::to_string(i));
    EXPECT_EQ((*gpus)[i].nvlink_group, 0);
  }
}

TEST(DiscoveryDeclared, SeveralEntriesAreSeveralGroups) {
  Result<std::vector<GpuInfo>> gpus = ParseDeclaredDevices("2xA100-40G, 4xL40S-48G,1xT4");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 7u);
  EXPECT_EQ((*gpus)[1].model, "A100");
  EXPECT_EQ((*gpus)[1].memory_mib, 40 * 1024);
  EXPECT_EQ((*gpus)[1].nvlink_group, 0);
  EXPECT_EQ((*gpus)[2].model, "L40S");
  EXPECT_EQ((*gpus)[2].memory_mib, 48 * 1024);
  EXPECT_EQ((*gpus)[2].nvlink_group, 1);
  EXPECT_EQ((*gpus)[2].uuid, "declared-2");
  EXPECT_EQ((*gpus)[6].model, "T4");
  EXPECT_EQ((*gpus)[6].memory_mib, 0);  // unknown
  EXPECT_EQ((*gpus)[6].nvlink_group, 2);
}

TEST(DiscoveryDeclared, NoGpus) {
  for (std::string_view text : {"", "none", "  none "}) {
    Result<std::vector<GpuInfo>> gpus = ParseDeclaredDevices(text);
    ASSERT_TRUE(gpus.ok()) << text;
    EXPECT_TRUE(gpus->empty());
  }
}

TEST(DiscoveryDeclared, ErrorsNameTheEntry) {
  EXPECT_EQ(DeclaredError("8xH800-80Q"),
            "devices: \"8xH800-80Q\": memory must be a number followed by G, got \"80Q\"");
  EXPECT_EQ(DeclaredError("2xA100-40G,4xL40S-G"),
            "devices: \"4xL40S-G\": memory must be a number followed by G, got \"G\"");
  EXPECT_EQ(DeclaredError("H800"),
            "devices: \"H800\": must be COUNTxMODEL or COUNTxMODEL-MEMORYG, e.g. 8xH800-80G");
  EXPECT_EQ(DeclaredError("0xH800"), "devices: \"0xH800\": count must be 1 to 1024, got 0");
  EXPECT_EQ(DeclaredError("8x"), "devices: \"8x\": the model is missing");
  EXPECT_EQ(DeclaredError("8xH800,"),
            "devices: \"\": must be COUNTxMODEL or COUNTxMODEL-MEMORYG, e.g. 8xH800-80G");
  EXPECT_EQ(DeclaredError("8xH 800"),
            "devices: \"8xH 800\": model \"H 800\" may hold only letters, digits, '_' and '.'");
  EXPECT_EQ(DeclaredError("ax8"),
            "devices: \"ax8\": must be COUNTxMODEL or COUNTxMODEL-MEMORYG, e.g. 8xH800-80G");
}

TEST(DiscoveryShortModel, Names) {
  EXPECT_EQ(ShortModel("NVIDIA H800 80GB HBM3"), "H800");
  EXPECT_EQ(ShortModel("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(ShortModel("NVIDIA A100 80GB PCIe"), "A100");
  EXPECT_EQ(ShortModel("NVIDIA L40S"), "L40S");
  EXPECT_EQ(ShortModel("NVIDIA H200"), "H200");
  EXPECT_EQ(ShortModel("NVIDIA H100 NVL"), "H100");
  EXPECT_EQ(ShortModel("Tesla V100-SXM2-32GB"), "V100");
  EXPECT_EQ(ShortModel("Tesla T4"), "T4");
  EXPECT_EQ(ShortModel("NVIDIA GeForce RTX 4090"), "RTX4090");
  EXPECT_EQ(ShortModel("NVIDIA RTX A6000"), "A6000");
  EXPECT_EQ(ShortModel("NVIDIA"), "NVIDIA");
}

TEST(DiscoveryHost, Sane) {
  HostInfo host = DiscoverHost();
  EXPECT_FALSE(host.hostname.empty());
  EXPECT_GE(host.cpu_milli, 1);
  EXPECT_GT(host.memory_mib, 0);
}

TEST(DiscoveryNvml, MissingLibrary) {
  Result<std::vector<GpuInfo>> gpus = DiscoverNvml("libarbiter-no-such-nvml.so.1");
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().message(),
            "NVML: libarbiter-no-such-nvml.so.1 not found (no NVIDIA driver?)");

  // "auto" without NVML: no GPUs and a warning, not an error.
  Result<Devices> devices = DiscoverDevices("auto", "libarbiter-no-such-nvml.so.1");
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  EXPECT_TRUE(devices->gpus.empty());
  EXPECT_NE(devices->warning.find("not found (no NVIDIA driver?)"), std::string::npos);

  Result<Devices> declared = DiscoverDevices("2xH800-80G", "libarbiter-no-such-nvml.so.1");
  ASSERT_TRUE(declared.ok());
  EXPECT_EQ(declared->gpus.size(), 2u);
  EXPECT_TRUE(declared->warning.empty());
  EXPECT_FALSE(DiscoverDevices("2xH800-80X").ok());
}

#ifdef ARBITER_FAKE_NVML
class DiscoveryFakeNvml : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("FAKE_NVML_MODE"); }
};

TEST_F(DiscoveryFakeNvml, TwoNvLinkPairs) {
  unsetenv("FAKE_NVML_MODE");
  Result<std::vector<GpuInfo>> gpus = DiscoverNvml(ARBITER_FAKE_NVML);
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*gpus)[i].model, "H800");
    EXPECT_EQ((*gpus)[i].name, "NVIDIA H800 80GB HBM3");
    EXPECT_EQ((*gpus)[i].memory_mib, 81559);
    EXPECT_EQ((*gpus)[i].uuid, "GPU-fake-" + std::to_string(i));
  }
  EXPECT_EQ((*gpus)[0].nvlink_group, 0);
  EXPECT_EQ((*gpus)[1].nvlink_group, 0);
  EXPECT_EQ((*gpus)[2].nvlink_group, 1);
  EXPECT_EQ((*gpus)[3].nvlink_group, 1);
}

TEST_F(DiscoveryFakeNvml, NvSwitchJoinsItsGpus) {
  setenv("FAKE_NVML_MODE", "switch", 1);
  Result<std::vector<GpuInfo>> gpus = DiscoverNvml(ARBITER_FAKE_NVML);
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[0].nvlink_group, 0);
  EXPECT_EQ((*gpus)[1].nvlink_group, 0);
  EXPECT_EQ((*gpus)[2].nvlink_group, 0);
  EXPECT_EQ((*gpus)[3].nvlink_group, 1);  // no links
}

TEST_F(DiscoveryFakeNvml, InitFailures) {
  setenv("FAKE_NVML_MODE", "broken", 1);
  Result<std::vector<GpuInfo>> gpus = DiscoverNvml(ARBITER_FAKE_NVML);
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().message(), "NVML: nvmlInit_v2 failed: Unknown Error");
  EXPECT_FALSE(DiscoverDevices("auto", ARBITER_FAKE_NVML).ok());

  // A library without its driver is as good as none to "auto".
  setenv("FAKE_NVML_MODE", "nodriver", 1);
  Result<Devices> devices = DiscoverDevices("auto", ARBITER_FAKE_NVML);
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  EXPECT_TRUE(devices->gpus.empty());
  EXPECT_NE(devices->warning.find("nvmlInit_v2 failed: Driver Not Loaded"), std::string::npos);

  unsetenv("FAKE_NVML_MODE");
  Result<Devices> found = DiscoverDevices("auto", ARBITER_FAKE_NVML);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->gpus.size(), 4u);
  EXPECT_TRUE(found->warning.empty());
}
#endif

}  // namespace
}  // namespace arbiter::agent
