#include "kube/allocation_json.h"

#include <nlohmann/json.hpp>

namespace gpushare::alloc {

// The JSON writers of the record's parts, one per struct. nlohmann's adl_serializer finds them
// by the struct's namespace (hence here, and static), so a vector of records becomes an array
// of their objects. Optional keys are left out when empty.

static void to_json(nlohmann::ordered_json& j, const DeviceRecord& d) {
  j["id"] = d.id;
  j["kind"] = DeviceKindName(d.kind);
  j["gpu"] = d.gpu;
  if (!d.uuid.empty()) j["uuid"] = d.uuid;
  if (d.replica >= 0) j["replica"] = d.replica;
  if (!d.mig.empty()) j["mig"] = d.mig;
  if (!d.profile.empty()) j["profile"] = d.profile;
  if (d.units > 0) j["units"] = d.units;
  if (d.memory_mib > 0) j["memoryMiB"] = d.memory_mib;
}

static void to_json(nlohmann::ordered_json& j, const ContainerRecord& c) {
  j["name"] = c.name;
  j["resource"] = c.resource;
  j["devices"] = c.devices;
}

static void to_json(nlohmann::ordered_json& j, const GpuRecord& g) {
  j["index"] = g.index;
  j["uuid"] = g.uuid;
  if (!g.model.empty()) j["model"] = g.model;
  if (g.memory_mib > 0) j["memoryMiB"] = g.memory_mib;
}

}  // namespace gpushare::alloc

namespace gpushare::kube {
namespace {

using alloc::AllocationRecord;
using alloc::ContainerRecord;
using alloc::DeviceRecord;
using alloc::GpuRecord;
using Json = nlohmann::json;
using Ordered = nlohmann::ordered_json;

constexpr size_t kMaxInput = 256 * 1024;

// Field readers: each names the path of what is wrong.
class Reader {
 public:
  Reader(const Json& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status String(const char* key, std::string* out, bool required = false) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return required ? Missing(key) : Status::Ok();
    if (!it->is_string()) return Wrong(key, "a string");
    *out = it->get<std::string>();
    return Status::Ok();
  }
  template <typename Int>
  Status Integer(const char* key, Int* out, int64_t min) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    if (!it->is_number_integer()) return Wrong(key, "an integer");
    const int64_t v = it->get<int64_t>();
    if (v < min || v > std::numeric_limits<Int>::max())
      return Status::InvalidArgument(Path(key) + ": out of range, got " + std::to_string(v));
    *out = static_cast<Int>(v);
    return Status::Ok();
  }
  // The array at `key` (empty when absent).
  Result<const Json*> Array(const char* key) const {
    static const Json kEmpty = Json::array();
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return &kEmpty;
    if (!it->is_array()) return Wrong(key, "an array");
    return &*it;
  }
  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  Status Missing(const char* key) const {
    return Status::InvalidArgument(Path(key) + ": required");
  }
  Status Wrong(const char* key, const char* what) const {
    return Status::InvalidArgument(Path(key) + ": expected " + what + ", got " +
                                   std::string(j_.at(key).type_name()));
  }
  const Json& j_;
  std::string path_;
};

Status ExpectObject(const Json& j, const std::string& path) {
  if (j.is_object()) return Status::Ok();
  return Status::InvalidArgument((path.empty() ? std::string("allocations") : path) +
                                 ": expected an object, got " + j.type_name());
}

Result<DeviceRecord> DecodeDevice(const Json& j, const std::string& path) {
  GPUSHARE_RETURN_IF_ERROR(ExpectObject(j, path));
  Reader r(j, path);
  DeviceRecord d;
  std::string kind;
  GPUSHARE_RETURN_IF_ERROR(r.String("id", &d.id, true));
  GPUSHARE_RETURN_IF_ERROR(r.String("kind", &kind));
  // An unknown kind (a newer agent) reads as unknown rather than failing the whole record.
  d.kind = alloc::ParseDeviceKind(kind).value_or(alloc::DeviceKind::kUnknown);
  GPUSHARE_RETURN_IF_ERROR(r.Integer("gpu", &d.gpu, -1));
  GPUSHARE_RETURN_IF_ERROR(r.String("uuid", &d.uuid));
  GPUSHARE_RETURN_IF_ERROR(r.Integer("replica", &d.replica, -1));
  GPUSHARE_RETURN_IF_ERROR(r.String("mig", &d.mig));
  GPUSHARE_RETURN_IF_ERROR(r.String("profile", &d.profile));
  GPUSHARE_RETURN_IF_ERROR(r.Integer("units", &d.units, 0));
  GPUSHARE_RETURN_IF_ERROR(r.Integer("memoryMiB", &d.memory_mib, 0));
  return d;
}

}  // namespace

