// Agent: the node agent's serving mode (gpushare-node without --print-resources).
//
// It turns (inventory, config) into a resource plan (core/resource_plan.h), serves one kubelet
// device plugin per planned resource (deviceplugin/server.h) and keeps them registered:
//   - plan -> servers -> Register with kubelet.sock. Registrations run concurrently and never
//     block the agent's thread (kubelet dials the plugin back inside Register, for up to 10 s
//     when the socket is gone); when to serve, serve again and register is decided by a pure
//     state machine (deviceplugin/registration_lifecycle.h) that the loop drives;
//   - kubelet restart: kubelet deletes every socket in the device plugin directory and creates
//     a new kubelet.sock. An inotify watch on the directory sees kubelet.sock being created and
//     our own sockets disappearing, at once (a check of both every 10 s is the safety net in
//     case an event is lost; without inotify the check runs every 1 s instead); a
//     ListAndWatch stream that ends is reported by the server. A Register in flight for a
//     socket that is gone is cancelled at once; the affected servers are stopped, served again
//     and re-registered (within tens of milliseconds; the promise is 2 s, docs/node-agent.md),
//     retrying with backoff while kubelet is not there;
//   - health: events from a HealthFeed go through core's HealthTracker; every transition is
//     logged and pushed to kubelet through ListAndWatch; quiet-period recoveries are timed here;
//   - memory shares: when the plan has a memory-share resource, a MemoryShareMode (built once by
//     AgentOptions::memory_shares) steers its GetPreferredAllocation, adds to its Allocate and
//     is told about every plan and health change (it publishes the node's GPU inventory);
//   - SIGHUP (or RequestReload, e.g. from the config watch of node/config_source.h) reloads
//     inventory and config; a bad new config keeps the old plan serving and logs
//     one line per problem; SIGTERM/SIGINT stop every server, remove our sockets and make Run
//     return 0. Signals arrive through a signalfd: no work happens in a signal handler.
// All lifecycle work runs on the thread that calls Run(); gRPC threads only post events
// (stream ends, Register outcomes). When to do what is decided by a pure state machine
// (deviceplugin/plugin_lifecycle.h: registrations, the directory watch, the fallback check) and
// core's HealthTracker (recoveries), both driven by the time of AgentOptions::clock; the loop
// carries out their steps and sleeps until their next wake-up or an event, nothing else.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "core/gpu_choice.h"
#include "core/health.h"
#include "core/inventory.h"
#include "core/node_config.h"
#include "core/resource_plan.h"
#include "core/status.h"
#include "deviceplugin/allocate_observer.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/preferred_allocation.h"

