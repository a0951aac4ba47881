#include "tests/fakes/kubelet/fake_kubelet.h"

#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace gpushare::fakes {
namespace {

namespace pb = ::v1beta1;
constexpr const char* kVersion = "v1beta1";
constexpr const char* kKubeletSock = "kubelet.sock";

bool IsDnsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// RFC 1123 subdomain: lower-case labels of [a-z0-9-], alphanumeric at both ends, joined by '.'.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    std::string label = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63) return false;
    for (char c : label) {
      if (!IsDnsLabelChar(c)) return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return true;
}

// The name part of a qualified name: at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends.
bool IsQualifiedNamePart(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return IsAlnum(s.front()) && IsAlnum(s.back());
}

bool IsQualifiedName(const std::string& s) {
  size_t slash = s.find('/');
  if (slash == std::string::npos) return IsQualifiedNamePart(s);
  if (s.find('/', slash + 1) != std::string::npos) return false;
  return IsDnsSubdomain(s.substr(0, slash)) && IsQualifiedNamePart(s.substr(slash + 1));
}

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

bool IsValidExtendedResourceName(const std::string& name) {
  // Native resources: no domain, or anything in the kubernetes.io namespace.
  if (name.find('/') == std::string::npos) return false;
  if (name.find("kubernetes.io/") != std::string::npos) return false;
  if (name.rfind("requests.", 0) == 0) return false;
  return IsQualifiedName("requests." + name);
}

// One connection from kubelet to a plugin (what kubelet calls an endpoint client).
struct FakeKubelet::Client {
  uint64_t id = 0;
  std::string resource;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::DevicePlugin::Stub> stub;
  grpc::ClientContext stream_ctx;  // the ListAndWatch call
  std::thread reader;
};

struct FakeKubelet::Entry {
  FakeResource view;
  std::shared_ptr<Client> client;  // current client, null when disconnected
};

class FakeKubelet::Registrar final : public pb::Registration::Service {
 public:
  explicit Registrar(FakeKubelet* k) : k_(k) {}
  grpc::Status Register(grpc::ServerContext*, const pb::RegisterRequest* req, pb::Empty*) override {
    return k_->HandleRegister(*req);
  }

 private:
  FakeKubelet* k_;
};

FakeKubelet::FakeKubelet(FakeKubeletOptions options) : opts_(std::move(options)) {}

FakeKubelet::~FakeKubelet() { Stop(); }

std::string FakeKubelet::kubelet_socket() const { return opts_.plugin_dir + "/" + kKubeletSock; }

std::chrono::steady_clock::time_point FakeKubelet::last_start() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

void FakeKubelet::DeleteSockets() {
  DIR* d = ::opendir(opts_.plugin_dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> victims;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = opts_.plugin_dir + "/" + name;
    if (IsSocket(path)) victims.push_back(path);  // the checkpoint and other files stay
  }
  ::closedir(d);
  for (const std::string& p : victims) ::unlink(p.c_str());
}

Status FakeKubelet::Start() {
  std::error_code ec;
  std::filesystem::create_directories(opts_.plugin_dir, ec);
  if (ec) return Status::Unavailable("fake kubelet: cannot create " + opts_.plugin_dir + ": " + ec.message());
  ::chmod(opts_.plugin_dir.c_str(), 0750);
  DeleteSockets();
  registrar_ = std::make_unique<Registrar>(this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + kubelet_socket(), grpc::InsecureServerCredentials());
  builder.RegisterService(registrar_.get());
  server_ = builder.BuildAndStart();
  if (!server_) return Status::Unavailable("fake kubelet: cannot serve " + kubelet_socket());
  std::lock_guard<std::mutex> lock(mu_);
  started_ = std::chrono::steady_clock::now();
  changed_.notify_all();
  return Status::Ok();
}

void FakeKubelet::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  std::vector<std::shared_ptr<Client>> clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    clients.swap(clients_);
    for (auto& [name, e] : entries_) {
      // The process is gone: nothing is registered; what the checkpoint restores is a
      // stopped endpoint with zero capacity.
      e.client.reset();
      e.view.connected = false;
      e.view.stream_open = false;
      e.view.devices.clear();
      RecountLocked(e);
    }
    changed_.notify_all();
  }
  for (auto& c : clients) c->stream_ctx.TryCancel();
  for (auto& c : clients) {
    if (c->reader.joinable()) c->reader.join();
  }
}

