#include "gpu/file_inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/strings.h"
#include "core/resource_plan.h"
#include "tests/config/input_files.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;

const std::string kExamples = std::string(GPUSHARE_SOURCE_DIR) + "/examples/inventory/";

std::vector<std::string> Problems(const std::string& yaml) {
  auto r = ParseInventoryYaml(yaml, "inv.yaml");
  if (r.ok()) return {};
  return SplitLines(r.status().message());
}

TEST(FileInventory, EightA10Example) {
  auto inv = LoadInventoryFile(kExamples + "8x-a10.yaml");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->source, kExamples + "8x-a10.yaml");
  EXPECT_EQ(inv->driver_version, "570.124.06");
  EXPECT_EQ(inv->cuda_driver_version, "12.8");
  ASSERT_EQ(inv->gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const Gpu& g = inv->gpus[i];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.product, "NVIDIA A10");
    EXPECT_EQ(g.memory_mib, 23028u);
    EXPECT_EQ(g.cc_major, 8);
    EXPECT_EQ(g.cc_minor, 6);
    EXPECT_EQ(g.numa_node, i < 4 ? 0 : 1);
    EXPECT_FALSE(g.mig_enabled);
    EXPECT_TRUE(IsGpuUuid(g.uuid)) << g.uuid;
  }
}

TEST(FileInventory, H100MigExample) {
  auto inv = LoadInventoryFile(kExamples + "h100-80gb-mig-1g.10gb.yaml");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus.size(), 1u);
  const Gpu& g = inv->gpus[0];
  EXPECT_EQ(g.product, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(g.mig_enabled);
  ASSERT_EQ(g.mig.size(), 7u);
  for (int j = 0; j < 7; ++j) {
    EXPECT_EQ(g.mig[j].index, j);
    EXPECT_EQ(g.mig[j].profile, "1g.10gb");
    EXPECT_EQ(g.mig[j].gpu_instance_id, 7 + j);
    EXPECT_EQ(g.mig[j].compute_instance_id, 0);
    EXPECT_TRUE(IsMigUuid(g.mig[j].uuid));
  }
}

TEST(FileInventory, MixedExample) {
  auto inv = LoadInventoryFile(kExamples + "mixed.yaml");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus.size(), 4u);
  std::set<uint64_t> sizes;
  int mig_gpus = 0;
  for (const auto& g : inv->gpus) {
    sizes.insert(g.memory_mib);
    mig_gpus += g.mig_enabled;
  }
  EXPECT_GE(sizes.size(), 2u) << "GPUs of different sizes";
  EXPECT_EQ(mig_gpus, 1);
}

TEST(FileInventory, AllFields) {
  auto inv = ParseInventoryYaml(R"(version: v1
driverVersion: "580.65.06"
gpus:
- index: 1
  uuid: GPU-11111111-2222-3333-4444-555555555555
  product: NVIDIA A100-SXM4-80GB
  memoryMiB: 81920
  computeCapability: 8.0
  numaNode: 1
  pciBusId: "0000:b1:00.0"
  multiprocessors: 108
  migEnabled: true
  mig:
  - profile: 3g.40gb
    gpuInstanceId: 2
    computeInstanceId: 0
    uuid: MIG-aaaaaaaa-2222-3333-4444-555555555555
    memoryMiB: 40192
    multiprocessors: 42
  - profile: 1c.3g.40gb
    gpuInstanceId: 2
    computeInstanceId: 1
    uuid: MIG-bbbbbbbb-2222-3333-4444-555555555555
    memoryMiB: 40192
- index: 0
  uuid: GPU-00000000-2222-3333-4444-555555555555
  product: NVIDIA A10
  memoryMiB: 23028
  computeCapability: "8.6"
)",
                                "inv.yaml");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].index, 0) << "sorted by index";
  EXPECT_EQ(inv->gpus[0].numa_node, -1);
  const Gpu& g = inv->gpus[1];
  EXPECT_EQ(g.cc_major, 8);
  EXPECT_EQ(g.cc_minor, 0);
  EXPECT_EQ(g.pci_bus_id, "0000:b1:00.0");
  EXPECT_EQ(g.multiprocessors, 108);
  ASSERT_EQ(g.mig.size(), 2u);
  EXPECT_EQ(g.mig[1].index, 1) << "index defaults to the position";
  EXPECT_EQ(g.mig[1].profile, "1c.3g.40gb");
  EXPECT_EQ(g.mig[0].multiprocessors, 42);
}

