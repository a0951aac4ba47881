// Helpers for the tests of the input readers (config, inventory, trace CSVs): a scratch
// directory per test, reading a FIFO with a liveness bound that unblocks the reader should it
// wait for a writer (so that a failing test ends instead of hanging), and the bound on a
// process's peak memory that hostile inputs must stay under.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <string>

namespace gpushare::testing {

// The peak memory (KiB) a gpushare process may reach while it refuses or checks a hostile input,
// derived from what the bound protects against rather than fixed (issue 30: a constant of
// 512 MiB under AddressSanitizer was crossed by what the sanitizer's allocator happened to keep):
//   - the process's own baseline: the same binary's peak on a trivial input, measured in the
//     same build by the test;
//   - plus what one read may hold by construction of the readers (kReaderAllowanceKib): the file,
//     at most 1 MiB, held twice while it is parsed, and its parse tree, at most kMaxYamlValues
//     (20,000) values at 1 KiB each with the problems they raise (measured: 12 MiB of growth for
//     the largest document accepted, 19,955 values, in the normal build);
//   - times the build's allocator overhead (kAllocatorFactor): AddressSanitizer pads every
//     allocation with redzones and a header (measured: 2x to 3x the normal build's growth for the
//     same document; 4 counted);
//   - plus what the build's allocator keeps after it is freed (kRetainedKib): ASan's quarantine,
//     which a child run with BoundedChildEnv() keeps at 16 MiB (and 256 KiB per thread; the
//     default, 256 MiB, fills with whatever a longer run frees, which a loaded machine makes
//     longer).
// In the normal build the agent must also stay under its DaemonSet's limit, kDaemonSetLimitKib:
// that is the product's own bound.
inline constexpr long kReaderAllowanceKib = 2 * 1024 + 20000;
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsanBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAsanBuild = true;
#else
inline constexpr bool kAsanBuild = false;
#endif
#else
inline constexpr bool kAsanBuild = false;
#endif
inline constexpr long kAllocatorFactor = kAsanBuild ? 4 : 1;
inline constexpr long kQuarantineMiB = 16;
inline constexpr long kThreadQuarantineKiB = 256;
inline constexpr long kRetainedKib =
    kAsanBuild ? kQuarantineMiB * 1024 + 64 * kThreadQuarantineKiB : 0;
inline constexpr long kDaemonSetLimitKib = 128 * 1024;

inline long InputMemoryBoundKib(long baseline_kib) {
  return baseline_kib + kAllocatorFactor * kReaderAllowanceKib + kRetainedKib;
}

// The environment overrides a child should run with for InputMemoryBoundKib to hold: under
// ASan, the parent's ASAN_OPTIONS with the quarantine pinned; nothing otherwise.
inline std::map<std::string, std::string> BoundedChildEnv() {
  if (!kAsanBuild) return {};
  const char* parent = std::getenv("ASAN_OPTIONS");
  std::string opts = parent != nullptr ? parent : "";
  if (!opts.empty()) opts += ":";
  opts += "quarantine_size_mb=" + std::to_string(kQuarantineMiB) +
          ":thread_local_quarantine_size_kb=" + std::to_string(kThreadQuarantineKiB);
  return {{"ASAN_OPTIONS", opts}};
}

// A directory of its own for the running test, removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = ::testing::TempDir() + "/inputs_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `text` (bytes as they are) to `name` in the directory; returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  // Makes a FIFO `name` in the directory; returns its path ("" on failure).
  std::string Fifo(const std::string& name) const {
    std::string p = path_ + "/" + name;
    return ::mkfifo(p.c_str(), 0600) == 0 ? p : "";
  }

 private:
  std::string path_;
};

// Runs `read` (which reads `fifo`) and returns its result, or nullopt when it had not returned
// after 10 s: then a writer opens and closes the FIFO, so that the blocked reader sees its end.
template <typename Read>
auto ReadFifoWithin(const std::string& fifo, Read read) -> std::optional<decltype(read())> {
  auto done = std::async(std::launch::async, read);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::ready) return done.get();
  int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (w >= 0) ::close(w);
  return std::nullopt;
}

}  // namespace gpushare::testing
