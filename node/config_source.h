// ConfigSource: where gpushare-node's sharing config comes from, and the automatic reload
// (issue 12: named configs selected per node by a node label, reloaded when the ConfigMap
// changes, no `kill -HUP` by hand).
//
// Two modes:
//   - a file (--config FILE or $CONFIG_FILE), as before;
//   - a directory (--config-dir DIR or $CONFIG_DIR) holding one config per name: a ConfigMap
//     mounted as a volume (files are links NAME -> ..data/NAME; kubelet swaps ..data at once on
//     an update; names starting with '.' are not configs). The node's label
//     (--config-node-label, default nvidia.com/device-plugin.config; read from the API server:
//     GET /api/v1/nodes/<--node-name>) names the config; core/config_select.h has the rules.
//     At start an API server that does not answer is retried with backoff for up to 30 s, then
//     --default-config is used if given, else the start fails.
// In both modes the file's bytes are watched: the config's directory with inotify (a ConfigMap
// update swaps ..data with one rename: IN_MOVED_TO; an edited file: IN_CLOSE_WRITE; IN_CREATE
// and IN_DELETE too), so a change is looked at at once, and every --config-poll-interval
// (default 10s) as the fallback: it is what notices a label change (the node is not watched),
// an event lost, and every change where inotify cannot be used (no instance, the watch limit
// reached, the directory gone: logged as event=config_watch_unavailable/_failed/_lost, the
// watch set again at the next poll; never fatal). SIGHUP reloads the serving config's file at
// once (node/agent.h). When the bytes change (a hash of the bytes, not the mtime: a ConfigMap swap
// is seen, a touch that keeps the bytes is not) or the label selects another config, the agent
// reloads exactly as on SIGHUP. A selection that fails later (the label names a config that is not
// there) keeps the running config and is logged once as event=reload_rejected; an API server that
// does not answer a poll keeps it too (event=config_labels_unavailable, a warning). The loader
// always loads the bytes the watch saw, so what serves is what was compared.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/sync.h"
#include "core/config_select.h"
#include "core/status.h"
#include "node/agent.h"

namespace CLI {
class App;
}

namespace gpushare::node {

struct ConfigSourceFlags {
  std::string config_dir;                            // --config-dir, $CONFIG_DIR
  std::string node_label = kDefaultConfigNodeLabel;  // --config-node-label, $CONFIG_NODE_LABEL
  std::string default_config;                        // --default-config, $DEFAULT_CONFIG
  std::string poll_interval = "10s";                 // --config-poll-interval (1s..1h)
};

void AddConfigSourceFlags(CLI::App& app, ConfigSourceFlags& flags);

// A config's bytes and where they came from.
struct ConfigSnapshot {
  std::string name;  // the config selected in directory mode; "" otherwise
  std::string
      path;  // the file read; "" = no file (every setting from flags, environment, defaults)
  std::string text;
  uint64_t hash = 0;
};

using NodeLabels = std::map<std::string, std::string>;
// The node's labels from the API server; an error when it cannot say.
using NodeLabelReader = std::function<Result<NodeLabels>()>;

struct ConfigSourceOptions {
  ConfigSourceFlags flags;
  std::string config_file;                   // --config, or $CONFIG_FILE; "" = none
  std::string config_file_origin;            // "--config" or "CONFIG_FILE", for messages
  std::string node_name;                     // --node-name / $NODE_NAME: required with --config-dir
  NodeLabelReader labels;                    // required with --config-dir
  int64_t startup_budget_ms = 30000;         // how long the start retries the labels
  std::function<void(int64_t ms)> sleep_ms;  // test hook; default: sleeps
  std::shared_ptr<Clock> clock = RealClock();
};

class ConfigSource {
 public:
  // Checks the flags and selects the config to start with (directory mode: asks the API
  // server, retrying as above). kInvalidArgument (exit 2) for flags or a selection that cannot
  // be made; kUnavailable when the API server did not answer and there is no --default-config.
  static Result<std::shared_ptr<ConfigSource>> Open(ConfigSourceOptions options);

