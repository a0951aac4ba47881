// Fuzzes the extender's JSON decoding: ExtenderArgs (filter, prioritize) on both paths, and
// ExtenderBindingArgs. The fast path (kube-scheduler's own encoding) and the general SAX path
// must agree on every input: both accept with the same candidates in the same mode, or both
// refuse. A reply encoded from decoded names must itself be valid JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "scheduler/wire.h"

namespace sched = gpushare::scheduler;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto fast = sched::ParseExtenderArgs(body);
  auto general = sched::ParseExtenderArgsGeneral(body);
  if (fast.ok() != general.ok()) __builtin_trap();
  if (fast.ok()) {
    if (fast->names_mode() != general->names_mode()) __builtin_trap();
    const std::vector<std::string_view> a = fast->CandidateNames();
    const std::vector<std::string_view> b = general->CandidateNames();
    if (a != b) __builtin_trap();
    if (!fast->pod.is_object()) __builtin_trap();
    sched::FilterResult r;
    r.node_names = a;
    if (!a.empty()) r.failed[std::string(a.front())] = "fuzz";
    if (!sched::ParseBody(sched::EncodeFilterResult(r)).ok()) __builtin_trap();
  } else if (fast.status().message().empty()) {
    __builtin_trap();
  }
  auto parsed = sched::ParseBody(body);
  if (parsed.ok()) {
    auto binding = sched::DecodeBindingArgs(*parsed);
    if (binding.ok()) {
      if (!sched::ParseBody(sched::EncodeBindingResult(binding->node)).ok()) __builtin_trap();
    }
  }
  return 0;
}
