// DevicePluginServer: one kubelet device plugin (v1beta1) for one advertised resource.
//
// Life of a server, as kubelet expects it (reference: kubernetes-protocols.md section 1.5):
//   1. Start(): remove a stale socket file, serve DevicePlugin on <dir>/<socket_name>, and prove
//      it is up with a self-dial (given up at once if the socket is deleted meanwhile: kubelet
//      restarting);
//   2. StartRegister(): call Registration/Register on kubelet.sock with the bare socket file
//      name as endpoint, without waiting: kubelet dials back and calls GetDevicePluginOptions
//      *inside* Register, for up to 10 s when our socket is gone, so the caller must never be
//      held up by it. The outcome arrives through a callback; CancelRegister() abandons the
//      call (the owner does when it learns the socket is gone). Register() is the blocking form;
//   3. kubelet opens ListAndWatch: the full device list is sent at once and again after every
//      change (SetHealth). When the last open stream ends while the server is not being
//      stopped, `on_stream_end` is called: kubelet never reopens a stream by itself, so the
//      owner must serve again and re-register;
//   4. Stop(): end the streams, shut the server down, remove the socket file.
// Handlers never let an exception escape; malformed requests get INVALID_ARGUMENT.
// Thread-safe. The device set is fixed for the life of a server; only health changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/sync.h"
#include "core/node_config.h"
#include "core/resource_plan.h"
#include "core/status.h"
#include "deviceplugin/allocate_observer.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/preferred_allocation.h"

namespace grpc {
class Server;
}

namespace gpushare::deviceplugin {

inline constexpr const char* kApiVersion = "v1beta1";
inline constexpr const char* kDefaultPluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kKubeletSocketName = "kubelet.sock";
inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

struct DevicePluginServerOptions {
  std::string plugin_dir = kDefaultPluginDir;  // where our socket is created
  std::string kubelet_socket;                  // full path; empty = <plugin_dir>/kubelet.sock
  PlannedResource resource;                    // name, socket_name, devices (initial health)
  PluginFlags plugin;                          // strategies for Allocate
  ExtraEnv extra_env;                          // node-wide environment additions
  AllocationPolicy allocation_policy = AllocationPolicy::kDistributed;
  std::vector<AllocationStep> steps;  // run in order after the strategy's answer
  PreferredChooser preferred;         // optional, replaces the allocation policy

  // Called (from a gRPC thread; must not block) when the last ListAndWatch stream ends and the
  // server is not being stopped. `generation` is the value given here.
  std::function<void(uint64_t generation)> on_stream_end;
  uint64_t generation = 0;
  // Optional: told how every container request of every Allocate ended.
  std::shared_ptr<AllocateObserver> observer;

  // Our own socket answers within milliseconds; a socket deleted meanwhile fails at once.
  std::chrono::milliseconds self_dial_timeout{1000};
  // A backstop only: a Register whose socket is lost is cancelled by the owner long before.
  // Shorter than kubelet's 10 s connect-back dial, so a dial-back that cannot succeed is never
  // waited out; a kubelet that has connected back answers within milliseconds.
  std::chrono::milliseconds register_timeout{5000};
  int max_threads = 8;  // gRPC sync-server threads: one per open stream plus unary calls
};

class DevicePluginServer {
 public:
  // Serves and self-dials. kUnavailable / kInvalidArgument with the reason when it cannot.
  static Result<std::unique_ptr<DevicePluginServer>> Start(DevicePluginServerOptions options);
  ~DevicePluginServer();  // Stop()

  DevicePluginServer(const DevicePluginServer&) = delete;
  DevicePluginServer& operator=(const DevicePluginServer&) = delete;

  // Starts Register with kubelet and returns at once. `done` is called exactly once, from a
  // gRPC thread, with the outcome (kAborted when cancelled, kDeadlineExceeded after
  // register_timeout, kUnavailable otherwise); it must not block, nor call Stop(). Several
  // calls may be in flight.
  void StartRegister(std::function<void(const Status&)> done) GPUSHARE_EXCLUDES(reg_mu_);
  // Cancels every Register in flight (their `done` still comes, with an error). Does not wait.
  void CancelRegister() GPUSHARE_EXCLUDES(reg_mu_);
  // StartRegister and wait for the outcome; call without holding locks the caller's other code
  // needs (kubelet calls back into this server meanwhile).
  Status Register() GPUSHARE_EXCLUDES(reg_mu_);

  // Sets the health of devices by ID (IDs not named keep their current health) and pushes a new
  // list to open streams when anything changed. Returns whether anything changed.
  bool SetHealth(const std::map<std::string, bool>& healthy_by_id);

  // Cancels Registers in flight and waits for their callbacks, ends streams, shuts the server
  // down and removes the socket file if it is still ours.
  void Stop() GPUSHARE_EXCLUDES(stop_mu_, reg_mu_);

  const std::string& resource_name() const;
  const std::string& socket_path() const { return socket_path_; }
  // The inode of the socket file this server created (to tell it from a later one).
  uint64_t socket_inode() const { return socket_inode_; }
  uint64_t generation() const;
  int open_streams() const;
  // Device counts as last advertised.
  int healthy_count() const;
  int device_count() const;

  class Impl;  // the gRPC service and the device snapshot; public only for the .cc

 private:
  DevicePluginServer() = default;

  std::unique_ptr<Impl> impl_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;
  uint64_t socket_inode_ = 0;
  Mutex stop_mu_;  // held for the whole of Stop()
  bool stopped_ GPUSHARE_GUARDED_BY(stop_mu_) = false;

  struct RegisterCall;
  // Destroys the finished calls, with reg_mu_ released meanwhile (held again on return).
  void ReapRegisters() GPUSHARE_REQUIRES(reg_mu_);
  Mutex reg_mu_;
  CondVar reg_cv_;  // a call finished
  std::vector<std::unique_ptr<RegisterCall>> registering_ GPUSHARE_GUARDED_BY(reg_mu_);
  bool stopped_registering_ GPUSHARE_GUARDED_BY(reg_mu_) = false;
};

}  // namespace gpushare::deviceplugin
