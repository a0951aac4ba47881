#include "core/resource_name.h"

#include <gtest/gtest.h>

namespace gpushare {
namespace {

TEST(ExtendedResourceName, Valid) {
  for (const char* ok :
       {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-1g.10gb.me", "aliyun.com/gpu-mem", "example.com/A_b-1", "a.b-c.d/x"}) {
    EXPECT_EQ(ExtendedResourceNameProblem(ok), "") << ok;
  }
}

TEST(ExtendedResourceName, Invalid) {
  struct Case {
    std::string name;
    std::string expect;  // a piece of the reason
  };
  const std::string long_name = "nvidia.com/" + std::string(64, 'a');
  for (const Case& c : std::vector<Case>{
           {"gpu", "needs a domain prefix"},
           {"kubernetes.io/gpu", "kubernetes.io"},
           {"foo.kubernetes.io/gpu", "kubernetes.io"},
           {"requests.nvidia.com/gpu", "requests."},
           {"nvidia.com/a/b", "only one '/'"},
           {"/gpu", "empty"},
           {"Nvidia.com/gpu", "DNS subdomain"},
           {"nvidia..com/gpu", "empty label"},
           {"-nvidia.com/gpu", "starts and ends"},
           {"nvidia.com/", "empty"},
           {long_name, "64 characters, at most 63"},
           {"nvidia.com/gpu!", "only letters"},
           {"nvidia.com/.gpu", "start and end"},
           {"nvidia.com/gpu-", "start and end"},
       }) {
    std::string why = ExtendedResourceNameProblem(c.name);
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.name << " -> " << why;
  }
  EXPECT_EQ(ExtendedResourceNameProblem("nvidia.com/" + std::string(63, 'a')), "");
}

TEST(ExtendedResourceName, Domain) {
  EXPECT_EQ(ResourceDomain("nvidia.com/gpu"), "nvidia.com");
  EXPECT_EQ(ResourceDomain("gpu"), "");
}

}  // namespace
}  // namespace gpushare
