// See allocation_json.h.
#include "core/allocation_json.h"

#include <limits>

#include "core/json.h"

namespace gpushare::alloc {
namespace {

using json::Quote;
using json::Value;
using Type = json::Value::Type;

constexpr size_t kMaxInput = 256 * 1024;

// ---- writing: keys in a fixed order, optional ones left out when empty ---------------------

// Appends "key":value to an object being written (`value` is JSON already).
void Put(std::string* out, const char* key, const std::string& value) {
  if (out->back() != '{') *out += ',';
  *out += Quote(key);
  *out += ':';
  *out += value;
}
std::string Int(int64_t v) {
  return std::to_string(v);
}

std::string EncodeDevice(const DeviceRecord& d) {
  std::string out = "{";
  Put(&out, "id", Quote(d.id));
  Put(&out, "kind", Quote(DeviceKindName(d.kind)));
  Put(&out, "gpu", Int(d.gpu));
  if (!d.uuid.empty()) Put(&out, "uuid", Quote(d.uuid));
  if (d.replica >= 0) Put(&out, "replica", Int(d.replica));
  if (!d.mig.empty()) Put(&out, "mig", Quote(d.mig));
  if (!d.profile.empty()) Put(&out, "profile", Quote(d.profile));
  if (d.units > 0) Put(&out, "units", Int(d.units));
  if (d.memory_mib > 0) Put(&out, "memoryMiB", Int(d.memory_mib));
  return out + "}";
}

std::string EncodeContainer(const ContainerRecord& c) {
  std::string out = "{";
  Put(&out, "name", Quote(c.name));
  Put(&out, "resource", Quote(c.resource));
  std::string devices = "[";
  for (const DeviceRecord& d : c.devices)
    devices += (devices.size() > 1 ? "," : "") + EncodeDevice(d);
  Put(&out, "devices", devices + "]");
  return out + "}";
}

std::string EncodeGpu(const GpuRecord& g) {
  std::string out = "{";
  Put(&out, "index", Int(g.index));
  Put(&out, "uuid", Quote(g.uuid));
  if (!g.model.empty()) Put(&out, "model", Quote(g.model));
  if (g.memory_mib > 0) Put(&out, "memoryMiB", Int(g.memory_mib));
  return out + "}";
}

// ---- reading: each error names the path of what is wrong ----------------------------------

// nlohmann's words for a type ("array", "string"), which the messages have always used.
std::string Bare(Type t) {
  std::string_view n = json::TypeName(t);
  if (n.rfind("an ", 0) == 0) n.remove_prefix(3);
  if (n.rfind("a ", 0) == 0) n.remove_prefix(2);
  return std::string(n);
}

class Reader {
 public:
  Reader(const Value& v, std::string path) : v_(v), path_(std::move(path)) {}

  Status String(const char* key, std::string* out, bool required = false) const {
    const Value* f = Field(key);
    if (f == nullptr) return required ? Missing(key) : Status::Ok();
    if (f->type != Type::kString) return Wrong(key, *f, "a string");
    *out = f->s;
    return Status::Ok();
  }
  template <typename Int>
  Status Integer(const char* key, Int* out, int64_t min) const {
    const Value* f = Field(key);
    if (f == nullptr) return Status::Ok();
    if (f->type != Type::kNumber || !f->is_int) return Wrong(key, *f, "an integer");
    if (f->i < min || f->i > static_cast<int64_t>(std::numeric_limits<Int>::max()))
      return Status::InvalidArgument(Path(key) + ": out of range, got " + std::to_string(f->i));
    *out = static_cast<Int>(f->i);
    return Status::Ok();
  }
  // The items of the array at `key` (none when absent).
  Result<const std::vector<Value>*> Array(const char* key) const {
    static const std::vector<Value> kEmpty;
    const Value* f = Field(key);
    if (f == nullptr) return &kEmpty;
    if (f->type != Type::kArray) return Wrong(key, *f, "an array");
    return &f->items;
  }

