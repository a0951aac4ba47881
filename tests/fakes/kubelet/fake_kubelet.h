// FakeKubelet: a test double of kubelet's device manager, written from the upstream API
// description in shared/reference/kubernetes-protocols.md (sections 1.5 to 1.9), not from our
// plugin code. It is the "independent kubelet client" of the node agent's acceptance criteria.
//
// What it does, as kubelet does:
//   - Start(): creates the device plugin directory, deletes every unix socket in it (leaving the
//     checkpoint, other files and sub-directories alone), serves Registration on kubelet.sock
//     with a default gRPC server;
//   - Register: checks the version (must be "v1beta1"), then the resource name (an extended
//     resource name), then dials <dir>/<endpoint> back INSIDE the handler with a blocking dial
//     bounded by 10 s (Options::dial_timeout), calls GetDevicePluginOptions (no deadline) and
//     only then answers: an error if the dial or the call failed. Afterwards a background reader
//     opens ListAndWatch (no deadline, no retry). RegisterRequest.options is ignored. A second
//     registration of a name replaces the first client. Registrations are served concurrently
//     (a handler per call, as Go's gRPC server does). The dial is kubelet's: a connection of
//     its own (no sharing with other channels of this process), and a socket that is missing
//     is retried with gRPC's connection backoff (about 1 s, then x1.6; grpc-go and gRPC C++
//     have the same defaults), so a socket that comes back within the timeout is found at the
//     next retry, one that does not fails the Register after the full timeout. Which context
//     bounds the dial differs between kubelet releases: some dial with a fresh 10 s context,
//     so the dial (and the registration, if it succeeds late) goes on after the plugin gave up
//     its call; newer ones derive it from the Register call, so a plugin that cancels its call
//     ends the dial. Options::dial_follows_caller chooses (default: the first, the harder one
//     for a plugin);
//   - every ListAndWatch message replaces the resource's device set; capacity = all devices,
//     allocatable = devices whose health is exactly "Healthy";
//   - when a stream ends, all of that resource's devices become unhealthy and the endpoint is
//     stopped; the stream is never reopened. Faithful to the pre-fix kubelet race (issues
//     #121994/#127803), the end of an OLD stream disconnects whichever client is CURRENT for
//     the name (Options::model_stream_end_race, on by default);
//   - Admit(): one container's allocation as kubelet's devicesToAllocate does it without a
//     Topology Manager hint: available = healthy minus in use; GetPreferredAllocation only when
//     the options say so, with available = free devices plus already chosen, must_include =
//     already chosen, allocation_size = the total request; the advice is intersected with
//     what is available and any shortfall filled by the double itself; then Allocate with
//     exactly one ContainerAllocateRequest. An error or an empty reply fails admission;
//   - AdmitPod(): a whole pod, as kubelet's device manager admits it (section 1.7): init
//     containers first, then app containers, each in spec order, one Admit per container and
//     resource; devices of (non-restartable) init containers are reused by the later
//     containers of the pod (taken first, before GetPreferredAllocation, which then gets them
//     as must_include), and a failure rejects the pod (UnexpectedAdmissionError) and frees what
//     it held. Tests choose the order in which pods are admitted and what each container asks;
//   - PodResources v1 (section 2) on its own socket (Options::pod_resources_socket): List
//     reports every admitted pod with its app containers in spec order (containers without
//     devices included, regular init containers not), each with kubelet's allocation records:
//     one ContainerDevices per device-plugin device ID (with its NUMA node as topology),
//     in no particular order (shuffled, like Go's map iteration), never the CDI devices;
//     GetAllocatableResources reports the healthy devices the same way; Get reports one pod or
//     fails with "pod <name> not found in namespace <ns>". The server rate-limits like kubelet
//     (100 requests/s, burst 10): beyond that RESOURCE_EXHAUSTED "rejected by rate limit";
//   - Restart(): what a kubelet restart looks like to plugins: the process dies (streams and
//     in-flight Register calls end at once, dials in progress are abandoned), the new process
//     deletes every socket in the directory, then serves a new kubelet.sock, and
//     registrations are forgotten (resources stay known with zero capacity, as restored from
//     the checkpoint, until their plugin registers again). Allocations survive (the
//     checkpoint); the PodResources socket is served again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "proto/deviceplugin/v1beta1/api.grpc.pb.h"
#include "proto/podresources/v1/api.grpc.pb.h"

namespace grpc {
class Server;
}

