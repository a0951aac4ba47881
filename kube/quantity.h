// Quantity: a Kubernetes resource quantity ("3", "3Gi", "500m", "1e3", "1.5k").
//
// Kubernetes writes resource amounts (container requests and limits, node capacity and
// allocatable) as quantity strings: a signed decimal number followed by an optional suffix,
// which is a binary SI suffix (Ki Mi Gi Ti Pi Ei), a decimal SI suffix (n u m k M G T P E) or a
// decimal exponent (e3, E-2). Parse() accepts exactly that grammar and nothing else ("3Gb",
// "K", " 3", "1.2.3" are errors that name the problem). The value is held exactly in units of
// 10^-9 (like the API server, anything finer is rounded up to 1n); Value() rounds up to a whole
// number as the API server's Value() does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpushare::kube {

class Quantity {
 public:
  Quantity() = default;  // zero

  // Parses a quantity string. Values whose whole part does not fit in int64 are rejected.
  static Result<Quantity> Parse(std::string_view text);

  // Constructs a quantity of `n` whole units.
  static Quantity FromInt(int64_t n);

  // The value rounded up to a whole number (ceil), as Kubernetes' Quantity.Value() does.
  int64_t Value() const;
  // The value in thousandths, rounded up (Quantity.MilliValue()). Saturates at the int64 range.
  int64_t MilliValue() const;
  // True when the value is a whole number (no fractional part).
  bool IsWholeNumber() const;
  bool IsZero() const { return nanos_ == 0; }
  bool IsNegative() const { return nanos_ < 0; }

  // A canonical spelling: the whole number when integral ("3221225472"), else the value in
  // milli ("500m") or nano ("1n") units.
  std::string ToString() const;

  friend bool operator==(const Quantity& a, const Quantity& b) { return a.nanos_ == b.nanos_; }
  friend bool operator<(const Quantity& a, const Quantity& b) { return a.nanos_ < b.nanos_; }

 private:
  __extension__ typedef __int128 Int128;
  explicit Quantity(Int128 nanos) : nanos_(nanos) {}
  Int128 nanos_ = 0;
};

// Parses a quantity that must be a non-negative whole number (extended resources such as
// aliyun.com/gpu-mem or nvidia.com/gpu are counted in whole units). `what` names the field in
// the error, e.g. "spec.containers[0].resources.limits[aliyun.com/gpu-mem]".
Result<int64_t> ParseWholeQuantity(std::string_view text, std::string_view what);

}  // namespace gpushare::kube
