// See object_key.h.
#include "core/object_key.h"

namespace gpushare {

ObjectKey ObjectKey::Of(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

std::string_view ObjectKey::NamespaceOf(std::string_view key) {
  const size_t slash = key.find('/');
  return slash == std::string_view::npos ? std::string_view() : key.substr(0, slash);
}

std::string ObjectKey::String() const {
  return namespace_.empty() ? name : namespace_ + "/" + name;
}

}  // namespace gpushare