  // The config to load now: what the last look found if it asked for a reload, else the
  // selected file read again (SIGHUP). Errors name the flag and the file.
  Result<ConfigSnapshot> Next() GPUSHARE_EXCLUDES(mu_);
  // The agent took (true) or refused what Next() returned last (AgentOptions::on_load).
  void Outcome(bool accepted) GPUSHARE_EXCLUDES(mu_);

  // Whether there is anything to watch (a file or a directory).
  bool watching() const { return watching_; }
  int64_t interval_ms() const { return interval_ms_; }

  // One look (the watch calls it when NextPollMs() is due): reads the labels and the file and
  // says what to do; a kReload leaves the bytes for Next().
  ConfigDecision Poll(int64_t now_ms) GPUSHARE_EXCLUDES(mu_);
  int64_t NextPollMs() GPUSHARE_EXCLUDES(mu_);

  // What the watch watches: the config directory, or the config file's directory.
  std::string watch_dir() const;
  // Whether a change of the entry `name` of watch_dir() can change the config.
  bool Concerns(const std::string& name) const;

 private:
  explicit ConfigSource(ConfigSourceOptions options);
  Result<ConfigSnapshot> Read(const std::string& name) const;  // the file of a config
  Result<std::vector<std::string>> Names() const;              // the configs in the directory
  ConfigLook Look(std::optional<ConfigSnapshot>* found) GPUSHARE_EXCLUDES(mu_);

  ConfigSourceOptions opts_;
  bool dir_mode_ = false;
  bool watching_ = false;
  int64_t interval_ms_ = 10000;
  Mutex mu_;
  // The name selected last (directory mode).
  std::string selected_ GPUSHARE_GUARDED_BY(mu_);
  // What a look asked to load.
  std::optional<ConfigSnapshot> found_ GPUSHARE_GUARDED_BY(mu_);
  // What Next() returned last.
  std::optional<ConfigSnapshot> loading_ GPUSHARE_GUARDED_BY(mu_);
  // Set by Open(); the poller's own state is guarded by mu_ too.
  std::unique_ptr<ConfigPoller> poller_ GPUSHARE_GUARDED_BY(mu_) GPUSHARE_PT_GUARDED_BY(mu_);
};

// The source a main opens from its flags: --config FILE ($CONFIG_FILE, named `config_file_flag`
// in messages) or `flags.config_dir` with the node's labels read from the API server
// (`kubeconfig`, in-cluster when empty; short timeouts, so a poll never hangs).
Result<std::shared_ptr<ConfigSource>> OpenConfigSourceFromFlags(
    const ConfigSourceFlags& flags, const std::string& config_file,
    const std::map<std::string, std::string>& env, const std::string& node_name,
    const std::string& kubeconfig);

struct ConfigWatchOptions {
  std::shared_ptr<Clock> clock = RealClock();  // of the polls (tests pass a SimulatedClock)
  bool use_inotify = true;  // false: the poll only (what a host without inotify gets; tests)
};

// Whether an inotify event on the name of a config (`mask`: the event's IN_* bits) means the
// config should be looked at now, given whether a regular file is at that name when the event
// is read. A regular file there after IN_CREATE, or after IN_DELETE (removed and made again, as
// an editor or `cat > file` does), is still being written: its IN_CLOSE_WRITE follows, and
// looking now would read it half-written (an empty file is a valid config of defaults). The
// watch thread may read IN_DELETE only after the new file exists, on a loaded machine (issue 30).
bool ConfigEventNeedsLook(uint32_t mask, bool regular_file_now);

// The watch: a thread that looks at `source` when its directory changes (inotify) and when its
// poll is due, and calls `request_reload` (the agent's RequestReload) when the config changed.
// Null when there is nothing to watch.
std::unique_ptr<Companion> StartConfigWatch(std::shared_ptr<ConfigSource> source,
                                            std::function<void()> request_reload,
                                            ConfigWatchOptions options = {});

}  // namespace gpushare::node
