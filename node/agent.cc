#include "node/agent.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "base/logfmt.h"
#include "base/strings.h"
#include "deviceplugin/registration_lifecycle.h"
#include "deviceplugin/server.h"
#include "node/memshare_service.h"

namespace gpushare::node {
namespace {

using deviceplugin::DevicePluginServer;
using logfmt::Value;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

// How often the loop checks the sockets by itself: the fallback when an inotify event is lost.
constexpr int64_t kCheckIntervalMs = 500;

std::string DirOf(const std::string& path) {
  std::filesystem::path p(path);
  std::string d = p.parent_path().string();
  return d.empty() ? "." : d;
}

std::string BaseOf(const std::string& path) { return std::filesystem::path(path).filename().string(); }

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

class Agent::Impl {
 public:
  explicit Impl(AgentOptions o) : opts(std::move(o)), lifecycle(TimingOf(opts)) {
    kubelet_socket = opts.kubelet_socket.empty() ? opts.plugin_dir + "/" + deviceplugin::kKubeletSocketName
                                                 : opts.kubelet_socket;
  }

  ~Impl() {
    StopAll();
    feed.reset();
    for (int fd : {signal_fd, inotify_fd, wake_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  Status Init() {
    if (!opts.load) return Status::InvalidArgument("agent: no input loader");
    if (opts.handle_signals) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGTERM);
      sigaddset(&set, SIGINT);
      sigaddset(&set, SIGHUP);
      if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return Status::Internal("pthread_sigmask failed");
      signal_fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
      if (signal_fd < 0) return Status::Internal(std::string("signalfd: ") + std::strerror(errno));
    }
    wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    inotify_fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (wake_fd < 0 || inotify_fd < 0) return Status::Internal(std::string("eventfd/inotify: ") + std::strerror(errno));

    Result<AgentInputs> in = opts.load();
    Status st = in.ok() ? Status::Ok() : in.status();
    Result<ResourcePlan> p = Status::Internal("not built");
    if (st.ok()) {
      p = BuildResourcePlan(in->inventory, in->config);
      if (!p.ok()) st = p.status();
    }
    if (st.ok()) st = EnsureMemoryMode(*in, *p);
    if (opts.on_load) opts.on_load(st.ok());
    if (!st.ok()) return st;
    Adopt(std::move(in).value(), std::move(p).value(), NowMs(), "start");
    return Status::Ok();
  }

  int Run() {
    std::error_code ec;
    std::filesystem::create_directories(opts.plugin_dir, ec);
    if (ec) {
      spdlog::warn("event=plugin_dir_missing dir={} error={}", opts.plugin_dir, Value(ec.message()));
    }
    AddWatches();
    kubelet_id = IdOf(kubelet_socket);
    StartFeed();
    spdlog::info("event=agent_started plugin_dir={} kubelet_socket={} resources={}", opts.plugin_dir,
                 kubelet_socket, slots.size());
    for (;;) {
      if (DrainPosted()) break;
      int64_t now = NowMs();
      ApplyHealth(health->Advance(now));
      Reconcile(now);
      if (DrainPosted()) break;
      const int64_t wake_now = NowMs();
      int timeout = static_cast<int>(std::clamp<int64_t>(NextWakeMs(wake_now) - wake_now, 0, kCheckIntervalMs));
      pollfd fds[3];
      int n = 0;
      if (signal_fd >= 0) fds[n++] = {signal_fd, POLLIN, 0};
      fds[n++] = {inotify_fd, POLLIN, 0};
      fds[n++] = {wake_fd, POLLIN, 0};
      int rc = ::poll(fds, n, timeout);
      if (rc < 0 && errno != EINTR) {
        spdlog::error("event=poll_failed error={}", Value(std::strerror(errno)));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ReadSignals();
      ReadInotify();
      uint64_t v;
      while (::read(wake_fd, &v, sizeof(v)) > 0) {
      }
    }
    spdlog::info("event=shutdown reason={} resources={}", Value(stop_reason), slots.size());
    StopAll();
    feed.reset();
    memory.reset();
    spdlog::info("event=exited status=0");
    return 0;
  }

  void Post(const std::function<void()>& f) {
    {
      std::lock_guard<std::mutex> lock(mu);
      f();
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd, &one, sizeof(one));
  }

  // ---- state --------------------------------------------------------------------------
  AgentOptions opts;
  std::string kubelet_socket;
  AgentInputs inputs;
  ResourcePlan plan;  // with current health applied
  std::unique_ptr<HealthTracker> health;
  std::unique_ptr<HealthFeed> feed;
  deviceplugin::AllocationDecorator decorator;
  std::unique_ptr<MemoryShareMode> memory;
  std::vector<Slot> slots;
  deviceplugin::RegistrationLifecycle lifecycle;
  uint64_t next_generation = 1;
  FileId kubelet_id;  // the kubelet.sock last seen

  int signal_fd = -1;
  int inotify_fd = -1;
  int wake_fd = -1;
  int watch_plugin = -1;
  int watch_kubelet = -1;  // -1 when kubelet.sock lives in the plugin dir (watch_plugin covers it)
  int64_t watch_retry_ms = -1;
  std::string stop_reason = "requested";

  std::mutex mu;  // guards the posted events below
  std::vector<uint64_t> ended_generations;
  std::vector<RegisterOutcome> register_outcomes;
  std::vector<HealthEvent> health_events;
  bool stop_requested = false;
  bool reload_requested = false;

 private:
  // Builds the memory-share mode the first time a plan needs it.
  Status EnsureMemoryMode(const AgentInputs& in, const ResourcePlan& p) {
    const bool wanted = std::any_of(p.resources.begin(), p.resources.end(),
                                    [](const PlannedResource& r) { return r.is_memory_shares(); });
    if (!wanted || memory) return Status::Ok();
    if (!opts.memory_shares) {
      spdlog::warn("event=memory_shares_unsteered reason={}",
                   Value("no memory-share mode configured: GetPreferredAllocation picks the best-fit GPU"));
      return Status::Ok();
    }
    Result<std::unique_ptr<MemoryShareMode>> m = opts.memory_shares(in);
    if (!m.ok()) return m.status();
    memory = std::move(m).value();
    return Status::Ok();
  }

  // Takes new inputs and plan: health tracker, decorator, one slot per resource, each to be
  // served at `first_serve_ms` (after a settle when a reload stopped servers with streams).
  void Adopt(AgentInputs in, ResourcePlan p, int64_t first_serve_ms, const char* reason) {
    inputs = std::move(in);
    for (const std::string& n : inputs.notes) spdlog::info("event=config_note note={}", Value(n));
    for (const std::string& n : p.notes) spdlog::info("event=plan_note note={}", Value(n));
    auto tracker = std::make_unique<HealthTracker>(inputs.inventory, HealthOptionsFromSettings(inputs.config.gpushare));
    if (health) {
      const int carried = tracker->CarryOver(*health);
      if (carried > 0) spdlog::info("event=health_carried_over unhealthy_units={}", carried);
    }
    health = std::move(tracker);
    health->ApplyTo(&p);
    plan = std::move(p);
    decorator = opts.decorator ? opts.decorator(inputs) : nullptr;
    if (memory) memory->Update(inputs, plan);
    slots.clear();
    for (const PlannedResource& r : plan.resources) {
      Slot s;
      s.resource = r;
      slots.push_back(std::move(s));
      spdlog::info("event=planned resource={} devices={} replicas={} socket={}", r.name, r.devices.size(),
                   r.replicas, r.socket_name);
    }
    lifecycle.Reset(slots.size(), first_serve_ms, reason);
    if (slots.empty()) {
      spdlog::warn("event=no_resources inventory={} reason={}", Value(inputs.inventory.source),
                   Value("the plan advertises nothing; serving no device plugin until a reload"));
    }
  }

  void StartFeed() {
    feed.reset();
    if (!opts.health) return;
    if (!inputs.config.gpushare.health_checks_enabled) {
      spdlog::info("event=health_checks_disabled");
      return;
    }
    auto f = opts.health(inputs, [this](const HealthEvent& ev) { Post([&] { health_events.push_back(ev); }); });
    if (!f.ok()) {
      spdlog::error("event=health_feed_failed error={}", Value(f.status().message()));
      return;
    }
    feed = std::move(f).value();
  }

  // Stops every server (Registers in flight are cancelled); returns whether any had streams.
  bool StopAll() {
    bool had_streams = false;
    for (Slot& s : slots) {
      if (!s.server) continue;
      had_streams = had_streams || s.server->open_streams() > 0;
      s.server->Stop();  // removes our socket
      s.server.reset();
    }
    return had_streams;
  }

  // ---- events ---------------------------------------------------------------------------
  // Applies posted events. Returns true when the agent should stop.
  bool DrainPosted() {
    std::vector<uint64_t> ended;
    std::vector<RegisterOutcome> outcomes;
    std::vector<HealthEvent> events;
    bool stop, reload;
    {
      std::lock_guard<std::mutex> lock(mu);
      ended.swap(ended_generations);
      outcomes.swap(register_outcomes);
      events.swap(health_events);
      stop = stop_requested;
      reload = reload_requested;
      reload_requested = false;
    }
    if (stop) return true;
    int64_t now = NowMs();
    for (const RegisterOutcome& o : outcomes) {
      const size_t i = SlotOf(o.generation);
      if (i == slots.size() || !lifecycle.RegisterDone(i, o.attempt, o.status.ok(), now)) continue;  // stale
      if (!o.status.ok()) {
        spdlog::warn("event=register_failed resource={} attempt={} retry_ms={} error={}", slots[i].resource.name,
                     lifecycle.failures(i), lifecycle.backoff_ms(i), Value(o.status.message()));
      }
    }
    for (uint64_t g : ended) {
      const size_t i = SlotOf(g);
      if (i == slots.size() || !lifecycle.serving(i) || lifecycle.reserve_pending(i)) continue;
      spdlog::warn("event=stream_ended resource={} action=reregister", slots[i].resource.name);
      lifecycle.StreamEnded(i, now);
    }
    for (HealthEvent& ev : events) {
      ev.time_ms = now;  // the tracker's clock is ours
      std::string ignored;
      auto t = health->OnEvent(ev, &ignored);
      if (t.empty()) {
        spdlog::info("event=health_event_ignored uuid={} xid={} reason={}", Value(ev.uuid.empty() ? "*" : ev.uuid),
                     ev.xid, Value(ignored.empty() ? "no change" : ignored));
      }
      ApplyHealth(t);
    }
    if (reload) Reload();
    return false;
  }

  void ReadSignals() {
    if (signal_fd < 0) return;
    signalfd_siginfo si;
    while (::read(signal_fd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      if (si.ssi_signo == SIGHUP) {
        spdlog::info("event=signal signal=SIGHUP action=reload");
        std::lock_guard<std::mutex> lock(mu);
        reload_requested = true;
      } else {
        spdlog::info("event=signal signal={} action=stop", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        std::lock_guard<std::mutex> lock(mu);
        stop_requested = true;
        stop_reason = si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT";
      }
    }
  }

  void AddWatches() {
    const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
    if (watch_plugin < 0) watch_plugin = ::inotify_add_watch(inotify_fd, opts.plugin_dir.c_str(), mask);
    bool separate = Canonical(DirOf(kubelet_socket)) != Canonical(opts.plugin_dir);
    if (separate && watch_kubelet < 0) {
      watch_kubelet = ::inotify_add_watch(inotify_fd, DirOf(kubelet_socket).c_str(), mask);
    }
    bool ok = watch_plugin >= 0 && (!separate || watch_kubelet >= 0);
    watch_retry_ms = ok ? -1 : NowMs() + 500;
    if (!ok) spdlog::warn("event=watch_failed dir={} error={} retry_ms=500", opts.plugin_dir, Value(std::strerror(errno)));
  }

  void ReadInotify() {
    alignas(inotify_event) char buf[16 * 1024];
    int64_t now = NowMs();
    for (;;) {
      ssize_t len = ::read(inotify_fd, buf, sizeof(buf));
      if (len <= 0) break;
      for (char* p = buf; p < buf + len;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        std::string name = ev->len ? std::string(ev->name) : std::string();
        if (ev->mask & IN_Q_OVERFLOW) {
          // Events were lost: assume the worst, kubelet restarted.
          KubeletRestarted(now, "inotify_overflow");
          continue;
        }
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
          if (ev->wd == watch_plugin) watch_plugin = -1;
          if (ev->wd == watch_kubelet) watch_kubelet = -1;
          spdlog::warn("event=watched_dir_gone dir={} retry_ms=500", opts.plugin_dir);
          watch_retry_ms = now + 500;
          continue;
        }
        bool in_kubelet_dir = (watch_kubelet >= 0) ? ev->wd == watch_kubelet : ev->wd == watch_plugin;
        if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && in_kubelet_dir && name == BaseOf(kubelet_socket)) {
          KubeletRestarted(now, "kubelet_socket_created");
        }
        // A deletion of one of our sockets only wakes the loop: CheckFiles compares the file
        // with the inode our server created, so our own unlinks (stopping a server, removing
        // a stale socket) are never mistaken for a loss.
      }
    }
  }

  void KubeletRestarted(int64_t now, const char* why) {
    spdlog::info("event=kubelet_restart_detected reason={} socket={}", why, kubelet_socket);
    kubelet_id = IdOf(kubelet_socket);  // the fallback check must not report it again
    lifecycle.KubeletStarted(now, why);
  }

  size_t SlotOf(uint64_t generation) const {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].server && slots[i].generation == generation) return i;
    }
    return slots.size();
  }

