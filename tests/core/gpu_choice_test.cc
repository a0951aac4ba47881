// RestrictChoice: which free devices gpushare-node's GetPreferredAllocation may advise for a
// time-slice, MIG or whole-GPU request when the pods waiting for it name GPUs.
#include "core/gpu_choice.h"

#include <gtest/gtest.h>

#include <map>

namespace gpushare::choice {
namespace {

// Four GPUs: 0 and 1 are A100s, 2 and 3 are H100s. Devices are "<uuid>" (whole) or
// "<uuid>::<n>" (replicas).
const std::map<std::string, DeviceGpu> kGpus = {
    {"GPU-0", {0, "NVIDIA A100-SXM4-80GB", "GPU-0"}},
    {"GPU-1", {1, "NVIDIA A100-SXM4-80GB", "GPU-1"}},
    {"GPU-2", {2, "NVIDIA H100 80GB HBM3", "GPU-2"}},
    {"GPU-3", {3, "NVIDIA H100 80GB HBM3", "GPU-3"}},
};

DeviceGpu GpuOf(const std::string& id) {
  auto it = kGpus.find(id.substr(0, id.find("::")));
  return it == kGpus.end() ? DeviceGpu{} : it->second;
}

PendingAsk Ask(std::string pod, std::string created,
               std::map<std::string, std::string> annotations = {}) {
  Result<GpuSelector> s = ParseGpuSelector(annotations);
  EXPECT_TRUE(s.ok());
  return {std::move(pod), std::move(created), s.ok() ? *s : GpuSelector{}};
}

const std::vector<std::string> kAll = {"GPU-0", "GPU-1", "GPU-2", "GPU-3"};
constexpr const char* kT1 = "2026-12-07T10:00:00Z";
constexpr const char* kT2 = "2026-12-07T10:00:05Z";

TEST(GpuChoice, NoAskNamingGpusLeavesEverythingToThePolicy) {
  ChoiceVerdict v = RestrictChoice(kAll, {}, 1, GpuOf, {});
  EXPECT_EQ(v.rule, ChoiceRule::kNone);
  EXPECT_EQ(v.available, kAll);
  v = RestrictChoice(kAll, {}, 1, GpuOf, {Ask("ns/a", kT1), Ask("ns/b", kT2)});
  EXPECT_EQ(v.rule, ChoiceRule::kNone);
  EXPECT_EQ(v.available, kAll);
}

TEST(GpuChoice, OneAskGetsOnlyTheGpusItAllows) {
  ChoiceVerdict v =
      RestrictChoice(kAll, {}, 2, GpuOf, {Ask("ns/a", kT1, {{"nvidia.com/use-gputype", "h100"}})});
  EXPECT_EQ(v.rule, ChoiceRule::kCommon);
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-2", "GPU-3"}));
  v = RestrictChoice(
      kAll, {}, 1, GpuOf,
      {Ask("ns/a", kT1,
           {{"nvidia.com/nouse-gputype", "A100"}, {"nvidia.com/nouse-gpuuuid", "GPU-2"}})});
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-3"}));
  // Replicas of a GPU go with their GPU.
  const std::vector<std::string> replicas = {"GPU-0::0", "GPU-0::1", "GPU-3::0", "GPU-3::1"};
  v = RestrictChoice(replicas, {}, 1, GpuOf,
                     {Ask("ns/a", kT1, {{"nvidia.com/use-gpuuuid", "GPU-3"}})});
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-3::0", "GPU-3::1"}));
}

TEST(GpuChoice, DevicesEveryAskAllowsComeFirst) {
  // a wants no GPU 0, b wants no GPU 1: GPUs 2 and 3 are right for either.
  ChoiceVerdict v =
      RestrictChoice(kAll, {}, 1, GpuOf,
                     {Ask("ns/a", kT1, {{"nvidia.com/nouse-gpuuuid", "GPU-0"}}),
                      Ask("ns/b", kT2, {{"nvidia.com/nouse-gpuuuid", "GPU-1"}}), Ask("ns/c", kT2)});
  EXPECT_EQ(v.rule, ChoiceRule::kCommon);
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-2", "GPU-3"}));
  EXPECT_EQ(v.pod, "ns/a,ns/b");  // those that name GPUs, for the log
}

TEST(GpuChoice, DisjointChoicesFollowTheFirstPodInAdmissionOrder) {
  const std::vector<PendingAsk> asks = {
      Ask("ns/late", kT2, {{"nvidia.com/use-gputype", "A100"}}),
      Ask("ns/early", kT1, {{"nvidia.com/use-gputype", "H100"}}),
  };
  ChoiceVerdict v = RestrictChoice(kAll, {}, 1, GpuOf, asks);
  EXPECT_EQ(v.rule, ChoiceRule::kFirstAsk);
  EXPECT_EQ(v.pod, "ns/early");
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-2", "GPU-3"}));
  // Once the H100s are taken, the early pod cannot be the one asking: the late one's choice.
  v = RestrictChoice({"GPU-0", "GPU-1"}, {}, 1, GpuOf, asks);
  EXPECT_EQ(v.rule, ChoiceRule::kFirstAsk);
  EXPECT_EQ(v.pod, "ns/late");
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-0", "GPU-1"}));
}

TEST(GpuChoice, APodNamingNoGpusLeavesTheNamedOnesToOthers) {
  // One named choice: GPU 3 is right for either pod, so the advice is GPU 3 whoever asks.
  const PendingAsk any = Ask("ns/any", kT1);
  const PendingAsk three = Ask("ns/three", kT2, {{"nvidia.com/use-gpuuuid", "GPU-3"}});
  const PendingAsk zero = Ask("ns/zero", kT2, {{"nvidia.com/use-gpuuuid", "GPU-0"}});
  ChoiceVerdict v = RestrictChoice(kAll, {}, 1, GpuOf, {any, three});
  EXPECT_EQ(v.rule, ChoiceRule::kCommon);
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-3"}));
  // Two disjoint choices after a pod naming none: the first pod is advised away from both.
  v = RestrictChoice(kAll, {}, 1, GpuOf, {three, zero, any});
  EXPECT_EQ(v.rule, ChoiceRule::kFirstAsk);
  EXPECT_EQ(v.pod, "ns/any");
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-1", "GPU-2"}));
  // When the rest is too little, it may have theirs too.
  v = RestrictChoice({"GPU-0", "GPU-2", "GPU-3"}, {}, 2, GpuOf, {three, zero, any});
  EXPECT_EQ(v.pod, "ns/any");
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-0", "GPU-2", "GPU-3"}));
}

TEST(GpuChoice, MustIncludeIsAlwaysKept) {
  ChoiceVerdict v = RestrictChoice(kAll, {"GPU-0"}, 2, GpuOf,
                                   {Ask("ns/a", kT1, {{"nvidia.com/use-gputype", "H100"}})});
  EXPECT_EQ(v.rule, ChoiceRule::kCommon);
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-0", "GPU-2", "GPU-3"}));
}

TEST(GpuChoice, NothingSatisfiableSaysWhichGpusEachChoiceExcluded) {
  ChoiceVerdict v = RestrictChoice({"GPU-0", "GPU-1", "unknown"}, {}, 1, GpuOf,
                                   {Ask("ns/a", kT1, {{"nvidia.com/use-gputype", "H100"}}),
                                    Ask("ns/b", kT2, {{"nvidia.com/use-gpuuuid", "GPU-3"}})});
  EXPECT_EQ(v.rule, ChoiceRule::kUnsatisfiable);
  EXPECT_EQ(v.available, (std::vector<std::string>{"GPU-0", "GPU-1", "unknown"}));
  ASSERT_EQ(v.excluded.size(), 2u);
  EXPECT_EQ(v.excluded[0],
            "ns/a: GPU 0: nvidia.com/use-gputype=H100 does not match \"NVIDIA A100-SXM4-80GB\"; "
            "GPU 1: nvidia.com/use-gputype=H100 does not match \"NVIDIA A100-SXM4-80GB\"");
  EXPECT_EQ(v.excluded[1],
            "ns/b: GPU 0: nvidia.com/use-gpuuuid does not list GPU-0; GPU 1: "
            "nvidia.com/use-gpuuuid does not list GPU-1");
  EXPECT_EQ(ChoiceRuleName(v.rule), "unsatisfiable");
  // Too few devices on an allowed GPU: said as such.
  v = RestrictChoice({"GPU-0::0", "GPU-1::0"}, {}, 2, GpuOf,
                     {Ask("ns/a", kT1, {{"nvidia.com/use-gpuuuid", "GPU-0,GPU-2"}})});
  EXPECT_EQ(v.rule, ChoiceRule::kUnsatisfiable);
  EXPECT_EQ(v.excluded.at(0), "ns/a: GPU 1: nvidia.com/use-gpuuuid does not list GPU-1");
}

}  // namespace
}  // namespace gpushare::choice
