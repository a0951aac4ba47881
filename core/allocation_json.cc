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
// A JSON array of `items`, each written by `encode`.
template <typename T, typename F>
std::string ArrayOf(const std::vector<T>& items, F encode) {
  std::string out = "[";
  for (const T& item : items) {
    if (out.size() > 1) out += ',';
    out += encode(item);
  }
  return out + "]";
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
  Put(&out, "devices", ArrayOf(c.devices, EncodeDevice));
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

Status ExpectObject(const Value& v, const std::string& path) {
  if (v.type == Type::kObject) return Status::Ok();
  return Status::InvalidArgument((path.empty() ? std::string("allocations") : path) +
                                 ": expected an object, got " + Bare(v.type));
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
  // Each item of the array at `key` (none when absent), which must be an object, decoded by
  // `decode(item, path)` and appended to `out`.
  template <typename T, typename F>
  Status Objects(const char* key, std::vector<T>* out, F decode) const {
    const Value* f = Field(key);
    if (f == nullptr) return Status::Ok();
    if (f->type != Type::kArray) return Wrong(key, *f, "an array");
    for (size_t i = 0; i < f->items.size(); ++i) {
      const std::string path = Path(key) + "[" + std::to_string(i) + "]";
      GPUSHARE_RETURN_IF_ERROR(ExpectObject(f->items[i], path));
      GPUSHARE_ASSIGN_OR_RETURN(T item, decode(f->items[i], path));
      out->push_back(std::move(item));
    }
    return Status::Ok();
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

// Each decoder is given an object and its path.
Result<DeviceRecord> DecodeDevice(const Value& v, const std::string& path) {
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

Result<ContainerRecord> DecodeContainer(const Value& v, const std::string& path) {
  Reader r(v, path);
  ContainerRecord c;
  GPUSHARE_RETURN_IF_ERROR(r.String("name", &c.name, true));
  GPUSHARE_RETURN_IF_ERROR(r.String("resource", &c.resource));
  GPUSHARE_RETURN_IF_ERROR(r.Objects("devices", &c.devices, DecodeDevice));
  return c;
}

Result<GpuRecord> DecodeGpu(const Value& v, const std::string& path) {
  Reader r(v, path);
  GpuRecord g;
  GPUSHARE_RETURN_IF_ERROR(r.Integer("index", &g.index, 0));
  GPUSHARE_RETURN_IF_ERROR(r.String("uuid", &g.uuid));
  GPUSHARE_RETURN_IF_ERROR(r.String("model", &g.model));
  GPUSHARE_RETURN_IF_ERROR(r.Integer("memoryMiB", &g.memory_mib, 0));
  return g;
}

}  // namespace

std::string EncodeAllocationRecord(const AllocationRecord& rec) {
  std::string out = "{";
  Put(&out, "v", Int(rec.version));
  Put(&out, "node", Quote(rec.node));
  Put(&out, "containers", ArrayOf(rec.containers, EncodeContainer));
  Put(&out, "gpus", ArrayOf(rec.gpus, EncodeGpu));
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
  GPUSHARE_RETURN_IF_ERROR(r.Objects("containers", &rec.containers, DecodeContainer));
  GPUSHARE_RETURN_IF_ERROR(r.Objects("gpus", &rec.gpus, DecodeGpu));
  return rec;
}

}  // namespace gpushare::alloc