  // ---- lifecycle ------------------------------------------------------------------------
  // Reports what changed on disk, then carries out every step the lifecycle says is due.
  void Reconcile(int64_t now) {
    if (watch_retry_ms >= 0 && now >= watch_retry_ms) {
      std::error_code ec;
      std::filesystem::create_directories(opts.plugin_dir, ec);
      AddWatches();
      if (watch_retry_ms < 0) KubeletRestarted(now, "plugin_dir_recreated");
    }
    CheckFiles(now);
    for (int round = 0; round < 8; ++round) {  // a stop is followed by a serve, a serve by a Register
      std::vector<deviceplugin::LifecycleAction> actions = lifecycle.Poll(NowMs());
      if (actions.empty()) break;
      for (const deviceplugin::LifecycleAction& a : actions) Execute(a);
    }
  }

  // By state, not only by events: our sockets gone or replaced, kubelet.sock replaced. Inotify
  // reports both at once; this is the fallback when an event is lost.
  void CheckFiles(int64_t now) {
    FileId k = IdOf(kubelet_socket);
    if (!(k == kubelet_id)) {
      kubelet_id = k;
      if (k.ino != 0) KubeletRestarted(now, "kubelet_socket_replaced");
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (!s.server || s.loss_reported || InodeOf(s.server->socket_path()) == s.server->socket_inode()) continue;
      s.loss_reported = true;
      spdlog::info("event=socket_lost resource={} socket={} action=serve_again", s.resource.name,
                   s.server->socket_path());
      lifecycle.SocketLost(i, now);
    }
  }