namespace gpushare::fakes {

struct FakeKubeletOptions {
  std::string plugin_dir;  // the device plugin directory (a temporary one in tests)
  std::chrono::milliseconds dial_timeout{10000};  // kubelet's blocking connect-back dial
  // false: the dial goes on for dial_timeout after the plugin cancelled its Register (and a
  // late success still registers); true: cancelling the Register ends the dial.
  bool dial_follows_caller = false;
  bool model_stream_end_race = true;
  // PodResources v1: full path of its unix socket; empty = not served.
  std::string pod_resources_socket;
  double pod_resources_qps = 100;  // kubelet's DefaultQPS
  int pod_resources_burst = 10;    // kubelet's DefaultBurstTokens
  uint64_t seed = 1;               // order of ContainerDevices entries
};

// One container of a pod given to AdmitPod: the extended resources it asks for (its limits).
struct FakeContainer {
  std::string name;
  std::map<std::string, int> resources;  // resource name -> device count
};

struct FakePod {
  std::string namespace_ = "default";
  std::string name;
  std::string uid;  // empty: "<namespace>/<name>"
  std::vector<FakeContainer> init_containers;
  std::vector<FakeContainer> containers;
};

// What kubelet recorded for one container and resource (its checkpoint entry).
struct AllocationRecord {
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  std::string container;
  bool init = false;
  std::string resource;
  std::vector<std::string> device_ids;
  v1beta1::ContainerAllocateResponse response;  // empty when the devices were all reused
};

struct FakeDevice {
  std::string id;
  std::string health;
  std::vector<int64_t> numa_nodes;
};

// What the double knows about one resource.
struct FakeResource {
  std::string name;
  std::string endpoint;      // socket file name the plugin registered
  bool connected = false;    // a registered client whose stream has not ended
  bool stream_open = false;  // the ListAndWatch stream is running
  int registrations = 0;     // successful Register calls for this name, across restarts
  int list_updates = 0;      // ListAndWatch messages received since the last registration
  int capacity = 0;
  int allocatable = 0;
  v1beta1::DevicePluginOptions options;
  std::vector<FakeDevice> devices;                          // sorted by ID
  std::chrono::steady_clock::time_point last_registered{};  // when the accepted Register came in
  // When the first ListAndWatch message of the current registration arrived (the resource is
  // usable from then on); zero until it has.
  std::chrono::steady_clock::time_point ready_at{};
};

struct RegistrationEvent {
  std::string resource_name;
  std::string endpoint;
  std::string version;
  bool accepted = false;
  std::string error;                                 // why it was refused
  std::chrono::steady_clock::time_point at{};        // when the call came in
  std::chrono::steady_clock::time_point answered{};  // when the handler answered
};

// The outcome of admitting one container.
struct Admission {
  bool admitted = false;
  std::string error;                    // why admission failed (UnexpectedAdmissionError)
  std::vector<std::string> device_ids;  // what kubelet allocated
  bool preferred_called = false;
  bool allocate_called = false;
  std::vector<std::string> must_include;        // devices reused from init containers
  std::vector<std::string> preferred;           // the plugin's advice, as returned
  v1beta1::ContainerAllocateResponse response;  // element 0 of the Allocate reply
};

// The outcome of admitting a pod: every container and resource that was allocated, in the
// order kubelet did it, up to the first failure.
struct PodAdmission {
  bool admitted = false;
  std::string error;  // "UnexpectedAdmissionError: <container>: <why>"
  struct Step {
    std::string container;
    bool init = false;
    std::string resource;
    Admission admission;
  };
  std::vector<Step> steps;
  const Admission* Find(const std::string& container, const std::string& resource) const;
};

class FakeKubelet {
 public:
  explicit FakeKubelet(FakeKubeletOptions options);
  ~FakeKubelet();  // Stop()

  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  // Cleans the directory (every socket but its own) and serves kubelet.sock. The gRPC server
  // is built first (by Stage(), unless already staged), so that kubelet.sock appears right
  // after the cleanup, as kubelet's net.Listen makes it.
  Status Start();
  // Builds the next instance's Registration server out of sight (beside the directory), as a
  // kubelet process that is starting up; Start() then only cleans and makes kubelet.sock
  // appear. Lets a test choose the moment a restarted kubelet comes back to within
  // microseconds.
  Status Stage();
  // Stops serving and drops every client, as if kubelet died; kubelet.sock is removed (as
  // Go's listener does when it closes).
  void Stop();
  // Stop(), then Start(): sockets deleted, new kubelet.sock, registrations forgotten.
  Status Restart();

  std::string kubelet_socket() const;
  // When the current instance started serving kubelet.sock.
  std::chrono::steady_clock::time_point last_start() const;
  // Register calls being handled right now (dialing back or asking for options).
  int registrations_in_flight() const;

