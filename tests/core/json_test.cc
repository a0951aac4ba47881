// core/json.h: the strict reader core/ decodes annotation values with. Its limits (depth, size),
// exact integers, escapes and error offsets, each with the text that shows it.
#include "core/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace gpushare::json {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view text) {
  Result<Value> v = Parse(text);
  EXPECT_FALSE(v.ok()) << text;
  return v.ok() ? "" : v.status().message();
}

TEST(Json, ReadsADocumentInOrder) {
  Result<Value> v = Parse(R"( {"b": [1, -2, 3.5, true, null], "a": {"x": "y"}} )");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->type, Value::Type::kObject);
  ASSERT_EQ(v->members.size(), 2u);
  EXPECT_EQ(v->members[0].first, "b") << "document order, not sorted";
  const Value* b = v->Find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->items.size(), 5u);
  EXPECT_TRUE(b->items[0].is_int);
  EXPECT_EQ(b->items[1].i, -2);
  EXPECT_FALSE(b->items[2].is_int);
  EXPECT_EQ(b->items[2].s, "3.5");
  EXPECT_TRUE(b->items[3].b);
  EXPECT_EQ(b->items[4].type, Value::Type::kNull);
  EXPECT_EQ(v->Find("a")->Find("x")->s, "y");
  EXPECT_EQ(v->Find("c"), nullptr);
}

TEST(Json, IntegersAreExactOrNotIntegers) {
  EXPECT_EQ(Parse("9223372036854775807")->i, INT64_MAX);
  EXPECT_TRUE(Parse("-9223372036854775808")->is_int);
  Result<Value> big = Parse("9223372036854775808");
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE(big->is_int) << "beyond int64: a number, never a wrapped integer";
  EXPECT_EQ(big->s, "9223372036854775808");
  EXPECT_FALSE(Parse("1e3")->is_int);
  EXPECT_THAT(ErrorOf("01"), HasSubstr("unexpected data after the JSON value at offset 1"));
  EXPECT_THAT(ErrorOf("-"), HasSubstr("truncated number"));
  EXPECT_THAT(ErrorOf("1."), HasSubstr("invalid number"));
}

TEST(Json, NestingIsBoundedAtSixteen) {
  const std::string ok = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
  EXPECT_TRUE(Parse(ok).ok());
  const std::string deep = std::string(kMaxDepth + 1, '[') + std::string(kMaxDepth + 1, ']');
  EXPECT_THAT(ErrorOf(deep), HasSubstr("nesting deeper than 16"));
  EXPECT_THAT(ErrorOf(std::string(100000, '[')), HasSubstr("nesting deeper than 16"))
      << "a hostile annotation does not recurse 100,000 deep";
}

TEST(Json, SizeIsBounded) {
  const std::string big = "\"" + std::string(kMaxBytes, 'x') + "\"";
  EXPECT_THAT(ErrorOf(big), HasSubstr("bytes, at most 1048576 accepted"));
}

TEST(Json, StringsAndEscapes) {
  EXPECT_EQ(Parse(R"("a\"b\\c\/\n\u00e9\ud83d\ude00")")->s, "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_THAT(ErrorOf(R"("\ud83d")"), HasSubstr("unpaired surrogate"));
  EXPECT_THAT(ErrorOf(R"("\ude00")"), HasSubstr("unpaired surrogate"));
  EXPECT_THAT(ErrorOf(R"("\x")"), HasSubstr("invalid escape"));
  EXPECT_THAT(ErrorOf("\"a\nb\""), HasSubstr("control character in string"));
  EXPECT_THAT(ErrorOf(R"({"k": "v)"), HasSubstr("unterminated string at offset 8"));
}

TEST(Json, MalformedDocumentsNameWhatAndWhere) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("unexpected end of input at offset 0"));
  EXPECT_THAT(ErrorOf(R"({"a":1,"a":2})"), HasSubstr("duplicate key \"a\""));
  EXPECT_THAT(ErrorOf(R"({a:1})"), HasSubstr("expected a string key at offset 1"));
  EXPECT_THAT(ErrorOf("[1 2]"), HasSubstr("expected ',' or ']'"));
  EXPECT_THAT(ErrorOf("tru"), HasSubstr("invalid literal"));
  EXPECT_THAT(ErrorOf("{} {}"), HasSubstr("unexpected data after the JSON value at offset 3"));
}

TEST(Json, QuoteAndSpellingForMessages) {
  EXPECT_EQ(Quote("a\"b\\\x01"), R"("a\"b\\\u0001")");
  EXPECT_EQ(Spelling(*Parse(R"("x")")), R"("x")");
  EXPECT_EQ(Spelling(*Parse("1.50")), "1.50");
  EXPECT_EQ(Spelling(*Parse("false")), "false");
  EXPECT_EQ(Spelling(*Parse("[]")), "an array");
  EXPECT_EQ(TypeName(Value::Type::kObject), "an object");
}

// JSON text is UTF-8: well-formed sequences pass as they are, every other byte becomes U+FFFD
// (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, beyond
// U+10FFFF), and what Quote writes always parses back.
TEST(Json, QuoteWritesOnlyWellFormedUtf8) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Quote("A100 \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80"),
            "\"A100 \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80\"");
  EXPECT_EQ(Quote("a\x80"
                  "b"),
            "\"a" + fffd + "b\"");
  EXPECT_EQ(Quote("\xE2\x82"), "\"" + fffd + fffd + "\"");
  EXPECT_EQ(Quote("\xC0\x80"), "\"" + fffd + fffd + "\"");
  EXPECT_EQ(Quote("\xED\xA0\x80"), "\"" + fffd + fffd + fffd + "\"");
  EXPECT_EQ(Quote("\xF4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");
  for (int b = 0; b < 256; ++b) {
    const std::string s = "x" + std::string(1, static_cast<char>(b)) + "\xA9y";
    Result<Value> v = Parse(Quote(s));
    ASSERT_TRUE(v.ok()) << b << ": " << v.status().message();
  }
}

}  // namespace
}  // namespace gpushare::json