  void Execute(const deviceplugin::LifecycleAction& a) {
    Slot& s = slots[a.slot];
    switch (a.step) {
      case deviceplugin::LifecycleStep::kCancelRegister:
        if (s.server) {
          spdlog::info("event=register_cancelled resource={} attempt={}", s.resource.name, a.attempt);
          s.server->CancelRegister();
        }
        return;
      case deviceplugin::LifecycleStep::kStop: {
        const bool had_streams = s.server && s.server->open_streams() > 0;
        if (s.server) {
          // Stop first, then serve and register: a late end of an old stream must not hit the
          // new registration (kubelet issues #121994/#127803).
          s.server->Stop();
          s.server.reset();
        }
        lifecycle.Stopped(a.slot, had_streams, NowMs());
        return;
      }
      case deviceplugin::LifecycleStep::kServe: {
        Status st = Serve(s, a.reason);
        lifecycle.Served(a.slot, st.ok(), NowMs());
        if (!st.ok()) {
          spdlog::warn("event=serve_failed resource={} attempt={} retry_ms={} error={}", s.resource.name,
                       lifecycle.failures(a.slot), lifecycle.backoff_ms(a.slot), Value(st.message()));
        }
        return;
      }
      case deviceplugin::LifecycleStep::kRegister: {
        if (!s.server) {  // cannot happen: the lifecycle registers only what serves
          lifecycle.RegisterDone(a.slot, a.attempt, false, NowMs());
          return;
        }
        const uint64_t generation = s.generation, attempt = a.attempt;
        s.server->StartRegister([this, generation, attempt](const Status& st) {
          Post([&] { register_outcomes.push_back({generation, attempt, st}); });
        });
        return;
      }
    }
  }

