// See inspect_text.h.
#include "cli/gpushare/inspect_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string_view>

#include "base/strings.h"
#include "core/memshare.h"

namespace gpushare::cli::inspect {
namespace {

namespace ms = memshare;
using namespace kube::inspect;
using Json = nlohmann::ordered_json;

std::string GiB(int64_t mib) {
  char buf[32];
  if (mib % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%" PRId64, mib / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(mib) / 1024.0);
  }
  return buf;
}

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "0%";
  return std::to_string(part * 100 / whole) + "%";
}

// ---- text -------------------------------------------------------------------------------------

// Rows of cells, printed in columns two spaces apart.
class Columns {
 public:
  void Row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string Render() const {
    std::vector<size_t> width;
    for (const auto& r : rows_) {
      if (width.size() < r.size()) width.resize(r.size());
      for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Or(const std::string& s, const char* dash = "-") {
  return s.empty() ? dash : s;
}

size_t MaxGpuIndex(const View& v) {
  size_t n = 0;
  for (const NodeView& node : v.nodes) {
    for (const GpuView& g : node.gpus) n = std::max(n, static_cast<size_t>(g.index) + 1);
  }
  return n;
}

const GpuView* FindGpu(const NodeView& n, int index) {
  for (const GpuView& g : n.gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

// Devices of the non-memory GPU resources: held / offered.
bool DeviceTotals(const NodeView& n, int64_t* used, int64_t* offered) {
  bool any = false;
  for (const ResourceView& r : n.resources) {
    if (r.name == ms::kResourceName || r.name == ms::kGpuCountResource) continue;
    any = true;
    *used += r.allocated;
    *offered += r.capacity;
  }
  return any;
}

std::string PendingSection(const View& v) {
  if (v.pending.empty()) return "";
  Columns c;
  c.Row({"PENDING POD", "NAMESPACE", "REQUEST", "REASON", "MESSAGE"});
  for (const PendingPod& p : v.pending) {
    std::string req;
    for (const auto& [name, n] : p.requests)
      req += (req.empty() ? "" : ",") + name + "=" + std::to_string(n);
    c.Row({p.name, p.namespace_, req, Or(p.reason), Or(p.message)});
  }
  return "\n" + c.Render();
}

std::string ClusterLine(const Totals& t) {
  return "Allocated/Total GPU Memory In Cluster:\n" + GiB(t.memory_allocated_mib) + "/" +
         GiB(t.memory_total_mib) + " (" + Percent(t.memory_allocated_mib, t.memory_total_mib) +
         ")\n";
}

std::string ShareCell(const PodShare& s) {
  std::string out;
  for (const ContainerShare& c : s.containers) {
    std::string part;
    if (c.kind == "mig") {
      part = Or(c.profile, "mig");
      for (int r : c.replicas) part += "#" + std::to_string(r);
    } else if (c.kind == "replica") {
      for (int r : c.replicas) part += (part.empty() ? "#" : ",#") + std::to_string(r);
      if (c.memory_mib > 0) part += ":" + GiB(c.memory_mib);
    } else if (c.kind == "unknown") {
      part = "?";
    } else {
      part = GiB(c.memory_mib);
    }
    out += (out.empty() ? "" : "+") + part;
  }
  return out;
}

std::string YamlScalar(const Json& j) {
  if (j.is_string())
    return Json(j.get<std::string>()).dump(-1, ' ', false, Json::error_handler_t::replace);
  return j.dump();
}

void YamlNode(const Json& j, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const Json& v = it.value();
      *out += pad + it.key() + ":";
      if ((v.is_object() || v.is_array()) && !v.empty()) {
        *out += "\n";
        YamlNode(v, v.is_array() ? indent : indent + 2, out);
      } else {
        *out += " " + (v.is_object() ? "{}" : v.is_array() ? "[]" : YamlScalar(v)) + "\n";
      }
    }
  } else if (j.is_array()) {
    for (const Json& v : j) {
      if (v.is_object() && !v.empty()) {
        std::string inner;
        YamlNode(v, indent + 2, &inner);
        *out += pad + "- " + inner.substr(indent + 2);
      } else if (v.is_array() && !v.empty()) {
        *out += pad + "-\n";
        YamlNode(v, indent + 2, out);
      } else {
        *out += pad + "- " + (v.is_object() ? "{}" : v.is_array() ? "[]" : YamlScalar(v)) + "\n";
      }
    }
  }
}

}  // namespace

Result<Input> ReadObjectsFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::InvalidArgument(path + ": cannot read");
  std::string text;
  constexpr size_t kMax = 64u << 20;
  text.resize(kMax + 1);
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  if (text.size() > kMax) return Status::InvalidArgument(path + ": larger than 64 MiB");
  return ParseObjects(text, path);
}

std::string ToYaml(const Json& json) {
  std::string out;
  YamlNode(json, 0, &out);
  return out;
}

std::string Table(const View& v) {
  const size_t ngpu = MaxGpuIndex(v);
  bool pending_col = false, devices_col = false, unhealthy = false;
  for (const NodeView& n : v.nodes) {
    pending_col |= n.pending_memory_mib > 0;
    int64_t u = 0, o = 0;
    devices_col |= DeviceTotals(n, &u, &o);
  }
  Columns c;
  std::vector<std::string> head = {"NAME", "IPADDRESS"};
  for (size_t i = 0; i < ngpu; ++i) head.push_back("GPU" + std::to_string(i) + "(Allocated/Total)");
  if (pending_col) head.push_back("PENDING(Allocated)");
  head.push_back("GPU Memory(GiB)");
  if (devices_col) head.push_back("GPU Devices(Used/Offered)");
  c.Row(head);
  for (const NodeView& n : v.nodes) {
    std::vector<std::string> row = {n.name, Or(n.address)};
    for (size_t i = 0; i < ngpu; ++i) {
      const GpuView* g = FindGpu(n, static_cast<int>(i));
      if (g == nullptr) {
        row.push_back("");
        continue;
      }
      std::string cell = GiB(g->memory_allocated_mib) + "/" + GiB(g->memory_total_mib);
      if (g->health == "Unhealthy") {
        cell += "*";
        unhealthy = true;
      }
      row.push_back(cell);
    }
    if (pending_col) row.push_back(GiB(n.pending_memory_mib));
    row.push_back(GiB(n.memory_allocated_mib) + "/" + GiB(n.memory_total_mib));
    if (devices_col) {
      int64_t used = 0, offered = 0;
      row.push_back(DeviceTotals(n, &used, &offered)
                        ? std::to_string(used) + "/" + std::to_string(offered)
                        : "");
    }
    c.Row(row);
  }
  std::string out = c.Render();
  out += std::string(78, '-') + "\n";
  out += ClusterLine(v.totals);
  if (unhealthy) out += "* unhealthy GPU\n";
  return out + PendingSection(v);
}

std::string Detail(const View& v) {
  std::string out;
  for (const NodeView& n : v.nodes) {
    out += "NAME:       " + n.name + "\n";
    out += "IPADDRESS:  " + Or(n.address) + "\n\n";
    std::set<std::pair<std::string, std::string>> pods;
    for (const GpuView& g : n.gpus) {
      for (const PodShare& s : g.pods) pods.insert({s.namespace_, s.name});
    }
    for (const PodShare& s : n.unplaced) pods.insert({s.namespace_, s.name});
    Columns c;
    std::vector<std::string> head = {"NAME", "NAMESPACE"};
    for (const GpuView& g : n.gpus) head.push_back("GPU" + std::to_string(g.index) + "(Allocated)");
    if (n.pending_memory_mib > 0) head.push_back("PENDING(Allocated)");
    c.Row(head);
    for (const auto& [ns, name] : pods) {
      std::vector<std::string> row = {name, ns};
      for (const GpuView& g : n.gpus) {
        std::string cell = "0";
        for (const PodShare& s : g.pods) {
          if (s.namespace_ == ns && s.name == name) cell = ShareCell(s);
        }
        row.push_back(cell);
      }
      if (n.pending_memory_mib > 0) {
        std::string cell = "0";
        for (const PodShare& s : n.unplaced) {
          if (s.namespace_ == ns && s.name == name) cell = GiB(s.memory_mib);
        }
        row.push_back(cell);
      }
      c.Row(row);
    }
    out += c.Render();
    for (const GpuView& g : n.gpus) {
      out += "GPU" + std::to_string(g.index) + ": " + Or(g.model) + ", " + Or(g.mode) + ", " +
             g.health + ", " + GiB(g.memory_allocated_mib) + "/" + GiB(g.memory_total_mib) + " GiB";
      if (g.units_total > 0)
        out += ", units " + std::to_string(g.units_allocated) + "/" + std::to_string(g.units_total);
      if (g.devices_used > 0) out += ", devices " + std::to_string(g.devices_used);
      out += ", clients " + std::to_string(g.clients);
      if (g.compute_percent > 0) out += ", compute " + std::to_string(g.compute_percent) + "%";
      out += "\n";
    }
    for (const ResourceView& r : n.resources) {
      out += "Resource " + r.name + ": " + std::to_string(r.allocated) + "/" +
             std::to_string(r.capacity) + " allocated\n";
    }
    out += "Allocated:  " + GiB(n.memory_allocated_mib) + " (" +
           Percent(n.memory_allocated_mib, n.memory_total_mib) + ")\n";
    out += "Total:      " + GiB(n.memory_total_mib) + "\n";
    for (const std::string& p : n.problems) out += "problem: " + OneLine(p) + "\n";
    out += std::string(78, '-') + "\n";
  }
  out += ClusterLine(v.totals);
  return out + PendingSection(v);
}

std::string Wide(const View& v) {
  Columns c;
  c.Row({"NODE", "IPADDRESS", "GPU", "UUID", "MODEL", "MODE", "HEALTH", "MEMORY(GiB)", "UNITS",
         "DEVICES", "CLIENTS", "PODS"});
  for (const NodeView& n : v.nodes) {
    for (const GpuView& g : n.gpus) {
      std::string pods;
      for (const PodShare& s : g.pods)
        pods += (pods.empty() ? "" : ",") + s.namespace_ + "/" + s.name;
      c.Row({n.name, Or(n.address), std::to_string(g.index), Or(g.uuid), Or(g.model), Or(g.mode),
             g.health, GiB(g.memory_allocated_mib) + "/" + GiB(g.memory_total_mib),
             g.units_total > 0
                 ? std::to_string(g.units_allocated) + "/" + std::to_string(g.units_total)
                 : "-",
             std::to_string(g.devices_used), std::to_string(g.clients), Or(pods)});
    }
  }
  std::string out = c.Render();
  out += std::string(78, '-') + "\n";
  out += ClusterLine(v.totals);
  return out + PendingSection(v);
}

}  // namespace gpushare::cli::inspect
