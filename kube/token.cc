#include "kube/token.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace gpushare::kube {
namespace {

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::shared_ptr<BearerToken> BearerToken::Fixed(std::string token) {
  std::shared_ptr<BearerToken> t(new BearerToken());
  MutexLock lock(&t->mu_);
  t->token_ = std::move(token);
  t->have_token_ = true;
  return t;
}

std::shared_ptr<BearerToken> BearerToken::FromFile(std::string path) {
  std::shared_ptr<BearerToken> t(new BearerToken());
  t->path_ = std::move(path);
  return t;
}

Status BearerToken::ReadLocked() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return Status::Unavailable("bearer token file " + path_ + ": cannot stat");
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) return Status::Unavailable("bearer token file " + path_ + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  ++reads_;
  std::string token = Trim(ss.str());
  if (token.empty()) return Status::Unavailable("bearer token file " + path_ + ": empty");
  token_ = std::move(token);
  have_token_ = true;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_ns_ = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return Status::Ok();
}

Result<std::string> BearerToken::Get() {
  MutexLock lock(&mu_);
  if (path_.empty()) return token_;
  struct stat st {};
  bool changed = true;
  if (have_token_ && ::stat(path_.c_str(), &st) == 0) {
    long long mtime = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    changed = st.st_dev != dev_ || st.st_ino != ino_ || st.st_size != size_ || mtime != mtime_ns_;
  }
  if (changed) {
    Status s = ReadLocked();
    if (!s.ok() && !have_token_) return s;
  }
  return token_;
}

Result<bool> BearerToken::Reload() {
  MutexLock lock(&mu_);
  if (path_.empty()) return false;
  std::string before = token_;
  bool had = have_token_;
  GPUSHARE_RETURN_IF_ERROR(ReadLocked());
  return !had || before != token_;
}

int BearerToken::reads() const {
  MutexLock lock(&mu_);
  return reads_;
}

}  // namespace gpushare::kube