  Status Serve(Slot& s, const std::string& reason) {
    if (s.server) {
      s.server->Stop();
      s.server.reset();
    }
    deviceplugin::DevicePluginServerOptions o;
    o.plugin_dir = opts.plugin_dir;
    o.kubelet_socket = kubelet_socket;
    o.resource = s.resource;
    o.plugin = inputs.config.plugin;
    o.extra_env = deviceplugin::ExtraEnv::FromConfig(inputs.config);
    o.allocation_policy = inputs.config.gpushare.allocation_policy;
    o.decorator = decorator;
    if (s.resource.is_memory_shares()) {
      // Units of one GPU only, steered by the memory-share mode when it runs.
      o.preferred = memory ? memory->Preferred() : MemoryUnitsBestFit();
      o.decorator = [first = memory ? memory->Decorator() : MemoryUnitsDecorator(), then = decorator](
                        const deviceplugin::ResolvedRequest& r, deviceplugin::ContainerAllocation* a) -> Status {
        GPUSHARE_RETURN_IF_ERROR(first(r, a));
        return then ? then(r, a) : Status::Ok();
      };
    }
    o.generation = s.generation = next_generation++;
    o.on_stream_end = [this](uint64_t g) { Post([&] { ended_generations.push_back(g); }); };
    spdlog::info("event=serve resource={} reason={}", s.resource.name, reason);
    auto server = DevicePluginServer::Start(std::move(o));
    if (!server.ok()) return server.status();
    s.server = std::move(server).value();
    s.loss_reported = false;
    return Status::Ok();
  }

