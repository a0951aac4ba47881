// The layer graph, as a table: for every folder of the product, the folders its sources may
// include from. The build (CMake targets) and this table must agree; a misplaced include fails
// here before it becomes a hidden edge. core/ and base/ are also held to the standard library
// (core: no I/O, threads or clocks), and interpose/ (loaded into other people's processes)
// to itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// folder -> the folders it may include from (itself included).
const std::map<std::string, std::set<std::string>>& AllowedEdges() {
  static const std::map<std::string, std::set<std::string>> edges = {
      {"base", {"base"}},
      {"core", {"base", "core"}},
      {"config", {"base", "core", "config"}},
      {"gpu", {"base", "core", "config", "gpu"}},
      {"kube", {"base", "core", "kube"}},
      // the HTTP server of both programs; it knows no endpoint (their owners hand it routes).
      {"net", {"base", "core", "net"}},
      {"deviceplugin", {"base", "core", "proto", "deviceplugin"}},
      {"node", {"base", "core", "config", "gpu", "kube", "net", "proto", "deviceplugin", "node"}},
      // scheduler and sim: of config/, only its flags part (FlagsHeaders).
      {"scheduler", {"base", "core", "config", "kube", "net", "scheduler"}},
      {"sim", {"base", "core", "config", "sim"}},
      // cli reads interpose/region_layout.h only (SharedInterposeHeaders, for `inspect region`).
      {"cli", {"base", "core", "config", "gpu", "kube", "net", "node", "scheduler", "sim", "cli"}},
      {"interpose", {"interpose"}},
      {"fuzz", {"base", "core", "config", "gpu", "net", "scheduler", "sim", "fuzz"}},
  };
  return edges;
}

// The one interpose/ header other layers may include: the accounting region's layout, which
// gpushare-node reads (node/region_reader.h). It must stay self-contained (C headers and
// pthread.h, no interpose/ include), so including it takes none of the library's code.
const std::set<std::string>& SharedInterposeHeaders() {
  static const std::set<std::string> h = {"interpose/region_layout.h"};
  return h;
}

// The headers of config/'s gpushare_flags target (durations, flag checks, input files, CSV):
// what gpushare-scheduler and the simulator may take from config/, so that neither links the
// node configuration's loader and YAML (config/CMakeLists.txt).
const std::set<std::string>& FlagsHeaders() {
  static const std::set<std::string> h = {"config/csv.h", "config/duration.h", "config/file_read.h",
                                          "config/flag_checks.h"};
  return h;
}
const std::set<std::string>& FlagsOnlyFolders() {
  static const std::set<std::string> f = {"scheduler", "sim"};
  return f;
}

// Layers that may include SharedInterposeHeaders() (besides interpose/ itself).
const std::set<std::string>& ReadersOfInterposeLayout() {
  static const std::set<std::string> f = {"node", "cli"};
  return f;
}

// base/ headers that core/ may use: the pure ones (no threads, no file descriptors).
const std::set<std::string>& PureBaseHeaders() {
  static const std::set<std::string> h = {"base/strings.h", "base/logfmt.h"};
  return h;
}

const std::set<std::string>& StandardHeaders() {
  static const std::set<std::string> h = {"algorithm",
                                          "any",
                                          "array",
                                          "atomic",
                                          "bit",
                                          "bitset",
                                          "cassert",
                                          "cctype",
                                          "cerrno",
                                          "cfloat",
                                          "charconv",
                                          "chrono",
                                          "cinttypes",
                                          "climits",
                                          "clocale",
                                          "cmath",
                                          "compare",
                                          "complex",
                                          "concepts",
                                          "condition_variable",
                                          "cstddef",
                                          "cstdint",
                                          "cstdio",
                                          "cstdlib",
                                          "cstring",
                                          "cwchar",
                                          "deque",
                                          "exception",
                                          "execution",
                                          "expected",
                                          "filesystem",
                                          "format",
                                          "forward_list",
                                          "fstream",
                                          "functional",
                                          "future",
                                          "initializer_list",
                                          "iomanip",
                                          "ios",
                                          "iosfwd",
                                          "iostream",
                                          "istream",
                                          "iterator",
                                          "limits",
                                          "list",
                                          "locale",
                                          "map",
                                          "memory",
                                          "memory_resource",
                                          "mutex",
                                          "new",
                                          "numbers",
                                          "numeric",
                                          "optional",
                                          "ostream",
                                          "queue",
                                          "random",
                                          "ranges",
                                          "ratio",
                                          "regex",
                                          "scoped_allocator",
                                          "semaphore",
                                          "set",
                                          "shared_mutex",
                                          "source_location",
                                          "span",
                                          "sstream",
                                          "stack",
                                          "stdexcept",
                                          "stop_token",
                                          "streambuf",
                                          "string",
                                          "string_view",
                                          "system_error",
                                          "thread",
                                          "tuple",
                                          "type_traits",
                                          "typeindex",
                                          "typeinfo",
                                          "unordered_map",
                                          "unordered_set",
                                          "utility",
                                          "valarray",
                                          "variant",
                                          "vector",
                                          "version"};
  return h;
}

