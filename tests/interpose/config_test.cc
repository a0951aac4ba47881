// Configuration: HAMi-compatible environment, the config file (which wins and survives su/ssh),
// size parsing, and fail-closed handling of anything malformed.
#include "interpose/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "interpose/base.h"

namespace gpushare::interpose {
namespace {

std::map<std::string, std::string>* g_env = nullptr;
const char* FakeGetenv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

Config FromEnv(std::map<std::string, std::string> env) {
  g_env = &env;
  Config c;
  ParseEnvironment(&FakeGetenv, &c);
  g_env = nullptr;
  return c;
}

Config FromText(const std::string& text) {
  Config c;
  ParseConfigText(text.data(), text.size(), &c);
  return c;
}

TEST(ParseSize, AcceptsHamiForms) {
  uint64_t v = 0;
  struct {
    const char* text;
    uint64_t bytes;
  } cases[] = {{"1g", 1ull << 30},
               {"1G", 1ull << 30},
               {"1024m", 1ull << 30},
               {"1048576k", 1ull << 30},
               {"1073741824", 1ull << 30},
               {"3GiB", 3ull << 30},
               {"512MB", 512ull << 20},
               {" 2g ", 2ull << 30},
               {"0", 0},
               {"1t", 1ull << 40},
               {"17b", 17}};
  for (const auto& c : cases) {
    ASSERT_TRUE(ParseSize(c.text, StrLen(c.text), &v)) << c.text;
    EXPECT_EQ(v, c.bytes) << c.text;
  }
}

TEST(ParseSize, RejectsGarbageAndOverflow) {
  uint64_t v = 0;
  for (const char* bad : {"", "g", "1x", "1.5g", "-1", "1gg", "99999999999999999999",
                          "18014398509481984k" /* 2^54 KiB overflows */, "1 g"}) {
    EXPECT_FALSE(ParseSize(bad, StrLen(bad), &v)) << bad;
  }
}

TEST(Environment, DefaultAndPerDeviceLimits) {
  Config c = FromEnv({{"CUDA_DEVICE_MEMORY_LIMIT", "4g"},
                      {"CUDA_DEVICE_MEMORY_LIMIT_1", "1024m"},
                      {"CUDA_DEVICE_SM_LIMIT", "30"},
                      {"CUDA_DEVICE_SM_LIMIT_1", "100"},
                      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/tmp/x.cache"}});
  EXPECT_EQ(c.source, Config::kEnvironment);
  EXPECT_FALSE(c.fail_closed);
  EXPECT_TRUE(c.Active());
  EXPECT_STREQ(c.region_path, "/tmp/x.cache");
  DeviceLimits d0 = LimitsFor(c, 0, nullptr);
  EXPECT_TRUE(d0.memory_limited);
  EXPECT_EQ(d0.memory_limit, 4ull << 30);
  EXPECT_EQ(d0.sm_limit, 30u);
  DeviceLimits d1 = LimitsFor(c, 1, nullptr);
  EXPECT_EQ(d1.memory_limit, 1ull << 30);
  EXPECT_EQ(d1.sm_limit, 0u) << "100% means no limit";
}

TEST(Environment, ZeroOrEmptyMeansNoLimitAndNothingIsActive) {
  EXPECT_FALSE(FromEnv({}).Active());
  EXPECT_FALSE(FromEnv({{"CUDA_DEVICE_MEMORY_LIMIT", "0"}}).Active());
  EXPECT_FALSE(FromEnv({{"CUDA_DEVICE_MEMORY_LIMIT", ""}}).Active());
  EXPECT_FALSE(FromEnv({{"CUDA_DEVICE_SM_LIMIT", "0"}}).Active());
  EXPECT_FALSE(FromEnv({{"CUDA_DEVICE_SM_LIMIT", "100"}}).Active());
  // A per-device 0 switches the default off for that device only.
  Config c = FromEnv({{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"CUDA_DEVICE_MEMORY_LIMIT_2", "0"}});
  EXPECT_TRUE(LimitsFor(c, 0, nullptr).memory_limited);
  EXPECT_FALSE(LimitsFor(c, 2, nullptr).memory_limited);
}

TEST(Environment, GarbageFailsClosedNamingTheVariable) {
  Config c = FromEnv({{"CUDA_DEVICE_MEMORY_LIMIT_0", "3x"}});
  EXPECT_TRUE(c.fail_closed);
  EXPECT_TRUE(c.Active());
  EXPECT_NE(std::string(c.problem).find("CUDA_DEVICE_MEMORY_LIMIT_0"), std::string::npos)
      << c.problem;
  DeviceLimits d = LimitsFor(c, 0, nullptr);
  EXPECT_TRUE(d.memory_limited);
  EXPECT_EQ(d.memory_limit, 0u) << "an unreadable limit must not become unlimited";
  EXPECT_TRUE(FromEnv({{"CUDA_DEVICE_SM_LIMIT", "150"}}).fail_closed);
}

TEST(Environment, PoliciesAndLimiterSwitch) {
  Config c = FromEnv({{"CUDA_DEVICE_SM_LIMIT", "50"},
                      {"GPU_CORE_UTILIZATION_POLICY", "DISABLE"},
                      {"GPUSHARE_MANAGED_MEMORY", "ignore"},
                      {"GPUSHARE_IPC_IMPORTS", "count"},
                      {"GPUSHARE_CONTEXT_OVERHEAD", "128m"},
                      {"LIBCUDA_LOG_LEVEL", "4"}});
  EXPECT_FALSE(c.AnySmLimit());
  EXPECT_EQ(LimitsFor(c, 0, nullptr).sm_limit, 0u);
  EXPECT_EQ(c.managed, ManagedPolicy::kIgnore);
  EXPECT_EQ(c.ipc_imports, ImportPolicy::kCount);
  EXPECT_EQ(c.context_overhead, 128ull << 20);
  EXPECT_EQ(c.log_level, 4);
}

constexpr const char* kFile =
    "# written by gpushare-node\n"
    "version=1\n"
    "region=/var/lib/gpushare/region\n"
    "device.0.uuid=GPU-11111111-2222-3333-4444-555555555555\n"
    "device.0.memory_limit=3221225472\n"
    "device.1.uuid=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n"
    "device.1.memory_limit=2g\n"
    "device.1.sm_limit=40\n"
    "context_overhead=256m\n";

TEST(ConfigFile, DevicesMatchByUuidNotByIndex) {
  Config c = FromText(kFile);
  EXPECT_EQ(c.source, Config::kFile);
  EXPECT_FALSE(c.fail_closed) << c.problem;
  EXPECT_STREQ(c.region_path, "/var/lib/gpushare/region");
  EXPECT_EQ(c.context_overhead, 256ull << 20);
  uint8_t u0[16], u1[16], other[16];
  ASSERT_TRUE(ParseUuid("GPU-11111111-2222-3333-4444-555555555555", 40, u0));
  ASSERT_TRUE(ParseUuid("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 40, u1));
  ASSERT_TRUE(ParseUuid("GPU-99999999-2222-3333-4444-555555555555", 40, other));
  // A process with CUDA_VISIBLE_DEVICES=1 sees the second GPU as its device 0: UUIDs decide.
  EXPECT_EQ(LimitsFor(c, 0, u1).memory_limit, 2ull << 30);
  EXPECT_EQ(LimitsFor(c, 0, u1).sm_limit, 40u);
  EXPECT_EQ(LimitsFor(c, 3, u0).memory_limit, 3ull << 30);
  EXPECT_FALSE(LimitsFor(c, 0, other).memory_limited) << "a GPU not given to the container";
}

TEST(ConfigFile, MalformedLinesFailClosedUnknownKeysAreIgnored) {
  Config bad = FromText("version=1\ndevice.0.memory_limit=lots\n");
  EXPECT_TRUE(bad.fail_closed);
  EXPECT_NE(std::string(bad.problem).find("device.0.memory_limit"), std::string::npos)
      << bad.problem;
  EXPECT_TRUE(FromText("no equals sign here\n").fail_closed);
  EXPECT_TRUE(FromText("version=2\n").fail_closed);
  EXPECT_TRUE(FromText("device.16.memory_limit=1g\n").fail_closed);
  EXPECT_TRUE(FromText("device.0.uuid=GPU-nothex\n").fail_closed);
  EXPECT_TRUE(FromText("region=relative/path\n").fail_closed);
  Config unknown = FromText("memory_limit=1g\nfuture_key=1\n");
  EXPECT_FALSE(unknown.fail_closed);
  EXPECT_NE(std::string(unknown.problem).find("future_key"), std::string::npos);
  EXPECT_EQ(LimitsFor(unknown, 5, nullptr).memory_limit, 1ull << 30);
}

TEST(ConfigFile, EmptyFileEnforcesNothing) {
  Config c = FromText("");
  EXPECT_FALSE(c.Active());
  EXPECT_FALSE(c.fail_closed);
}

TEST(Uuid, ParseAndFormatRoundTrip) {
  uint8_t u[16];
  ASSERT_TRUE(ParseUuid("MIG-01234567-89ab-cdef-0123-456789abcdef", 40, u));
  char text[41];
  FormatUuid(u, text);
  EXPECT_STREQ(text, "GPU-01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_FALSE(ParseUuid("GPU-0123", 8, u));
}

TEST(SaturatingMath, NeverWraps) {
  EXPECT_EQ(SatSub(1, 2), 0u);
  EXPECT_EQ(SatAdd(kU64Max, 1), kU64Max);
  EXPECT_EQ(SatMul(kU64Max / 2, 3), kU64Max);
  EXPECT_EQ(RoundUp(kU64Max - 1, 512), kU64Max);
  EXPECT_EQ(RoundUp(1000, 512), 1024u);
}

}  // namespace
}  // namespace gpushare::interpose
