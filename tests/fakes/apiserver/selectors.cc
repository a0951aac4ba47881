#include "tests/fakes/apiserver/selectors.h"

#include <cctype>

namespace gpushare::fakes {
namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// A label value: at most 63 characters, alphanumerics with - _ . inside, may be empty.
bool ValidValue(const std::string& v) {
  if (v.size() > 63) return false;
  if (v.empty()) return true;
  for (char c : v) {
    if (!IsNameChar(c)) return false;
  }
  return std::isalnum(static_cast<unsigned char>(v.front())) &&
         std::isalnum(static_cast<unsigned char>(v.back()));
}

// A label key: [DNS-subdomain prefix '/'] name, name as a value but non-empty.
bool ValidKey(const std::string& k) {
  std::string name = k;
  size_t slash = k.find('/');
  if (slash != std::string::npos) {
    std::string prefix = k.substr(0, slash);
    name = k.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253) return false;
    for (char c : prefix) {
      if (!(std::islower(static_cast<unsigned char>(c)) ||
            std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.')) {
        return false;
      }
    }
  }
  return !name.empty() && ValidValue(name);
}

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTop(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

Status Bad(std::string_view req, std::string_view why) {
  return Status::InvalidArgument("unable to parse requirement: \"" + std::string(req) +
                                 "\": " + std::string(why));
}

}  // namespace

Result<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  for (const std::string& raw : SplitTop(text)) {
    std::string r = Trim(raw);
    if (r.empty()) return Bad(raw, "empty requirement");
    Req req;
    if (r[0] == '!') {
      req.key = Trim(r.substr(1));
      req.op = Op::kNotExists;
      if (!ValidKey(req.key)) return Bad(r, "invalid label key");
      sel.reqs_.push_back(std::move(req));
      continue;
    }
    // Find the operator.
    size_t i = 0;
    while (i < r.size() && (IsNameChar(r[i]) || r[i] == '/')) ++i;
    req.key = r.substr(0, i);
    if (!ValidKey(req.key)) return Bad(r, "invalid label key");
    std::string rest = Trim(r.substr(i));
    if (rest.empty()) {
      req.op = Op::kExists;
    } else if (rest.rfind("==", 0) == 0 || rest.rfind("!=", 0) == 0 || rest[0] == '=') {
      size_t oplen = rest[0] == '=' && (rest.size() < 2 || rest[1] != '=') ? 1 : 2;
      req.op = rest[0] == '!' ? Op::kNotEq : Op::kEq;
      std::string v = Trim(rest.substr(oplen));
      if (!ValidValue(v)) return Bad(r, "invalid label value");
      req.values.insert(v);
    } else if (rest[0] == '>' || rest[0] == '<') {
      req.op = rest[0] == '>' ? Op::kGt : Op::kLt;
      std::string v = Trim(rest.substr(1));
      try {
        size_t used = 0;
        req.number = std::stoll(v, &used);
        if (used != v.size()) return Bad(r, "value must be an integer");
      } catch (...) {
        return Bad(r, "value must be an integer");
      }
    } else {
      bool notin = rest.rfind("notin", 0) == 0;
      bool in = !notin && rest.rfind("in", 0) == 0;
      if (!in && !notin) return Bad(r, "unknown operator");
      req.op = notin ? Op::kNotIn : Op::kIn;
      std::string list = Trim(rest.substr(notin ? 5 : 2));
      if (list.size() < 2 || list.front() != '(' || list.back() != ')') {
        return Bad(r, "expected a parenthesised value list");
      }
      std::string inner = list.substr(1, list.size() - 2);
      size_t start = 0;
      for (;;) {
        size_t comma = inner.find(',', start);
        std::string v = Trim(
            inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (!ValidValue(v)) return Bad(r, "invalid label value");
        req.values.insert(v);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
    sel.reqs_.push_back(std::move(req));
  }
  return sel;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Req& r : reqs_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    switch (r.op) {
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
      case Op::kEq:
      case Op::kIn:
        if (!has || r.values.count(it->second) == 0) return false;
        break;
      case Op::kNotEq:
      case Op::kNotIn:
        if (has && r.values.count(it->second) != 0) return false;
        break;
      case Op::kGt:
      case Op::kLt: {
        if (!has) return false;
        try {
          size_t used = 0;
          long long v = std::stoll(it->second, &used);
          if (used != it->second.size()) return false;
          if (r.op == Op::kGt ? !(v > r.number) : !(v < r.number)) return false;
        } catch (...) {
          return false;
        }
        break;
      }
    }
  }
  return true;
}

Result<FieldSelector> FieldSelector::Parse(std::string_view text,
                                           const std::set<std::string>& supported) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  // Split on unescaped commas, then each term on its first unescaped operator.
  std::vector<std::string> terms;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      cur += text[i];
      cur += text[++i];
    } else if (text[i] == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += text[i];
    }
  }
  terms.push_back(cur);
  for (const std::string& t : terms) {
    size_t op = std::string::npos;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\') {
        ++i;
        continue;
      }
      if (t[i] == '=' || (t[i] == '!' && i + 1 < t.size() && t[i + 1] == '=')) {
        op = i;
        break;
      }
    }
    if (op == std::string::npos) {
      return Status::InvalidArgument("invalid field selector: \"" + t +
                                     "\": no operator (want =, == or !=)");
    }
    Term term;
    term.field = Trim(t.substr(0, op));
    term.equal = t[op] == '=';
    size_t vstart = op + (t[op] == '!' ? 2 : (op + 1 < t.size() && t[op + 1] == '=' ? 2 : 1));
    std::string raw = t.substr(vstart);
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\' && i + 1 < raw.size()) ++i;
      term.value += raw[i];
    }
    if (supported.count(term.field) == 0) {
      return Status::InvalidArgument("field label not supported: " + term.field);
    }
    sel.terms_.push_back(std::move(term));
  }
  return sel;
}

bool FieldSelector::Matches(const std::map<std::string, std::string>& fields) const {
  for (const Term& t : terms_) {
    auto it = fields.find(t.field);
    std::string v = it == fields.end() ? "" : it->second;
    if ((v == t.value) != t.equal) return false;
  }
  return true;
}

}  // namespace gpushare::fakes
