// See files.h.
#include "node/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpushare::node {

Status ErrnoStatus(const std::string& what, const std::string& path) {
  return Status::Unavailable(what + " " + path + ": " + std::strerror(errno));
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("cannot create", path);
  if (chmod(path.c_str(), mode) != 0) return ErrnoStatus("cannot set permissions of", path);
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string prefix = path.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return ErrnoStatus("cannot create", prefix);
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus("cannot write", tmp);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = ErrnoStatus("cannot write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  bool ok = fsync(fd) == 0 && fchmod(fd, mode) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoStatus("cannot finish", path);
    unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

uint64_t ContentHash64(const std::string& data) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string ContentHashHex(const std::string& data) {
  char text[17];
  snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(ContentHash64(data)));
  return text;
}

}  // namespace gpushare::node
