// The resource plan as data: every file in tests/testdata/resource_plan/ is one test. Commands
// (docs/testing.md):
//
//   inventory            the input describes the node's GPUs, one line each (kept for the rest
//                        of the file); prints them
//       eight-a10 | one-h100-mig                     the shapes of tests/core/test_inventories.h
//       gpu <i> [memory=MiB] [numa=N] [product="..."]  a GPU without MIG (default an A10)
//       mig-gpu <i> profile=P count=N memory=MiB [first-gi=G] [numa=N]   an H100 in MIG mode
//       mig <i> index=J profile=P gi=G ci=C memory=MiB                   one more MIG device on GPU
//       i
//   plan [format=table] [env=KEY=VALUE]... [flag=setting=VALUE]...
//                        the input is the node config file (YAML); loads it as the node agent
//                        does (config/node_config_loader.h), builds the plan for the inventory
//                        and prints it: one line per resource, one per run of devices, the notes;
//                        or the problem lines. format=table prints gpushare-node
//                        --print-resources' table instead (node/plan_printer.h).
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <optional>
#include <sstream>

#include "base/strings.h"
#include "config/node_config_loader.h"
#include "core/resource_plan.h"
#include "node/plan_printer.h"
#include "tests/core/test_inventories.h"
#include "tests/datadriven.h"

