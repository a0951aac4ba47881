// ConfigSelect: which named node config a node uses, and when the agent reloads it. Pure: the
// node's labels, the names in the config directory, the bytes' hash and the time come in; a
// name, or what to do, comes out (node/config_source.h does the I/O around it).
//
// Selection (gpushare-node --config-dir, as NVIDIA's plugin does with the node label
// nvidia.com/device-plugin.config): the label's value names the config; without the label,
// --default-config; without both, the only config when the directory holds exactly one.
// Everything else is an error that names the label, the value and the configs available.
//
// ConfigPoller decides, look after look (every --config-poll-interval), whether what is
// selected now (name and a hash of the file's bytes) differs from what serves: a change of the
// bytes or of the name asks for a reload, once per new (name, hash); the same bytes (a touch,
// or a ConfigMap swap that rewrote nothing) do nothing; a selection that fails is reported once
// per distinct message and leaves the running config alone; an API server that does not answer
// is a warning, the running config stays.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpushare {

inline constexpr const char* kDefaultConfigNodeLabel = "nvidia.com/device-plugin.config";

// The name of the config to use. kNotFound when the label (or the default) names a config the
// directory does not hold; kFailedPrecondition when nothing names one and the directory holds
// none or several. `available` need not be sorted; messages list it sorted.
Result<std::string> SelectConfig(const std::map<std::string, std::string>& labels,
                                 const std::string& label_key, const std::string& default_name,
                                 const std::vector<std::string>& available);

// What one look at the config found.
struct ConfigLook {
  enum class Kind {
    kSelected,           // `name` is selected and its bytes hash to `hash`
    kUnselectable,       // SelectConfig failed, or the selected file cannot be read: `message`
    kLabelsUnavailable,  // the API server did not answer: `message`
  };
  Kind kind = Kind::kSelected;
  std::string name;  // the selected config ("" for a plain --config file)
  uint64_t hash = 0;
  std::string message;
};

enum class ConfigAction {
  kNone,
  kReload,  // load what the look selected (the agent's reload, as SIGHUP)
  kReject,  // log `message` as event=reload_rejected; the running config stays
  kWarn,    // log `message` as a warning; the running config stays
};

struct ConfigDecision {
  ConfigAction action = ConfigAction::kNone;
  std::string message;
  bool operator==(const ConfigDecision&) const = default;
};

class ConfigPoller {
 public:
  // `name`/`hash`: what the agent started with; the first look is due at now_ms + interval_ms.
  ConfigPoller(int64_t interval_ms, std::string name, uint64_t hash, int64_t now_ms);

  int64_t NextPollMs() const { return next_poll_ms_; }

  // A look taken at now_ms. The next look is due one interval later.
  ConfigDecision Observe(const ConfigLook& look, int64_t now_ms);

  // The agent accepted a config with this name and hash (a reload this poller asked for, a
  // SIGHUP, the start): looks that find it again ask for nothing.
  void Loaded(const std::string& name, uint64_t hash);

  const std::string& serving_name() const { return serving_.name; }

 private:
  struct Key {
    std::string name;
    uint64_t hash = 0;
    bool operator==(const Key&) const = default;
  };
  int64_t interval_ms_;
  int64_t next_poll_ms_;
  Key serving_;
  std::optional<Key> attempted_;  // the last reload asked for that did not become serving_
  std::string reported_;          // the last rejection or warning reported (once each)
};

// Retrying the node's labels at start: the first failure is retried after 500 ms, doubling to
// 8 s, for at most `budget_ms` since the first attempt (30 s in the agent). nullopt: give up.
std::optional<int64_t> StartupRetryAtMs(int64_t started_ms, int64_t now_ms, int failures,
                                        int64_t budget_ms);

}  // namespace gpushare
