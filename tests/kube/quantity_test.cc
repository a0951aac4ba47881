// Quantity parsing, base64 and timestamps.
#include "kube/quantity.h"

#include <gtest/gtest.h>

#include "kube/base64.h"
#include "kube/timestamps.h"

namespace gpushare::kube {
namespace {

int64_t V(const char* s) {
  Result<Quantity> q = Quantity::Parse(s);
  EXPECT_TRUE(q.ok()) << s << ": " << q.status().ToString();
  return q.ok() ? q->Value() : -999;
}

int64_t Milli(const char* s) {
  Result<Quantity> q = Quantity::Parse(s);
  EXPECT_TRUE(q.ok()) << s << ": " << q.status().ToString();
  return q.ok() ? q->MilliValue() : -999;
}

TEST(QuantityTest, PlainAndSuffixes) {
  EXPECT_EQ(V("3"), 3);
  EXPECT_EQ(V("0"), 0);
  EXPECT_EQ(V("+7"), 7);
  EXPECT_EQ(V("3Gi"), 3LL << 30);
  EXPECT_EQ(V("1Ki"), 1024);
  EXPECT_EQ(V("2Mi"), 2LL << 20);
  EXPECT_EQ(V("1Ti"), 1LL << 40);
  EXPECT_EQ(V("1Pi"), 1LL << 50);
  EXPECT_EQ(V("1Ei"), 1LL << 60);
  EXPECT_EQ(V("1k"), 1000);
  EXPECT_EQ(V("2M"), 2000000);
  EXPECT_EQ(V("3G"), 3000000000LL);
  EXPECT_EQ(V("1T"), 1000000000000LL);
  EXPECT_EQ(V("1P"), 1000000000000000LL);
  EXPECT_EQ(V("1E"), 1000000000000000000LL);
  EXPECT_EQ(V("1e3"), 1000);
  EXPECT_EQ(V("1E3"), 1000);
  EXPECT_EQ(V("1.5e3"), 1500);
  EXPECT_EQ(V("15e-1"), 2);  // 1.5 rounds up
  EXPECT_EQ(V("1.5Gi"), 3LL << 29);
  EXPECT_EQ(V("5."), 5);
}

TEST(QuantityTest, FractionsRoundUpLikeTheApiServer) {
  EXPECT_EQ(Milli("500m"), 500);
  EXPECT_EQ(V("500m"), 1);
  EXPECT_EQ(Milli("0.5"), 500);
  EXPECT_EQ(Milli(".5"), 500);
  EXPECT_EQ(Milli("1u"), 1);  // rounds up to 1m
  EXPECT_EQ(Milli("100n"), 1);
  EXPECT_EQ(Milli("2.5m"), 3);
  EXPECT_EQ(Milli("1e-10"), 1);  // below nano: rounded up to 1n, then to 1m
  EXPECT_EQ(V("-500m"), 0);      // ceil(-0.5)
  EXPECT_EQ(Milli("-2"), -2000);
}

TEST(QuantityTest, WholeNumbers) {
  Result<Quantity> a = Quantity::Parse("3");
  Result<Quantity> b = Quantity::Parse("3000m");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b);
  EXPECT_TRUE(b->IsWholeNumber());
  EXPECT_FALSE(Quantity::Parse("1500m")->IsWholeNumber());
  EXPECT_EQ(Quantity::Parse("3Gi")->ToString(), "3221225472");
  EXPECT_EQ(Quantity::Parse("1500m")->ToString(), "1500m");
  EXPECT_EQ(Quantity::Parse("5n")->ToString(), "5n");
  EXPECT_EQ(Quantity::FromInt(12).Value(), 12);
  EXPECT_TRUE(*Quantity::Parse("1") < *Quantity::Parse("1001m"));
}

TEST(QuantityTest, Errors) {
  for (const char* bad : {"", " 3", "3 ", "abc", "3Gb", "3K", "3gi", "1.2.3", "--1", "+", ".", "e3",
                          "3e", "3e+", "3ex", "1Gi1", "0x10", "3Mi ", "１"}) {
    Result<Quantity> q = Quantity::Parse(bad);
    EXPECT_FALSE(q.ok()) << "accepted \"" << bad << "\"";
    if (!q.ok()) {
      EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(q.status().message().find("quantity"), std::string::npos) << q.status().message();
    }
  }
  Result<Quantity> unknown = Quantity::Parse("3Gb");
  EXPECT_NE(unknown.status().message().find("unknown suffix \"Gb\""), std::string::npos)
      << unknown.status().message();
  // Out of range rather than wrapped around.
  EXPECT_FALSE(Quantity::Parse("1e30").ok());
  EXPECT_FALSE(Quantity::Parse("9Ei").ok());
  EXPECT_FALSE(Quantity::Parse("99999999999999999999").ok());
  EXPECT_FALSE(Quantity::Parse(std::string(70, '1')).ok());
  EXPECT_TRUE(Quantity::Parse("7Ei").ok());
}

TEST(QuantityTest, ParseWholeQuantityNamesTheField) {
  EXPECT_EQ(*ParseWholeQuantity("3", "limits[aliyun.com/gpu-mem]"), 3);
  EXPECT_EQ(*ParseWholeQuantity("1k", "x"), 1000);
  Result<int64_t> frac = ParseWholeQuantity("500m", "limits[aliyun.com/gpu-mem]");
  ASSERT_FALSE(frac.ok());
  EXPECT_NE(frac.status().message().find("limits[aliyun.com/gpu-mem]: must be a whole number"),
            std::string::npos);
  Result<int64_t> neg = ParseWholeQuantity("-1", "f");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("must not be negative"), std::string::npos);
  Result<int64_t> bad = ParseWholeQuantity("x", "f");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("f: quantity", 0), 0u) << bad.status().message();
}

TEST(Base64Test, RoundTripAndErrors) {
  for (std::string s : {"", "a", "ab", "abc", "abcd", "-----BEGIN CERTIFICATE-----\n\x01\xff"}) {
    Result<std::string> d = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(d.ok()) << s;
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(*Base64Decode("aGVs\nbG8="), "hello");  // wrapped lines
  EXPECT_EQ(*Base64Decode("aGVsbG8"), "hello");     // padding optional
  EXPECT_FALSE(Base64Decode("aGV*bG8=").ok());
  EXPECT_FALSE(Base64Decode("aGVsbG8=x").ok());
  EXPECT_FALSE(Base64Decode("a").ok());
}

TEST(TimestampTest, FormatAndParse) {
  auto t = std::chrono::system_clock::time_point(
      std::chrono::seconds(1796212800));  // 2026-12-02T12:00:00Z
  EXPECT_EQ(FormatTimestamp(t), "2026-12-02T12:00:00Z");
  EXPECT_EQ(*ParseTimestamp("2026-12-02T12:00:00Z"), t);
  EXPECT_EQ(*ParseTimestamp("2026-12-02T14:00:00+02:00"), t);
  EXPECT_EQ(*ParseTimestamp("2026-12-02T12:00:00.5Z"), t + std::chrono::milliseconds(500));
  EXPECT_EQ(*ParseTimestamp("1970-01-01T00:00:00Z"), std::chrono::system_clock::time_point());
  for (const char* bad : {"", "2026-12-02", "2026-13-02T12:00:00Z", "2026-12-02T12:00:00", "x"}) {
    EXPECT_FALSE(ParseTimestamp(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gpushare::kube