Status FakeKubelet::Restart() {
  Stop();
  return Start();
}

grpc::Status FakeKubelet::HandleRegister(const pb::RegisterRequest& req) {
  RegistrationEvent ev;
  ev.resource_name = req.resource_name();
  ev.endpoint = req.endpoint();
  ev.version = req.version();
  ev.at = std::chrono::steady_clock::now();
  auto refuse = [&](grpc::StatusCode code, std::string msg) {
    ev.error = msg;
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(ev);
    changed_.notify_all();
    return grpc::Status(code, msg);
  };

  if (req.version() != kVersion) {
    return refuse(grpc::StatusCode::UNKNOWN, "requested API version \"" + req.version() +
                                                 "\" is not supported by kubelet. Supported versions are [\"" +
                                                 kVersion + "\"]");
  }
  if (!IsValidExtendedResourceName(req.resource_name())) {
    return refuse(grpc::StatusCode::UNKNOWN, "the ResourceName \"" + req.resource_name() + "\" is invalid");
  }

  // Connect back, inside the handler: a plain path join, blocking dial with a deadline.
  auto client = std::make_shared<Client>();
  client->resource = req.resource_name();
  std::string path = opts_.plugin_dir + "/" + req.endpoint();
  client->channel = grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
  if (!client->channel->WaitForConnected(std::chrono::system_clock::now() + opts_.dial_timeout)) {
    return refuse(grpc::StatusCode::UNKNOWN, "failed to dial device plugin at " + path);
  }
  client->stub = pb::DevicePlugin::NewStub(client->channel);
  pb::DevicePluginOptions options;
  {
    grpc::ClientContext ctx;  // no deadline, as kubelet
    pb::Empty empty;
    grpc::Status s = client->stub->GetDevicePluginOptions(&ctx, empty, &options);
    if (!s.ok()) {
      return refuse(grpc::StatusCode::UNKNOWN, "failed to get device plugin options: " + s.error_message());
    }
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    client->id = next_client_id_++;
    Entry& e = entries_[req.resource_name()];
    e.view.name = req.resource_name();
    e.view.endpoint = req.endpoint();
    e.view.options = options;  // RegisterRequest.options is ignored, as kubelet does
    e.view.connected = true;
    e.view.stream_open = false;
    e.view.registrations++;
    e.view.list_updates = 0;
    e.view.last_registered = ev.at;
    e.client = client;  // replaces any previous client of this name
    clients_.push_back(client);
    ev.accepted = true;
    log_.push_back(ev);
    // The reader is started under the lock so Stop() always finds it joinable.
    client->reader = std::thread([this, client] { RunClient(client); });
    changed_.notify_all();
  }
  return grpc::Status::OK;
}

void FakeKubelet::RecountLocked(Entry& e) {
  std::sort(e.view.devices.begin(), e.view.devices.end(),
            [](const FakeDevice& a, const FakeDevice& b) { return a.id < b.id; });
  e.view.capacity = static_cast<int>(e.view.devices.size());
  e.view.allocatable = 0;
  for (const FakeDevice& d : e.view.devices) {
    if (d.health == "Healthy") e.view.allocatable++;
  }
}

