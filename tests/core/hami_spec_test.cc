// HAMi's pod spec read as gpushare's (core/hami_spec.h): one container at a time.
#include "core/hami_spec.h"

#include <gtest/gtest.h>

namespace gpushare::hami {
namespace {

using memshare::MemoryUnit;

ContainerAsk Ask(std::optional<int64_t> gpus, std::optional<int64_t> mem,
                 std::optional<int64_t> percent, std::optional<int64_t> cores, bool init = false) {
  return {"c", init, gpus, mem, percent, cores};
}

std::vector<std::pair<std::string, int64_t>> Limits(const ContainerAsk& a,
                                                    MemoryUnit u = MemoryUnit::kGiB) {
  Result<std::optional<Rewrite>> r = RewriteContainer(a, u, "aliyun.com/gpu-mem");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() && *r ? (*r)->limits : std::vector<std::pair<std::string, int64_t>>{};
}

std::string Error(const ContainerAsk& a) {
  return RewriteContainer(a, MemoryUnit::kGiB, "aliyun.com/gpu-mem").status().message();
}

TEST(HamiSpec, WhatEachContainerBecomes) {
  using L = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(Limits(Ask(1, 3000, std::nullopt, 30)), (L{{"aliyun.com/gpu-mem", 3}}));
  EXPECT_EQ(Limits(Ask(1, 3072, std::nullopt, std::nullopt)), (L{{"aliyun.com/gpu-mem", 3}}));
  EXPECT_EQ(Limits(Ask(1, 3000, std::nullopt, std::nullopt), MemoryUnit::kMiB),
            (L{{"aliyun.com/gpu-mem", 3000}}));
  EXPECT_EQ(Limits(Ask(1, std::nullopt, 40, std::nullopt)),
            (L{{"alibabacloud.com/gpu-milli", 400}}));
  // gpumem wins over the percentage; above 100 % is 100 %, as in HAMi.
  EXPECT_EQ(Limits(Ask(1, 2048, 40, std::nullopt)), (L{{"aliyun.com/gpu-mem", 2}}));
  EXPECT_EQ(Limits(Ask(1, std::nullopt, 150, std::nullopt)),
            (L{{"alibabacloud.com/gpu-milli", 1000}}));
  // The whole memory (cores only, 100 %): whole GPUs.
  EXPECT_EQ(Limits(Ask(3, std::nullopt, std::nullopt, 20)),
            (L{{"alibabacloud.com/gpu-milli", 3000}}));
  Result<std::optional<Rewrite>> whole =
      RewriteContainer(Ask(1, std::nullopt, 100, 20), MemoryUnit::kGiB, "aliyun.com/gpu-mem");
  ASSERT_TRUE(whole.ok() && *whole);
  EXPECT_FALSE((*whole)->keep_cores);
  Result<std::optional<Rewrite>> shared =
      RewriteContainer(Ask(1, 1024, std::nullopt, 20), MemoryUnit::kGiB, "aliyun.com/gpu-mem");
  ASSERT_TRUE(shared.ok() && *shared);
  EXPECT_TRUE((*shared)->keep_cores);
  EXPECT_TRUE((*shared)->notes.empty());
  // Not HAMi's: no nvidia.com/gpu and nothing else, or nvidia.com/gpu alone (a whole GPU).
  EXPECT_FALSE(*RewriteContainer(Ask(std::nullopt, std::nullopt, std::nullopt, std::nullopt),
                                 MemoryUnit::kGiB, "aliyun.com/gpu-mem"));
  EXPECT_FALSE(*RewriteContainer(Ask(2, std::nullopt, std::nullopt, std::nullopt), MemoryUnit::kGiB,
                                 "aliyun.com/gpu-mem"));
  EXPECT_FALSE(*RewriteContainer(Ask(std::nullopt, std::nullopt, std::nullopt, 30),
                                 MemoryUnit::kGiB, "aliyun.com/gpu-mem"));
  // Init containers: memory yes, fractions and whole GPUs no.
  EXPECT_EQ(Limits(Ask(1, 1024, std::nullopt, std::nullopt, true)), (L{{"aliyun.com/gpu-mem", 1}}));
  EXPECT_EQ(Error(Ask(1, std::nullopt, 50, std::nullopt, true)),
            "init container \"c\": nvidia.com/gpumem-percentage in an init container: a fraction "
            "is for app containers only (ask nvidia.com/gpumem)");
  EXPECT_NE(Error(Ask(1, std::nullopt, std::nullopt, 30, true)).find("init container"),
            std::string::npos);
  EXPECT_NE(Error(Ask(2, 1024, std::nullopt, std::nullopt)).find("not supported yet"),
            std::string::npos);
  EXPECT_NE(Error(Ask(17, std::nullopt, std::nullopt, 10)).find("more than 16 whole GPUs"),
            std::string::npos);
  EXPECT_NE(Error(Ask(0, std::nullopt, 30, std::nullopt)).find("without nvidia.com/gpu"),
            std::string::npos);
}

}  // namespace
}  // namespace gpushare::hami
