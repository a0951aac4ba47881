// The interpreter: see node_config_internal.h.
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/duration.h"
#include "config/node_config_internal.h"

namespace gpushare::node_config_internal {
namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ',')) {
    size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
  }
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

// Go's strconv.ParseBool, which NVIDIA's flags and environment variables go through.
std::optional<bool> ParseBoolText(const std::string& s) {
  static const std::set<std::string> t = {"1", "t", "T", "true", "TRUE", "True"};
  static const std::set<std::string> f = {"0", "f", "F", "false", "FALSE", "False"};
  if (t.count(s)) return true;
  if (f.count(s)) return false;
  return std::nullopt;
}

// Interprets the final text of each setting into the NodeConfig.
class Interpreter {
 public:
  Interpreter(Problems* p, NodeConfig* c) : p_(p), c_(c) {}

  // Checks `raw` against the row's kind, values and bounds and, when it passes, calls the row's
  // setter; a problem names raw.origin (and the file position when it came from the file).
  void Apply(const Setting& s, const Raw& raw) {
    const Value v{s, raw.value, [&](const std::string& what) {
                    p_->Add(raw.origin, what, raw.node.IsDefined() ? &raw.node : nullptr);
                  }};
    switch (s.kind) {
      case Kind::kBool:
        return ApplyBool(v);
      case Kind::kEnum:
        return ApplyEnum(v);
      case Kind::kEnumList:
        return ApplyEnumList(v);
      case Kind::kInt:
        return ApplyInt(v);
      case Kind::kIntList:
        return ApplyIntList(v);
      case Kind::kDuration:
        return ApplyDuration(v);
      case Kind::kString:
      case Kind::kPath:
        return ApplyText(v);
    }
  }

 private:
  // One value being applied, and how a problem with it is reported.
  struct Value {
    const Setting& s;
    const std::string& text;
    std::function<void(const std::string&)> bad;
    std::string Quoted() const { return "\"" + text + "\""; }
  };

  void ApplyBool(const Value& v) {
    auto b = ParseBoolText(v.text);
    if (!b) return v.bad("must be true or false, got " + v.Quoted());
    std::get<SetBool>(v.s.set)(*c_, *b);
  }

  void ApplyEnum(const Value& v) {
    const auto& allowed = v.s.values;
    if (std::find(allowed.begin(), allowed.end(), v.text) == allowed.end()) {
      std::string extra;
      if (std::string(v.s.row.key) == "deviceDiscoveryStrategy" && v.text == "tegra") {
        extra = " (Tegra devices are not supported by gpushare)";
      }
      return v.bad("must be " + yaml::OneOf(allowed) + ", got " + v.Quoted() + extra);
    }
    std::get<SetEnum>(v.s.set)(*c_, v.text);
  }

  void ApplyEnumList(const Value& v) {
    const auto& allowed = v.s.values;
    const std::vector<std::string> items = SplitCommas(v.text);
    bool ok = !items.empty();
    for (const auto& it : items) {
      if (std::find(allowed.begin(), allowed.end(), it) != allowed.end()) continue;
      v.bad("must be one or more of " + Join(allowed) + ", got \"" + it + "\"");
      ok = false;
    }
    if (items.empty()) v.bad("must name at least one of " + Join(allowed));
    if (ok) std::get<SetNames>(v.s.set)(*c_, items);
  }

  void ApplyInt(const Value& v) {
    const std::string& t = v.text;
    const bool ok = IsSmallNumber(t) || (t.size() > 1 && t[0] == '-' && IsSmallNumber(t.substr(1)));
    const int64_t x = ok ? std::stoll(t) : 0;
    if (!ok || x < v.s.min || x > v.s.max) {
      return v.bad("must be " + std::to_string(v.s.min) + ".." + std::to_string(v.s.max) +
                   ", got " + (ok ? t : v.Quoted()));
    }
    std::get<SetInt>(v.s.set)(*c_, x);
  }

  void ApplyIntList(const Value& v) {
    std::vector<uint32_t> xs;
    bool ok = true;
    for (const auto& it : v.text.empty() ? std::vector<std::string>{} : SplitCommas(v.text)) {
      if (!IsSmallNumber(it) || std::stoll(it) < v.s.min || std::stoll(it) > v.s.max) {
        v.bad("must be a list of XIDs " + std::to_string(v.s.min) + ".." + std::to_string(v.s.max) +
              ", got \"" + it + "\"");
        ok = false;
        continue;
      }
      xs.push_back(static_cast<uint32_t>(std::stoll(it)));
    }
    if (ok) std::get<SetInts>(v.s.set)(*c_, std::move(xs));
  }