TEST(FileInventory, EmptyNode) {
  auto inv = ParseInventoryYaml("gpus: []\n", "inv.yaml");
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->gpus.empty());
}

struct BadInventory {
  const char* name;
  std::string yaml;
  std::string problem;
};

class InvalidInventory : public ::testing::TestWithParam<BadInventory> {};

TEST_P(InvalidInventory, NamesTheField) {
  auto lines = Problems(GetParam().yaml);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], GetParam().problem);
}

const std::string kGpu0 =
    "gpus:\n- index: 0\n  uuid: GPU-00000000-2222-3333-4444-555555555555\n  product: NVIDIA A10\n"
    "  memoryMiB: 23028\n  computeCapability: \"8.6\"\n";
const std::string kMigGpu =
    "gpus:\n- index: 0\n  uuid: GPU-00000000-2222-3333-4444-555555555555\n  product: H100\n"
    "  memoryMiB: 81559\n  computeCapability: \"9.0\"\n  migEnabled: true\n  mig:\n";
std::string Mig(int gi, int ci, const std::string& uuid_tail,
                const std::string& profile = "1g.10gb", int mem = 9856) {
  return "  - profile: " + profile + "\n    gpuInstanceId: " + std::to_string(gi) +
         "\n    computeInstanceId: " + std::to_string(ci) +
         "\n    uuid: MIG-00000000-2222-3333-4444-" + uuid_tail +
         "\n    memoryMiB: " + std::to_string(mem) + "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, InvalidInventory,
    ::testing::Values(
        BadInventory{
            "NoGpus", "driverVersion: x\n",
            "gpus: is required (a list of GPUs; [] for a node without GPUs) (inv.yaml:1:1)"},
        BadInventory{"EmptyDocument", "",
                     "gpus: is required (a list of GPUs; [] for a node without GPUs)"},
        BadInventory{"GpusNotAList", "gpus: 8\n",
                     "gpus: must be a list of GPUs, got the number 8 (inv.yaml:1:7)"},
        BadInventory{"UnknownKey", kGpu0 + "  memory: 24\n",
                     "gpus[0].memory: unknown key (allowed here: index, uuid, product, memoryMiB, "
                     "computeCapability, numaNode, pciBusId, multiprocessors, migEnabled, mig) "
                     "(inv.yaml:7:3)"},
        BadInventory{"BadUuid",
                     "gpus:\n- index: 0\n  uuid: GPU-1\n  product: A\n  memoryMiB: 1\n  "
                     "computeCapability: \"8.6\"\n",
                     "gpus[0].uuid: must be GPU-<8-4-4-4-12 hex digits>, got \"GPU-1\" "
                     "(inv.yaml:3:9)"},
        BadInventory{"MissingMemory",
                     "gpus:\n- index: 0\n  uuid: GPU-00000000-2222-3333-4444-555555555555\n  "
                     "product: A\n  computeCapability: \"8.6\"\n",
                     "gpus[0].memoryMiB: is required (total memory in MiB, e.g. 23028) "
                     "(inv.yaml:2:3)"},
        BadInventory{"MemoryZero",
                     "gpus:\n- index: 0\n  uuid: GPU-00000000-2222-3333-4444-555555555555\n"
                     "  product: A\n  memoryMiB: 0\n  computeCapability: \"8.6\"\n",
                     "gpus[0].memoryMiB: must be 1..16777216, got 0 (inv.yaml:5:14)"},
        BadInventory{"BadPciBusId", kGpu0 + "  numaNode: 0\n" + "  pciBusId: 17:00.0\n",
                     "gpus[0].pciBusId: must be a PCI bus ID like 0000:17:00.0, got \"17:00.0\" "
                     "(inv.yaml:8:13)"},
        BadInventory{"NumaRange", kGpu0 + "  numaNode: -2\n",
                     "gpus[0].numaNode: must be -1..1023, got -2 (inv.yaml:7:13)"},
        BadInventory{
            "MigWithoutMigEnabled", kGpu0 + "  mig: []\n",
            "gpus[0].mig: MIG devices are listed but migEnabled is not true (inv.yaml:7:8)"},
        BadInventory{"DuplicateGpuUuid",
                     kGpu0 + "- index: 1\n  uuid: GPU-00000000-2222-3333-4444-555555555555\n"
                             "  product: A\n  memoryMiB: 1\n  computeCapability: \"8.6\"\n",
                     "gpus[1].uuid: duplicate of gpus[0].uuid "
                     "(GPU-00000000-2222-3333-4444-555555555555)"},
        BadInventory{"DuplicateIndex",
                     kGpu0 + "- index: 0\n  uuid: GPU-10000000-2222-3333-4444-555555555555\n"
                             "  product: A\n  memoryMiB: 1\n  computeCapability: \"8.6\"\n",
                     "gpus[1].index: duplicate of gpus[0].index (0)"},
        BadInventory{"BadProfile", kMigGpu + Mig(7, 0, "000000000001", "1gb"),
                     "gpus[0].mig[0].profile: must be a MIG profile like 1g.10gb, 1c.2g.20gb or "
                     "1g.10gb+me, got \"1gb\" (inv.yaml:9:14)"},
        BadInventory{"DuplicateGiCi",
                     kMigGpu + Mig(7, 0, "000000000001") + Mig(7, 0, "000000000002"),
                     "gpus[0].mig[1]: gpuInstanceId 7 / computeInstanceId 0 is also used by "
                     "gpus[0].mig[0]"},
        BadInventory{"TooManySlices",
                     kMigGpu + Mig(1, 0, "000000000001", "7g.80gb", 40000) +
                         Mig(8, 0, "000000000002", "1g.10gb", 9856),
                     "gpus[0].mig: the GPU instances use 8 GPU slices; a GPU has at most 7"},
        BadInventory{"DuplicateMigUuid",
                     kMigGpu + Mig(7, 0, "000000000001") + Mig(8, 0, "000000000001"),
                     "gpus[0].mig[1].uuid: duplicate of gpus[0].mig[0].uuid "
                     "(MIG-00000000-2222-3333-4444-000000000001)"},
        BadInventory{
            "MigMissingGi",
            kMigGpu + "  - profile: 1g.10gb\n    computeInstanceId: 0\n"
                      "    uuid: MIG-00000000-2222-3333-4444-000000000001\n    memoryMiB: 9856\n",
            "gpus[0].mig[0].gpuInstanceId: is required (the GI ID, e.g. 7) (inv.yaml:9:5)"},
        BadInventory{"Syntax", "gpus: [\n",
                     "inv.yaml:2:1: not valid YAML or JSON: end of sequence flow not found"}),
    [](const ::testing::TestParamInfo<BadInventory>& info) {
      return std::string(info.param.name);
    });