// Standard headers core/ may not use: I/O, threads and clocks belong to the callers.
const std::set<std::string>& ImpureStandardHeaders() {
  static const std::set<std::string> h = {
      "thread",   "mutex",  "condition_variable", "future",     "fstream",  "filesystem",
      "iostream", "chrono", "shared_mutex",       "stop_token", "semaphore"};
  return h;
}

struct Include {
  std::string where;  // file:line
  bool quoted;        // "..." rather than <...>
  std::string header;
};

std::vector<Include> IncludesOf(const fs::path& file) {
  static const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::smatch m;
    if (std::regex_search(line, m, include)) {
      out.push_back({file.string() + ":" + std::to_string(n), m[1] == "\"", m[2]});
    }
  }
  return out;
}

// Every source of `folder` (recursively), skipping generated code.
std::vector<fs::path> SourcesOf(const std::string& folder) {
  std::vector<fs::path> out;
  const fs::path root = fs::path(GPUSHARE_SOURCE_DIR) / folder;
  if (!fs::is_directory(root)) return out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cc" && ext != ".c") continue;
    if (entry.path().string().find("/generated/") != std::string::npos) continue;
    out.push_back(entry.path());
  }
  return out;
}

std::string FolderOf(const std::string& header) {
  const size_t slash = header.find('/');
  return slash == std::string::npos ? "" : header.substr(0, slash);
}

TEST(Layering, EveryFolderIncludesOnlyWhatTheTableAllows) {
  int files = 0;
  for (const auto& [folder, allowed] : AllowedEdges()) {
    for (const fs::path& file : SourcesOf(folder)) {
      ++files;
      for (const Include& inc : IncludesOf(file)) {
        if (!inc.quoted) continue;
        const std::string from = FolderOf(inc.header);
        if (folder == "interpose" && from.empty()) continue;  // interpose's own "x.h" style
        if (SharedInterposeHeaders().count(inc.header) && ReadersOfInterposeLayout().count(folder))
          continue;
        EXPECT_TRUE(allowed.count(from))
            << inc.where << ": " << folder << "/ includes \"" << inc.header << "\"; " << folder
            << "/ may include only from the folders tests/core/layering_test.cc allows it";
      }
    }
  }
  EXPECT_GT(files, 100) << "found too few sources; is GPUSHARE_SOURCE_DIR right?";
}

TEST(Layering, SchedulerAndSimulatorTakeOnlyTheFlagsPartOfConfig) {
  for (const std::string& folder : FlagsOnlyFolders()) {
    for (const fs::path& file : SourcesOf(folder)) {
      for (const Include& inc : IncludesOf(file)) {
        if (!inc.quoted || FolderOf(inc.header) != "config") continue;
        EXPECT_TRUE(FlagsHeaders().count(inc.header))
            << inc.where << ": " << folder << "/ includes \"" << inc.header << "\"; it may take "
            << "from config/ only the headers of gpushare_flags (durations, flag checks, input "
            << "files, CSV), not the node configuration";
      }
    }
  }
  // The flags part stands alone: none of its files reaches into the rest of config/.
  for (const std::string& header : FlagsHeaders()) {
    for (const char* ext : {".h", ".cc"}) {
      const fs::path file =
          fs::path(GPUSHARE_SOURCE_DIR) / (header.substr(0, header.size() - 2) + ext);
      EXPECT_TRUE(fs::exists(file)) << file << " is gone: update FlagsHeaders()";
      for (const Include& inc : IncludesOf(file)) {
        if (inc.quoted && FolderOf(inc.header) == "config") {
          EXPECT_TRUE(FlagsHeaders().count(inc.header))
              << inc.where << ": gpushare_flags includes \"" << inc.header << "\"";
        }
      }
    }
  }
}

// Private headers: the parts of one concept split into files share one, and only those files
// include it (config/node_config_internal.h: the node config loader's, whose API is
// config/node_config_loader.h; scheduler/cache_internal.h: the scheduler cache's, whose API is
// scheduler/cache.h). Tests and benches included.
TEST(Layering, PrivateHeadersStayWithTheirParts) {
  const std::map<std::string, std::string> private_to = {
      {"config/node_config_internal.h", "config/"},
      {"scheduler/cache_internal.h", "scheduler/cache"},
  };
  std::vector<std::string> folders = {"tests", "bench"};
  for (const auto& [folder, allowed] : AllowedEdges()) folders.push_back(folder);
  int seen = 0;
  for (const std::string& folder : folders) {
    for (const fs::path& file : SourcesOf(folder)) {
      const std::string rel = fs::relative(file, GPUSHARE_SOURCE_DIR).string();
      for (const Include& inc : IncludesOf(file)) {
        auto it = private_to.find(inc.header);
        if (it == private_to.end()) continue;
        ++seen;
        EXPECT_EQ(rel.rfind(it->second, 0), 0u)
            << inc.where << ": \"" << inc.header << "\" is private to " << it->second << "*";
      }
    }
  }
  EXPECT_GE(seen, 9) << "the parts themselves include them";
}

