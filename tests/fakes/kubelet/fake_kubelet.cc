#include "tests/fakes/kubelet/fake_kubelet.h"

#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

namespace gpushare::fakes {
namespace {

namespace pb = ::v1beta1;
constexpr const char* kVersion = "v1beta1";
constexpr const char* kKubeletSock = "kubelet.sock";

bool IsDnsLabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}
bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

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

struct FakeKubelet::PodRecord {
  std::string ns, name, uid;
  std::vector<std::string> app_containers;  // spec order, for List
  bool active = true;
  std::vector<AllocationRecord> records;
  std::map<std::string, int64_t> numa;  // "<resource>\n<id>" -> NUMA node (-1: none)
};

// Kubelet's PodResources server: a token bucket in front of every call (DefaultQPS 100,
// DefaultBurstTokens 10), then the allocation records.
class FakeKubelet::Lister final : public ::v1::PodResourcesLister::Service {
 public:
  explicit Lister(FakeKubelet* k)
      : k_(k), tokens_(k->opts_.pod_resources_burst), last_(Clock::now()) {}

  grpc::Status List(grpc::ServerContext*, const ::v1::ListPodResourcesRequest*,
                    ::v1::ListPodResourcesResponse* resp) override {
    if (!Allow()) return Limited();
    std::lock_guard<std::mutex> lock(k_->mu_);
    for (const PodRecord& p : k_->pods_) Fill(p, resp->add_pod_resources());
    return grpc::Status::OK;
  }

  grpc::Status GetAllocatableResources(grpc::ServerContext*,
                                       const ::v1::AllocatableResourcesRequest*,
                                       ::v1::AllocatableResourcesResponse* resp) override {
    if (!Allow()) return Limited();
    std::lock_guard<std::mutex> lock(k_->mu_);
    std::vector<std::pair<std::string, const FakeDevice*>> devs;
    for (const auto& [name, e] : k_->entries_) {
      for (const FakeDevice& d : e.view.devices) {
        if (d.health == "Healthy") devs.emplace_back(name, &d);
      }
    }
    Shuffle(&devs);
    for (const auto& [name, d] : devs) {
      ::v1::ContainerDevices* cd = resp->add_devices();
      cd->set_resource_name(name);
      cd->add_device_ids(d->id);
      for (int64_t n : d->numa_nodes) cd->mutable_topology()->add_nodes()->set_id(n);
    }
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext*, const ::v1::GetPodResourcesRequest* req,
                   ::v1::GetPodResourcesResponse* resp) override {
    if (!Allow()) return Limited();
    std::lock_guard<std::mutex> lock(k_->mu_);
    for (const PodRecord& p : k_->pods_) {
      if (p.ns == req->pod_namespace() && p.name == req->pod_name()) {
        Fill(p, resp->mutable_pod_resources());
        return grpc::Status::OK;
      }
    }
    // kubelet returns a plain error (gRPC code Unknown) for a missing pod.
    return grpc::Status(
        grpc::StatusCode::UNKNOWN,
        "pod " + req->pod_name() + " not found in namespace " + req->pod_namespace());
  }

  uint64_t calls() const { return calls_.load(); }
  uint64_t limited() const { return limited_.load(); }

 private:
  using Clock = std::chrono::steady_clock;

  bool Allow() {
    std::lock_guard<std::mutex> lock(mu_);
    Clock::time_point now = Clock::now();
    double burst = k_->opts_.pod_resources_burst;
    tokens_ = std::min(burst, tokens_ + std::chrono::duration<double>(now - last_).count() *
                                            k_->opts_.pod_resources_qps);
    last_ = now;
    if (tokens_ < 1) {
      limited_++;
      return false;
    }
    tokens_ -= 1;
    calls_++;
    return true;
  }
  static grpc::Status Limited() {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "rejected by rate limit");
  }