 private:
  // The member `key`; null counts as absent.
  const Value* Field(const char* key) const {
    const Value* f = v_.Find(key);
    return f == nullptr || f->type == Type::kNull ? nullptr : f;
  }
  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  Status Missing(const char* key) const {
    return Status::InvalidArgument(Path(key) + ": required");
  }
  Status Wrong(const char* key, const Value& f, const char* what) const {
    return Status::InvalidArgument(Path(key) + ": expected " + what + ", got " + Bare(f.type));
  }
  const Value& v_;
  std::string path_;
};

Status ExpectObject(const Value& v, const std::string& path) {
  if (v.type == Type::kObject) return Status::Ok();
  return Status::InvalidArgument((path.empty() ? std::string("allocations") : path) +
                                 ": expected an object, got " + Bare(v.type));
}

Result<DeviceRecord> DecodeDevice(const Value& v, const std::string& path) {
  GPUSHARE_RETURN_IF_ERROR(ExpectObject(v, path));
  Reader r(v, path);
  DeviceRecord d;
  std::string kind;
  GPUSHARE_RETURN_IF_ERROR(r.String("id", &d.id, true));
  GPUSHARE_RETURN_IF_ERROR(r.String("kind", &kind));
  // An unknown kind (a newer agent) reads as unknown rather than failing the whole record.
  d.kind = ParseDeviceKind(kind).value_or(DeviceKind::kUnknown);
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
  std::string out = "{";
  Put(&out, "v", Int(rec.version));
  Put(&out, "node", Quote(rec.node));
  std::string containers = "[";
  for (const ContainerRecord& c : rec.containers)
    containers += (containers.size() > 1 ? "," : "") + EncodeContainer(c);
  Put(&out, "containers", containers + "]");
  std::string gpus = "[";
  for (const GpuRecord& g : rec.gpus) gpus += (gpus.size() > 1 ? "," : "") + EncodeGpu(g);
  Put(&out, "gpus", gpus + "]");
  if (rec.truncated > 0) Put(&out, "truncated", Int(rec.truncated));
  return out + "}";
}

Result<AllocationRecord> DecodeAllocationRecord(std::string_view text) {
  if (text.size() > kMaxInput) {
    return Status::InvalidArgument("allocations: " + std::to_string(text.size()) +
                                   " bytes, more than the 256 KiB an annotation may hold");
  }
  Result<Value> doc = json::Parse(text);
  if (!doc.ok()) return Status::InvalidArgument("allocations: not valid JSON");
  const Value& j = *doc;
  GPUSHARE_RETURN_IF_ERROR(ExpectObject(j, ""));
  Reader r(j, "");
  AllocationRecord rec;
  rec.version = 0;
  GPUSHARE_RETURN_IF_ERROR(r.Integer("v", &rec.version, 1));
  if (rec.version == 0) return Status::InvalidArgument("v: required");
  if (rec.version > kRecordVersion) {
    return Status::InvalidArgument("v: version " + std::to_string(rec.version) +
                                   " is newer than this reader (" + std::to_string(kRecordVersion) +
                                   ")");
  }
  GPUSHARE_RETURN_IF_ERROR(r.String("node", &rec.node));
  GPUSHARE_RETURN_IF_ERROR(r.Integer("truncated", &rec.truncated, 0));
  GPUSHARE_ASSIGN_OR_RETURN(const std::vector<Value>* containers, r.Array("containers"));
  for (size_t i = 0; i < containers->size(); ++i) {
    const std::string path = "containers[" + std::to_string(i) + "]";
    const Value& cj = (*containers)[i];
    GPUSHARE_RETURN_IF_ERROR(ExpectObject(cj, path));
    Reader cr(cj, path);
    ContainerRecord c;
    GPUSHARE_RETURN_IF_ERROR(cr.String("name", &c.name, true));
    GPUSHARE_RETURN_IF_ERROR(cr.String("resource", &c.resource));
    GPUSHARE_ASSIGN_OR_RETURN(const std::vector<Value>* devices, cr.Array("devices"));
    for (size_t k = 0; k < devices->size(); ++k) {
      GPUSHARE_ASSIGN_OR_RETURN(
          DeviceRecord d,
          DecodeDevice((*devices)[k], path + ".devices[" + std::to_string(k) + "]"));
      c.devices.push_back(std::move(d));
    }
    rec.containers.push_back(std::move(c));
  }
  GPUSHARE_ASSIGN_OR_RETURN(const std::vector<Value>* gpus, r.Array("gpus"));
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string path = "gpus[" + std::to_string(i) + "]";
    const Value& gj = (*gpus)[i];
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

}  // namespace gpushare::alloc