  void ApplyDuration(const Value& v) {
    auto ms = ParseDurationMs(v.text);
    if (!ms) return v.bad("must be a duration like 30s, 5m or 1h (0 = never), got " + v.Quoted());
    std::get<SetDuration>(v.s.set)(*c_, std::chrono::milliseconds(*ms));
  }

  void ApplyText(const Value& v) {
    if (v.s.kind == Kind::kPath && !v.text.empty() && v.text[0] != '/') {
      return v.bad("must be an absolute path, got " + v.Quoted());
    }
    const std::string why = std::get<SetText>(v.s.set)(*c_, v.text);
    if (!why.empty()) v.bad(why);
  }

  Problems* p_;
  NodeConfig* c_;
};

// The value of `s` at the highest level that sets it (flag > environment > file), if any.
std::optional<Raw> Resolve(const Setting& s, const FileContents& file, const NodeConfigFlags& flags,
                           const Environment& env) {
  std::optional<Raw> raw;
  if (auto it = file.settings.find(s.row.key); it != file.settings.end()) raw = it->second;
  for (const char* name : {s.alt_env, s.row.env}) {
    if (name == nullptr) continue;
    if (auto it = env.find(name); it != env.end() && !it->second.empty()) {
      raw = Raw{it->second, name, YAML::Node(YAML::NodeType::Undefined)};
    }
  }
  if (auto it = flags.values.find(s.row.key); it != flags.values.end()) {
    raw = Raw{it->second, s.row.flag, YAML::Node(YAML::NodeType::Undefined)};
  }
  return raw;
}

}  // namespace

// NVIDIA's health environment variables: DP_DISABLE_HEALTHCHECKS=all|xids|<xid,...> and
// DP_ENABLE_HEALTHCHECKS=all|<xid,...>.
void ApplyNvidiaHealthEnv(const Environment& env, NodeConfig* c, Problems* p) {
  auto parse = [&](const char* name, bool disable) {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return;
    for (const auto& raw : SplitCommas(it->second)) {
      std::string item = raw;
      std::transform(item.begin(), item.end(), item.begin(), ::tolower);
      auto& ig = c->gpushare.ignored_xids;
      if (disable && (item == "all" || item == "xids")) {
        c->gpushare.health_checks_enabled = false;
      } else if (!disable && item == "all") {
        ig.clear();
      } else if (IsSmallNumber(item) && std::stoll(item) > 0 && std::stoll(item) <= 65535) {
        uint32_t x = static_cast<uint32_t>(std::stoll(item));
        if (disable) {
          if (std::find(ig.begin(), ig.end(), x) == ig.end()) ig.push_back(x);
        } else {
          ig.erase(std::remove(ig.begin(), ig.end(), x), ig.end());
        }
      } else {
        p->AddLine(std::string(name) + ": must be " +
                   (disable ? "all, xids or a comma list of XIDs" : "all or a comma list of XIDs") +
                   ", got \"" + raw + "\"");
      }
    }
  };
  parse("DP_DISABLE_HEALTHCHECKS", true);
  parse("DP_ENABLE_HEALTHCHECKS", false);
}

// Applies every setting's final value to out->config, then the rules between settings.
void ApplySettings(const FileContents& file, const NodeConfigFlags& flags, const Environment& env,
                   Problems* problems, LoadedNodeConfig* out) {
  NodeConfig& c = out->config;
  Interpreter interp(problems, &c);
  std::map<std::string, Raw> given;  // by key: the settings set at some level
  for (const auto& s : Settings()) {
    std::optional<Raw> raw = Resolve(s, file, flags, env);
    if (!raw) continue;
    interp.Apply(s, *raw);
    given[s.row.key] = *raw;
  }
  auto shared_policy = given.find("sharedDevicesAllocationPolicy"),
       own_policy = given.find("allocationPolicy");
  if (shared_policy != given.end() && own_policy != given.end() &&
      shared_policy->second.value != own_policy->second.value) {
    const Raw& own = own_policy->second;
    problems->Add(own.origin,
                  "\"" + own.value + "\" conflicts with " + shared_policy->second.origin + " \"" +
                      shared_policy->second.value + "\"; set only one of them",
                  own.node.IsDefined() ? &own.node : nullptr);
  }
  if (auto mps = given.find("mpsRoot"); mps != given.end() && !mps->second.value.empty()) {
    out->notes.push_back(mps->second.origin + ": gpushare does not run MPS; ignored");
  }
  if (given.count("nvidiaDevRoot") == 0) c.plugin.nvidia_dev_root = c.plugin.nvidia_driver_root;
}

}  // namespace gpushare::node_config_internal
