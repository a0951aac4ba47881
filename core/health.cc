#include "core/health.h"

#include <algorithm>

namespace gpushare {

HealthOptions HealthOptionsFromSettings(const GpushareSettings& s) {
  HealthOptions o;
  o.enabled = s.health_checks_enabled;
  o.ignored_xids = s.ignored_xids;
  o.recovery_ms = s.health_recovery_seconds * 1000;
  return o;
}

HealthTracker::HealthTracker(const Inventory& inventory, HealthOptions options)
    : options_(std::move(options)) {
  for (const auto& g : inventory.gpus) {
    by_uuid_[g.uuid] = units_.size();
    units_.push_back({g.uuid, "", g.index, -1});
    for (const auto& m : g.mig) {
      by_uuid_[m.uuid] = units_.size();
      units_.push_back({m.uuid, g.uuid, g.index, m.index});
    }
  }
}

int HealthTracker::CarryOver(const HealthTracker& previous) {
  if (!options_.enabled) return 0;
  int carried = 0;
  for (Unit& u : units_) {
    auto it = previous.by_uuid_.find(u.uuid);
    if (it == previous.by_uuid_.end()) continue;
    const Unit& old = previous.units_[it->second];
    u.unhealthy = old.unhealthy;
    u.sticky = old.sticky;
    u.last_error_ms = old.last_error_ms;
    carried += u.unhealthy ? 1 : 0;
  }
  return carried;
}

bool HealthTracker::Effective(const Unit& u) const {
  if (u.unhealthy) return false;
  if (u.parent.empty()) return true;
  auto it = by_uuid_.find(u.parent);
  return it == by_uuid_.end() || !units_[it->second].unhealthy;
}

bool HealthTracker::IsHealthy(const std::string& uuid) const {
  auto it = by_uuid_.find(uuid);
  return it == by_uuid_.end() || Effective(units_[it->second]);
}

std::map<std::string, bool> HealthTracker::Snapshot() const {
  std::map<std::string, bool> s;
  for (const auto& u : units_) s[u.uuid] = Effective(u);
  return s;
}

std::vector<HealthTransition> HealthTracker::Diff(const std::map<std::string, bool>& before,
                                                  const std::string& reason,
                                                  int64_t time_ms) const {
  std::vector<HealthTransition> out;
  for (const auto& u : units_) {
    bool now = Effective(u);
    if (before.at(u.uuid) == now) continue;
    out.push_back({u.uuid, u.gpu_index, u.mig_index, now, reason, time_ms});
  }
  return out;
}

std::vector<HealthTransition> HealthTracker::OnEvent(const HealthEvent& event,
                                                     std::string* ignored) {
  auto ignore = [&](std::string why) {
    if (ignored != nullptr) *ignored = std::move(why);
    return std::vector<HealthTransition>{};
  };
  if (!options_.enabled) return ignore("health checks are disabled");
  const bool lost = event.kind == HealthEventKind::kDeviceLost;
  if (!lost && std::find(options_.ignored_xids.begin(), options_.ignored_xids.end(), event.xid) !=
                   options_.ignored_xids.end()) {
    return ignore("xid " + std::to_string(event.xid) + " is in the ignore list");
  }
  std::vector<Unit*> targets;
  if (event.uuid.empty()) {
    for (auto& u : units_) {
      if (u.parent.empty()) targets.push_back(&u);
    }
  } else {
    auto it = by_uuid_.find(event.uuid);
    if (it == by_uuid_.end()) return ignore("unknown device " + event.uuid);
    targets.push_back(&units_[it->second]);
  }
  if (targets.empty()) return ignore("the node has no GPUs");
  auto before = Snapshot();
  for (Unit* u : targets) {
    u->unhealthy = true;
    u->sticky = u->sticky || lost;
    u->last_error_ms = std::max(u->last_error_ms, event.time_ms);
  }
  std::string what = lost ? "device lost" : "xid " + std::to_string(event.xid);
  std::string where = event.uuid.empty() ? "every GPU" : event.uuid;
  std::string reason = what + " on " + where;
  if (!event.detail.empty()) reason += " (" + event.detail + ")";
  return Diff(before, reason, event.time_ms);
}

std::vector<HealthTransition> HealthTracker::Advance(int64_t now_ms) {
  if (options_.recovery_ms <= 0) return {};
  auto before = Snapshot();
  for (auto& u : units_) {
    if (u.unhealthy && !u.sticky && now_ms - u.last_error_ms >= options_.recovery_ms) {
      u.unhealthy = false;
    }
  }
  return Diff(before, "no error for " + std::to_string(options_.recovery_ms / 1000) + "s", now_ms);
}

std::optional<int64_t> HealthTracker::NextRecoveryMs() const {
  if (options_.recovery_ms <= 0) return std::nullopt;
  std::optional<int64_t> next;
  for (const auto& u : units_) {
    if (!u.unhealthy || u.sticky) continue;
    int64_t at = u.last_error_ms + options_.recovery_ms;
    if (!next || at < *next) next = at;
  }
  return next;
}

void HealthTracker::ApplyTo(ResourcePlan* plan) const {
  for (auto& r : plan->resources) {
    for (auto& d : r.devices) {
      bool healthy = IsHealthy(d.device_uuid);
      if (!d.is_mig) {
        for (const auto& u : units_) {
          if (u.parent == d.gpu_uuid && u.unhealthy) healthy = false;
        }
      }
      d.healthy = healthy;
    }
  }
}

}  // namespace gpushare