  template <typename T>
  void Shuffle(std::vector<T>* v) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shuffle(v->begin(), v->end(), rng_);
  }

  // One pod: its app containers in spec order, each device-plugin device as its own
  // ContainerDevices entry (in random order), with its NUMA node as topology.
  void Fill(const PodRecord& p, ::v1::PodResources* out) {
    out->set_name(p.name);
    out->set_namespace_(p.ns);
    for (const std::string& c : p.app_containers) {
      ::v1::ContainerResources* cr = out->add_containers();
      cr->set_name(c);
      std::vector<std::pair<std::string, std::string>> devs;  // resource, id
      for (const AllocationRecord& r : p.records) {
        if (r.container != c || r.init) continue;
        for (const std::string& id : r.device_ids) devs.emplace_back(r.resource, id);
      }
      Shuffle(&devs);
      for (const auto& [res, id] : devs) {
        ::v1::ContainerDevices* cd = cr->add_devices();
        cd->set_resource_name(res);
        cd->add_device_ids(id);
        auto n = p.numa.find(res + "\n" + id);
        if (n != p.numa.end() && n->second >= 0)
          cd->mutable_topology()->add_nodes()->set_id(n->second);
      }
    }
  }

  FakeKubelet* k_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
  std::mt19937_64 rng_{k_->opts_.seed};
  std::atomic<uint64_t> calls_{0}, limited_{0};
};

class FakeKubelet::Registrar final : public pb::Registration::Service {
 public:
  explicit Registrar(FakeKubelet* k) : k_(k) {}
  grpc::Status Register(grpc::ServerContext* call, const pb::RegisterRequest* req,
                        pb::Empty*) override {
    return k_->HandleRegister(call, *req);
  }

 private:
  FakeKubelet* k_;
};

FakeKubelet::FakeKubelet(FakeKubeletOptions options)
    : opts_(std::move(options)), registrar_(std::make_unique<Registrar>(this)) {}

FakeKubelet::~FakeKubelet() {
  Stop();
  if (staged_) {
    staged_->Shutdown(std::chrono::system_clock::now());
    staged_->Wait();
    staged_.reset();
    ::unlink(StagingPath().c_str());
  }
}

std::string FakeKubelet::kubelet_socket() const {
  return opts_.plugin_dir + "/" + kKubeletSock;
}

std::chrono::steady_clock::time_point FakeKubelet::last_start() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

int FakeKubelet::registrations_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
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

