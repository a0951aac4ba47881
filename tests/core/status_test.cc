// Status and Result: the error idiom's own promises (core/status.h).
#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/strings.h"

namespace gpushare {
namespace {

Result<int> Parse(const std::string& s) {
  if (!IsDigits(s)) return Status::InvalidArgument("not a number: " + s);
  return std::stoi(s);
}

Result<int> Doubled(const std::string& s) {
  GPUSHARE_ASSIGN_OR_RETURN(int v, Parse(s));
  return 2 * v;
}

Result<std::unique_ptr<int>> MoveOnly(bool ok) {
  if (!ok) return Status::NotFound("nothing");
  return std::make_unique<int>(7);
}

Status UseMoveOnly(bool ok, int* out) {
  GPUSHARE_ASSIGN_OR_RETURN(std::unique_ptr<int> p, MoveOnly(ok));
  *out = *p;
  return Status::Ok();
}

TEST(Status, AssignOrReturnPassesTheValueOn) {
  Result<int> r = Doubled("21");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  int v = 0;
  ASSERT_TRUE(UseMoveOnly(true, &v).ok());
  EXPECT_EQ(v, 7);
}

TEST(Status, AssignOrReturnReturnsTheErrorUnchanged) {
  Result<int> r = Doubled("x1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "not a number: x1");
  int v = 0;
  Status s = UseMoveOnly(false, &v);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(v, 0);
}

TEST(Status, ValueOnAnErrorAbortsWithTheErrorInsteadOfThrowing) {
  Result<int> r = Status::Unavailable("no kubelet");
  EXPECT_DEATH((void)r.value(), "Result::value\\(\\) on an error: UNAVAILABLE: no kubelet");
  EXPECT_EQ(r.value_or(5), 5);
}

TEST(Status, WithContextPrefixesOnlyErrors) {
  EXPECT_TRUE(Status::Ok().WithContext("ctx").ok());
  EXPECT_EQ(Status::NotFound("gpu 3").WithContext("plan").ToString(), "NOT_FOUND: plan: gpu 3");
}

// A refusal's core/reasons.h code travels with the error: through context, copies and
// GPUSHARE_ASSIGN_OR_RETURN; an OK status takes none.
TEST(Status, TheReasonTravelsWithTheError) {
  const Status s = Status::ResourceExhausted("no room").WithReason("GpuMemoryInsufficient");
  EXPECT_EQ(s.reason(), "GpuMemoryInsufficient");
  EXPECT_EQ(s.WithContext("node n1").reason(), "GpuMemoryInsufficient");
  EXPECT_EQ(s.WithContext("node n1").message(), "node n1: no room");
  EXPECT_EQ(Status::NotFound("x").reason(), "");
  EXPECT_EQ(Status::Ok().WithReason("BindConflict").reason(), "") << "OK carries no reason";
  auto fails = [] { return WithReason(Result<int>(Status::Aborted("busy")), "BindConflict"); };
  auto passes = [&]() -> Result<int> {
    GPUSHARE_ASSIGN_OR_RETURN(int v, fails());
    return v;
  };
  EXPECT_EQ(passes().status().reason(), "BindConflict");
  EXPECT_EQ(*WithReason(Result<int>(7), "BindConflict"), 7);
}

}  // namespace
}  // namespace gpushare
