// See library_install.h.
#include "node/library_install.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/interposer_contract.h"
#include "node/files.h"

namespace gpushare::node {
namespace {

constexpr const char* kTempPrefix = ".install-";
constexpr time_t kStaleTempSeconds = 600;

// The whole file, at most kMaxLibraryBytes.
Result<std::string> ReadSmallFile(const std::string& path, const std::string& role) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FailedPrecondition(role + " " + path + ": " + std::strerror(errno));
  const std::string too_big =
      role + " " + path + ": larger than " + std::to_string(kMaxLibraryBytes >> 20) + " MiB";
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::FailedPrecondition(role + " " + path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxLibraryBytes) {  // before reading any of it
    close(fd);
    return Status::FailedPrecondition(too_big);
  }
  std::string data;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::FailedPrecondition(role + " " + path + ": " + std::strerror(errno));
      close(fd);
      return s;
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > kMaxLibraryBytes) {  // it grew while read
      close(fd);
      return Status::FailedPrecondition(too_big);
    }
    data.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

bool ValidVersion(std::string_view v) {
  if (v.empty() || v.size() > 64 || v[0] == '.') return false;
  for (char c : v) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
          c == '_' || c == '-' || c == '+'))
      return false;
  }
  return true;
}

void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

// Removes temporary directories of installs that died more than kStaleTempSeconds ago.
void RemoveStaleTemps(const std::string& host_dir) {
  DIR* d = opendir(host_dir.c_str());
  if (!d) return;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kTempPrefix, 0) != 0) continue;
    struct stat st;
    std::string path = host_dir + "/" + name;
    if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        now - st.st_mtime > kStaleTempSeconds)
      RemoveTree(path);
  }
  closedir(d);
}

Status SyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", dir);
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok ? Status::Ok() : ErrnoStatus("cannot sync", dir);
}

// An installed directory of this name exists: it must hold exactly these bytes.
Result<InstalledLibrary> Existing(const InstalledLibrary& want, const std::string& data) {
  Result<std::string> have = ReadSmallFile(want.path, "installed library");
  if (!have.ok())
    return Status::FailedPrecondition(want.dir + " exists but its library is unreadable (" +
                                      have.status().message() + "); not overwritten");
  if (*have != data)
    return Status::FailedPrecondition(want.path +
                                      " exists with other content than this version's library; "
                                      "not overwritten (a container may have it mapped)");
  return want;
}

}  // namespace

Result<InstalledLibrary> InstallLibrary(const std::string& source, const std::string& host_dir,
                                        std::string_view version) {
  if (host_dir.empty() || host_dir[0] != '/')
    return Status::InvalidArgument("gpushare.interposer.hostDir: must be an absolute path, got \"" +
                                   host_dir + "\"");
  if (!ValidVersion(version))
    return Status::InvalidArgument("library version \"" + std::string(version) +
                                   "\": want 1-64 letters, digits, '.', '_', '-' or '+'");
  Result<std::string> data = ReadSmallFile(source, "the library to install,");
  if (!data.ok()) return data.status();
  if (data->empty())
    return Status::FailedPrecondition("the library to install, " + source + ", is empty");

  InstalledLibrary want;
  want.dir = host_dir + (host_dir.back() == '/' ? "" : "/") + std::string(version) + "-" +
             ContentHashHex(*data);
  want.path = want.dir + "/" + kLibraryFileName;
  struct stat st;
  if (lstat(want.dir.c_str(), &st) == 0) return Existing(want, *data);

  GPUSHARE_RETURN_IF_ERROR(MakeDirs(host_dir));
  RemoveStaleTemps(host_dir);
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = host_dir + "/" + kTempPrefix + std::to_string(getpid()) + "-" +
                          std::to_string(counter.fetch_add(1));
  RemoveTree(tmp);
  GPUSHARE_RETURN_IF_ERROR(MakeDir(tmp, 0755));
  Status s = WriteFileAtomically(tmp + "/" + kLibraryFileName, *data, 0644);
  if (s.ok()) s = SyncDir(tmp);
  if (!s.ok()) {
    RemoveTree(tmp);
    return s;
  }
  if (rename(tmp.c_str(), want.dir.c_str()) != 0) {
    const int err = errno;
    RemoveTree(tmp);
    // Another installer got there first: its directory must hold the same bytes.
    if (err == EEXIST || err == ENOTEMPTY) return Existing(want, *data);
    errno = err;
    return ErrnoStatus("cannot rename " + tmp + " to", want.dir);
  }
  GPUSHARE_RETURN_IF_ERROR(SyncDir(host_dir));
  want.written = true;
  return want;
}

}  // namespace gpushare::node
