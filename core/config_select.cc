#include "core/config_select.h"

#include <algorithm>

namespace gpushare {
namespace {

std::string Available(std::vector<std::string> names) {
  if (names.empty()) return "none";
  std::sort(names.begin(), names.end());
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

bool Has(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

}  // namespace

Result<std::string> SelectConfig(const std::map<std::string, std::string>& labels,
                                 const std::string& label_key, const std::string& default_name,
                                 const std::vector<std::string>& available) {
  if (auto it = labels.find(label_key); it != labels.end()) {
    if (Has(available, it->second)) return it->second;
    return Status::NotFound(
        "node label " + label_key + "=\"" + it->second +
        "\" names a config that does not exist (available: " + Available(available) + ")");
  }
  if (!default_name.empty()) {
    if (Has(available, default_name)) return default_name;
    return Status::NotFound(
        "the node has no label " + label_key + " and --default-config \"" + default_name +
        "\" names a config that does not exist (available: " + Available(available) + ")");
  }
  if (available.size() == 1) return available[0];
  return Status::FailedPrecondition(
      "the node has no label " + label_key +
      " and no --default-config is given, so the config cannot be chosen among " +
      (available.empty()
           ? std::string("none (the config directory is empty)")
           : std::to_string(available.size()) + " (available: " + Available(available) + ")") +
      "; label the node or set --default-config");
}

ConfigPoller::ConfigPoller(int64_t interval_ms, std::string name, uint64_t hash, int64_t now_ms)
    : interval_ms_(interval_ms),
      next_poll_ms_(now_ms + interval_ms),
      serving_{std::move(name), hash} {}

ConfigDecision ConfigPoller::Observe(const ConfigLook& look, int64_t now_ms) {
  next_poll_ms_ = now_ms + interval_ms_;
  if (look.kind != ConfigLook::Kind::kSelected) {
    if (look.message == reported_) return {};
    reported_ = look.message;
    return {
        look.kind == ConfigLook::Kind::kUnselectable ? ConfigAction::kReject : ConfigAction::kWarn,
        look.message};
  }
  reported_.clear();
  const Key k{look.name, look.hash};
  if (k == serving_) {
    attempted_.reset();  // back to what serves: a later change to the rejected one is tried again
    return {};
  }
  if (attempted_ && *attempted_ == k) return {};  // asked already; rejected or under way
  attempted_ = k;
  std::string what = look.name.empty()            ? std::string("the config file changed")
                     : look.name == serving_.name ? "config \"" + look.name + "\" changed"
                                                  : "the node now selects config \"" + look.name +
                                                        "\" (was \"" + serving_.name + "\")";
  return {ConfigAction::kReload, what};
}

void ConfigPoller::Loaded(const std::string& name, uint64_t hash) {
  serving_ = {name, hash};
  if (attempted_ && *attempted_ == serving_) attempted_.reset();
}

std::optional<int64_t> StartupRetryAtMs(int64_t started_ms, int64_t now_ms, int failures,
                                        int64_t budget_ms) {
  int64_t delay = 500;
  for (int i = 1; i < failures && delay < 8000; ++i) delay *= 2;
  delay = std::min<int64_t>(delay, 8000);
  const int64_t deadline = started_ms + budget_ms;
  if (now_ms >= deadline) return std::nullopt;
  return std::min(now_ms + delay, deadline);
}

}  // namespace gpushare
