#include "kube/quantity.h"

#include <limits>

namespace gpushare::kube {
namespace {

__extension__ typedef __int128 Int128;

// Largest magnitude accepted, in nano units: the int64 range of whole units.
constexpr Int128 kMaxNanos = static_cast<Int128>(std::numeric_limits<int64_t>::max()) * 1000000000;
constexpr Int128 kNano = 1000000000;
// Intermediate results may exceed kMaxNanos before a negative power of ten brings them back.
constexpr Int128 kIntermediateLimit = static_cast<Int128>(10000000000000000000ULL) *
                                      static_cast<Int128>(1000000000000000000ULL);  // 1e37

std::string Quote(std::string_view s) {
  std::string out = "\"";
  out.append(s);
  out += '"';
  return out;
}

Status Invalid(std::string_view text, std::string_view why) {
  return Status::InvalidArgument("quantity " + Quote(text) + ": " + std::string(why));
}

// Multiplies *v by m, returning false when the result would leave the intermediate range.
bool MulChecked(Int128* v, Int128 m) {
  if (*v == 0 || m == 0) {
    *v = 0;
    return true;
  }
  if (*v > kIntermediateLimit / m) return false;
  *v *= m;
  return true;
}

Int128 CeilDiv(Int128 a, Int128 b) {  // a >= 0, b > 0
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace

Result<Quantity> Quantity::Parse(std::string_view text) {
  if (text.empty()) return Invalid(text, "empty");
  if (text.size() > 64) return Invalid(text.substr(0, 64), "longer than 64 characters");
  size_t i = 0;
  bool negative = false;
  if (text[i] == '+' || text[i] == '-') {
    negative = text[i] == '-';
    ++i;
  }
  // Mantissa: digits with at most one decimal point, at least one digit.
  Int128 mantissa = 0;
  int frac_digits = 0;
  int digits = 0;
  bool seen_point = false;
  bool overflow = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (seen_point) return Invalid(text, "more than one decimal point");
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits;
    if (seen_point) ++frac_digits;
    if (mantissa >= kIntermediateLimit / 10) overflow = true;
    if (!overflow) mantissa = mantissa * 10 + (c - '0');
  }
  if (digits == 0) return Invalid(text, "no digits before the suffix");
  if (overflow) return Invalid(text, "out of range");

  // Suffix.
  std::string_view suffix = text.substr(i);
  int dec_exp = 0;  // power of ten
  int bin_exp = 0;  // power of two
  if (suffix.empty()) {
  } else if (suffix == "Ki") {
    bin_exp = 10;
  } else if (suffix == "Mi") {
    bin_exp = 20;
  } else if (suffix == "Gi") {
    bin_exp = 30;
  } else if (suffix == "Ti") {
    bin_exp = 40;
  } else if (suffix == "Pi") {
    bin_exp = 50;
  } else if (suffix == "Ei") {
    bin_exp = 60;
  } else if (suffix == "n") {
    dec_exp = -9;
  } else if (suffix == "u") {
    dec_exp = -6;
  } else if (suffix == "m") {
    dec_exp = -3;
  } else if (suffix == "k") {
    dec_exp = 3;
  } else if (suffix == "M") {
    dec_exp = 6;
  } else if (suffix == "G") {
    dec_exp = 9;
  } else if (suffix == "T") {
    dec_exp = 12;
  } else if (suffix == "P") {
    dec_exp = 15;
  } else if (suffix == "E") {
    dec_exp = 18;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    size_t j = 1;
    bool neg_exp = false;
    if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) {
      neg_exp = suffix[j] == '-';
      ++j;
    }
    if (j == suffix.size()) return Invalid(text, "exponent without digits");
    int e = 0;
    for (; j < suffix.size(); ++j) {
      char c = suffix[j];
      if (c < '0' || c > '9') return Invalid(text, "bad exponent " + Quote(suffix));
      e = e * 10 + (c - '0');
      if (e > 1000) return Invalid(text, "exponent out of range");
    }
    dec_exp = neg_exp ? -e : e;
  } else {
    return Invalid(text, "unknown suffix " + Quote(suffix) +
                             " (want one of n u m k M G T P E Ki Mi Gi Ti Pi Ei, or an exponent "
                             "such as e3)");
  }

  // value = mantissa * 10^(dec_exp - frac_digits) * 2^bin_exp, held in nano units.
  int ten_pow = dec_exp - frac_digits + 9;
  Int128 v = mantissa;
  for (int b = 0; b < bin_exp; b += 10) {
    if (!MulChecked(&v, 1024)) return Invalid(text, "out of range");
  }
  if (ten_pow >= 0) {
    for (int k = 0; k < ten_pow; ++k) {
      if (!MulChecked(&v, 10)) return Invalid(text, "out of range");
    }
  } else {
    // Divide, rounding up to the next nano unit (as the API server does).
    for (int k = 0; k < -ten_pow && v != 0; ++k) {
      v = CeilDiv(v, 10);
    }
  }
  if (v > kMaxNanos) return Invalid(text, "out of range");
  return Quantity(negative ? -v : v);
}

Quantity Quantity::FromInt(int64_t n) {
  return Quantity(static_cast<Int128>(n) * kNano);
}

int64_t Quantity::Value() const {
  Int128 q = nanos_ >= 0 ? CeilDiv(nanos_, kNano) : -((-nanos_) / kNano);
  return static_cast<int64_t>(q);
}

int64_t Quantity::MilliValue() const {
  constexpr Int128 kMicroPerMilli = 1000000;
  Int128 q = nanos_ >= 0 ? CeilDiv(nanos_, kMicroPerMilli) : -((-nanos_) / kMicroPerMilli);
  if (q > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (q < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(q);
}

bool Quantity::IsWholeNumber() const {
  return nanos_ % kNano == 0;
}

std::string Quantity::ToString() const {
  auto to_string = [](Int128 v) {
    bool neg = v < 0;
    if (neg) v = -v;
    std::string s;
    do {
      s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
      v /= 10;
    } while (v != 0);
    if (neg) s.insert(s.begin(), '-');
    return s;
  };
  if (nanos_ % kNano == 0) return to_string(nanos_ / kNano);
  if (nanos_ % 1000000 == 0) return to_string(nanos_ / 1000000) + "m";
  return to_string(nanos_) + "n";
}

Result<int64_t> ParseWholeQuantity(std::string_view text, std::string_view what) {
  Result<Quantity> q = Quantity::Parse(text);
  if (!q.ok()) return q.status().WithContext(what);
  if (q->IsNegative()) {
    return Status::InvalidArgument(std::string(what) + ": must not be negative, got \"" +
                                   std::string(text) + "\"");
  }
  if (!q->IsWholeNumber()) {
    return Status::InvalidArgument(std::string(what) + ": must be a whole number, got \"" +
                                   std::string(text) + "\"");
  }
  return q->Value();
}

}  // namespace gpushare::kube
