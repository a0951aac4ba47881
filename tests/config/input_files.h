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
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>

namespace gpushare::testing {

// The peak resident set (KiB) a gpushare binary may reach while it refuses or checks a hostile
// input: well under the agent's 128 MiB DaemonSet limit (the agent serves in about 23 MiB and
// peaks at 35 MiB with the largest config it accepts). Under AddressSanitizer the process starts
// at about 128 MiB and freed memory is held in quarantine, so the bound there only catches
// growth with the input (the unbounded readers took 0.5 to 24 GB).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr long kInputMemoryBoundKib = 512 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr long kInputMemoryBoundKib = 512 * 1024;
#else
inline constexpr long kInputMemoryBoundKib = 64 * 1024;
#endif
#else
inline constexpr long kInputMemoryBoundKib = 64 * 1024;
#endif

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
