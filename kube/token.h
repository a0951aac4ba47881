// BearerToken: the bearer token the client sends, either fixed or read from a file that is
// re-read whenever it changes.
//
// Service-account tokens projected into a pod rotate: kubelet replaces the file (atomically,
// through a symlink swap) well before the old token expires, and the API server starts
// rejecting the old one after its expiry. So a file-backed token is never cached forever:
// Get() stats the file on every call and re-reads it when its identity (device, inode), size or
// modification time changed. Reload() re-reads unconditionally; the client calls it after a
// 401 to pick up a token rotated within the same mtime tick. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/sync.h"
#include "core/status.h"

namespace gpushare::kube {

class BearerToken {
 public:
  static std::shared_ptr<BearerToken> Fixed(std::string token);
  static std::shared_ptr<BearerToken> FromFile(std::string path);

  // The current token. For a file: re-read when the file changed; surrounding whitespace is
  // trimmed; an unreadable or empty file is an error naming the path (the last good token is
  // then still used if there was one, so a rotation caught mid-write does not fail requests).
  Result<std::string> Get();

  // Re-reads the file now. Returns true when the token changed.
  Result<bool> Reload();

  bool file_backed() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // How many times the file was (re)read; for tests and metrics.
  int reads() const;

 private:
  BearerToken() = default;
  Status ReadLocked() GPUSHARE_REQUIRES(mu_);

  std::string path_;  // set once, before the token is shared
  mutable Mutex mu_;
  std::string token_ GPUSHARE_GUARDED_BY(mu_);
  bool have_token_ GPUSHARE_GUARDED_BY(mu_) = false;
  // File identity at the last read.
  unsigned long long dev_ GPUSHARE_GUARDED_BY(mu_) = 0, ino_ GPUSHARE_GUARDED_BY(mu_) = 0;
  long long size_ GPUSHARE_GUARDED_BY(mu_) = -1, mtime_ns_ GPUSHARE_GUARDED_BY(mu_) = 0;
  int reads_ GPUSHARE_GUARDED_BY(mu_) = 0;
};

}  // namespace gpushare::kube
