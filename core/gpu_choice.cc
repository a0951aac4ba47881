#include "core/gpu_choice.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace gpushare::choice {
namespace {

// Bounds on what a verdict lists (a log line, not a report): asks and GPUs per ask.
constexpr size_t kMaxAsksListed = 8;
constexpr size_t kMaxGpusListed = 8;

bool Allowed(const GpuSelector& s, const DeviceGpu& g) {
  return g.index >= 0 && s.Allows(g.model, g.uuid);
}

// The devices of `available` that `s` allows, with must_include kept (kubelet takes those
// anyway), in the order of `available`.
std::vector<std::string> AllowedDevices(const std::vector<std::string>& available,
                                        const std::vector<std::string>& must_include,
                                        const std::vector<DeviceGpu>& gpus,
                                        const std::vector<const GpuSelector*>& selectors) {
  std::vector<std::string> out;
  for (size_t i = 0; i < available.size(); ++i) {
    const bool must =
        std::find(must_include.begin(), must_include.end(), available[i]) != must_include.end();
    if (must || std::all_of(selectors.begin(), selectors.end(),
                            [&](const GpuSelector* s) { return Allowed(*s, gpus[i]); }))
      out.push_back(available[i]);
  }
  return out;
}

// "ns/a: GPU 1: <why>; GPU 3: <why>": the GPUs of `available` that the ask excludes.
std::string Exclusions(const PendingAsk& ask, const std::vector<DeviceGpu>& gpus) {
  std::string out = ask.pod + ":";
  std::set<int> seen;
  size_t listed = 0;
  for (const DeviceGpu& g : gpus) {
    if (g.index < 0 || !seen.insert(g.index).second) continue;
    std::optional<std::string> why = ask.selector.Excludes(g.model, g.uuid);
    if (!why) continue;
    if (listed++ == kMaxGpusListed) {
      out += " ...";
      break;
    }
    out += (listed == 1 ? " GPU " : "; GPU ") + std::to_string(g.index) + ": " + *why;
  }
  if (listed == 0) out += " too few free devices on the GPUs it allows";
  return out;
}

}  // namespace

std::string_view ChoiceRuleName(ChoiceRule r) {
  switch (r) {
    case ChoiceRule::kNone:
      return "none";
    case ChoiceRule::kCommon:
      return "common";
    case ChoiceRule::kFirstAsk:
      return "first-ask";
    case ChoiceRule::kUnsatisfiable:
      return "unsatisfiable";
  }
  return "none";
}

ChoiceVerdict RestrictChoice(const std::vector<std::string>& available,
                             const std::vector<std::string>& must_include, int size,
                             const std::function<DeviceGpu(const std::string& id)>& gpu_of,
                             std::vector<PendingAsk> asks) {
  ChoiceVerdict v;
  v.available = available;
  std::sort(asks.begin(), asks.end(), [](const PendingAsk& a, const PendingAsk& b) {
    return std::tie(a.created, a.pod) < std::tie(b.created, b.pod);
  });
  std::vector<const GpuSelector*> named;
  for (const PendingAsk& a : asks)
    if (!a.selector.empty()) named.push_back(&a.selector);
  if (named.empty()) return v;  // 1

  std::vector<DeviceGpu> gpus;
  gpus.reserve(available.size());
  for (const std::string& id : available) gpus.push_back(gpu_of(id));
  const auto enough = [size](const std::vector<std::string>& d) {
    return static_cast<int>(d.size()) >= size;
  };

  std::vector<std::string> common = AllowedDevices(available, must_include, gpus, named);
  if (enough(common)) {  // 2
    v.rule = ChoiceRule::kCommon;
    v.available = std::move(common);
    size_t listed = 0;
    for (const PendingAsk& a : asks) {
      if (a.selector.empty()) continue;
      if (listed++ == kMaxAsksListed) {
        v.pod += ",...";
        break;
      }
      v.pod += (v.pod.empty() ? "" : ",") + a.pod;
    }
    return v;
  }

  for (const PendingAsk& a : asks) {  // 3
    std::vector<std::string> own = AllowedDevices(available, must_include, gpus, {&a.selector});
    if (enough(own)) {
      // A pod that names no GPUs leaves those the others named to them where it can.
      if (a.selector.empty()) {
        std::vector<std::string> spare;
        for (size_t i = 0; i < available.size(); ++i)
          if (std::find(must_include.begin(), must_include.end(), available[i]) !=
                  must_include.end() ||
              std::none_of(named.begin(), named.end(),
                           [&](const GpuSelector* s) { return Allowed(*s, gpus[i]); }))
            spare.push_back(available[i]);
        if (enough(spare)) own = std::move(spare);
      }
      v.rule = ChoiceRule::kFirstAsk;
      v.pod = a.pod;
      v.available = std::move(own);
      return v;
    }
    if (v.excluded.size() < kMaxAsksListed) v.excluded.push_back(Exclusions(a, gpus));
  }
  v.rule = ChoiceRule::kUnsatisfiable;  // 4
  return v;
}

}  // namespace gpushare::choice
