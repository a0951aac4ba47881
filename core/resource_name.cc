#include "core/resource_name.h"

#include <string>

namespace gpushare {

namespace {

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsAlnum(char c) {
  return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}

// DNS-1123 subdomain: dot-separated labels of [a-z0-9-], each starting and ending
// alphanumeric, at most 253 characters in all.
std::string SubdomainProblem(std::string_view s) {
  if (s.empty()) return "the domain prefix before '/' is empty";
  if (s.size() > 253) return "the domain prefix is longer than 253 characters";
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (label.empty()) return "the domain prefix '" + std::string(s) + "' has an empty label";
    for (char c : label) {
      if (!IsLowerAlnum(c) && c != '-') {
        return "the domain prefix '" + std::string(s) +
               "' must be a DNS subdomain (lower-case letters, digits, '-' and '.')";
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return "the domain prefix '" + std::string(s) +
             "' must be a DNS subdomain (each label starts and ends with a letter or digit)";
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return "";
}

// The name part of a qualified name: at most 63 characters of [A-Za-z0-9_.-], starting and
// ending alphanumeric.
std::string NamePartProblem(std::string_view s) {
  if (s.empty()) return "the part after '/' is empty";
  if (s.size() > 63) {
    return "the part after '/' is " + std::to_string(s.size()) +
           " characters, at most 63 are allowed";
  }
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return "the part after '/' may contain only letters, digits, '-', '_' and '.'";
    }
  }
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) {
    return "the part after '/' must start and end with a letter or digit";
  }
  return "";
}

}  // namespace

std::string_view ResourceDomain(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return {};
  return name.substr(0, slash);
}

std::string ExtendedResourceNameProblem(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) {
    return "an extended resource name needs a domain prefix, e.g. nvidia.com/" + std::string(name);
  }
  if (name.find("kubernetes.io/") != std::string_view::npos) {
    return "names in the kubernetes.io namespace are reserved for native resources";
  }
  if (name.substr(0, 9) == "requests.") return "the prefix 'requests.' is reserved";
  if (name.find('/', slash + 1) != std::string_view::npos) return "only one '/' is allowed";
  std::string p = SubdomainProblem(name.substr(0, slash));
  if (!p.empty()) return p;
  // Kubelet checks "requests." + name, whose prefix must still fit in 253 characters.
  if (slash + 9 > 253) return "the domain prefix is too long";
  return NamePartProblem(name.substr(slash + 1));
}

}  // namespace gpushare
