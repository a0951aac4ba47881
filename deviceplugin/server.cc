#include "deviceplugin/server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "base/logfmt.h"
#include "core/reasons.h"
#include "deviceplugin/preferred_allocation.h"
#include "proto/deviceplugin/v1beta1/api.grpc.pb.h"

namespace gpushare::deviceplugin {
namespace {

namespace pb = ::v1beta1;
using logfmt::Value;

// An immutable view of the resource at one health version. Handlers take a shared_ptr to the
// current snapshot and work on it without holding the server's lock.
struct Snapshot {
  Snapshot(PlannedResource r, uint64_t v) : resource(std::move(r)), index(resource), version(v) {
    for (const PlannedDevice& d : resource.devices) {
      pb::Device* out = list.add_devices();
      out->set_id(d.id);
      out->set_health(d.healthy ? kHealthy : kUnhealthy);
      if (!d.numa_nodes.empty()) {
        for (int64_t n : d.numa_nodes) out->mutable_topology()->add_nodes()->set_id(n);
      }
      if (d.healthy) ++healthy;
    }
  }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  const PlannedResource resource;
  const DeviceIndex index;  // points into `resource`
  const uint64_t version;
  pb::ListAndWatchResponse list;
  int healthy = 0;
};

grpc::StatusCode ToGrpcCode(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kAborted:
      return grpc::StatusCode::ABORTED;
    case StatusCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case StatusCode::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

// The core/reasons.h code of a request ResolveDevices refused: a device this resource does not
// advertise, a device that is Unhealthy now, or else a request the resource does not accept.
std::string_view ResolveRefusalReason(const DeviceIndex& index,
                                      const std::vector<std::string>& ids) {
  bool unhealthy = false;
  for (const std::string& id : ids) {
    const PlannedDevice* d = index.Find(id);
    if (d == nullptr) return reasons::kUnknownDevice;
    unhealthy = unhealthy || !d->healthy;
  }
  return unhealthy ? reasons::kGpuUnhealthy : reasons::kInvalidRequest;
}

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(s.code()), s.message());
}

}  // namespace

namespace {

// A refused Allocate: the message starts with the reason code ("GpuUnhealthy: resource ...:
// devices are Unhealthy: ..."), so that kubelet's UnexpectedAdmissionError (the pod's Event and
// status) carries the code; the observer is told the same code.
grpc::Status Refusal(grpc::StatusCode code, std::string_view reason, const std::string& message) {
  return grpc::Status(code, reasons::Coded(reason, message));
}

void ToProto(const ContainerAllocation& a, pb::ContainerAllocateResponse* out) {
  for (const auto& [k, v] : a.envs) (*out->mutable_envs())[k] = v;
  for (const MountSpec& m : a.mounts) {
    pb::Mount* pm = out->add_mounts();
    pm->set_container_path(m.container_path);
    pm->set_host_path(m.host_path);
    pm->set_read_only(m.read_only);
  }
  for (const DeviceNodeSpec& d : a.device_nodes) {
    pb::DeviceSpec* pd = out->add_devices();
    pd->set_container_path(d.container_path);
    pd->set_host_path(d.host_path);
    pd->set_permissions(d.permissions);
  }
  for (const auto& [k, v] : a.annotations) (*out->mutable_annotations())[k] = v;
  for (const std::string& n : a.cdi_devices) out->add_cdi_devices()->set_name(n);
}

std::vector<std::string> ToVector(const google::protobuf::RepeatedPtrField<std::string>& r) {
  return std::vector<std::string>(r.begin(), r.end());
}

std::string Summary(const std::vector<std::string>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 4; ++i) s += (i ? "," : "") + ids[i];
  if (ids.size() > 4) s += ",...";
  return s;
}

// Runs a handler body; no exception leaves a gRPC handler.
template <typename F>
grpc::Status Guard(const std::string& resource, const char* rpc, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    spdlog::error("event=handler_exception resource={} rpc={} error={}", resource, rpc,
                  Value(e.what()));
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(rpc) + " failed: " + e.what());
  } catch (...) {
    spdlog::error("event=handler_exception resource={} rpc={}", resource, rpc);
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(rpc) + " failed");
  }
}

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// Channel arguments for a connection of its own: gRPC shares subchannels (and their reconnect
// backoff) between channels to the same address; a fresh attempt must not inherit the backoff
// of an earlier one that found no socket.
grpc::ChannelArguments OwnConnection() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

}  // namespace