TEST(FileInventory, ComputeCapabilityForms) {
  auto lines = Problems(
      "gpus:\n- index: 0\n  uuid: GPU-00000000-2222-3333-4444-555555555555\n  product: A\n"
      "  memoryMiB: 1\n  computeCapability: eight\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "gpus[0].computeCapability: must be major.minor, e.g. \"8.6\", got "
            "\"eight\" (inv.yaml:6:22)");
}

TEST(FileInventory, ReportsEveryProblem) {
  auto lines =
      Problems("gpus:\n- index: x\n  uuid: nope\n  product: A\n  memoryMiB: -1\n  extra: 1\n");
  EXPECT_EQ(lines.size(), 5u) << ::testing::PrintToString(lines);
}

TEST(FileInventory, UnreadableFile) {
  auto r = LoadInventoryFile("/nonexistent/inv.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cannot read inventory file /nonexistent/inv.yaml"));
  auto src = MakeFileInventorySource("/nonexistent/inv.yaml");
  EXPECT_FALSE(src->Load().ok());
  EXPECT_THAT(src->Describe(), HasSubstr("/nonexistent/inv.yaml"));
}

// The inventory file follows the config file's rules (config/file_read.h): a regular file of
// at most 1 MiB and 20,000 YAML values, problems capped at 20 with a count of the rest.
class InventoryBounds : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    return scratch_.Write(name, text);
  }
  testing::ScratchDir scratch_;
  const std::string dir_ = scratch_.path();
};