std::string FakeKubelet::StagingPath() const {
  // Beside the directory, on the same file system (for link()), out of the directory's watch.
  std::filesystem::path dir = std::filesystem::path(opts_.plugin_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // a trailing slash
  return (dir.parent_path() / ("." + dir.filename().string() + "-kubelet-next.sock")).string();
}

Status FakeKubelet::Stage() {
  if (staged_) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(opts_.plugin_dir, ec);
  if (ec)
    return Status::Unavailable("fake kubelet: cannot create " + opts_.plugin_dir + ": " +
                               ec.message());
  const std::string staging = StagingPath();
  ::unlink(staging.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + staging, grpc::InsecureServerCredentials());
  builder.RegisterService(registrar_.get());
  staged_ = builder.BuildAndStart();
  if (!staged_) return Status::Unavailable("fake kubelet: cannot serve " + staging);
  return Status::Ok();
}

Status FakeKubelet::Start() {
  if (server_) return Status::FailedPrecondition("fake kubelet: already started");
  GPUSHARE_RETURN_IF_ERROR(Stage());
  ::chmod(opts_.plugin_dir.c_str(), 0750);
  // kubelet's order: clean the directory, then listen on kubelet.sock. The server was built
  // beforehand, so kubelet.sock appears right after the cleanup, as net.Listen makes it.
  DeleteSockets();
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = std::chrono::steady_clock::now();
    serving_ = true;
  }
  const std::string staging = StagingPath();
  if (::link(staging.c_str(), kubelet_socket().c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::lock_guard<std::mutex> lock(mu_);
    serving_ = false;
    return Status::Unavailable("fake kubelet: cannot create " + kubelet_socket() + ": " + why);
  }
  ::unlink(staging.c_str());
  server_ = std::move(staged_);
  std::error_code ec;
  if (!opts_.pod_resources_socket.empty()) {
    std::filesystem::create_directories(
        std::filesystem::path(opts_.pod_resources_socket).parent_path(), ec);
    ::unlink(opts_.pod_resources_socket.c_str());
    if (!lister_) lister_ = std::make_unique<Lister>(this);
    grpc::ServerBuilder pr;
    pr.AddListeningPort("unix:" + opts_.pod_resources_socket, grpc::InsecureServerCredentials());
    pr.RegisterService(lister_.get());
    pod_resources_server_ = pr.BuildAndStart();
    if (!pod_resources_server_) {
      return Status::Unavailable("fake kubelet: cannot serve PodResources on " +
                                 opts_.pod_resources_socket);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  changed_.notify_all();
  return Status::Ok();
}

void FakeKubelet::Stop() {
  // The process dies: handlers stop dialing, their calls to plugins are cut, and every call
  // in flight ends at once for the plugins (no grace period).
  {
    std::lock_guard<std::mutex> lock(mu_);
    serving_ = false;
    for (grpc::ClientContext* c : pending_calls_) c->TryCancel();
    changed_.notify_all();
  }
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
    ::unlink(kubelet_socket().c_str());  // Go's unix listener removes its file when closed
  }
  if (pod_resources_server_) {
    pod_resources_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    pod_resources_server_->Wait();
    pod_resources_server_.reset();
    ::unlink(opts_.pod_resources_socket.c_str());
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
  return Start();  // builds the new instance's server, then cleans and listens
}

bool FakeKubelet::DialBack(grpc::ServerContext* call, grpc::Channel* channel) {
  // One blocking dial bounded by dial_timeout. It is waited for in short slices only so that
  // it can be abandoned when this instance stops; the channel keeps its own connection
  // attempts and backoff across the slices, as one long wait would.
  const auto deadline = std::chrono::system_clock::now() + opts_.dial_timeout;
  for (;;) {
    auto now = std::chrono::system_clock::now();
    if (now >= deadline) return false;
    if (channel->WaitForConnected(std::min(deadline, now + std::chrono::milliseconds(20))))
      return true;
    std::lock_guard<std::mutex> lock(mu_);
    if (!serving_) return false;
    if (opts_.dial_follows_caller && call->IsCancelled()) return false;
  }
}

grpc::Status FakeKubelet::HandleRegister(grpc::ServerContext* call,
                                         const pb::RegisterRequest& req) {
  RegistrationEvent ev;
  ev.resource_name = req.resource_name();
  ev.endpoint = req.endpoint();
  ev.version = req.version();
  ev.at = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  struct Done {
    FakeKubelet* k;
    ~Done() {
      std::lock_guard<std::mutex> lock(k->mu_);
      --k->in_flight_;
      k->changed_.notify_all();
    }
  } done{this};
  auto refuse = [&](grpc::StatusCode code, std::string msg) {
    ev.error = msg;
    ev.answered = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(ev);
    changed_.notify_all();
    return grpc::Status(code, msg);
  };

  if (req.version() != kVersion) {
    return refuse(grpc::StatusCode::UNKNOWN,
                  "requested API version \"" + req.version() +
                      "\" is not supported by kubelet. Supported versions are [\"" + kVersion +
                      "\"]");
  }
  if (!IsValidExtendedResourceName(req.resource_name())) {
    return refuse(grpc::StatusCode::UNKNOWN,
                  "the ResourceName \"" + req.resource_name() + "\" is invalid");
  }

  // Connect back, inside the handler: a plain path join, a blocking dial with a deadline, on a
  // connection of its own (Go's grpc.Dial shares nothing with other dials).
  auto client = std::make_shared<Client>();
  client->resource = req.resource_name();
  std::string path = opts_.plugin_dir + "/" + req.endpoint();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  client->channel =
      grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
  if (!DialBack(call, client->channel.get())) {
    return refuse(grpc::StatusCode::UNKNOWN, "failed to dial device plugin at " + path);
  }
  client->stub = pb::DevicePlugin::NewStub(client->channel);
  pb::DevicePluginOptions options;
  {
    grpc::ClientContext ctx;  // no deadline, as kubelet; cut only when this instance stops
    bool alive;
    {
      std::lock_guard<std::mutex> lock(mu_);
      alive = serving_;
      if (alive) pending_calls_.push_back(&ctx);
    }
    if (!alive) return refuse(grpc::StatusCode::UNAVAILABLE, "kubelet stopped");
    pb::Empty empty;
    grpc::Status s = client->stub->GetDevicePluginOptions(&ctx, empty, &options);
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_calls_.erase(std::remove(pending_calls_.begin(), pending_calls_.end(), &ctx),
                           pending_calls_.end());
    }
    if (!s.ok()) {
      return refuse(grpc::StatusCode::UNKNOWN,
                    "failed to get device plugin options: " + s.error_message());
    }
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!serving_) {  // the process died meanwhile: nothing is remembered
      ev.error = "kubelet stopped";
      ev.answered = std::chrono::steady_clock::now();
      log_.push_back(ev);
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, ev.error);
    }
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
    e.view.ready_at = {};
    e.client = client;  // replaces any previous client of this name
    clients_.push_back(client);
    ev.accepted = true;
    ev.answered = std::chrono::steady_clock::now();
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
    if (e.view.list_updates++ == 0) e.view.ready_at = std::chrono::steady_clock::now();
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

bool FakeKubelet::WaitFor(const std::function<bool()>& pred,
                          std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

bool FakeKubelet::WaitForAllocatable(const std::string& name, int allocatable,
                                     std::chrono::milliseconds timeout,
                                     int min_registrations) const {
  return WaitFor(
      [&] {
        auto r = Resource(name);
        return r && r->connected && r->allocatable == allocatable && r->list_updates > 0 &&
               r->registrations >= min_registrations;
      },
      timeout);
}

FakeKubelet::PodRecord* FakeKubelet::PodLocked(const std::string& uid) {
  for (PodRecord& p : pods_) {
    if (p.uid == uid) return &p;
  }
  return nullptr;
}

std::vector<std::string> FakeKubelet::InUse(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const PodRecord& p : pods_) {
    for (const AllocationRecord& r : p.records) {
      if (r.resource == resource) out.insert(out.end(), r.device_ids.begin(), r.device_ids.end());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Admission FakeKubelet::Admit(const std::string& container, const std::string& resource, int count) {
  // A container key "pod/container" of the older single-container API: a pod of its own.
  const std::string uid = "single:" + container;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (PodLocked(uid) == nullptr) {
      PodRecord p;
      size_t slash = container.find('/');
      p.ns = "default";
      p.name = slash == std::string::npos ? container : container.substr(0, slash);
      p.uid = uid;
      p.app_containers.push_back(slash == std::string::npos ? container
                                                            : container.substr(slash + 1));
      pods_.push_back(std::move(p));
    }
  }
  size_t slash = container.find('/');
  std::vector<std::string> none;
  Admission a =
      AllocateContainer(uid, slash == std::string::npos ? container : container.substr(slash + 1),
                        resource, count, &none);
  if (!a.admitted) {
    std::lock_guard<std::mutex> lock(mu_);
    PodRecord* p = PodLocked(uid);
    if (p != nullptr && p->records.empty()) {
      pods_.erase(pods_.begin() + (p - pods_.data()));
    }
  }
  return a;
}

Admission FakeKubelet::AllocateContainer(const std::string& pod_uid, const std::string& container,
                                         const std::string& resource, int count,
                                         std::vector<std::string>* reusable) {
  Admission out;
  std::shared_ptr<Client> client;
  std::vector<std::string> available;
  std::vector<std::string> chosen;  // reused devices first: must_include
  std::map<std::string, int64_t> numa_of;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PodRecord* pod = PodLocked(pod_uid);
    if (pod != nullptr) {
      for (const AllocationRecord& r : pod->records) {
        if (r.container == container && r.resource == resource) {  // kubelet step 2
          out.admitted = true;
          out.device_ids = r.device_ids;
          return out;
        }
      }
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
    for (const PodRecord& p : pods_) {
      for (const AllocationRecord& r : p.records) {
        if (r.resource == resource) in_use.insert(r.device_ids.begin(), r.device_ids.end());
      }
    }
    int healthy = 0;
    std::set<std::string> healthy_ids;
    for (const FakeDevice& d : e.view.devices) {
      numa_of[d.id] = d.numa_nodes.empty() ? -1 : d.numa_nodes.front();
      if (d.health != "Healthy") continue;
      ++healthy;
      healthy_ids.insert(d.id);
      if (!in_use.count(d.id)) available.push_back(d.id);
    }
    if (healthy == 0) {
      out.error = "no healthy devices present; cannot allocate unhealthy devices " + resource;
      return out;
    }
    // Step 4: devices of the pod's init containers first, in sorted order.
    std::sort(reusable->begin(), reusable->end());
    for (const std::string& id : *reusable) {
      if (static_cast<int>(chosen.size()) >= count) break;
      chosen.push_back(id);
    }
    const int needed = count - static_cast<int>(chosen.size());
    if (needed > 0 && static_cast<int>(available.size()) < needed) {
      out.error = "requested number of devices unavailable for " + resource +
                  ". Requested: " + std::to_string(needed) +
                  ", Available: " + std::to_string(available.size());
      return out;
    }
    if (needed == 0) available.clear();
  }
  out.must_include = chosen;

  std::set<std::string> avail_set(available.begin(), available.end());
  if (!available.empty() && client->stub && CurrentClient(resource) == client) {
    auto r = Resource(resource);
    if (r && r->options.get_preferred_allocation_available()) {
      pb::PreferredAllocationRequest req;
      pb::ContainerPreferredAllocationRequest* c = req.add_container_requests();
      std::vector<std::string> pool = available;
      pool.insert(pool.end(), chosen.begin(), chosen.end());
      std::sort(pool.begin(), pool.end());
      for (const std::string& id : pool) c->add_available_deviceids(id);
      for (const std::string& id : chosen) c->add_must_include_deviceids(id);
      c->set_allocation_size(count);  // the container's total request, not the remainder
      pb::PreferredAllocationResponse resp;
      grpc::ClientContext ctx;  // no deadline, as kubelet
      grpc::Status s = client->stub->GetPreferredAllocation(&ctx, req, &resp);
      out.preferred_called = true;
      if (!s.ok()) {
        out.error =
            "device plugin GetPreferredAllocation rpc failed with err: " + s.error_message();
        return out;
      }
      if (resp.container_responses_size() > 0) {
        for (const std::string& id : resp.container_responses(0).deviceids())
          out.preferred.push_back(id);
      }
      // Advice only: intersect with what is available, never exceed the request.
      std::vector<std::string> advice = out.preferred;
      std::sort(advice.begin(), advice.end());
      for (const std::string& id : advice) {
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
  out.allocate_called = true;
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
  PodRecord* pod = PodLocked(pod_uid);
  if (pod == nullptr) return out;  // removed meanwhile
  AllocationRecord rec;
  rec.pod_namespace = pod->ns;
  rec.pod_name = pod->name;
  rec.pod_uid = pod->uid;
  rec.container = container;
  rec.resource = resource;
  rec.device_ids = chosen;
  rec.response = out.response;
  for (const std::string& id : chosen)
    pod->numa[resource + "\n" + id] = numa_of.count(id) ? numa_of[id] : -1;
  pod->records.push_back(std::move(rec));
  return out;
}

const Admission* PodAdmission::Find(const std::string& container,
                                    const std::string& resource) const {
  for (const Step& s : steps) {
    if (s.container == container && s.resource == resource) return &s.admission;
  }
  return nullptr;
}

PodAdmission FakeKubelet::AdmitPod(const FakePod& pod) {
  PodAdmission out;
  const std::string uid = pod.uid.empty() ? pod.namespace_ + "/" + pod.name : pod.uid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (PodLocked(uid) == nullptr) {
      PodRecord p;
      p.ns = pod.namespace_;
      p.name = pod.name;
      p.uid = uid;
      for (const FakeContainer& c : pod.containers) p.app_containers.push_back(c.name);
      pods_.push_back(std::move(p));
    }
  }
  std::map<std::string, std::vector<std::string>> reuse;  // resource -> init devices to reuse
  auto run = [&](const FakeContainer& c, bool init) {
    for (const auto& [resource, count] : c.resources) {
      if (count <= 0) continue;
      Admission a = AllocateContainer(uid, c.name, resource, count, &reuse[resource]);
      out.steps.push_back({c.name, init, resource, a});
      if (!a.admitted) {
        out.error = "UnexpectedAdmissionError: container " + c.name + ": " + a.error;
        return false;
      }
      std::vector<std::string>& pool = reuse[resource];
      if (init) {  // addContainerAllocatedResources
        for (const std::string& id : a.device_ids) {
          if (std::find(pool.begin(), pool.end(), id) == pool.end()) pool.push_back(id);
        }
      } else {  // removeContainerAllocatedResources
        for (const std::string& id : a.device_ids)
          pool.erase(std::remove(pool.begin(), pool.end(), id), pool.end());
      }
    }
    return true;
  };
  bool ok = true;
  for (const FakeContainer& c : pod.init_containers) {
    if (!(ok = run(c, true))) break;
  }
  if (ok) {
    for (const FakeContainer& c : pod.containers) {
      if (!(ok = run(c, false))) break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  PodRecord* p = PodLocked(uid);
  if (p != nullptr) {
    for (AllocationRecord& r : p->records) {
      for (const FakeContainer& c : pod.init_containers) r.init = r.init || c.name == r.container;
    }
  }
  if (!ok) {
    // The pod is rejected (phase Failed): it is no longer active, its devices are freed.
    if (p != nullptr) pods_.erase(pods_.begin() + (p - pods_.data()));
    return out;
  }
  out.admitted = true;
  return out;
}

bool FakeKubelet::RemovePod(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < pods_.size(); ++i) {
    if (pods_[i].ns == ns && pods_[i].name == name) {
      pods_.erase(pods_.begin() + i);
      return true;
    }
  }
  return false;
}

void FakeKubelet::Release(const std::string& container) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string uid = "single:" + container;
  for (size_t i = 0; i < pods_.size(); ++i) {
    if (pods_[i].uid == uid) {
      pods_.erase(pods_.begin() + i);
      return;
    }
  }
}

std::vector<AllocationRecord> FakeKubelet::Allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AllocationRecord> out;
  for (const PodRecord& p : pods_) out.insert(out.end(), p.records.begin(), p.records.end());
  return out;
}

grpc::Status FakeKubelet::PreStartContainer(const std::string& container,
                                            const std::string& resource) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "resource " + resource + " not connected");
  pb::PreStartContainerRequest req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_[resource].view.options.pre_start_required()) return grpc::Status::OK;
    const PodRecord* pod = PodLocked("single:" + container);
    const AllocationRecord* rec = nullptr;
    if (pod != nullptr) {
      for (const AllocationRecord& r : pod->records) {
        if (r.resource == resource) rec = &r;
      }
    }
    if (rec == nullptr)
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no devices allocated to " + container);
    for (const std::string& id : rec->device_ids) req.add_devices_ids(id);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::PreStartContainerResponse resp;
  return client->stub->PreStartContainer(&ctx, req, &resp);
}

grpc::Status FakeKubelet::RawAllocate(const std::string& resource, const pb::AllocateRequest& req,
                                      pb::AllocateResponse* resp) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "resource " + resource + " not connected");
  grpc::ClientContext ctx;
  return client->stub->Allocate(&ctx, req, resp);
}

grpc::Status FakeKubelet::RawPreferred(const std::string& resource,
                                       const pb::PreferredAllocationRequest& req,
                                       pb::PreferredAllocationResponse* resp) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "resource " + resource + " not connected");
  grpc::ClientContext ctx;
  return client->stub->GetPreferredAllocation(&ctx, req, resp);
}

uint64_t FakeKubelet::pod_resources_calls() const {
  return lister_ ? lister_->calls() : 0;
}
uint64_t FakeKubelet::pod_resources_rate_limited() const {
  return lister_ ? lister_->limited() : 0;
}

bool FakeKubelet::DropStream(const std::string& resource) {
  std::shared_ptr<Client> client = CurrentClient(resource);
  if (!client) return false;
  client->stream_ctx.TryCancel();
  return true;
}

}  // namespace gpushare::fakes