void FakeKubelet::RunClient(std::shared_ptr<Client> client) {
  pb::Empty empty;
  auto reader = client->stub->ListAndWatch(&client->stream_ctx, empty);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(client->resource);
    if (it != entries_.end() && it->second.client == client) it->second.view.stream_open = true;
    changed_.notify_all();
  }
  pb::ListAndWatchResponse resp;
  while (reader->Read(&resp)) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(client->resource);
    if (it == entries_.end() || it->second.client != client) continue;  // a replaced client
    Entry& e = it->second;
    e.view.devices.clear();  // every message replaces the whole set
    for (const pb::Device& d : resp.devices()) {
      FakeDevice fd{d.id(), d.health(), {}};
      for (const pb::NUMANode& n : d.topology().nodes()) fd.numa_nodes.push_back(n.id());
      e.view.devices.push_back(std::move(fd));
    }
    e.view.list_updates++;
    RecountLocked(e);
    changed_.notify_all();
  }
  reader->Finish();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(client->resource);
  if (it == entries_.end() || !it->second.client) return;
  Entry& e = it->second;
  // Pre-fix kubelet: the end of any stream disconnects the client that is current now.
  if (e.client != client) {
    if (!opts_.model_stream_end_race) return;
    e.client->stream_ctx.TryCancel();  // disconnecting closes the new client's stream too
  }
  e.client.reset();
  e.view.connected = false;
  e.view.stream_open = false;
  for (FakeDevice& d : e.view.devices) d.health = "Unhealthy";
  RecountLocked(e);
  changed_.notify_all();
}

std::shared_ptr<FakeKubelet::Client> FakeKubelet::CurrentClient(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(resource);
  return it == entries_.end() ? nullptr : it->second.client;
}

std::optional<FakeResource> FakeKubelet::Resource(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second.view;
}

std::vector<FakeResource> FakeKubelet::Resources() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FakeResource> out;
  for (const auto& [n, e] : entries_) out.push_back(e.view);
  return out;
}

std::vector<RegistrationEvent> FakeKubelet::RegistrationLog() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

bool FakeKubelet::WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

bool FakeKubelet::WaitForAllocatable(const std::string& name, int allocatable,
                                     std::chrono::milliseconds timeout, int min_registrations) const {
  return WaitFor(
      [&] {
        auto r = Resource(name);
        return r && r->connected && r->allocatable == allocatable && r->list_updates > 0 &&
               r->registrations >= min_registrations;
      },
      timeout);
}