// One Register call in flight (or finished, not yet destroyed).
struct DevicePluginServer::RegisterCall {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Registration::Stub> stub;
  grpc::ClientContext ctx;
  pb::RegisterRequest req;
  pb::Empty resp;
  // Guarded by the server's reg_mu_; then only the owner touches it. (Not annotated: clang's
  // GUARDED_BY cannot name a mutex of another object.)
  bool finished = false;
};

class DevicePluginServer::Impl final : public pb::DevicePlugin::Service {
 public:
  explicit Impl(DevicePluginServerOptions o)
      : opts(std::move(o)), preferred(opts.allocation_policy) {
    snap = std::make_shared<const Snapshot>(opts.resource, 1);
  }

  std::shared_ptr<const Snapshot> Current() const GPUSHARE_EXCLUDES(mu) {
    MutexLock lock(&mu);
    return snap;
  }

  void BeginStop() GPUSHARE_EXCLUDES(mu) {
    {
      MutexLock lock(&mu);
      stopping = true;
    }
    cv.NotifyAll();
  }

  bool SetHealth(const std::map<std::string, bool>& healthy_by_id) GPUSHARE_EXCLUDES(mu) {
    MutexLock lock(&mu);
    PlannedResource next = snap->resource;
    bool changed = false;
    for (PlannedDevice& d : next.devices) {
      auto it = healthy_by_id.find(d.id);
      if (it == healthy_by_id.end() || it->second == d.healthy) continue;
      d.healthy = it->second;
      changed = true;
    }
    if (!changed) return false;
    snap = std::make_shared<const Snapshot>(std::move(next), snap->version + 1);
    cv.NotifyAll();
    return true;
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const pb::Empty*,
                                      pb::DevicePluginOptions* out) override {
    return Guard(opts.resource.name, "GetDevicePluginOptions", [&] {
      out->set_pre_start_required(false);
      out->set_get_preferred_allocation_available(true);
      return grpc::Status::OK;
    });
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const pb::Empty*,
                            grpc::ServerWriter<pb::ListAndWatchResponse>* writer) override {
    return Guard(opts.resource.name, "ListAndWatch", [&] {
      {
        MutexLock lock(&mu);
        ++streams;
      }
      spdlog::info("event=list_and_watch_open resource={}", opts.resource.name);
      uint64_t sent = 0;
      const char* why = "server stopping";
      for (;;) {
        std::shared_ptr<const Snapshot> s;
        {
          MutexLock lock(&mu);
          // Wake at once on a change or a stop; poll cancellation a few times a second.
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
          while (!stopping && snap->version == sent) {
            if (!cv.WaitUntil(&mu, deadline)) break;
          }
          if (stopping) break;
          s = snap;
        }
        if (ctx->IsCancelled()) {
          why = "cancelled by kubelet";
          break;
        }
        if (s->version == sent) continue;
        if (!writer->Write(s->list)) {
          why = "write failed";
          break;
        }
        sent = s->version;
        spdlog::debug("event=list_and_watch_sent resource={} devices={} healthy={} version={}",
                      opts.resource.name, s->list.devices_size(), s->healthy, s->version);
      }
      bool report;
      {
        MutexLock lock(&mu);
        --streams;
        report = !stopping && streams == 0;
      }
      spdlog::info("event=list_and_watch_end resource={} reason={}", opts.resource.name,
                   Value(why));
      if (report && opts.on_stream_end) opts.on_stream_end(opts.generation);
      return grpc::Status::OK;
    });
  }

