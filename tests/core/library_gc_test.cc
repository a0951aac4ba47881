// core/library_gc.h: which state directories and library versions may go.
#include "core/library_gc.h"

#include <gtest/gtest.h>

namespace gpushare {
namespace {

constexpr int64_t kGrace = 600;

StateDirSeen Dir(std::string path, int64_t age, std::string library,
                 std::vector<std::string> devices, std::string resource = "nvidia.com/gpu") {
  StateDirSeen d;
  d.path = std::move(path);
  d.age_s = age;
  d.answered = true;
  d.marked = true;
  d.marker = {std::move(library), std::move(resource), std::move(devices)};
  return d;
}

GcInput Base() {
  GcInput in;
  in.grace_s = kGrace;
  in.live_listed = true;
  in.current_library_dir = "/lib/0.2.0-bbbb";
  in.library_dirs = {{"/lib/0.1.0-aaaa", 5000}, {"/lib/0.2.0-bbbb", 5000}};
  return in;
}

std::vector<std::string> Paths(const std::vector<GcRemoval>& r) {
  std::vector<std::string> out;
  for (const auto& x : r) out.push_back(x.path);
  return out;
}

TEST(AllocationMarker, RoundTrips) {
  AllocationMarker m{"/lib/0.1.0-aaaa", "nvidia.com/gpu", {"GPU-1::0", "GPU-1::1"}};
  EXPECT_EQ(EncodeAllocationMarker(m),
            "library=/lib/0.1.0-aaaa\nresource=nvidia.com/gpu\ndevice=GPU-1::0\ndevice=GPU-1::1\n");
  auto back = ParseAllocationMarker(EncodeAllocationMarker(m));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, m);
}

TEST(AllocationMarker, RefusesWhatItDoesNotKnow) {
  EXPECT_FALSE(ParseAllocationMarker("resource=r\n").ok());  // no device
  EXPECT_FALSE(ParseAllocationMarker("device=d\n").ok());    // no resource
  auto r = ParseAllocationMarker("resource=r\ndevice=d\ncolour=blue\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "line 3: unknown key \"colour\"");
  EXPECT_FALSE(ParseAllocationMarker("resource=r\ndevice\n").ok());
}

TEST(PlanCollection, NothingWithoutPodResources) {
  GcInput in = Base();
  in.live_listed = false;
  in.state_dirs = {Dir("/s/a", 5000, "/lib/0.1.0-aaaa", {"GPU-1::0"})};
  GcPlan p = PlanCollection(in);
  EXPECT_TRUE(p.state_dirs.empty());
  EXPECT_TRUE(p.library_dirs.empty());
  EXPECT_FALSE(p.skipped.empty());
}

TEST(PlanCollection, AStateDirGoesWhenKubeletAllocatesNoneOfItsDevices) {
  GcInput in = Base();
  in.state_dirs = {Dir("/s/gone", 5000, "/lib/0.2.0-bbbb", {"GPU-1::0", "GPU-1::1"}),
                   Dir("/s/partly", 5000, "/lib/0.2.0-bbbb", {"GPU-1::2", "GPU-1::3"})};
  in.live = {{"nvidia.com/gpu", "GPU-1::3"}};
  EXPECT_EQ(Paths(PlanCollection(in).state_dirs), std::vector<std::string>{"/s/gone"});
}

TEST(PlanCollection, TheSameIdUnderAnotherResourceDoesNotKeepIt) {
  GcInput in = Base();
  in.state_dirs = {Dir("/s/a", 5000, "", {"GPU-1"})};
  in.live = {{"nvidia.com/gpu.shared", "GPU-1"}};
  EXPECT_EQ(Paths(PlanCollection(in).state_dirs), std::vector<std::string>{"/s/a"});
}

TEST(PlanCollection, NeverYoungerThanTheGrace) {
  GcInput in = Base();
  in.state_dirs = {Dir("/s/young", kGrace - 1, "/lib/0.1.0-aaaa", {"GPU-1::0"}),
                   Dir("/s/future", -30, "/lib/0.1.0-aaaa", {"GPU-1::1"}),
                   Dir("/s/old", kGrace, "/lib/0.2.0-bbbb", {"GPU-1::2"})};
  GcPlan p = PlanCollection(in);
  EXPECT_EQ(Paths(p.state_dirs), std::vector<std::string>{"/s/old"});
  EXPECT_TRUE(p.library_dirs.empty());  // the young ones still refer to 0.1.0
}

TEST(PlanCollection, AnIncompleteDirGoesOnceOld) {
  GcInput in = Base();
  StateDirSeen half;
  half.path = "/s/half";
  half.age_s = 5000;
  StateDirSeen fresh = half;
  fresh.path = "/s/fresh";
  fresh.age_s = 1;
  in.state_dirs = {half, fresh};
  EXPECT_EQ(Paths(PlanCollection(in).state_dirs), std::vector<std::string>{"/s/half"});
}

TEST(PlanCollection, AnOldVersionGoesWhenNoStateDirRefersToIt) {
  GcInput in = Base();
  in.state_dirs = {Dir("/s/a", 5000, "/lib/0.2.0-bbbb", {"GPU-1::0"})};
  in.live = {{"nvidia.com/gpu", "GPU-1::0"}};
  GcPlan p = PlanCollection(in);
  EXPECT_TRUE(p.state_dirs.empty());
  EXPECT_EQ(Paths(p.library_dirs), std::vector<std::string>{"/lib/0.1.0-aaaa"});
}

TEST(PlanCollection, AnOldVersionInUseStays) {
  GcInput in = Base();
  in.state_dirs = {Dir("/s/a", 5000, "/lib/0.1.0-aaaa", {"GPU-1::0"})};
  in.live = {{"nvidia.com/gpu", "GPU-1::0"}};
  EXPECT_TRUE(PlanCollection(in).library_dirs.empty());
}

TEST(PlanCollection, AVersionGoesInTheRoundItsLastStateDirGoes) {
  GcInput in = Base();
  in.state_dirs = {Dir("/s/a", 5000, "/lib/0.1.0-aaaa", {"GPU-1::0"})};
  GcPlan p = PlanCollection(in);
  EXPECT_EQ(Paths(p.state_dirs), std::vector<std::string>{"/s/a"});
  EXPECT_EQ(Paths(p.library_dirs), std::vector<std::string>{"/lib/0.1.0-aaaa"});
}

TEST(PlanCollection, TheCurrentVersionAndYoungVersionsStay) {
  GcInput in = Base();
  in.library_dirs.push_back({"/lib/0.1.5-cccc", kGrace - 1});
  EXPECT_EQ(Paths(PlanCollection(in).library_dirs), std::vector<std::string>{"/lib/0.1.0-aaaa"});
}

TEST(PlanCollection, NoVersionGoesWithoutKnowingTheCurrentOne) {
  GcInput in = Base();
  in.current_library_dir.clear();
  EXPECT_TRUE(PlanCollection(in).library_dirs.empty());
}

TEST(PlanCollection, AnUnmarkedAnsweredDirStaysAndKeepsEveryVersion) {
  GcInput in = Base();
  StateDirSeen legacy;
  legacy.path = "/s/legacy";
  legacy.age_s = 5000;
  legacy.answered = true;
  in.state_dirs = {legacy};
  GcPlan p = PlanCollection(in);
  EXPECT_TRUE(p.state_dirs.empty());
  EXPECT_TRUE(p.library_dirs.empty());
  EXPECT_EQ(p.kept_unmarked, std::vector<std::string>{"/s/legacy"});
}

TEST(PlanCollection, AStateRootThatCannotBeListedKeepsEveryVersion) {
  GcInput in = Base();
  in.state_dirs_listed = false;
  EXPECT_TRUE(PlanCollection(in).library_dirs.empty());
}

}  // namespace
}  // namespace gpushare
