// ObjectKey: a namespaced object's "namespace/name" key (what informers index pods by, client-go's
// MetaNamespaceKeyFunc), split in one place. Pure.
#pragma once

#include <string>
#include <string_view>

namespace gpushare {

struct ObjectKey {
  std::string namespace_;
  std::string name;

  // "ns/name" -> {ns, name}, split at the first '/' (a namespace holds none); a key without '/'
  // is a cluster-scoped object's name (namespace_ empty).
  static ObjectKey Of(std::string_view key);
  // The namespace part of a key without copying it ("" for a cluster-scoped name).
  static std::string_view NamespaceOf(std::string_view key);
  // "ns/name", or the name alone when namespace_ is empty.
  std::string String() const;

  bool operator==(const ObjectKey&) const = default;
};

}  // namespace gpushare
