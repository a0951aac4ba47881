// Extended resource names: the rules kubelet applies to a device plugin's resource name.
//
// Kubelet's Register handler refuses a resource name that is not an "extended resource name":
// it must carry a domain prefix ("example.com/gpu"), must not be in the kubernetes.io
// namespace, and "requests." + name must be a valid qualified name (prefix a DNS-1123
// subdomain, name part at most 63 characters of [A-Za-z0-9_.-] starting and ending
// alphanumeric). gpushare checks the same rules before it serves anything, so a bad rename is
// refused at start with the field named instead of at registration time.
#pragma once

#include <string>
#include <string_view>

namespace gpushare {

// Empty when `name` is a valid extended resource name; otherwise the reason, written for an
// operator, e.g. "the part after '/' is 70 characters, at most 63 are allowed".
std::string ExtendedResourceNameProblem(std::string_view name);

// The domain of "nvidia.com/gpu" is "nvidia.com"; empty when there is no '/'.
std::string_view ResourceDomain(std::string_view name);

}  // namespace gpushare
