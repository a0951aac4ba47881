#include "node/agent.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "base/logfmt.h"
#include "base/signals.h"
#include "base/strings.h"
#include "base/sync.h"
#include "base/unique_fd.h"
#include "core/reasons.h"
#include "deviceplugin/plugin_lifecycle.h"
#include "deviceplugin/server.h"
#include "node/gpu_choice.h"
#include "node/memshare_service.h"

namespace gpushare::node {
namespace {

using deviceplugin::DevicePluginServer;
using logfmt::Value;

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// Which file is at a path (inode numbers are reused at once on some file systems, so the
// change time is part of it); all zero when there is none.
struct FileId {
  uint64_t dev = 0, ino = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileId&) const = default;
};

FileId IdOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

std::string DirOf(const std::string& path) {
  std::filesystem::path p(path);
  std::string d = p.parent_path().string();
  return d.empty() ? "." : d;
}

std::string BaseOf(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  auto c = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

// One planned resource and the server that serves it. When to serve and register is decided
// by the RegistrationLifecycle (same index); the slot only holds what the decisions act on.
struct Slot {
  PlannedResource resource;  // with current health
  std::unique_ptr<DevicePluginServer> server;
  uint64_t generation = 0;     // of `server`; outcomes of older servers are ignored
  bool loss_reported = false;  // the lifecycle was told that this server's socket is gone
};

// The outcome of a Register, posted from a gRPC thread.
struct RegisterOutcome {
  uint64_t generation = 0;
  uint64_t attempt = 0;
  Status status;
};

// What other threads (gRPC, the health feed, RequestStop/RequestReload, signals) hand to the
// agent's thread; taken as a whole at every pass.
struct Posted {
  std::vector<uint64_t> ended_generations;
  std::vector<RegisterOutcome> register_outcomes;
  std::vector<HealthEvent> health_events;
  bool stop = false;
  bool reload = false;
  std::string stop_reason = "requested";
};

deviceplugin::LifecycleTiming TimingOf(const AgentOptions& o) {
  deviceplugin::LifecycleTiming t;
  t.debounce_ms = o.debounce.count();
  t.max_debounce_ms = 5 * o.debounce.count();
  t.settle_ms = o.settle.count();
  t.min_backoff_ms = o.min_backoff.count();
  t.max_backoff_ms = o.max_backoff.count();
  return t;
}

}  // namespace

std::vector<deviceplugin::AllocationStep> AllocationSteps(
    deviceplugin::AllocationDecorator units, deviceplugin::AllocationDecorator interposer) {
  std::vector<deviceplugin::AllocationStep> steps;
  if (units) steps.push_back({reasons::kInvalidRequest, std::move(units)});
  if (interposer) steps.push_back({reasons::kInterposerSetupFailed, std::move(interposer)});
  return steps;
}

class Agent::Impl {
 public:
  explicit Impl(AgentOptions o)
      : opts_(std::move(o)),
        clock_(opts_.clock),
        allocate_observer_(
            opts_.allocate_observers.empty()
                ? nullptr
                : std::make_shared<deviceplugin::AllocateFanOut>(opts_.allocate_observers)),
        lifecycle_(TimingOf(opts_)) {
    kubelet_socket_ = opts_.kubelet_socket.empty()
                          ? opts_.plugin_dir + "/" + deviceplugin::kKubeletSocketName
                          : opts_.kubelet_socket;
  }

  ~Impl() {
    StopAll();
    feed_.reset();
    on_advance_.reset();  // before wake_fd_ closes
  }

  Status Init() {
    if (!opts_.load) return Status::InvalidArgument("agent: no input loader");
    if (!clock_) return Status::InvalidArgument("agent: no clock");
    GPUSHARE_RETURN_IF_ERROR(OpenDescriptors());
    on_advance_ = clock_->OnAdvance([this] { Wake(); });
    Result<AgentInputs> in = opts_.load();
    Result<ResourcePlan> p = in.ok() ? BuildResourcePlan(in->inventory, in->config) : in.status();
    Status st = p.ok() ? EnsureMemoryMode(*in, *p) : p.status();
    if (opts_.on_load) opts_.on_load(st.ok());
    if (!st.ok()) return st;
    Adopt(std::move(in).value(), std::move(p).value(), clock_->NowMs(), "start");
    return Status::Ok();
  }

