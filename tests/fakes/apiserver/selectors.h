// Label and field selectors as the API server parses and applies them, for the API-server
// double (tests/fakes/apiserver).
//
// Label selectors: comma-separated requirements `key`, `!key`, `key=v`, `key==v`, `key!=v`,
// `key in (a,b)`, `key notin (a,b)`, `key>n`, `key<n`; `!=` and `notin` also match objects
// without the label. Field selectors: comma-separated `field=v`, `field==v`, `field!=v` over a
// fixed set of fields per resource (anything else is the API's 400 "field label not
// supported"); `\` escapes `,` `=` `!` and `\` in values.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::fakes {

class LabelSelector {
 public:
  static Result<LabelSelector> Parse(std::string_view text);
  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool empty() const { return reqs_.empty(); }

 private:
  enum class Op { kExists, kNotExists, kEq, kNotEq, kIn, kNotIn, kGt, kLt };
  struct Req {
    std::string key;
    Op op;
    std::set<std::string> values;
    long long number = 0;
  };
  std::vector<Req> reqs_;
};

class FieldSelector {
 public:
  static Result<FieldSelector> Parse(std::string_view text, const std::set<std::string>& supported);
  bool Matches(const std::map<std::string, std::string>& fields) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    std::string field;
    bool equal;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace gpushare::fakes
