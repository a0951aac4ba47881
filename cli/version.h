// The version every binary reports with --version: the project's version (CMakeLists.txt) and
// the git commit it was built from (cmake/version.cmake; GPUSHARE_GIT_COMMIT for a tree
// without .git, such as an image build).
#pragma once

#include <string>
#include <string_view>

namespace gpushare::cli {

extern const char* const kVersion;    // "0.1.0"
extern const char* const kGitCommit;  // the full commit id, "<id>-dirty", or "unknown"

// "<program> <version> (commit <id>)": what --version prints.
inline std::string VersionLine(std::string_view program) {
  return std::string(program) + " " + kVersion + " (commit " + kGitCommit + ")";
}

}  // namespace gpushare::cli