std::string EncodeAllocationRecord(const AllocationRecord& rec) {
  Ordered j;
  j["v"] = rec.version;
  j["node"] = rec.node;
  j["containers"] = rec.containers;
  j["gpus"] = rec.gpus;
  if (rec.truncated > 0) j["truncated"] = rec.truncated;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<AllocationRecord> DecodeAllocationRecord(std::string_view text) {
  if (text.size() > kMaxInput) {
    return Status::InvalidArgument("allocations: " + std::to_string(text.size()) +
                                   " bytes, more than the 256 KiB an annotation may hold");
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("allocations: not valid JSON");
  GPUSHARE_RETURN_IF_ERROR(ExpectObject(j, ""));
  Reader r(j, "");
  AllocationRecord rec;
  rec.version = 0;
  GPUSHARE_RETURN_IF_ERROR(r.Integer("v", &rec.version, 1));
  if (rec.version == 0) return Status::InvalidArgument("v: required");
  if (rec.version > alloc::kRecordVersion) {
    return Status::InvalidArgument("v: version " + std::to_string(rec.version) +
                                   " is newer than this reader (" +
                                   std::to_string(alloc::kRecordVersion) + ")");
  }
  GPUSHARE_RETURN_IF_ERROR(r.String("node", &rec.node));
  GPUSHARE_RETURN_IF_ERROR(r.Integer("truncated", &rec.truncated, 0));
  GPUSHARE_ASSIGN_OR_RETURN(const Json* containers, r.Array("containers"));
  for (size_t i = 0; i < containers->size(); ++i) {
    const std::string path = "containers[" + std::to_string(i) + "]";
    const Json& cj = (*containers)[i];
    GPUSHARE_RETURN_IF_ERROR(ExpectObject(cj, path));
    Reader cr(cj, path);
    ContainerRecord c;
    GPUSHARE_RETURN_IF_ERROR(cr.String("name", &c.name, true));
    GPUSHARE_RETURN_IF_ERROR(cr.String("resource", &c.resource));
    GPUSHARE_ASSIGN_OR_RETURN(const Json* devices, cr.Array("devices"));
    for (size_t k = 0; k < devices->size(); ++k) {
      GPUSHARE_ASSIGN_OR_RETURN(
          DeviceRecord d,
          DecodeDevice((*devices)[k], path + ".devices[" + std::to_string(k) + "]"));
      c.devices.push_back(std::move(d));
    }
    rec.containers.push_back(std::move(c));
  }
  GPUSHARE_ASSIGN_OR_RETURN(const Json* gpus, r.Array("gpus"));
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string path = "gpus[" + std::to_string(i) + "]";
    const Json& gj = (*gpus)[i];
    GPUSHARE_RETURN_IF_ERROR(ExpectObject(gj, path));
    Reader gr(gj, path);
    GpuRecord g;
    GPUSHARE_RETURN_IF_ERROR(gr.Integer("index", &g.index, 0));
    GPUSHARE_RETURN_IF_ERROR(gr.String("uuid", &g.uuid));
    GPUSHARE_RETURN_IF_ERROR(gr.String("model", &g.model));
    GPUSHARE_RETURN_IF_ERROR(gr.Integer("memoryMiB", &g.memory_mib, 0));
    rec.gpus.push_back(std::move(g));
  }
  return rec;
}

}  // namespace gpushare::kube
