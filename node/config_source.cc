// See config_source.h.
#include "node/config_source.h"

#include <dirent.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/logfmt.h"
#include "base/unique_fd.h"
#include "config/duration.h"
#include "config/flag_checks.h"
#include "config/node_config_loader.h"
#include "kube/client.h"
#include "kube/objects.h"
#include "node/files.h"
#include "node/memshare_service.h"
#include "node/periodic.h"

namespace gpushare::node {
namespace {

using logfmt::Value;

constexpr int64_t kMinPollMs = 1000, kMaxPollMs = 3600 * 1000;

std::string Quoted(const std::string& s) {
  return "\"" + s + "\"";
}

}  // namespace

void AddConfigSourceFlags(CLI::App& app, ConfigSourceFlags& flags) {
  app.add_option("--config-dir", flags.config_dir,
                 "directory with one config file per name (a ConfigMap volume); the node label "
                 "--config-node-label chooses one; not with --config [env CONFIG_DIR]")
      ->envname("CONFIG_DIR");
  app.add_option("--config-node-label", flags.node_label,
                 "node label whose value names the config in --config-dir [env CONFIG_NODE_LABEL]")
      ->envname("CONFIG_NODE_LABEL")
      ->capture_default_str();
  app.add_option("--default-config", flags.default_config,
                 "config in --config-dir for a node without the label (default: the only one, if "
                 "there is one) [env DEFAULT_CONFIG]")
      ->envname("DEFAULT_CONFIG");
  app.add_option("--config-poll-interval", flags.poll_interval,
                 "how often the node's label and the config file are checked for changes (reloaded "
                 "when the bytes or the selection change), 1s..1h")
      ->check(DurationIn(kMinPollMs, "1s", kMaxPollMs, "1h"))
      ->capture_default_str();
}

ConfigSource::ConfigSource(ConfigSourceOptions options) : opts_(std::move(options)) {
  if (!opts_.sleep_ms) {
    opts_.sleep_ms = [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  }
  if (!opts_.clock) opts_.clock = RealClock();
}

Result<std::shared_ptr<ConfigSource>> ConfigSource::Open(ConfigSourceOptions options) {
  const ConfigSourceFlags& f = options.flags;
  if (!f.config_dir.empty() && !options.config_file.empty()) {
    return Status::InvalidArgument(
        "--config-dir (CONFIG_DIR) and --config (CONFIG_FILE) are mutually exclusive: got "
        "--config-dir " +
        f.config_dir + " and " + options.config_file_origin + " " + options.config_file +
        "; give one of them");
  }
  std::optional<int64_t> poll = ParseDurationMs(f.poll_interval);
  if (!poll || *poll < kMinPollMs || *poll > kMaxPollMs) {
    return Status::InvalidArgument(
        "--config-poll-interval: must be a positive duration from 1s to 1h, like 10s, got " +
        Quoted(f.poll_interval));
  }
  std::shared_ptr<ConfigSource> s(new ConfigSource(std::move(options)));
  s->interval_ms_ = *poll;
  s->dir_mode_ = !s->opts_.flags.config_dir.empty();
  s->watching_ = s->dir_mode_ || !s->opts_.config_file.empty();
  if (!s->watching_) {
    MutexLock lock(&s->mu_);  // not shared yet: held for the analysis only
    s->found_ = ConfigSnapshot{};
    return s;
  }
  std::string name;
  if (s->dir_mode_) {
    const ConfigSourceOptions& o = s->opts_;
    if (o.flags.node_label.empty())
      return Status::InvalidArgument("--config-node-label: must not be empty");
    if (o.node_name.empty()) {
      return Status::InvalidArgument(
          "--node-name (or NODE_NAME): required with --config-dir (the node's label " +
          o.flags.node_label + " chooses the config)");
    }
    if (!o.labels)
      return Status::InvalidArgument(
          "--config-dir: no Kubernetes API client to read the node's labels");
    Result<std::vector<std::string>> names = s->Names();
    if (!names.ok()) return names.status();
    // The node's labels, retried with backoff for a bounded time.
    const int64_t started = o.clock->NowMs();
    int failures = 0;
    Result<NodeLabels> labels = o.labels();
    while (!labels.ok()) {
      ++failures;
      std::optional<int64_t> at =
          StartupRetryAtMs(started, o.clock->NowMs(), failures, o.startup_budget_ms);
      if (!at) break;
      spdlog::warn("event=config_labels_unavailable node={} attempt={} retry_ms={} error={}",
                   o.node_name, failures, *at - o.clock->NowMs(), Value(labels.status().message()));
      o.sleep_ms(std::max<int64_t>(0, *at - o.clock->NowMs()));
      labels = o.labels();
    }
    Result<std::string> chosen = Status::Internal("unset");
    if (labels.ok()) {
      chosen = SelectConfig(*labels, o.flags.node_label, o.flags.default_config, *names);
    } else if (!o.flags.default_config.empty()) {
      spdlog::warn(
          "event=config_labels_unavailable node={} action=use_default_config config={} error={}",
          o.node_name, Value(o.flags.default_config), Value(labels.status().message()));
      chosen = SelectConfig({}, o.flags.node_label, o.flags.default_config, *names);
    } else {
      return Status::Unavailable("--config-dir: cannot read node " + o.node_name + "'s label " +
                                 o.flags.node_label + " from the API server (" +
                                 labels.status().message() + ", for " +
                                 std::to_string(o.startup_budget_ms / 1000) +
                                 " s) and no --default-config is given to fall back on");
    }
    if (!chosen.ok())
      return Status::InvalidArgument("--config-dir " + o.flags.config_dir + ": " +
                                     chosen.status().message());
    name = *chosen;
  }
  Result<ConfigSnapshot> first = s->Read(name);
  if (!first.ok()) return first.status();
  if (s->dir_mode_) {
    spdlog::info("event=config_selected config={} label={} path={} poll_interval_ms={}",
                 Value(name), Value(s->opts_.flags.node_label), Value(first->path),
                 s->interval_ms_);
  }
  const int64_t now_ms = s->opts_.clock->NowMs();
  {
    MutexLock lock(&s->mu_);  // not shared yet: held for the analysis only
    s->selected_ = name;
    s->poller_ = std::make_unique<ConfigPoller>(s->interval_ms_, name, first->hash, now_ms);
    s->found_ = std::move(first).value();
  }
  return s;
}

Result<std::vector<std::string>> ConfigSource::Names() const {
  const std::string& dir = opts_.flags.config_dir;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return Status::InvalidArgument("--config-dir: cannot list " + dir + ": " +
                                   std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.empty() || n[0] == '.') continue;  // ., .., ..data and kubelet's timestamped dirs
    struct stat st;
    if (stat((dir + "/" + n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

Result<ConfigSnapshot> ConfigSource::Read(const std::string& name) const {
  ConfigSnapshot s;
  s.name = name;
  if (!watching_) return s;
  s.path = dir_mode_
               ? opts_.flags.config_dir + (opts_.flags.config_dir.back() == '/' ? "" : "/") + name
               : opts_.config_file;
  Result<std::string> text = ReadNodeConfigFile(s.path);
  if (!text.ok()) {
    return Status::InvalidArgument(
        (dir_mode_ ? std::string("--config-dir") : opts_.config_file_origin) + ": " +
        text.status().message());
  }
  s.text = std::move(text).value();
  s.hash = ContentHash64(s.text);
  return s;
}

Result<ConfigSnapshot> ConfigSource::Next() {
  std::string name;
  {
    MutexLock lock(&mu_);
    if (found_) {
      loading_ = std::move(found_);
      found_.reset();
      return *loading_;
    }
    name = poller_ ? poller_->serving_name() : selected_;
  }
  Result<ConfigSnapshot> s = Read(name);
  if (!s.ok()) return s;
  MutexLock lock(&mu_);
  loading_ = *s;
  return s;
}

void ConfigSource::Outcome(bool accepted) {
  MutexLock lock(&mu_);
  if (accepted && loading_ && poller_) {
    poller_->Loaded(loading_->name, loading_->hash);
    selected_ = loading_->name;
  }
  loading_.reset();
}

ConfigLook ConfigSource::Look(std::optional<ConfigSnapshot>* found) {
  ConfigLook look;
  std::string name;
  if (dir_mode_) {
    std::string serving;
    {
      MutexLock lock(&mu_);
      serving = poller_->serving_name();
    }
    const std::string keep = "; keeping config " + Quoted(serving);
    Result<NodeLabels> labels = opts_.labels();
    if (!labels.ok()) {
      return {ConfigLook::Kind::kLabelsUnavailable, "", 0,
              "cannot read node " + opts_.node_name +
                  "'s labels from the API server: " + labels.status().message() + keep};
    }
    Result<std::vector<std::string>> names = Names();
    if (!names.ok())
      return {ConfigLook::Kind::kUnselectable, "", 0, names.status().message() + keep};
    Result<std::string> chosen =
        SelectConfig(*labels, opts_.flags.node_label, opts_.flags.default_config, *names);
    if (!chosen.ok())
      return {ConfigLook::Kind::kUnselectable, "", 0, chosen.status().message() + keep};
    name = *chosen;
  }
  Result<ConfigSnapshot> s = Read(name);
  if (!s.ok()) return {ConfigLook::Kind::kUnselectable, "", 0, s.status().message()};
  look.name = s->name;
  look.hash = s->hash;
  *found = std::move(s).value();
  return look;
}

ConfigDecision ConfigSource::Poll(int64_t now_ms) {
  std::optional<ConfigSnapshot> snap;
  ConfigLook look = Look(&snap);
  MutexLock lock(&mu_);
  ConfigDecision d = poller_->Observe(look, now_ms);
  if (d.action == ConfigAction::kReload) found_ = std::move(snap);
  return d;
}

int64_t ConfigSource::NextPollMs() {
  MutexLock lock(&mu_);
  return poller_ ? poller_->NextPollMs() : opts_.clock->NowMs() + interval_ms_;
}

std::string ConfigSource::watch_dir() const {
  if (dir_mode_) return opts_.flags.config_dir;
  const std::string parent = std::filesystem::path(opts_.config_file).parent_path().string();
  return parent.empty() ? "." : parent;
}

bool ConfigSource::Concerns(const std::string& name) const {
  if (dir_mode_) return true;  // every entry of a ConfigMap directory is one of its configs
  // The file itself, or kubelet's ..data and ..<timestamp> when it lies in a ConfigMap volume.
  return name == std::filesystem::path(opts_.config_file).filename().string() ||
         name.rfind("..", 0) == 0;
}

namespace {

// The watch of StartConfigWatch: its own thread looks at the config when the watched directory
// reports a change (inotify) and when ConfigSource::NextPollMs is due (the fallback, and the
// only way to see a label change); it waits on the inotify descriptor and an eventfd (stop, a
// simulated clock's advance) in between.
class ConfigWatch final : public Companion {
 public:
  ConfigWatch(std::shared_ptr<ConfigSource> source, std::function<void()> request_reload,
              ConfigWatchOptions options)
      : source_(std::move(source)),
        request_reload_(std::move(request_reload)),
        opts_(std::move(options)),
        wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    on_advance_ = opts_.clock->OnAdvance([this] { Wake(); });
    thread_ = std::thread([this] { Loop(); });
  }

  ~ConfigWatch() override {
    stop_ = true;
    Wake();
    thread_.join();
    on_advance_.reset();
  }

 private:
  static constexpr uint32_t kMask =
      IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF;

  void Loop() {
    if (opts_.use_inotify) inotify_fd_.reset(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (!inotify_fd_) {
      spdlog::warn("event=config_watch_unavailable dir={} error={} action=poll interval_ms={}",
                   Value(source_->watch_dir()),
                   Value(opts_.use_inotify ? std::strerror(errno) : "disabled"),
                   source_->interval_ms());
    }
    SetWatch();
    spdlog::info("event=config_watch_started dir={} inotify={} interval_ms={}",
                 Value(source_->watch_dir()), wd_ >= 0, source_->interval_ms());
    bool changed = false;
    while (!stop_) {
      const int64_t now = opts_.clock->NowMs();
      if (changed || now >= source_->NextPollMs()) {
        SetWatch();  // a lost watch is set again at the next look
        Act(source_->Poll(now), changed ? "changed" : "poll");
      }
      changed = WaitForChange();
    }
  }

  // Sets the inotify watch on the config's directory if it is not set; a failure (the
  // directory is gone, the watch limit is reached) is logged once and left to the poll.
  void SetWatch() {
    if (!inotify_fd_ || wd_ >= 0) return;
    wd_ = ::inotify_add_watch(inotify_fd_.get(), source_->watch_dir().c_str(), kMask);
    if (wd_ >= 0) {
      if (!watch_failure_.empty())
        spdlog::info("event=config_watch_restored dir={}", Value(source_->watch_dir()));
      watch_failure_.clear();
      return;
    }
    const std::string error = std::strerror(errno);
    if (error == watch_failure_) return;
    watch_failure_ = error;
    spdlog::warn("event=config_watch_failed dir={} error={} action=poll interval_ms={}",
                 Value(source_->watch_dir()), Value(error), source_->interval_ms());
  }

  // Waits until the next poll, a change in the directory or the stop; returns whether the
  // directory reported a change that concerns the config.
  bool WaitForChange() {
    int timeout = opts_.clock->PollTimeoutMs(source_->NextPollMs());
    if (!wake_fd_) timeout = timeout < 0 ? 200 : std::min(timeout, 200);  // no eventfd: re-check
    pollfd fds[2];
    int n = 0;
    if (wake_fd_) fds[n++] = {wake_fd_.get(), POLLIN, 0};
    if (inotify_fd_) fds[n++] = {inotify_fd_.get(), POLLIN, 0};
    if (::poll(fds, n, timeout) < 0 && errno != EINTR) {
      spdlog::error("event=poll_failed error={}", Value(std::strerror(errno)));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    uint64_t v;
    while (wake_fd_ && ::read(wake_fd_.get(), &v, sizeof(v)) > 0) {
    }
    return ReadEvents();
  }

  bool ReadEvents() {
    if (!inotify_fd_) return false;
    bool changed = false;
    alignas(inotify_event) char buf[16 * 1024];
    for (;;) {
      const ssize_t len = ::read(inotify_fd_.get(), buf, sizeof(buf));
      if (len <= 0) break;
      for (char* p = buf; p < buf + len;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        changed = Concerns(*ev) || changed;
      }
    }
    return changed;
  }

  bool Concerns(const inotify_event& ev) {
    if (ev.mask & IN_Q_OVERFLOW) return true;  // events were lost: look
    if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
      if (ev.wd == wd_) {
        wd_ = -1;
        spdlog::warn("event=config_watch_lost dir={} action=poll interval_ms={}",
                     Value(source_->watch_dir()), source_->interval_ms());
      }
      return true;
    }
    if (ev.len == 0 || !source_->Concerns(ev.name)) return false;
    struct stat st {};
    const std::string path = source_->watch_dir() + "/" + ev.name;
    return ConfigEventNeedsLook(ev.mask, ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode));
  }

  void Act(const ConfigDecision& d, const char* trigger) {
    switch (d.action) {
      case ConfigAction::kNone:
        break;
      case ConfigAction::kReload:
        spdlog::info("event=config_changed action=reload trigger={} reason={}", trigger,
                     Value(d.message));
        request_reload_();
        break;
      case ConfigAction::kReject:
        spdlog::error("event=reload_rejected problem={}", Value(d.message));
        break;
      case ConfigAction::kWarn:
        spdlog::warn("event=config_labels_unavailable action=keep_config error={}",
                     Value(d.message));
        break;
    }
  }

  void Wake() {
    if (!wake_fd_) return;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd_.get(), &one, sizeof(one));
  }

  const std::shared_ptr<ConfigSource> source_;
  const std::function<void()> request_reload_;
  const ConfigWatchOptions opts_;
  UniqueFd wake_fd_;
  UniqueFd inotify_fd_;        // the watch thread's only
  int wd_ = -1;                // the watch thread's only
  std::string watch_failure_;  // the last failure logged (the watch thread's only)
  std::atomic<bool> stop_{false};
  std::shared_ptr<void> on_advance_;
  std::thread thread_;  // last
};

}  // namespace

bool ConfigEventNeedsLook(uint32_t mask, bool regular_file_now) {
  if ((mask & (IN_CREATE | IN_DELETE)) && regular_file_now) return false;
  return true;
}

std::unique_ptr<Companion> StartConfigWatch(std::shared_ptr<ConfigSource> source,
                                            std::function<void()> request_reload,
                                            ConfigWatchOptions options) {
  if (!source || !source->watching()) return nullptr;
  if (!options.clock) options.clock = RealClock();
  return std::make_unique<ConfigWatch>(std::move(source), std::move(request_reload),
                                       std::move(options));
}

Result<std::shared_ptr<ConfigSource>> OpenConfigSourceFromFlags(
    const ConfigSourceFlags& flags, const std::string& config_file,
    const std::map<std::string, std::string>& env, const std::string& node_name,
    const std::string& kubeconfig) {
  ConfigSourceOptions c;
  c.flags = flags;
  c.config_file = config_file;
  c.config_file_origin = "--config";
  if (c.config_file.empty()) {
    if (auto it = env.find("CONFIG_FILE"); it != env.end()) {
      c.config_file = it->second;
      c.config_file_origin = "CONFIG_FILE";
    }
  }
  c.node_name = node_name;
  if (!c.flags.config_dir.empty() && c.config_file.empty() && !c.node_name.empty()) {
    kube::ClientOptions ko;  // a poll must not hang on an API server that does not answer
    ko.request_timeout = std::chrono::seconds(5);
    ko.connect_timeout = std::chrono::seconds(3);
    Result<std::shared_ptr<kube::Client>> client = MakeApiClient(kubeconfig, "--config-dir", ko);
    if (!client.ok()) return client.status();
    c.labels = [client = *client, node = c.node_name]() -> Result<NodeLabels> {
      Result<kube::Node> n = client->GetNode(node);
      if (!n.ok()) return n.status();
      return n->metadata.labels;
    };
  }
  return ConfigSource::Open(std::move(c));
}

}  // namespace gpushare::node
