// Base64 (RFC 4648, standard alphabet) for the *-data fields of a kubeconfig
// (certificate-authority-data, client-certificate-data, client-key-data), which hold PEM bytes
// encoded as base64.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpushare::kube {

// Decodes standard base64. Whitespace (newlines from wrapped YAML) is skipped; padding is
// optional; any other character outside the alphabet is an error.
Result<std::string> Base64Decode(std::string_view in);

std::string Base64Encode(std::string_view in);

}  // namespace gpushare::kube
