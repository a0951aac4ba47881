#include "core/gpu_selector.h"

#include <algorithm>
#include <cctype>

namespace gpushare {
namespace {

char Lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool Blank(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// As Go's strings.TrimSpace (ASCII): HAMi's reading.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && Blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && Blank(s.back())) s.remove_suffix(1);
  return s;
}

Status ParseList(const std::map<std::string, std::string>& annotations, std::string_view key,
                 std::vector<std::string>* out) {
  const auto it = annotations.find(std::string(key));
  if (it == annotations.end()) return Status::Ok();
  std::string_view rest = it->second;
  const std::string where = "annotation " + std::string(key);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view entry = Trim(rest.substr(0, comma));
    if (!entry.empty()) {
      if (entry.size() > kMaxSelectorEntryBytes)
        return Status::InvalidArgument(where + ": entry \"" + std::string(entry.substr(0, 32)) +
                                       "...\" is longer than " +
                                       std::to_string(kMaxSelectorEntryBytes) + " bytes");
      for (char c : entry)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          return Status::InvalidArgument(where + ": entry " + std::to_string(out->size() + 1) +
                                         " holds a control character");
      if (out->size() == kMaxSelectorEntries)
        return Status::InvalidArgument(where + ": more than " +
                                       std::to_string(kMaxSelectorEntries) + " entries");
      out->emplace_back(entry);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return Status::Ok();
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

bool AnyModel(const std::vector<std::string>& entries, std::string_view model) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const std::string& e) { return ModelMatches(model, e); });
}

bool AnyUuid(const std::vector<std::string>& entries, std::string_view uuid) {
  return std::find(entries.begin(), entries.end(), uuid) != entries.end();
}

}  // namespace

bool ModelMatches(std::string_view model, std::string_view entry) {
  if (entry.empty() || entry.size() > model.size()) return false;
  const auto hit = std::search(model.begin(), model.end(), entry.begin(), entry.end(),
                               [](char a, char b) { return Lower(a) == Lower(b); });
  return hit != model.end();
}

bool GpuSelector::Allows(std::string_view model, std::string_view uuid) const {
  return (use_types.empty() || AnyModel(use_types, model)) && !AnyModel(nouse_types, model) &&
         (use_uuids.empty() || AnyUuid(use_uuids, uuid)) && !AnyUuid(nouse_uuids, uuid);
}

std::optional<std::string> GpuSelector::Excludes(std::string_view model,
                                                 std::string_view uuid) const {
  if (Allows(model, uuid)) return std::nullopt;
  const std::string m = "\"" + std::string(model) + "\"";
  if (!use_types.empty() && !AnyModel(use_types, model))
    return std::string(kUseGpuTypeAnnotation) + "=" + Joined(use_types) + " does not match " + m;
  if (!nouse_types.empty() && AnyModel(nouse_types, model))
    return std::string(kNoUseGpuTypeAnnotation) + "=" + Joined(nouse_types) + " matches " + m;
  if (!use_uuids.empty() && !AnyUuid(use_uuids, uuid))
    return std::string(kUseGpuUuidAnnotation) + " does not list " + std::string(uuid);
  if (!nouse_uuids.empty() && AnyUuid(nouse_uuids, uuid))
    return std::string(kNoUseGpuUuidAnnotation) + " lists " + std::string(uuid);
  return std::nullopt;
}

std::string GpuSelector::Describe() const {
  std::string out;
  const auto add = [&out](std::string_view key, const std::vector<std::string>& v) {
    if (v.empty()) return;
    out += (out.empty() ? "" : "; ") + std::string(key) + "=" + Joined(v);
  };
  add(kUseGpuTypeAnnotation, use_types);
  add(kNoUseGpuTypeAnnotation, nouse_types);
  add(kUseGpuUuidAnnotation, use_uuids);
  add(kNoUseGpuUuidAnnotation, nouse_uuids);
  return out;
}

Result<GpuSelector> ParseGpuSelector(const std::map<std::string, std::string>& annotations) {
  GpuSelector s;
  GPUSHARE_RETURN_IF_ERROR(ParseList(annotations, kUseGpuTypeAnnotation, &s.use_types));
  GPUSHARE_RETURN_IF_ERROR(ParseList(annotations, kNoUseGpuTypeAnnotation, &s.nouse_types));
  GPUSHARE_RETURN_IF_ERROR(ParseList(annotations, kUseGpuUuidAnnotation, &s.use_uuids));
  GPUSHARE_RETURN_IF_ERROR(ParseList(annotations, kNoUseGpuUuidAnnotation, &s.nouse_uuids));
  return s;
}

std::vector<std::string> UnknownModels(const GpuSelector& s,
                                       const std::vector<std::string>& models) {
  std::vector<std::string> out;
  for (const std::vector<std::string>* list : {&s.use_types, &s.nouse_types})
    for (const std::string& e : *list)
      if (std::none_of(models.begin(), models.end(),
                       [&](const std::string& m) { return ModelMatches(m, e); }))
        out.push_back(e);
  return out;
}

}  // namespace gpushare