std::vector<std::string> FakeKubelet::InUse(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [c, by_res] : allocations_) {
    auto it = by_res.find(resource);
    if (it != by_res.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Admission FakeKubelet::Admit(const std::string& container, const std::string& resource, int count) {
  Admission out;
  std::shared_ptr<Client> client;
  std::vector<std::string> available;
  std::vector<std::string> must_include;  // no init containers to reuse from in this double
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto existing = allocations_.find(container);
    if (existing != allocations_.end() && existing->second.count(resource)) {
      out.admitted = true;
      out.device_ids = existing->second[resource];
      return out;
    }
    auto it = entries_.find(resource);
    if (it == entries_.end() || it->second.view.registrations == 0) {
      out.error = "cannot allocate unregistered device " + resource;
      return out;
    }
    Entry& e = it->second;
    if (!e.client) {
      // A stopped endpoint: its devices are all unhealthy by now.
      out.error = "no healthy devices present; cannot allocate unhealthy devices " + resource;
      return out;
    }
    client = e.client;
    std::set<std::string> in_use;
    for (const auto& [c, by_res] : allocations_) {
      auto r = by_res.find(resource);
      if (r != by_res.end()) in_use.insert(r->second.begin(), r->second.end());
    }
    int healthy = 0;
    for (const FakeDevice& d : e.view.devices) {
      if (d.health != "Healthy") continue;
      ++healthy;
      if (!in_use.count(d.id)) available.push_back(d.id);
    }
    if (healthy == 0) {
      out.error = "no healthy devices present; cannot allocate unhealthy devices " + resource;
      return out;
    }
    if (static_cast<int>(available.size()) < count) {
      out.error = "requested number of devices unavailable for " + resource + ". Requested: " +
                  std::to_string(count) + ", Available: " + std::to_string(available.size());
      return out;
    }
  }

  std::vector<std::string> chosen = must_include;
  std::set<std::string> avail_set(available.begin(), available.end());
  if (client->stub && CurrentClient(resource) == client) {
    auto r = Resource(resource);
    if (r && r->options.get_preferred_allocation_available()) {
      pb::PreferredAllocationRequest req;
      pb::ContainerPreferredAllocationRequest* c = req.add_container_requests();
      for (const std::string& id : available) c->add_available_deviceids(id);
      for (const std::string& id : must_include) c->add_must_include_deviceids(id);
      c->set_allocation_size(count);
      pb::PreferredAllocationResponse resp;
      grpc::ClientContext ctx;  // no deadline, as kubelet
      grpc::Status s = client->stub->GetPreferredAllocation(&ctx, req, &resp);
      out.preferred_called = true;
      if (!s.ok()) {
        out.error = "device plugin GetPreferredAllocation rpc failed with err: " + s.error_message();
        return out;
      }
      if (resp.container_responses_size() > 0) {
        for (const std::string& id : resp.container_responses(0).deviceids()) out.preferred.push_back(id);
      }
      // Advice only: intersect with what is available, never exceed the request.
      for (const std::string& id : out.preferred) {
        if (static_cast<int>(chosen.size()) >= count) break;
        if (avail_set.count(id) && std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
          chosen.push_back(id);
        }
      }
    }
  }
  // Fill any shortfall from the remaining available devices.
  for (const std::string& id : available) {
    if (static_cast<int>(chosen.size()) >= count) break;
    if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
  }

  pb::AllocateRequest req;
  pb::ContainerAllocateRequest* c = req.add_container_requests();  // exactly one container
  for (const std::string& id : chosen) c->add_devices_ids(id);
  pb::AllocateResponse resp;
  grpc::ClientContext ctx;  // no deadline, as kubelet
  grpc::Status s = client->stub->Allocate(&ctx, req, &resp);
  if (!s.ok()) {
    out.error = "allocate failed: " + s.error_message();
    return out;
  }
  if (resp.container_responses_size() == 0) {
    out.error = "allocate failed: the plugin returned no container_responses";
    return out;
  }
  out.admitted = true;
  out.device_ids = chosen;
  out.response = resp.container_responses(0);
  std::lock_guard<std::mutex> lock(mu_);
  allocations_[container][resource] = chosen;
  return out;
}

void FakeKubelet::Release(const std::string& container) {
  std::lock_guard<std::mutex> lock(mu_);
  allocations_.erase(container);
}

grpc::Status FakeKubelet::PreStartContainer(const std::string& container, const std::string& resource) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "resource " + resource + " not connected");
  pb::PreStartContainerRequest req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_[resource].view.options.pre_start_required()) return grpc::Status::OK;
    auto it = allocations_.find(container);
    if (it == allocations_.end() || !it->second.count(resource)) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no devices allocated to " + container);
    }
    for (const std::string& id : it->second[resource]) req.add_devices_ids(id);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::PreStartContainerResponse resp;
  return client->stub->PreStartContainer(&ctx, req, &resp);
}

grpc::Status FakeKubelet::RawAllocate(const std::string& resource, const pb::AllocateRequest& req,
                                      pb::AllocateResponse* resp) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "resource " + resource + " not connected");
  grpc::ClientContext ctx;
  return client->stub->Allocate(&ctx, req, resp);
}

grpc::Status FakeKubelet::RawPreferred(const std::string& resource, const pb::PreferredAllocationRequest& req,
                                       pb::PreferredAllocationResponse* resp) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "resource " + resource + " not connected");
  grpc::ClientContext ctx;
  return client->stub->GetPreferredAllocation(&ctx, req, resp);
}

bool FakeKubelet::DropStream(const std::string& resource) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client) return false;
  client->stream_ctx.TryCancel();
  return true;
}

}  // namespace gpushare::fakes
