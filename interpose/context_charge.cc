// See context_charge.h.
#include "interpose/context_charge.h"

#include "interpose/config.h"

namespace gpushare::interpose {

const char* ChargeSourceName(ChargeSource s) {
  uint32_t i = static_cast<uint32_t>(s);
  return i < kChargeSourceCount ? kChargeSourceNames[i] : kChargeSourceNames[0];
}

ContextCharge DecideContextCharge(const ContextChargeInput& in) {
  if (in.fixed)
    return {in.overhead_set ? in.overhead : kDefaultContextOverhead, ChargeSource::kFixed};
  const bool earlier = in.earlier >= kMinPlausibleContext && in.earlier <= kMaxPlausibleContext;
  if (in.measured && in.used_after > in.used_before) {
    uint64_t d = in.used_after - in.used_before;
    if (d >= kMinPlausibleContext && d <= kMaxPlausibleContext) {
      if (earlier && in.earlier > d) return {in.earlier, ChargeSource::kEarlier, d};
      return {d, ChargeSource::kMeasured, d};
    }
  }
  if (earlier) return {in.earlier, ChargeSource::kEarlier};
  if (in.overhead_set) return {in.overhead, ChargeSource::kOverride};
  return {kDefaultContextOverhead, ChargeSource::kDefault};
}

}  // namespace gpushare::interpose