namespace gpushare::node {

// What the agent serves from. `notes` are logged once per load (not errors).
struct AgentInputs {
  Inventory inventory;
  NodeConfig config;
  std::vector<std::string> notes;
};

// Loads inventory and config (at start and on every SIGHUP). An error carries every problem,
// one per line; kInvalidArgument means the config or inventory file is invalid.
using InputLoader = std::function<Result<AgentInputs>()>;

// A running source of health events (NVML XID events, or the simulated backend's events
// file). It calls the sink from its own thread until destroyed.
class HealthFeed {
 public:
  virtual ~HealthFeed() = default;
};
using HealthSink = std::function<void(const HealthEvent&)>;
using HealthFeedFactory =
    std::function<Result<std::unique_ptr<HealthFeed>>(const AgentInputs& inputs, HealthSink sink)>;

// Builds the Allocate decorator for a config (the seam where the in-container library's
// environment and mounts are added); may return an empty function.
using DecoratorFactory =
    std::function<deviceplugin::AllocationDecorator(const AgentInputs& inputs)>;

// Memory shares (gpushare.memoryShares, node/memshare_service.h): what the agent needs from the
// part that talks to the API server and to kubelet's PodResources API.
class MemoryShareMode {
 public:
  virtual ~MemoryShareMode() = default;
  // The current inputs and plan (health applied), after every load, reload and health change.
  // Called on the agent thread; must not block.
  virtual void Update(const AgentInputs& inputs, const ResourcePlan& plan) = 0;
  // GetPreferredAllocation of the memory-share resource.
  virtual deviceplugin::PreferredChooser Preferred() = 0;
  // Allocate of the memory-share resource, run before the config's decorator.
  virtual deviceplugin::AllocationDecorator Decorator() = 0;
};
// GPU choices for the resources that are not memory shares (node/gpu_choice.h): the pods
// bound to this node that may be waiting for `size` devices of `resource`, with the GPUs each
// allows. Called on gRPC threads (GetPreferredAllocation); must be thread-safe and return within
// a couple of seconds.
class PendingAsks {
 public:
  virtual ~PendingAsks() = default;
  virtual std::vector<choice::PendingAsk> Asks(const std::string& resource, int size) = 0;
};

// Built the first time a plan has a memory-share resource. An error stops Init (and is
// logged on a reload, which then serves without memory mode).
using MemoryShareFactory =
    std::function<Result<std::unique_ptr<MemoryShareMode>>(const AgentInputs& inputs)>;

// Something that runs beside the agent on its own thread (the config watch, the collection of
// old library versions): started once Init succeeded, destroyed after Run returned.
class Companion {
 public:
  virtual ~Companion() = default;
};

// Told what the agent does: the plans it adopts (the allocation recorder's inputs), /metrics
// and /healthz, /readyz (node/metrics.h). Every call is made on the agent's thread; none may
// block. Allocate is followed through deviceplugin::AllocateObserver (AgentOptions::
// allocate_observers), on gRPC threads.
class AgentObserver {
 public:
  virtual ~AgentObserver() = default;
  // After every load, reload and health change: the inputs and the plan (health applied).
  virtual void PlanChanged(const AgentInputs& /*inputs*/, const ResourcePlan& /*plan*/) {}
  // Every health event the feed posted (before the tracker's verdict).
  virtual void HealthEventSeen(const HealthEvent& /*ev*/) {}
  // A Register with kubelet succeeded for this resource.
  virtual void Registered(const std::string& /*resource*/) {}
  // Kubelet restarted (every registration is void until made again).
  virtual void KubeletRestarted() {}
  // One pass of the loop ran at now_ms (the agent's clock).
  virtual void LoopTurned(int64_t /*now_ms*/) {}
};

// The steps of one served resource's Allocate after the strategy's answer, in order: the
// memory-share units (`units`, share resources only; its refusals coded InvalidRequest), then
// the in-container library (`interposer`, InterposerSetupFailed). Null steps are left out.
std::vector<deviceplugin::AllocationStep> AllocationSteps(
    deviceplugin::AllocationDecorator units, deviceplugin::AllocationDecorator interposer);

struct AgentOptions {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket;        // empty = <plugin_dir>/kubelet.sock
  InputLoader load;                  // required
  HealthFeedFactory health;          // optional
  DecoratorFactory decorator;        // optional
  MemoryShareFactory memory_shares;  // optional; without it memory shares go by best fit (one GPU)
  // Optional: GetPreferredAllocation of the other resources follows the GPU choices of the pods
  // that may be asking (node/gpu_choice.h); without it, the allocation policy alone.
  std::shared_ptr<PendingAsks> pending_asks;
  bool handle_signals = true;  // block SIGTERM/SIGINT/SIGHUP and read them from a signalfd
  // Watch the plugin directory with inotify (false: the fallback check of the files only, what
  // a host without inotify gets; tests use it to drive that path).
  bool watch_plugin_dir = true;
  // Optional: told after every load (Init's and each reload's) whether the agent took the
  // inputs (true) or kept the old ones (false). Called on the agent thread.
  std::function<void(bool accepted)> on_load;
  // Told, in this order, what the agent does (see AgentObserver): the allocation recorder's
  // inputs, the metrics.
  std::vector<std::shared_ptr<AgentObserver>> observers;
  // Told, in this order, how every container request of every Allocate of every served
  // resource ended (one deviceplugin::AllocateFanOut): the metrics' counters, the Events of
  // refusals.
  std::vector<std::shared_ptr<deviceplugin::AllocateObserver>> allocate_observers;

  // Lifecycle timing (deviceplugin::LifecycleTiming). Reactions are event-driven; these only
  // coalesce bursts and pace retries.
  std::chrono::milliseconds debounce{20};      // coalesces a burst of directory events (x5 at most)
  std::chrono::milliseconds settle{100};       // after stopping a server with open streams
  std::chrono::milliseconds min_backoff{200};  // registration retries...
  std::chrono::milliseconds max_backoff{5000};  // ...double up to this

  // The time every decision is made in and waited for (tests pass a SimulatedClock).
  std::shared_ptr<Clock> clock = RealClock();
};

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Blocks the signals (call before any other thread exists), loads the inputs and builds the
  // plan. Errors are what the loader or BuildResourcePlan said; nothing is served yet.
  Status Init();

  // Serves until SIGTERM/SIGINT or RequestStop(). Returns the process exit status (0).
  int Run();

  // Thread-safe requests, equivalent to SIGTERM and SIGHUP.
  void RequestStop();
  void RequestReload();

  const ResourcePlan& plan() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpushare::node