TEST_F(InventoryBounds, DirectoryFifoAndDeviceAreRefused) {
  auto r = LoadInventoryFile(dir_);
  ASSERT_FALSE(r.ok()) << "a directory was read as an inventory";
  EXPECT_EQ(r.status().message(), "--inventory: cannot read inventory file " + dir_ +
                                      ": it is a directory (name the file inside it, e.g. " + dir_ +
                                      "/inventory.yaml)");
  EXPECT_THAT(LoadInventoryFile("/dev/zero").status().message(),
              HasSubstr("it is a character device"));
  const std::string fifo = scratch_.Fifo("fifo");
  ASSERT_FALSE(fifo.empty());
  auto f = testing::ReadFifoWithin(fifo, [&] { return LoadInventoryFile(fifo); });
  ASSERT_TRUE(f.has_value()) << "reading a FIFO blocked";
  EXPECT_THAT(f->status().message(), HasSubstr("it is a FIFO"));
}

TEST_F(InventoryBounds, FileOverTheLimitIsRefused) {
  const std::string path = Write("big.yaml", std::string(kMaxInventoryFileBytes + 1, '#'));
  auto r = LoadInventoryFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--inventory: cannot read inventory file " + path +
                ": 1048577 bytes (1.0 MiB), more than the limit of 1048576 bytes (1 MiB)");
}

TEST_F(InventoryBounds, TooManyValuesAndTooManyProblems) {
  std::string s = "gpus: [";
  for (int i = 0; i < 60000; ++i) s += "1,";
  s += "1]\n";
  auto r = ParseInventoryYaml(s, "inv.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("inv.yaml: more than 20000 YAML values"));
  // 2,000 GPUs that are not mappings: 2,000 problems, 20 listed.
  s = "gpus: [";
  for (int i = 0; i < 2000; ++i) s += "x,";
  s += "x]\n";
  r = ParseInventoryYaml(s, "inv.yaml");
  ASSERT_FALSE(r.ok());
  auto lines = SplitLines(r.status().message());
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[20], "... and 1981 more problems (2001 in all)");
}

TEST_F(InventoryBounds, ControlBytesAreEscapedInMessages) {
  auto lines = Problems(
      "gpus:\n- index: 0\n  uuid: \"GPU-\\0\\x07\"\n  product: A\n  memoryMiB: 1\n"
      "  computeCapability: \"8.6\"\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(
      lines[0],
      "gpus[0].uuid: must be GPU-<8-4-4-4-12 hex digits>, got \"GPU-\\0\\x07\" (inv.yaml:3:9)");
}

TEST(InitFailure, FollowsFailOnInitError) {
  Status s = Status::Unavailable("no NVML");
  auto exit = DecideOnInitFailure(s, true);
  EXPECT_EQ(exit.action, InitFailureAction::kExit);
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.message, HasSubstr("no NVML"));
  EXPECT_THAT(exit.message, HasSubstr("failOnInitError"));
  auto wait = DecideOnInitFailure(s, false);
  EXPECT_EQ(wait.action, InitFailureAction::kWaitIdle);
  EXPECT_THAT(wait.message, HasSubstr("waits"));
}

}  // namespace
}  // namespace gpushare
