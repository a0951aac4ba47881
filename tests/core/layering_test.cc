// core/ is pure: it includes only the C++ standard library and other core/ headers. This test
// reads every source under core/ and fails on any other #include.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

const std::set<std::string>& StandardHeaders() {
  static const std::set<std::string> h = {
      "algorithm", "any", "array", "atomic", "bit", "bitset", "cassert", "cctype", "cerrno",
      "cfloat", "charconv", "chrono", "cinttypes", "climits", "clocale", "cmath", "compare",
      "complex", "concepts", "cstddef", "cstdint", "cstdio", "cstdlib", "cstring", "cwchar",
      "deque", "exception", "execution", "expected", "filesystem", "format", "forward_list",
      "functional", "initializer_list", "iomanip", "ios", "iosfwd", "iostream", "istream",
      "iterator", "limits", "list", "locale", "map", "memory", "memory_resource", "new",
      "numbers", "numeric", "optional", "ostream", "queue", "random", "ranges", "ratio",
      "regex", "scoped_allocator", "set", "source_location", "span", "sstream", "stack",
      "stdexcept", "streambuf", "string", "string_view", "system_error", "tuple",
      "type_traits", "typeindex", "typeinfo", "unordered_map", "unordered_set", "utility",
      "valarray", "variant", "vector", "version"};
  return h;
}

// Headers that would break the rule although they are "standard-ish": I/O and threads.
const std::set<std::string>& Forbidden() {
  static const std::set<std::string> h = {"thread", "mutex", "condition_variable", "future",
                                          "fstream", "filesystem", "iostream", "chrono",
                                          "shared_mutex", "stop_token", "semaphore"};
  return h;
}

TEST(Layering, CoreIncludesOnlyStdAndCore) {
  namespace fs = std::filesystem;
  const fs::path core = fs::path(GPUSHARE_SOURCE_DIR) / "core";
  ASSERT_TRUE(fs::is_directory(core)) << core;
  const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(core)) {
    const auto ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cc") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string where = entry.path().string() + ":" + std::to_string(n) + ": ";
      const std::string header = m[2];
      if (m[1] == "\"") {
        EXPECT_EQ(header.rfind("core/", 0), 0u)
            << where << "includes \"" << header << "\", which is outside core/";
      } else {
        if (Forbidden().count(header)) {
          ADD_FAILURE() << where << "includes <" << header
                        << ">: core/ does no I/O, threads or clocks";
        } else {
          EXPECT_TRUE(StandardHeaders().count(header))
              << where << "includes <" << header << ">, which is not a standard header";
        }
      }
    }
  }
  EXPECT_GT(files, 5) << "found too few core sources; is GPUSHARE_SOURCE_DIR right?";
}

}  // namespace