  // Observations.
  std::optional<FakeResource> Resource(const std::string& name) const;
  std::vector<FakeResource> Resources() const;
  std::vector<RegistrationEvent> RegistrationLog() const;
  // Polls `pred` (called without the double's lock) until true or the timeout passes.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const;
  // Convenience: waits for a connected resource with `allocatable` healthy devices (and, when
  // min_registrations > 0, at least that many registrations).
  bool WaitForAllocatable(const std::string& name, int allocatable,
                          std::chrono::milliseconds timeout, int min_registrations = 0) const;

  // Admits one container (pod/container key) asking for `count` devices of `resource`.
  // A container that already has devices of the resource gets them back (kubelet step 2).
  Admission Admit(const std::string& container, const std::string& resource, int count);
  // The pod finished: its devices are free again.
  void Release(const std::string& container);
  // Devices of `resource` in use by admitted containers.
  std::vector<std::string> InUse(const std::string& resource) const;

  // Admits a whole pod (init containers first, reuse of their devices). A pod already admitted
  // (same UID) gets its recorded devices back (kubelet step 2).
  PodAdmission AdmitPod(const FakePod& pod);
  // The pod is gone (deleted, or finished and cleaned up): its devices are free, List stops
  // reporting it. False when no such pod was admitted.
  bool RemovePod(const std::string& ns, const std::string& name);
  // Every allocation record, in admission order.
  std::vector<AllocationRecord> Allocations() const;
  // PodResources calls served and refused by the rate limit.
  uint64_t pod_resources_calls() const;
  uint64_t pod_resources_rate_limited() const;

  // Calls PreStartContainer with the 30 s deadline kubelet uses (only if the options require
  // it; returns OK without a call otherwise).
  grpc::Status PreStartContainer(const std::string& container, const std::string& resource);

  // Raw calls to a registered plugin, for tests of malformed requests.
  grpc::Status RawAllocate(const std::string& resource, const v1beta1::AllocateRequest& req,
                           v1beta1::AllocateResponse* resp);
  grpc::Status RawPreferred(const std::string& resource,
                            const v1beta1::PreferredAllocationRequest& req,
                            v1beta1::PreferredAllocationResponse* resp);

  // Fault injection: the ListAndWatch stream of `resource` breaks (kubelet side). Kubelet then
  // marks the devices unhealthy and waits for the plugin to register again.
  bool DropStream(const std::string& resource);

  class Registrar;  // the Registration service; public only for the .cc
  class Lister;     // the PodResourcesLister service; public only for the .cc

 private:
  struct Client;
  struct Entry;
  struct PodRecord;

  // One container's allocation of one resource: kubelet's devicesToAllocate + Allocate.
  // `reusable` holds the pod's init-container devices that later containers take first.
  Admission AllocateContainer(const std::string& pod_uid, const std::string& container,
                              const std::string& resource, int count,
                              std::vector<std::string>* reusable);
  PodRecord* PodLocked(const std::string& uid);

  grpc::Status HandleRegister(grpc::ServerContext* call, const v1beta1::RegisterRequest& req);
  // The connect-back: true once connected; false after the timeout, when this instance stops,
  // or (dial_follows_caller) when the plugin cancelled its call.
  bool DialBack(grpc::ServerContext* call, grpc::Channel* channel);
  void RunClient(std::shared_ptr<Client> client);
  std::shared_ptr<Client> CurrentClient(const std::string& resource) const;
  void RecountLocked(Entry& e);
  void DeleteSockets();

  std::string StagingPath() const;

  const FakeKubeletOptions opts_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> staged_;  // the next instance's server, not yet visible

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, Entry> entries_;          // by resource name
  std::vector<std::shared_ptr<Client>> clients_;  // every client ever made, joined on Stop
  std::vector<RegistrationEvent> log_;
  std::vector<PodRecord> pods_;  // admitted pods, in admission order (the checkpoint)
  std::chrono::steady_clock::time_point started_{};
  uint64_t next_client_id_ = 1;
  bool serving_ = false;  // this instance is alive (false from the start of Stop)
  int in_flight_ = 0;     // Register handlers running
  std::vector<grpc::ClientContext*>
      pending_calls_;  // handlers' calls to plugins, cancelled by Stop

  std::unique_ptr<Lister> lister_;
  std::unique_ptr<grpc::Server> pod_resources_server_;
};

// Kubelet's check of a device plugin resource name: an extended resource name (domain-prefixed,
// not in the kubernetes.io namespace, and "requests.<name>" a valid qualified name).
bool IsValidExtendedResourceName(const std::string& name);

}  // namespace gpushare::fakes
