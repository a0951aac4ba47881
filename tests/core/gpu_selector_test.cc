// GpuSelector: HAMi's nvidia.com/use-gputype, nouse-gputype, use-gpuuuid and nouse-gpuuuid, read
// and matched as HAMi's scheduler does (comma lists, trimmed, models by case-insensitive
// substring, UUIDs exactly), with bounds on what a pod may write.
#include "core/gpu_selector.h"

#include <gtest/gtest.h>

namespace gpushare {
namespace {

constexpr std::string_view kA100 = "NVIDIA A100-SXM4-80GB";
constexpr std::string_view kA10 = "NVIDIA A10";

GpuSelector Parse(const std::map<std::string, std::string>& a) {
  Result<GpuSelector> s = ParseGpuSelector(a);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : GpuSelector{};
}

TEST(GpuSelector, NoAnnotationsOrBlankValuesAreNoConstraint) {
  EXPECT_TRUE(Parse({}).empty());
  EXPECT_TRUE(
      Parse({{"nvidia.com/use-gputype", ""}, {"nvidia.com/nouse-gpuuuid", " , ,"}}).empty());
  EXPECT_FALSE(Parse({}).Excludes(kA10, "GPU-1").has_value());
}

TEST(GpuSelector, ModelsMatchBySubstringIgnoringCaseAndEntriesAreTrimmed) {
  const GpuSelector s = Parse({{"nvidia.com/use-gputype", " a100 , H100"}});
  EXPECT_EQ(s.use_types, (std::vector<std::string>{"a100", "H100"}));
  EXPECT_FALSE(s.Excludes(kA100, "GPU-1").has_value());
  EXPECT_FALSE(s.Excludes("NVIDIA H100 80GB HBM3", "GPU-2").has_value());
  const std::optional<std::string> why = s.Excludes(kA10, "GPU-3");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "nvidia.com/use-gputype=a100,H100 does not match \"NVIDIA A10\"");
  // A substring, as HAMi matches: "A10" names the A100 as well.
  const GpuSelector a10 = Parse({{"nvidia.com/use-gputype", "A10"}});
  EXPECT_FALSE(a10.Excludes(kA100, "GPU-1").has_value());
  const GpuSelector no = Parse({{"nvidia.com/nouse-gputype", "a10"}});
  EXPECT_EQ(no.Excludes(kA100, "GPU-1").value_or(""),
            "nvidia.com/nouse-gputype=a10 matches \"NVIDIA A100-SXM4-80GB\"");
}

TEST(GpuSelector, UuidsMatchExactly) {
  const GpuSelector s = Parse(
      {{"nvidia.com/use-gpuuuid", "GPU-aaa, GPU-bbb"}, {"nvidia.com/nouse-gpuuuid", "GPU-bbb"}});
  EXPECT_FALSE(s.Excludes(kA10, "GPU-aaa").has_value());
  EXPECT_EQ(s.Excludes(kA10, "GPU-bbb").value_or(""), "nvidia.com/nouse-gpuuuid lists GPU-bbb");
  EXPECT_EQ(s.Excludes(kA10, "GPU-aa").value_or(""), "nvidia.com/use-gpuuuid does not list GPU-aa");
  EXPECT_EQ(s.Excludes(kA10, "gpu-aaa").value_or(""),
            "nvidia.com/use-gpuuuid does not list gpu-aaa");
  EXPECT_EQ(s.Describe(),
            "nvidia.com/use-gpuuuid=GPU-aaa,GPU-bbb; nvidia.com/nouse-gpuuuid=GPU-bbb");
}

TEST(GpuSelector, AGpuMustPassEveryAnnotation) {
  const GpuSelector s =
      Parse({{"nvidia.com/use-gputype", "A100"}, {"nvidia.com/nouse-gpuuuid", "GPU-1"}});
  EXPECT_TRUE(s.Excludes(kA100, "GPU-1").has_value());
  EXPECT_FALSE(s.Excludes(kA100, "GPU-2").has_value());
  EXPECT_TRUE(s.Excludes(kA10, "GPU-2").has_value());
}

TEST(GpuSelector, WhatAPodMayWriteIsBounded) {
  std::string many;
  for (int i = 0; i <= static_cast<int>(kMaxSelectorEntries); ++i)
    many += "GPU-" + std::to_string(i) + ",";
  Result<GpuSelector> s = ParseGpuSelector({{"nvidia.com/use-gpuuuid", many}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "annotation nvidia.com/use-gpuuuid: more than 64 entries");
  s = ParseGpuSelector({{"nvidia.com/use-gputype", std::string(200, 'x')}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("annotation nvidia.com/use-gputype: entry \"xxx"),
            std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("longer than 128 bytes"), std::string::npos);
  s = ParseGpuSelector({{"nvidia.com/nouse-gputype", "A100,T4\n"}});
  ASSERT_TRUE(s.ok()) << "blanks around an entry (a YAML block's newline) are trimmed";
  EXPECT_EQ(s->nouse_types, (std::vector<std::string>{"A100", "T4"}));
  s = ParseGpuSelector({{"nvidia.com/nouse-gputype", "A100,T\x01"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "annotation nvidia.com/nouse-gputype: entry 2 holds a control character");
}

TEST(GpuSelector, UnknownModelsAreTheEntriesNoModelMatches) {
  const GpuSelector s =
      Parse({{"nvidia.com/use-gputype", "A100,V100"}, {"nvidia.com/nouse-gputype", "t4,a10"}});
  EXPECT_EQ(UnknownModels(s, {std::string(kA100), std::string(kA10)}),
            (std::vector<std::string>{"V100", "t4"}));
  EXPECT_TRUE(UnknownModels(Parse({}), {}).empty());
}

}  // namespace
}  // namespace gpushare
