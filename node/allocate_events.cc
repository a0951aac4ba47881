// See allocate_events.h.
#include "node/allocate_events.h"

#include <utility>

namespace gpushare::node {

namespace {
constexpr size_t kMaxIdsShown = 8;
}

AllocateEvents::AllocateEvents(std::shared_ptr<kube::EventRecorder> recorder,
                               AllocateEventsOptions options, NowMs now_ms)
    : recorder_(std::move(recorder)), options_(std::move(options)), now_ms_(std::move(now_ms)) {}

std::string AllocateEvents::Message(const std::string& resource,
                                    const std::vector<std::string>& ids, const std::string& why,
                                    uint64_t suppressed) {
  std::string devices;
  for (size_t i = 0; i < ids.size() && i < kMaxIdsShown; ++i)
    devices += (i == 0 ? "" : ",") + ids[i];
  if (ids.size() > kMaxIdsShown) devices += ",... (" + std::to_string(ids.size()) + " devices)";
  std::string m = "Allocate of " + resource + " [" + devices + "] refused: " + why;
  if (suppressed > 0)
    m += " (and " + std::to_string(suppressed) +
         " more refusals for this reason since the last event)";
  return m;
}

void AllocateEvents::Refused(const std::string& resource, std::string_view reason,
                             const std::vector<std::string>& device_ids,
                             const std::string& message) {
  uint64_t suppressed = 0;
  {
    MutexLock l(&mu_);
    PerReason& r = reasons_[std::string(reason)];
    const int64_t now = now_ms_();
    if (r.last_ms >= 0 && now - r.last_ms < options_.interval_ms) {
      ++r.suppressed;
      return;
    }
    r.last_ms = now;
    suppressed = r.suppressed;
    r.suppressed = 0;
  }
  kube::Node node;
  node.metadata.name = options_.node_name;
  recorder_->RecordNode(node, "Warning", std::string(reason),
                        Message(resource, device_ids, message, suppressed));
}

}  // namespace gpushare::node