namespace gpushare {
namespace {

using datadriven::Case;

// "plan error: INVALID_ARGUMENT" and the problem lines as they are.
std::string Errors(const std::string& what, const Status& s) {
  return what + ": " + std::string(StatusCodeName(s.code())) + "\n" + s.message() + "\n";
}

// One inventory line; an error names the line.
Status AddInventoryLine(const std::string& line, Inventory* inv) {
  // Split as a command line is: `kind index key=value key="a value"`.
  std::string error;
  auto parsed = datadriven::ParseCases("", "x " + line + "\n----\n", &error);
  if (!parsed || parsed->size() != 1)
    return Status::InvalidArgument("cannot read inventory line: " + line);
  const std::vector<datadriven::Arg>& words = (*parsed)[0].args;
  if (words.empty()) return Status::Ok();
  std::map<std::string, std::string> o;
  for (size_t w = 2; w < words.size(); ++w) o[words[w].key] = words[w].value;
  auto num = [&](const std::string& k, int64_t def) -> int64_t {
    auto it = o.find(k);
    return it == o.end() ? def : std::stoll(it->second);
  };
  const std::string& kind = words[0].key;
  if (kind == "eight-a10" || kind == "one-h100-mig") {
    Inventory preset = kind == "eight-a10" ? testing::EightA10() : testing::OneH100Mig();
    for (Gpu& g : preset.gpus) inv->gpus.push_back(std::move(g));
    return Status::Ok();
  }
  if (words.size() < 2) return Status::InvalidArgument("inventory line needs a GPU index: " + line);
  const int index = std::stoi(words[1].key);
  if (kind == "gpu") {
    inv->gpus.push_back(testing::WholeGpu(index, num("memory", 23028),
                                          static_cast<int>(num("numa", -1)),
                                          o.count("product") ? o.at("product") : "NVIDIA A10"));
  } else if (kind == "mig-gpu") {
    inv->gpus.push_back(testing::MigGpu(index, o.at("profile"), static_cast<int>(num("count", 0)),
                                        num("memory", 0), static_cast<int>(num("first-gi", 7)),
                                        static_cast<int>(num("numa", 0))));
  } else if (kind == "mig") {
    for (Gpu& g : inv->gpus) {
      if (g.index != index) continue;
      MigInstance m;
      m.index = static_cast<int>(num("index", 0));
      m.profile = o.at("profile");
      m.gpu_instance_id = static_cast<int>(num("gi", 0));
      m.compute_instance_id = static_cast<int>(num("ci", 0));
      m.uuid = testing::MigUuid(index, m.index);
      m.memory_mib = num("memory", 0);
      g.mig.push_back(m);
      return Status::Ok();
    }
    return Status::InvalidArgument("no GPU " + std::to_string(index) + " for: " + line);
  } else {
    return Status::InvalidArgument("unknown inventory line: " + line);
  }
  return Status::Ok();
}

std::string PrintInventory(const Inventory& inv) {
  std::ostringstream os;
  for (const Gpu& g : inv.gpus) {
    os << g.index << " " << g.uuid << " \"" << g.product << "\" " << g.memory_mib
       << " MiB numa=" << g.numa_node << (g.mig_enabled ? " mig" : "") << "\n";
    for (const MigInstance& m : g.mig) {
      os << "  " << g.index << ":" << m.index << " " << m.uuid << " " << m.profile
         << " gi=" << m.gpu_instance_id << " ci=" << m.compute_instance_id << " " << m.memory_mib
         << " MiB\n";
    }
  }
  return os.str();
}

std::string Numa(const std::vector<int64_t>& nodes) {
  if (nodes.empty()) return "-";
  std::string s;
  for (int64_t n : nodes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

// Everything of a device but its ID and replica number, in the words of a device line. Fields
// that follow from the ID and the inventory are left out; any that does not is printed.
std::string DeviceFields(const PlannedDevice& d, const std::string& id_base, const Inventory& inv) {
  std::string s = " gpu=" + std::to_string(d.gpu_index);
  std::string inventory_uuid;
  for (const Gpu& g : inv.gpus) {
    if (g.index == d.gpu_index) inventory_uuid = g.uuid;
  }
  if (d.gpu_uuid != inventory_uuid) s += " gpu-uuid=" + d.gpu_uuid;
  if (d.device_uuid != id_base) s += " device=" + d.device_uuid;
  const std::string index = d.is_mig
                                ? std::to_string(d.gpu_index) + ":" + std::to_string(d.mig_index)
                                : std::to_string(d.gpu_index);
  if (d.device_index != index) s += " index=" + d.device_index;
  if (d.is_mig || d.mig_index != -1 || d.mig_gi != -1 || d.mig_ci != -1) {
    s += std::string(d.is_mig ? " mig=" : " not-mig mig=") + std::to_string(d.mig_index) +
         " gi=" + std::to_string(d.mig_gi) + " ci=" + std::to_string(d.mig_ci);
  }
  s += " numa=" + Numa(d.numa_nodes) + " memory=" + std::to_string(d.memory_mib);
  if (d.memory_limit_mib != 0) s += " limit=" + std::to_string(d.memory_limit_mib);
  if (d.sm_share_ppm != 0) s += " sm-ppm=" + std::to_string(d.sm_share_ppm);
  if (!d.healthy) s += " unhealthy";
  return s;
}

// A replicated device's ID is <base><separator><replica>: "<uuid>::3", memory units "<uuid>-_-3".
// Returns the part before the number, or nullopt when the ID does not end in the replica.
std::optional<std::string> Stem(const PlannedDevice& d) {
  if (d.replica < 0) return std::nullopt;
  const std::string n = std::to_string(d.replica);
  if (d.id.size() <= n.size() || d.id.compare(d.id.size() - n.size(), n.size(), n) != 0)
    return std::nullopt;
  const std::string stem = d.id.substr(0, d.id.size() - n.size());
  if (std::isdigit(static_cast<unsigned char>(stem.back()))) return std::nullopt;
  return stem;
}

// The devices of a resource, one line per run of replicas of one device: "<uuid>::{0..9} gpu=0
// ...".
std::string PrintDevices(const PlannedResource& r, const Inventory& inv) {
  std::string out;
  size_t i = 0;
  while (i < r.devices.size()) {
    const PlannedDevice& d = r.devices[i];
    auto stem = Stem(d);
    if (!stem) {
      out += "  " + d.id + (d.replica >= 0 ? " replica=" + std::to_string(d.replica) : "") +
             DeviceFields(d, d.id, inv) + "\n";
      ++i;
      continue;
    }
    // The ID without "::<n>" is what the device's UUID should be; memory units keep "-_-".
    std::string base = stem->size() > 2 && stem->substr(stem->size() - 2) == "::"
                           ? stem->substr(0, stem->size() - 2)
                           : *stem;
    const std::string fields = DeviceFields(d, base, inv);
    size_t j = i + 1;
    while (j < r.devices.size()) {
      const PlannedDevice& e = r.devices[j];
      auto s = Stem(e);
      if (!s || *s != *stem || e.replica != r.devices[j - 1].replica + 1 ||
          DeviceFields(e, base, inv) != fields)
        break;
      ++j;
    }
    const int first = d.replica, last = r.devices[j - 1].replica;
    out += "  " + *stem + "{" + std::to_string(first) +
           (last > first ? ".." + std::to_string(last) : "") + "}" + fields + "\n";
    i = j;
  }
  return out;
}

std::string PrintPlan(const ResourcePlan& plan, const Inventory& inv) {
  std::string out;
  for (const PlannedResource& r : plan.resources) {
    out += r.name + " devices=" + std::to_string(r.devices.size()) +
           " replicas=" + std::to_string(r.replicas) + " socket=" + r.socket_name;
    if (r.base_name != r.name) out += " base=" + r.base_name;
    if (!r.source_field.empty()) out += " source=" + r.source_field;
    if (r.fail_requests_greater_than_one) out += " failRequestsGreaterThanOne";
    if (r.unit_mib != 0) out += " unit-mib=" + std::to_string(r.unit_mib);
    out += "\n";
    if (plan.Find(r.name) != &r)
      out += "  (Find(\"" + r.name + "\") does not return this resource)\n";
    out += PrintDevices(r, inv);
  }
  for (const std::string& n : plan.notes) out += "note: " + n + "\n";
  return out;
}

class PlanCases {
 public:
  std::string Run(const Case& c) {
    if (c.command == "inventory") return RunInventory(c);
    if (c.command == "plan") return RunPlan(c);
    return "unknown command \"" + c.command + "\" (inventory, plan)\n";
  }

 private:
  std::string RunInventory(const Case& c) {
    inventory_ = Inventory{};
    inventory_.source = "test";
    for (const std::string& line : SplitLines(c.input)) {
      Status s;
      try {
        s = AddInventoryLine(line, &inventory_);
      } catch (const std::exception& e) {  // std::stoll, map::at: a number or a key is missing
        s = Status::InvalidArgument("cannot read inventory line \"" + line + "\": " + e.what());
      }
      if (!s.ok()) return s.message() + "\n";
    }
    return PrintInventory(inventory_);
  }

  std::string RunPlan(const Case& c) {
    Environment env;
    for (const std::string& kv : c.Values("env")) {
      const size_t eq = kv.find('=');
      env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    NodeConfigFlags flags;
    for (const std::string& kv : c.Values("flag")) {
      const size_t eq = kv.find('=');
      flags.values[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    auto loaded = LoadNodeConfigFromText(flags, env, c.input, "node.yaml");
    if (!loaded.ok()) return Errors("config error", loaded.status());
    std::string out;
    for (const std::string& n : loaded->notes) out += "config note: " + n + "\n";
    for (const std::string& w : loaded->warnings) out += "config warning: " + w + "\n";
    auto plan = BuildResourcePlan(inventory_, loaded->config);
    if (!plan.ok()) return out + Errors("plan error", plan.status());
    if (c.Value("format") == "table") {
      node::PlanPrintInput in;
      in.inventory = &inventory_;
      in.config = &loaded->config;
      in.plan = &*plan;
      in.notes = loaded->notes;
      return node::FormatPlan(in, node::PlanFormat::kTable);
    }
    return out + PrintPlan(*plan, inventory_);
  }

  Inventory inventory_;
};

const std::string kDataDir = std::string(GPUSHARE_SOURCE_DIR) + "/tests/testdata/resource_plan";

class ResourcePlanData : public ::testing::TestWithParam<std::string> {};

TEST_P(ResourcePlanData, File) {
  PlanCases cases;
  const int n = datadriven::RunDataFile(GetParam(), [&](const Case& c) { return cases.Run(c); });
  EXPECT_GT(n, 0) << GetParam() << " has no cases";
}

INSTANTIATE_TEST_SUITE_P(Testdata, ResourcePlanData,
                         ::testing::ValuesIn(datadriven::DataFiles(kDataDir)),
                         datadriven::FileParamName);

}  // namespace
}  // namespace gpushare