  int64_t NextWakeMs(int64_t now) const {
    int64_t next = std::min(now + kCheckIntervalMs, lifecycle.NextWakeMs(now));
    if (auto r = health->NextRecoveryMs()) next = std::min(next, *r);
    if (watch_retry_ms >= 0) next = std::min(next, watch_retry_ms);
    return next;
  }

  // ---- health ---------------------------------------------------------------------------
  void ApplyHealth(const std::vector<HealthTransition>& transitions) {
    if (transitions.empty()) return;
    for (const HealthTransition& t : transitions) {
      spdlog::info("event=health_transition uuid={} gpu={} mig={} state={} reason={}", t.uuid, t.gpu_index,
                   t.mig_index, t.healthy ? "Healthy" : "Unhealthy", Value(t.reason));
    }
    health->ApplyTo(&plan);
    if (memory) memory->Update(inputs, plan);
    for (Slot& s : slots) {
      const PlannedResource* r = plan.Find(s.resource.name);
      if (r == nullptr) continue;
      std::map<std::string, bool> by_id;
      int healthy = 0;
      for (const PlannedDevice& d : r->devices) {
        by_id[d.id] = d.healthy;
        healthy += d.healthy;
      }
      s.resource = *r;
      if (s.server && s.server->SetHealth(by_id)) {
        spdlog::info("event=health_pushed resource={} healthy={} devices={}", r->name, healthy, r->devices.size());
      }
    }
  }

  // ---- reload ---------------------------------------------------------------------------
  void Reload() {
    Result<AgentInputs> in = opts.load();
    Status problem = in.ok() ? Status::Ok() : in.status();
    Result<ResourcePlan> p = Status::Internal("not built");
    if (problem.ok()) {
      p = BuildResourcePlan(in->inventory, in->config);
      if (!p.ok()) problem = p.status();
    }
    if (problem.ok()) {
      Status m = EnsureMemoryMode(*in, *p);
      if (!m.ok()) spdlog::error("event=memory_shares_failed error={} action=serve_unsteered", Value(m.message()));
    }
    if (!problem.ok()) {
      for (const std::string& line : SplitLines(problem.message())) {
        spdlog::error("event=reload_rejected problem={}", Value(line));
      }
      spdlog::warn("event=reload_kept_old_config resources={}", slots.size());
      if (opts.on_load) opts.on_load(false);
      return;
    }
    if (opts.on_load) opts.on_load(true);
    spdlog::info("event=reload_accepted resources={}", p->resources.size());
    // Stop before serving the new plan; with streams open, settle first (see Execute).
    const bool had_streams = StopAll();
    std::vector<std::string> old_gpus = GpuUuids(inputs.inventory);
    Adopt(std::move(in).value(), std::move(p).value(), NowMs() + (had_streams ? opts.settle.count() : 0), "reload");
    // The feed keeps running across reloads of the same GPUs (an events file is not replayed,
    // NVML registrations stay); a different set of GPUs gets a new feed.
    if (GpuUuids(inputs.inventory) != old_gpus || !feed) StartFeed();
  }

  static std::vector<std::string> GpuUuids(const Inventory& inv) {
    std::vector<std::string> out;
    for (const Gpu& g : inv.gpus) out.push_back(g.uuid);
    std::sort(out.begin(), out.end());
    return out;
  }
};

Agent::Agent(AgentOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Agent::~Agent() = default;

Status Agent::Init() { return impl_->Init(); }
int Agent::Run() { return impl_->Run(); }
const ResourcePlan& Agent::plan() const { return impl_->plan; }

void Agent::RequestStop() {
  impl_->Post([this] { impl_->stop_requested = true; });
}

void Agent::RequestReload() {
  impl_->Post([this] { impl_->reload_requested = true; });
}

}  // namespace gpushare::node