  int Run() {
    Prepare();
    std::string reason;
    while (!Pass(&reason)) Wait();
    spdlog::info("event=shutdown reason={} resources={}", Value(reason), slots_.size());
    StopAll();
    feed_.reset();
    memory_.reset();
    spdlog::info("event=exited status=0");
    return 0;
  }

  const ResourcePlan& plan() const { return plan_; }

  void RequestStop(const std::string& reason) GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      posted_.stop = true;
      posted_.stop_reason = reason;
    }
    Wake();
  }

  void RequestReload() GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      posted_.reload = true;
    }
    Wake();
  }

 private:
  // ---- setup ------------------------------------------------------------------------------
  Status OpenDescriptors() {
    if (opts_.handle_signals) GPUSHARE_RETURN_IF_ERROR(BlockSignals());
    wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_) return Status::Internal(std::string("eventfd: ") + std::strerror(errno));
    if (opts_.watch_plugin_dir) inotify_fd_.reset(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (!inotify_fd_) {
      // No inotify (the per-user instance limit, a kernel without it): the agent still works,
      // finding kubelet restarts by the fallback check of the files (PluginLifecycle).
      lifecycle_.WatchUnavailable();
      spdlog::warn("event=watch_unavailable dir={} error={} action=check_files check_ms={}",
                   opts_.plugin_dir,
                   Value(opts_.watch_plugin_dir ? std::strerror(errno) : "disabled"),
                   lifecycle_.CheckIntervalMs());
    }
    return Status::Ok();
  }

  Status BlockSignals() {
    signal_fd_ = gpushare::BlockSignals({SIGTERM, SIGINT, SIGHUP});
    if (!signal_fd_)
      return Status::Internal(std::string("blocking signals: ") + std::strerror(errno));
    return Status::Ok();
  }

  void Prepare() {
    std::error_code ec;
    std::filesystem::create_directories(opts_.plugin_dir, ec);
    if (ec)
      spdlog::warn("event=plugin_dir_missing dir={} error={}", opts_.plugin_dir,
                   Value(ec.message()));
    if (inotify_fd_) AddWatches(clock_->NowMs());
    kubelet_id_ = IdOf(kubelet_socket_);
    StartFeed();
    spdlog::info("event=agent_started plugin_dir={} kubelet_socket={} resources={}",
                 opts_.plugin_dir, kubelet_socket_, slots_.size());
  }

  // Builds the memory-share mode the first time a plan needs it.
  Status EnsureMemoryMode(const AgentInputs& in, const ResourcePlan& p) {
    const bool wanted = std::any_of(p.resources.begin(), p.resources.end(),
                                    [](const PlannedResource& r) { return r.is_share_resource(); });
    if (!wanted || memory_) return Status::Ok();
    if (!opts_.memory_shares) {
      spdlog::warn(
          "event=memory_shares_unsteered reason={}",
          Value("no memory-share mode configured: GetPreferredAllocation picks the best-fit GPU"));
      return Status::Ok();
    }
    GPUSHARE_ASSIGN_OR_RETURN(memory_, opts_.memory_shares(in));
    return Status::Ok();
  }

  // Takes new inputs and plan: health tracker, decorator, one slot per resource, each to be
  // served at `first_serve_ms` (after a settle when a reload stopped servers with streams).
  void Adopt(AgentInputs in, ResourcePlan p, int64_t first_serve_ms, const char* reason) {
    inputs_ = std::move(in);
    for (const std::string& n : inputs_.notes) spdlog::info("event=config_note note={}", Value(n));
    for (const std::string& n : p.notes) spdlog::info("event=plan_note note={}", Value(n));
    AdoptHealth();
    health_->ApplyTo(&p);
    plan_ = std::move(p);
    decorator_ = opts_.decorator ? opts_.decorator(inputs_) : nullptr;
    if (memory_) memory_->Update(inputs_, plan_);
    for (const auto& o : opts_.observers) o->PlanChanged(inputs_, plan_);
    slots_.clear();
    for (const PlannedResource& r : plan_.resources) {
      slots_.push_back(Slot{r, nullptr, 0, false});
      spdlog::info("event=planned resource={} devices={} replicas={} socket={}", r.name,
                   r.devices.size(), r.replicas, r.socket_name);
    }
    lifecycle_.registration().Reset(slots_.size(), first_serve_ms, reason);
    if (slots_.empty()) {
      spdlog::warn("event=no_resources inventory={} reason={}", Value(inputs_.inventory.source),
                   Value("the plan advertises nothing; serving no device plugin until a reload"));
    }
  }

  // A health tracker for the new inputs, carrying over what the old one knew.
  void AdoptHealth() {
    auto tracker = std::make_unique<HealthTracker>(
        inputs_.inventory, HealthOptionsFromSettings(inputs_.config.gpushare));
    if (health_) {
      const int carried = tracker->CarryOver(*health_);
      if (carried > 0) spdlog::info("event=health_carried_over unhealthy_units={}", carried);
    }
    health_ = std::move(tracker);
  }

  void StartFeed() {
    feed_.reset();
    if (!opts_.health) return;
    if (!inputs_.config.gpushare.health_checks_enabled) {
      spdlog::info("event=health_checks_disabled");
      return;
    }
    auto f = opts_.health(inputs_, [this](const HealthEvent& ev) { PostHealth(ev); });
    if (!f.ok()) {
      spdlog::error("event=health_feed_failed error={}", Value(f.status().message()));
      return;
    }
    feed_ = std::move(f).value();
  }

  // Stops every server (Registers in flight are cancelled); returns whether any had streams.
  bool StopAll() {
    bool had_streams = false;
    for (Slot& s : slots_) {
      if (!s.server) continue;
      had_streams = had_streams || s.server->open_streams() > 0;
      s.server->Stop();  // removes our socket
      s.server.reset();
    }
    return had_streams;
  }

  // ---- the loop ---------------------------------------------------------------------------
  // One pass: posted events, due recoveries, what changed on disk, due lifecycle steps.
  // Returns true (with the reason) when the agent should stop.
  bool Pass(std::string* stop_reason) {
    if (DrainPosted(stop_reason)) return true;
    const int64_t now = clock_->NowMs();
    for (const auto& o : opts_.observers) o->LoopTurned(now);
    ApplyHealth(health_->Advance(now));
    Reconcile(now);
    return DrainPosted(stop_reason);
  }

  // Sleeps until the lifecycle's next wake-up, a signal, a directory event or a posted event.
  void Wait() {
    const int64_t now = clock_->NowMs();
    const int timeout =
        clock_->PollTimeoutMs(lifecycle_.NextWakeMs(now, health_->NextRecoveryMs()));
    pollfd fds[3];
    int n = 0;
    if (signal_fd_) fds[n++] = {signal_fd_.get(), POLLIN, 0};
    if (inotify_fd_) fds[n++] = {inotify_fd_.get(), POLLIN, 0};
    fds[n++] = {wake_fd_.get(), POLLIN, 0};
    if (::poll(fds, n, timeout) < 0 && errno != EINTR) {
      // Only a broken descriptor set or no memory: pause instead of spinning (never seen).
      spdlog::error("event=poll_failed error={}", Value(std::strerror(errno)));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ReadSignals();
    ReadInotify();
    uint64_t v;
    while (::read(wake_fd_.get(), &v, sizeof(v)) > 0) {
    }
  }

  void Wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd_.get(), &one, sizeof(one));
  }

  // ---- events -----------------------------------------------------------------------------
  void PostHealth(const HealthEvent& ev) GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      posted_.health_events.push_back(ev);
    }
    Wake();
  }

  void PostStreamEnd(uint64_t generation) GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      posted_.ended_generations.push_back(generation);
    }
    Wake();
  }

  void PostOutcome(RegisterOutcome outcome) GPUSHARE_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      posted_.register_outcomes.push_back(std::move(outcome));
    }
    Wake();
  }

  Posted TakePosted() GPUSHARE_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    Posted taken = std::move(posted_);
    posted_ = Posted{};
    posted_.stop = taken.stop;
    posted_.stop_reason = taken.stop_reason;
    return taken;
  }

  // Applies posted events. Returns true (with the reason) when the agent should stop.
  bool DrainPosted(std::string* stop_reason) {
    Posted p = TakePosted();
    if (p.stop) {
      *stop_reason = p.stop_reason;
      return true;
    }
    const int64_t now = clock_->NowMs();
    for (const RegisterOutcome& o : p.register_outcomes) OnRegisterOutcome(o, now);
    for (uint64_t g : p.ended_generations) OnStreamEnd(g, now);
    for (HealthEvent& ev : p.health_events) OnHealthEvent(ev, now);
    if (p.reload) Reload();
    return false;
  }

  void OnRegisterOutcome(const RegisterOutcome& o, int64_t now) {
    deviceplugin::RegistrationLifecycle& reg = lifecycle_.registration();
    const size_t i = SlotOf(o.generation);
    if (i == slots_.size() || !reg.RegisterDone(i, o.attempt, o.status.ok(), now)) return;  // stale
    if (o.status.ok()) {
      for (const auto& obs : opts_.observers) obs->Registered(slots_[i].resource.name);
    }
    if (o.status.ok()) return;
    spdlog::warn("event=register_failed resource={} attempt={} retry_ms={} error={}",
                 slots_[i].resource.name, reg.failures(i), reg.backoff_ms(i),
                 Value(o.status.message()));
  }

  void OnStreamEnd(uint64_t generation, int64_t now) {
    deviceplugin::RegistrationLifecycle& reg = lifecycle_.registration();
    const size_t i = SlotOf(generation);
    if (i == slots_.size() || !reg.serving(i) || reg.reserve_pending(i)) return;
    spdlog::warn("event=stream_ended resource={} action=reregister", slots_[i].resource.name);
    reg.StreamEnded(i, now);
  }

  void OnHealthEvent(HealthEvent& ev, int64_t now) {
    ev.time_ms = now;  // the tracker's clock is ours
    for (const auto& o : opts_.observers) o->HealthEventSeen(ev);
    std::string ignored;
    auto t = health_->OnEvent(ev, &ignored);
    if (t.empty()) {
      spdlog::info("event=health_event_ignored uuid={} xid={} reason={}",
                   Value(ev.uuid.empty() ? "*" : ev.uuid), ev.xid,
                   Value(ignored.empty() ? "no change" : ignored));
    }
    ApplyHealth(t);
  }

  void ReadSignals() {
    while (const int sig = ReadSignal(signal_fd_)) {
      if (sig == SIGHUP) {
        spdlog::info("event=signal signal=SIGHUP action=reload");
        RequestReload();
        continue;
      }
      const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
      spdlog::info("event=signal signal={} action=stop", name);
      RequestStop(name);
    }
  }

  // Sets the inotify watches that are missing; a failure is retried (PluginLifecycle).
  void AddWatches(int64_t now) {
    const uint32_t mask =
        IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
    if (watch_plugin_ < 0)
      watch_plugin_ = ::inotify_add_watch(inotify_fd_.get(), opts_.plugin_dir.c_str(), mask);
    const bool separate = Canonical(DirOf(kubelet_socket_)) != Canonical(opts_.plugin_dir);
    if (separate && watch_kubelet_ < 0) {
      watch_kubelet_ = ::inotify_add_watch(inotify_fd_.get(), DirOf(kubelet_socket_).c_str(), mask);
    }
    if (watch_plugin_ >= 0 && (!separate || watch_kubelet_ >= 0)) {
      if (lifecycle_.WatchSet()) KubeletRestarted(now, "plugin_dir_recreated");
      return;
    }
    lifecycle_.WatchLost(now);
    spdlog::warn("event=watch_failed dir={} error={} retry_ms={}", opts_.plugin_dir,
                 Value(std::strerror(errno)), deviceplugin::PluginLifecycle::kWatchRetryMs);
  }

  void ReadInotify() {
    if (!inotify_fd_) return;
    alignas(inotify_event) char buf[16 * 1024];
    const int64_t now = clock_->NowMs();
    for (;;) {
      ssize_t len = ::read(inotify_fd_.get(), buf, sizeof(buf));
      if (len <= 0) break;
      for (char* p = buf; p < buf + len;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        OnInotify(*ev, now);
      }
    }
  }

  void OnInotify(const inotify_event& ev, int64_t now) {
    lifecycle_.FilesChanged();
    if (ev.mask & IN_Q_OVERFLOW) {
      KubeletRestarted(now, "inotify_overflow");  // events were lost: assume the worst
      return;
    }
    if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
      if (ev.wd == watch_plugin_) watch_plugin_ = -1;
      if (ev.wd == watch_kubelet_) watch_kubelet_ = -1;
      spdlog::warn("event=watched_dir_gone dir={} retry_ms={}", opts_.plugin_dir,
                   deviceplugin::PluginLifecycle::kWatchRetryMs);
      lifecycle_.WatchLost(now);
      return;
    }
    const bool in_kubelet_dir =
        (watch_kubelet_ >= 0) ? ev.wd == watch_kubelet_ : ev.wd == watch_plugin_;
    const std::string name = ev.len ? std::string(ev.name) : std::string();
    if ((ev.mask & (IN_CREATE | IN_MOVED_TO)) && in_kubelet_dir &&
        name == BaseOf(kubelet_socket_)) {
      KubeletRestarted(now, "kubelet_socket_created");
    }
    // A deletion of one of our sockets only asks for a check of the files: CheckFiles compares the
    // file with the inode our server created, so our own unlinks (stopping a server, removing a
    // stale socket) are never mistaken for a loss.
  }

  void KubeletRestarted(int64_t now, const char* why) {
    spdlog::info("event=kubelet_restart_detected reason={} socket={}", why, kubelet_socket_);
    kubelet_id_ = IdOf(kubelet_socket_);  // the fallback check must not report it again
    for (const auto& o : opts_.observers) o->KubeletRestarted();
    lifecycle_.registration().KubeletStarted(now, why);
  }

  size_t SlotOf(uint64_t generation) const {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].server && slots_[i].generation == generation) return i;
    }
    return slots_.size();
  }

  // ---- lifecycle --------------------------------------------------------------------------
  // Reports what changed on disk, then carries out every step the lifecycle says is due.
  void Reconcile(int64_t now) {
    if (lifecycle_.WatchRetryDue(now)) {
      std::error_code ec;
      std::filesystem::create_directories(opts_.plugin_dir, ec);
      AddWatches(now);
    }
    if (lifecycle_.CheckDue(now)) {
      lifecycle_.Checked(now);
      CheckFiles(now);
    }
    for (int round = 0; round < 8;
         ++round) {  // a stop is followed by a serve, a serve by a Register
      std::vector<deviceplugin::LifecycleAction> actions =
          lifecycle_.registration().Poll(clock_->NowMs());
      if (actions.empty()) break;
      for (const deviceplugin::LifecycleAction& a : actions) Execute(a);
    }
  }

  // By state, not only by events: our sockets gone or replaced, kubelet.sock replaced. Runs when
  // inotify reported a change, and as the fallback every PluginLifecycle::CheckIntervalMs().
  void CheckFiles(int64_t now) {
    FileId k = IdOf(kubelet_socket_);
    if (!(k == kubelet_id_)) {
      kubelet_id_ = k;
      if (k.ino != 0) KubeletRestarted(now, "kubelet_socket_replaced");
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (!s.server || s.loss_reported ||
          InodeOf(s.server->socket_path()) == s.server->socket_inode())
        continue;
      s.loss_reported = true;
      spdlog::info("event=socket_lost resource={} socket={} action=serve_again", s.resource.name,
                   s.server->socket_path());
      lifecycle_.registration().SocketLost(i, now);
    }
  }

  void Execute(const deviceplugin::LifecycleAction& a) {
    switch (a.step) {
      case deviceplugin::LifecycleStep::kCancelRegister:
        return CancelRegister(a);
      case deviceplugin::LifecycleStep::kStop:
        return StopSlot(a.slot);
      case deviceplugin::LifecycleStep::kServe:
        return ServeSlot(a);
      case deviceplugin::LifecycleStep::kRegister:
        return StartRegister(a);
    }
  }

  void CancelRegister(const deviceplugin::LifecycleAction& a) {
    Slot& s = slots_[a.slot];
    if (!s.server) return;
    spdlog::info("event=register_cancelled resource={} attempt={}", s.resource.name, a.attempt);
    s.server->CancelRegister();
  }

  void StopSlot(size_t slot) {
    Slot& s = slots_[slot];
    const bool had_streams = s.server && s.server->open_streams() > 0;
    if (s.server) {
      // Stop first, then serve and register: a late end of an old stream must not hit the new
      // registration (kubelet issues #121994/#127803).
      s.server->Stop();
      s.server.reset();
    }
    lifecycle_.registration().Stopped(slot, had_streams, clock_->NowMs());
  }

  void ServeSlot(const deviceplugin::LifecycleAction& a) {
    Slot& s = slots_[a.slot];
    Status st = Serve(s, a.reason);
    deviceplugin::RegistrationLifecycle& reg = lifecycle_.registration();
    reg.Served(a.slot, st.ok(), clock_->NowMs());
    if (st.ok()) return;
    spdlog::warn("event=serve_failed resource={} attempt={} retry_ms={} error={}", s.resource.name,
                 reg.failures(a.slot), reg.backoff_ms(a.slot), Value(st.message()));
  }

  void StartRegister(const deviceplugin::LifecycleAction& a) {
    Slot& s = slots_[a.slot];
    if (!s.server) {  // cannot happen: the lifecycle registers only what serves
      lifecycle_.registration().RegisterDone(a.slot, a.attempt, false, clock_->NowMs());
      return;
    }
    const uint64_t generation = s.generation, attempt = a.attempt;
    s.server->StartRegister([this, generation, attempt](const Status& st) {
      PostOutcome({generation, attempt, st});
    });
  }

  Status Serve(Slot& s, const std::string& reason) {
    if (s.server) {
      s.server->Stop();
      s.server.reset();
    }
    deviceplugin::DevicePluginServerOptions o = ServerOptions(s.resource);
    o.generation = s.generation = next_generation_++;
    spdlog::info("event=serve resource={} reason={}", s.resource.name, reason);
    GPUSHARE_ASSIGN_OR_RETURN(s.server, DevicePluginServer::Start(std::move(o)));
    s.loss_reported = false;
    return Status::Ok();
  }

  deviceplugin::DevicePluginServerOptions ServerOptions(const PlannedResource& r) {
    deviceplugin::DevicePluginServerOptions o;
    o.plugin_dir = opts_.plugin_dir;
    o.kubelet_socket = kubelet_socket_;
    o.resource = r;
    o.plugin = inputs_.config.plugin;
    o.extra_env = deviceplugin::ExtraEnv::FromConfig(inputs_.config);
    o.allocation_policy = inputs_.config.gpushare.allocation_policy;
    // Units (or milli) of one GPU only, steered by the memory-share mode when it runs.
    if (r.is_share_resource())
      o.preferred = memory_ ? memory_->Preferred() : MemoryUnitsBestFit();
    else if (opts_.pending_asks)
      o.preferred = GpuChoiceChooser(inputs_.inventory, o.allocation_policy, opts_.pending_asks);
    o.on_stream_end = [this](uint64_t g) { PostStreamEnd(g); };
    // Every observer of Allocate, for every resource: the one fan-out.
    o.steps = AllocationSteps(
        r.is_share_resource() ? (memory_ ? memory_->Decorator() : MemoryUnitsDecorator()) : nullptr,
        decorator_);
    o.observer = allocate_observer_;
    return o;
  }

  // ---- health -----------------------------------------------------------------------------
  void ApplyHealth(const std::vector<HealthTransition>& transitions) {
    if (transitions.empty()) return;
    for (const HealthTransition& t : transitions) {
      spdlog::info("event=health_transition uuid={} gpu={} mig={} state={} reason={}", t.uuid,
                   t.gpu_index, t.mig_index, t.healthy ? "Healthy" : "Unhealthy", Value(t.reason));
    }
    health_->ApplyTo(&plan_);
    if (memory_) memory_->Update(inputs_, plan_);
    for (const auto& o : opts_.observers) o->PlanChanged(inputs_, plan_);
    for (Slot& s : slots_) PushHealth(s);
  }

  void PushHealth(Slot& s) {
    const PlannedResource* r = plan_.Find(s.resource.name);
    if (r == nullptr) return;
    std::map<std::string, bool> by_id;
    int healthy = 0;
    for (const PlannedDevice& d : r->devices) {
      by_id[d.id] = d.healthy;
      healthy += d.healthy;
    }
    s.resource = *r;
    if (s.server && s.server->SetHealth(by_id)) {
      spdlog::info("event=health_pushed resource={} healthy={} devices={}", r->name, healthy,
                   r->devices.size());
    }
  }

  // ---- reload -----------------------------------------------------------------------------
  void Reload() {
    Result<AgentInputs> in = opts_.load();
    Result<ResourcePlan> p = in.ok() ? BuildResourcePlan(in->inventory, in->config) : in.status();
    if (!p.ok()) return RejectReload(p.status());
    Status m = EnsureMemoryMode(*in, *p);
    if (!m.ok())
      spdlog::error("event=memory_shares_failed error={} action=serve_unsteered",
                    Value(m.message()));
    if (opts_.on_load) opts_.on_load(true);
    spdlog::info("event=reload_accepted resources={}", p->resources.size());
    // Stop before serving the new plan; with streams open, settle first (see StopSlot).
    const bool had_streams = StopAll();
    std::vector<std::string> old_gpus = GpuUuids(inputs_.inventory);
    Adopt(std::move(in).value(), std::move(p).value(),
          clock_->NowMs() + (had_streams ? opts_.settle.count() : 0), "reload");
    // The feed keeps running across reloads of the same GPUs (an events file is not replayed,
    // NVML registrations stay); a different set of GPUs gets a new feed.
    if (GpuUuids(inputs_.inventory) != old_gpus || !feed_) StartFeed();
  }

  void RejectReload(const Status& problem) {
    for (const std::string& line : SplitLines(problem.message())) {
      spdlog::error("event=reload_rejected problem={}", Value(line));
    }
    spdlog::warn("event=reload_kept_old_config resources={}", slots_.size());
    if (opts_.on_load) opts_.on_load(false);
  }

  static std::vector<std::string> GpuUuids(const Inventory& inv) {
    std::vector<std::string> out;
    for (const Gpu& g : inv.gpus) out.push_back(g.uuid);
    std::sort(out.begin(), out.end());
    return out;
  }

  // ---- state ------------------------------------------------------------------------------
  // Everything below mu_'s block belongs to the thread that calls Init and Run.
  const AgentOptions opts_;
  const std::shared_ptr<Clock> clock_;
  std::string kubelet_socket_;
  AgentInputs inputs_;
  ResourcePlan plan_;  // with current health applied
  std::unique_ptr<HealthTracker> health_;
  std::unique_ptr<HealthFeed> feed_;
  deviceplugin::AllocationDecorator decorator_;
  // opts_.allocate_observers as one; null without any.
  const std::shared_ptr<deviceplugin::AllocateObserver> allocate_observer_;
  std::unique_ptr<MemoryShareMode> memory_;
  std::vector<Slot> slots_;  // same index as the lifecycle's slots
  deviceplugin::PluginLifecycle lifecycle_;
  uint64_t next_generation_ = 1;
  FileId kubelet_id_;  // the kubelet.sock last seen

  UniqueFd signal_fd_;
  UniqueFd inotify_fd_;
  UniqueFd wake_fd_;  // written by Wake() from any thread
  int watch_plugin_ = -1;
  int watch_kubelet_ =
      -1;  // -1 when kubelet.sock lives in the plugin dir (watch_plugin_ covers it)
  std::shared_ptr<void> on_advance_;  // a simulated clock's advances wake the loop

  Mutex mu_;
  Posted posted_ GPUSHARE_GUARDED_BY(mu_);
};

Agent::Agent(AgentOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Agent::~Agent() = default;

Status Agent::Init() {
  return impl_->Init();
}
int Agent::Run() {
  return impl_->Run();
}
const ResourcePlan& Agent::plan() const {
  return impl_->plan();
}
void Agent::RequestStop() {
  impl_->RequestStop("requested");
}
void Agent::RequestReload() {
  impl_->RequestReload();
}

}  // namespace gpushare::node
