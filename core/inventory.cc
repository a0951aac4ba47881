#include "core/inventory.h"

#include <charconv>

namespace gpushare {

const Gpu* Inventory::FindByIndex(int index) const {
  for (const auto& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

const Gpu* Inventory::FindByUuid(const std::string& uuid) const {
  for (const auto& g : gpus) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

const Gpu* Inventory::FindMigOwner(const std::string& mig_uuid, const MigInstance** mig) const {
  for (const auto& g : gpus) {
    for (const auto& m : g.mig) {
      if (m.uuid == mig_uuid) {
        if (mig != nullptr) *mig = &m;
        return &g;
      }
    }
  }
  if (mig != nullptr) *mig = nullptr;
  return nullptr;
}

namespace {

// Parses "<digits><suffix>" at the front of `s`; returns the number and advances `s` past the
// suffix. Fails on no digits, a leading zero, or a missing suffix.
bool TakeCount(std::string_view& s, std::string_view suffix, int* out) {
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || n > 6 || (n > 1 && s[0] == '0')) return false;
  if (s.substr(n, suffix.size()) != suffix) return false;
  int v = 0;
  std::from_chars(s.data(), s.data() + n, v);
  if (v <= 0) return false;
  *out = v;
  s.remove_prefix(n + suffix.size());
  return true;
}

bool IsAttributeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsHex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

bool IsUuidBody(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i : {8u, 13u, 18u, 23u}) {
    if (s[i] != '-') return false;
  }
  return IsHex(s.substr(0, 8)) && IsHex(s.substr(9, 4)) && IsHex(s.substr(14, 4)) &&
         IsHex(s.substr(19, 4)) && IsHex(s.substr(24, 12));
}

bool IsSmallNumber(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool IsGpuUuid(const std::string& s) {
  return s.rfind("GPU-", 0) == 0 && IsUuidBody(std::string_view(s).substr(4));
}

bool IsMigUuid(const std::string& s) {
  if (s.rfind("MIG-", 0) != 0) return false;
  std::string_view rest = std::string_view(s).substr(4);
  if (IsUuidBody(rest)) return true;
  // MIG-GPU-<uuid>/<gi>/<ci>
  if (rest.substr(0, 4) != "GPU-" || rest.size() < 40) return false;
  if (!IsUuidBody(rest.substr(4, 36)) || rest.substr(40, 1) != "/") return false;
  std::string_view ids = rest.substr(41);
  size_t slash = ids.find('/');
  return slash != std::string_view::npos && IsSmallNumber(ids.substr(0, slash)) &&
         IsSmallNumber(ids.substr(slash + 1));
}

std::optional<MigProfileSlices> ParseMigProfile(const std::string& profile) {
  std::string_view s(profile);
  MigProfileSlices out;
  // Optional "<c>c." prefix: try it on a copy, fall back to the G-only form.
  std::string_view probe = s;
  int c = 0;
  if (TakeCount(probe, "c.", &c)) {
    out.compute_slices = c;
    s = probe;
  }
  if (!TakeCount(s, "g.", &out.gpu_slices)) return std::nullopt;
  // Memory: "<n>gb".
  if (!TakeCount(s, "gb", &out.memory_gb)) return std::nullopt;
  if (out.compute_slices == 0) out.compute_slices = out.gpu_slices;
  if (out.compute_slices > out.gpu_slices) return std::nullopt;
  // Attributes: "+me", "+gfx", "+me.all", ...
  while (!s.empty()) {
    if (s[0] != '+') return std::nullopt;
    s.remove_prefix(1);
    size_t n = 0;
    while (n < s.size() && (IsAttributeChar(s[n]) || (s[n] == '.' && n > 0))) ++n;
    if (n == 0 || s[n - 1] == '.') return std::nullopt;
    out.attributes.emplace_back(s.substr(0, n));
    s.remove_prefix(n);
  }
  return out;
}

}  // namespace gpushare