TEST(Layering, CoreIsPure) {
  int files = 0;
  for (const fs::path& file : SourcesOf("core")) {
    ++files;
    for (const Include& inc : IncludesOf(file)) {
      if (inc.quoted) {
        if (FolderOf(inc.header) == "base") {
          EXPECT_TRUE(PureBaseHeaders().count(inc.header))
              << inc.where << ": core/ includes \"" << inc.header
              << "\", which holds threads or file descriptors";
        }
      } else if (ImpureStandardHeaders().count(inc.header)) {
        ADD_FAILURE() << inc.where << ": includes <" << inc.header
                      << ">: core/ does no I/O, threads or clocks";
      } else {
        EXPECT_TRUE(StandardHeaders().count(inc.header))
            << inc.where << ": includes <" << inc.header << ">, which is not a standard header";
      }
    }
  }
  EXPECT_GT(files, 5);
}

TEST(Layering, PureBaseHeadersUseOnlyTheStandardLibrary) {
  for (const std::string& header : PureBaseHeaders()) {
    const fs::path file = fs::path(GPUSHARE_SOURCE_DIR) / header;
    ASSERT_TRUE(fs::exists(file)) << file;
    for (const Include& inc : IncludesOf(file)) {
      if (inc.quoted) {
        EXPECT_TRUE(PureBaseHeaders().count(inc.header)) << inc.where << ": " << inc.header;
      } else {
        EXPECT_TRUE(StandardHeaders().count(inc.header) &&
                    !ImpureStandardHeaders().count(inc.header))
            << inc.where << ": <" << inc.header << ">";
      }
    }
  }
}

TEST(Layering, TheSharedInterposeHeaderIsSelfContained) {
  for (const std::string& header : SharedInterposeHeaders()) {
    const fs::path file = fs::path(GPUSHARE_SOURCE_DIR) / header;
    ASSERT_TRUE(fs::exists(file)) << file;
    for (const Include& inc : IncludesOf(file)) {
      EXPECT_FALSE(inc.quoted) << inc.where << ": " << inc.header
                               << ": the shared layout header includes no project header";
      EXPECT_TRUE(inc.header == "stdint.h" || inc.header == "stddef.h" || inc.header == "pthread.h")
          << inc.where << ": <" << inc.header << ">";
    }
  }
}

// Every lock of the product is one clang's -Wthread-safety checks (`make lint`): base/sync.h's
// Mutex, SharedMutex and CondVar with their scoped holders, and the members they guard marked
// GPUSHARE_GUARDED_BY. A bare standard mutex, lock or condition variable outside base/ is
// refused here, so an unchecked lock cannot come back unnoticed.
TEST(Layering, EveryLockOutsideBaseIsOneTheCompilerChecks) {
  static const std::regex bare(
      R"(std::(mutex|shared_mutex|recursive_mutex|timed_mutex|shared_timed_mutex|)"
      R"(condition_variable(_any)?|lock_guard|unique_lock|shared_lock|scoped_lock)\b)");
  int files = 0;
  for (const auto& [folder, allowed] : AllowedEdges()) {
    if (folder == "base") continue;
    for (const fs::path& f : SourcesOf(folder)) {
      ++files;
      std::ifstream in(f);
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const size_t comment = line.find("//");
        const std::string code = comment == std::string::npos ? line : line.substr(0, comment);
        EXPECT_FALSE(std::regex_search(code, bare))
            << f.string() << ":" << n << ": " << line << "\n(use base/sync.h: Mutex, MutexLock, "
            << "SharedMutex, ReaderLock, WriterLock, CondVar, and mark what it guards)";
      }
    }
  }
  EXPECT_GT(files, 100);
}

// The table names every product folder: a new folder needs its row.
TEST(Layering, TheTableNamesEveryFolderWithSources) {
  const std::set<std::string> not_product = {"tests",    "bench",  "build",      "proto",
                                             "examples", "deploy", "docs",       "e2e",
                                             "scripts",  "cmake",  "gpu-results"};
  for (const auto& entry : fs::directory_iterator(GPUSHARE_SOURCE_DIR)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || not_product.count(name) || name.rfind("build", 0) == 0)
      continue;
    if (SourcesOf(name).empty()) continue;
    EXPECT_TRUE(AllowedEdges().count(name))
        << name << "/ holds C++ sources but has no row in the layer table";
  }
}

}  // namespace