  grpc::Status NoContainers(const char* message) const {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "resource " + opts.resource.name + ": " + message + " has no container_requests");
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const pb::PreferredAllocationRequest* req,
                                      pb::PreferredAllocationResponse* resp) override {
    return Guard(opts.resource.name, "GetPreferredAllocation", [&] {
      if (req->container_requests_size() == 0) return NoContainers("PreferredAllocationRequest");
      std::shared_ptr<const Snapshot> s = Current();
      for (const pb::ContainerPreferredAllocationRequest& c : req->container_requests()) {
        PreferredAllocationQuery q{ToVector(c.available_deviceids()),
                                   ToVector(c.must_include_deviceids()), c.allocation_size()};
        Result<std::vector<std::string>> chosen =
            opts.preferred ? opts.preferred(s->index, q) : preferred.Choose(s->index, q);
        if (!chosen.ok()) {
          spdlog::warn("event=preferred_allocation_refused resource={} error={}",
                       opts.resource.name, Value(chosen.status().message()));
          return ToGrpc(chosen.status());
        }
        pb::ContainerPreferredAllocationResponse* out = resp->add_container_responses();
        for (const std::string& id : *chosen) out->add_deviceids(id);
        if (spdlog::should_log(spdlog::level::debug)) {
          spdlog::debug("event=preferred_allocation resource={} size={} available={} chosen={}",
                        opts.resource.name, q.allocation_size, q.available.size(),
                        Summary(*chosen));
        }
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status Allocate(grpc::ServerContext*, const pb::AllocateRequest* req,
                        pb::AllocateResponse* resp) override {
    return Guard(opts.resource.name, "Allocate", [&] {
      if (req->container_requests_size() == 0) {
        const grpc::Status none = NoContainers("AllocateRequest");
        return Refusal(none.error_code(), reasons::kInvalidRequest, none.error_message());
      }
      std::shared_ptr<const Snapshot> s = Current();
      HostDeviceNodes nodes;
      if (opts.plugin.pass_device_specs) nodes = ProbeHostDeviceNodes(opts.plugin.nvidia_dev_root);
      for (const pb::ContainerAllocateRequest& c : req->container_requests()) {
        std::vector<std::string> ids = ToVector(c.devices_ids());
        // Tells the observer, and answers kubelet with the code in front of the message.
        auto refuse = [&](grpc::StatusCode code, std::string_view reason,
                          const std::string& message) {
          spdlog::warn("event=allocate_refused resource={} devices={} error={}", opts.resource.name,
                       Value(Summary(ids)), Value(message));
          if (opts.observer) opts.observer->OnAllocate({opts.resource.name, ids, reason, message});
          return Refusal(code, reason, message);
        };
        Result<ResolvedRequest> r = ResolveDevices(s->index, ids);
        if (!r.ok())
          return refuse(ToGrpcCode(r.status().code()), ResolveRefusalReason(s->index, ids),
                        r.status().message());
        ContainerAllocation a = BuildContainerAllocation(*r, opts.plugin, nodes, opts.extra_env);
        if (!a.problem.empty())
          return refuse(grpc::StatusCode::FAILED_PRECONDITION, reasons::kDeviceNodesUnavailable,
                        a.problem);
        for (const AllocationStep& step : opts.steps) {
          if (!step.apply) continue;
          Status st = step.apply(*r, &a);
          if (!st.ok()) return refuse(ToGrpcCode(st.code()), step.refusal_reason, st.message());
        }
        ToProto(a, resp->add_container_responses());
        if (opts.observer) opts.observer->OnAllocate({opts.resource.name, ids, "", ""});
        auto env = a.envs.find(kVisibleDevicesEnv);
        spdlog::info("event=allocate resource={} devices={} count={} visible={}",
                     opts.resource.name, Value(Summary(ids)), ids.size(),
                     Value(env == a.envs.end() ? std::string("-") : env->second));
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const pb::PreStartContainerRequest*,
                                 pb::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

  const DevicePluginServerOptions opts;
  PreferredAllocator preferred;

  mutable Mutex mu;
  CondVar cv;  // snap changed, or stopping was set
  std::shared_ptr<const Snapshot> snap GPUSHARE_GUARDED_BY(mu);
  bool stopping GPUSHARE_GUARDED_BY(mu) = false;
  int streams GPUSHARE_GUARDED_BY(mu) = 0;
};

Result<std::unique_ptr<DevicePluginServer>> DevicePluginServer::Start(
    DevicePluginServerOptions options) {
  const std::string name = options.resource.name;
  if (name.empty()) return Status::InvalidArgument("device plugin: resource name is empty");
  const std::string sock = options.resource.socket_name;
  if (sock.empty() || sock.find('/') != std::string::npos || sock == kKubeletSocketName) {
    return Status::InvalidArgument("device plugin " + name + ": invalid socket file name \"" +
                                   sock + "\"");
  }
  std::string path = options.plugin_dir + "/" + sock;
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::InvalidArgument("device plugin " + name + ": socket path " + path +
                                   " is longer than " +
                                   std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.plugin_dir, ec);
  if (ec) {
    return Status::Unavailable("device plugin " + name + ": cannot create " + options.plugin_dir +
                               ": " + ec.message());
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::FailedPrecondition("device plugin " + name + ": " + path +
                                        " exists and is not a socket; refusing to remove it");
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::Unavailable("device plugin " + name + ": cannot remove stale socket " + path +
                                 ": " + std::strerror(errno));
    }
  }

  std::unique_ptr<DevicePluginServer> self(new DevicePluginServer());
  self->socket_path_ = path;
  const auto self_dial_timeout = options.self_dial_timeout;
  const int max_threads = options.max_threads;
  self->impl_ = std::make_unique<Impl>(std::move(options));

  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(self->impl_.get());
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  grpc::ResourceQuota quota("gpushare-" + sock);
  quota.SetMaxThreads(max_threads);
  builder.SetResourceQuota(quota);
  self->server_ = builder.BuildAndStart();
  if (!self->server_) {
    return Status::Unavailable("device plugin " + name + ": cannot serve on " + path);
  }
  self->socket_inode_ = InodeOf(path);
  if (self->socket_inode_ == 0) {  // deleted between bind and here
    self->Stop();
    return Status::Unavailable("device plugin " + name + ": " + path +
                               " was removed while the server started (kubelet restarting?)");
  }

  // Prove the server answers before telling kubelet about it. A socket deleted meanwhile
  // (kubelet starting: it deletes every socket) fails at once instead of after the timeout.
  auto channel = grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(),
                                           OwnConnection());
  const auto deadline = std::chrono::system_clock::now() + self_dial_timeout;
  for (;;) {
    auto now = std::chrono::system_clock::now();
    if (channel->WaitForConnected(std::min(deadline, now + std::chrono::milliseconds(20)))) break;
    if (InodeOf(path) != self->socket_inode_) {
      self->Stop();
      return Status::Unavailable("device plugin " + name + ": " + path +
                                 " was removed while the server started (kubelet restarting?)");
    }
    if (now >= deadline) {
      self->Stop();
      return Status::Unavailable("device plugin " + name + ": self-dial of " + path +
                                 " failed within " + std::to_string(self_dial_timeout.count()) +
                                 " ms");
    }
  }
  spdlog::info("event=serving resource={} socket={} devices={} healthy={}", name, path,
               self->device_count(), self->healthy_count());
  return self;
}

DevicePluginServer::~DevicePluginServer() {
  Stop();
}

void DevicePluginServer::ReapRegisters() {
  // Finished calls are destroyed here, on the owner's thread, never inside their own callback
  // (gRPC does not allow a call's context and channel to go away from within it).
  std::vector<std::unique_ptr<RegisterCall>> done;
  for (auto& c : registering_) {
    if (c->finished) done.push_back(std::move(c));
  }
  registering_.erase(std::remove(registering_.begin(), registering_.end(), nullptr),
                     registering_.end());
  reg_mu_.Unlock();
  done.clear();
  reg_mu_.Lock();
}

void DevicePluginServer::StartRegister(std::function<void(const Status&)> done) {
  const DevicePluginServerOptions& o = impl_->opts;
  const std::string kubelet =
      o.kubelet_socket.empty() ? o.plugin_dir + "/" + kKubeletSocketName : o.kubelet_socket;
  auto owned = std::make_unique<RegisterCall>();
  RegisterCall* call = owned.get();
  call->req.set_version(kApiVersion);
  call->req.set_endpoint(o.resource.socket_name);
  call->req.set_resource_name(o.resource.name);
  call->req.mutable_options()->set_pre_start_required(false);
  call->req.mutable_options()->set_get_preferred_allocation_available(true);
  call->channel = grpc::CreateCustomChannel("unix:" + kubelet, grpc::InsecureChannelCredentials(),
                                            OwnConnection());
  call->stub = pb::Registration::NewStub(call->channel);
  call->ctx.set_deadline(std::chrono::system_clock::now() + o.register_timeout);
  bool stopping;
  {
    MutexLock lock(&reg_mu_);
    ReapRegisters();
    stopping = stopped_registering_;
    if (!stopping) registering_.push_back(std::move(owned));
  }
  if (stopping) {
    done(Status::Aborted("register " + o.resource.name + ": the server is stopping"));
    return;
  }
  const std::string resource = o.resource.name;
  const std::string endpoint = o.resource.socket_name;
  call->stub->async()->Register(
      &call->ctx, &call->req, &call->resp,
      [this, call, done = std::move(done), resource, endpoint, kubelet](grpc::Status s) {
        Status st;
        if (s.ok()) {
          spdlog::info("event=registered resource={} endpoint={} kubelet={}", resource, endpoint,
                       kubelet);
        } else {
          StatusCode code =
              s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? StatusCode::kDeadlineExceeded
              : s.error_code() == grpc::StatusCode::CANCELLED       ? StatusCode::kAborted
                                                                    : StatusCode::kUnavailable;
          st = Status(code, "register " + resource + " with " + kubelet + ": " + s.error_message());
        }
        done(st);
        // Last: Stop() may destroy this server once every call has finished.
        MutexLock lock(&reg_mu_);
        call->finished = true;
        reg_cv_.NotifyAll();
      });
}

void DevicePluginServer::CancelRegister() {
  MutexLock lock(&reg_mu_);
  for (auto& c : registering_) {
    if (!c->finished) c->ctx.TryCancel();
  }
}

Status DevicePluginServer::Register() {
  struct Outcome {
    Mutex mu;
    CondVar cv;
    std::optional<Status> result GPUSHARE_GUARDED_BY(mu);
  } out;
  StartRegister([&out](const Status& st) {
    MutexLock lock(&out.mu);
    out.result = st;
    out.cv.NotifyAll();
  });
  MutexLock lock(&out.mu);
  while (!out.result.has_value()) out.cv.Wait(&out.mu);
  return *out.result;
}

bool DevicePluginServer::SetHealth(const std::map<std::string, bool>& healthy_by_id) {
  return impl_->SetHealth(healthy_by_id);
}

void DevicePluginServer::Stop() {
  MutexLock lock(&stop_mu_);
  if (stopped_ || !impl_) return;
  stopped_ = true;
  {
    // No new Register; the ones in flight are cancelled and their callbacks waited for.
    MutexLock reg(&reg_mu_);
    stopped_registering_ = true;
    for (auto& c : registering_) {
      if (!c->finished) c->ctx.TryCancel();
    }
    while (!std::all_of(registering_.begin(), registering_.end(),
                        [](const auto& c) { return c->finished; })) {
      reg_cv_.Wait(&reg_mu_);
    }
    ReapRegisters();
  }
  impl_->BeginStop();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
  }
  // Remove the socket only if it is still the one this server created.
  if (socket_inode_ != 0 && InodeOf(socket_path_) == socket_inode_) ::unlink(socket_path_.c_str());
  spdlog::info("event=stopped resource={} socket={}", impl_->opts.resource.name, socket_path_);
}

const std::string& DevicePluginServer::resource_name() const {
  return impl_->opts.resource.name;
}
uint64_t DevicePluginServer::generation() const {
  return impl_->opts.generation;
}

int DevicePluginServer::open_streams() const {
  MutexLock lock(&impl_->mu);
  return impl_->streams;
}

int DevicePluginServer::healthy_count() const {
  return impl_->Current()->healthy;
}
int DevicePluginServer::device_count() const {
  return static_cast<int>(impl_->Current()->resource.devices.size());
}

}  // namespace gpushare::deviceplugin
