#include "config/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpushare {
namespace {

std::string NotRegular(mode_t mode, const std::string& path, std::string_view example_name) {
  if (S_ISDIR(mode)) {
    return "it is a directory (name the file inside it, e.g. " + path + "/" +
           std::string(example_name) + ")";
  }
  if (S_ISFIFO(mode)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(mode)) return "it is a character device, not a regular file";
  if (S_ISBLK(mode)) return "it is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "it is a socket, not a regular file";
  return "it is not a regular file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string DescribeBytes(int64_t bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;
  auto tenths = [bytes](int64_t unit, const char* name) {
    const int64_t t = (bytes * 10 + unit / 2) / unit;
    return std::to_string(t / 10) + "." + std::to_string(t % 10) + " " + name;
  };
  std::string human;
  if (bytes >= kGiB)
    human = tenths(kGiB, "GiB");
  else if (bytes > 0 && bytes % kMiB == 0)
    human = std::to_string(bytes / kMiB) + " MiB";
  else
    human = tenths(kMiB, "MiB");
  return std::to_string(bytes) + " bytes (" + human + ")";
}

std::string OverLimit(int64_t size, int64_t limit) {
  return DescribeBytes(size) + ", more than the limit of " + DescribeBytes(limit);
}

Result<std::string> ReadInputFile(const std::string& path, const InputFileRules& rules) {
  const std::string prefix = "cannot read " + std::string(rules.what) + " " + path + ": ";
  auto failed = [&](int err) {
    const std::string msg = prefix + std::strerror(err);
    return err == ENOENT ? Status::NotFound(msg) : Status::InvalidArgument(msg);
  };
  // The type first, from the path: a FIFO or a device is never opened.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return failed(errno);
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument(prefix + NotRegular(st.st_mode, path, rules.example_name));
  // Then on the opened file, which is what is read (the path may have changed meanwhile);
  // O_NONBLOCK: should it have become a FIFO, opening it does not wait for a writer.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) return failed(errno);
  if (::fstat(fd.get(), &st) != 0) return failed(errno);
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument(prefix + NotRegular(st.st_mode, path, rules.example_name));
  if (st.st_size > rules.max_bytes)
    return Status::InvalidArgument(prefix + OverLimit(st.st_size, rules.max_bytes));
  std::string out;
  out.resize(static_cast<size_t>(st.st_size) + 1);
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (static_cast<int64_t>(have) > rules.max_bytes) break;
      out.resize(std::min<size_t>(out.size() * 2, static_cast<size_t>(rules.max_bytes) + 1));
    }
    const ssize_t n = ::read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed(errno);
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(have) > rules.max_bytes) {
    return Status::InvalidArgument(prefix + "it grew past the limit of " +
                                   DescribeBytes(rules.max_bytes) + " while it was read");
  }
  out.resize(have);
  return out;
}

}  // namespace gpushare
