// Region files for tests and benchmarks of node/region_reader.h: the layout of
// interpose/region_layout.h initialised by libgpushare-cuda.so's own initialiser
// (interpose/region_init.h), with devices and slots filled in.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "interpose/region_init.h"
#include "interpose/region_layout.h"

namespace gpushare::testing {

namespace ir = gpushare::interpose;

// "GPU-xxxxxxxx-..." -> the 16 bytes the region keeps.
inline void UuidBytes(const std::string& uuid, uint8_t out[16]) {
  std::string hex;
  for (size_t i = 4; i < uuid.size(); ++i)
    if (uuid[i] != '-') hex.push_back(uuid[i]);
  for (int i = 0; i < 16 && 2 * i + 1 < static_cast<int>(hex.size()); ++i)
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

// Device d: `uuid`, a memory limit (0 = none) and an SM limit.
inline void AddDevice(ir::RegionFile* f, int d, const std::string& uuid, uint64_t limit,
                      uint32_t sm = 0) {
  ir::RegionDevice& dev = f->devices[d];
  UuidBytes(uuid, dev.uuid);
  dev.in_use = 1;
  dev.limited = limit != 0;
  dev.memory_limit = limit;
  dev.sm_limit = sm;
}

// Slot s: a process charging `used` bytes on device d (the device total follows).
inline void AddProcess(ir::RegionFile* f, int s, int32_t pid, uint64_t start, int d,
                       uint64_t used) {
  f->slots[s].pid = pid;
  f->slots[s].start_time = start;
  f->slots[s].used[d] += used;
  f->devices[d].used += used;
  if (static_cast<uint32_t>(s + 1) > f->header.slot_high_water) f->header.slot_high_water = s + 1;
}

// A region file mapped read-write (as the interposer maps it); unmapped and closed on
// destruction.
class MappedRegion {
 public:
  explicit MappedRegion(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0 || ::ftruncate(fd_, sizeof(ir::RegionFile)) != 0) return;
    void* p = ::mmap(nullptr, sizeof(ir::RegionFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p != MAP_FAILED) {
      file_ = static_cast<ir::RegionFile*>(p);
      ir::InitialiseRegionFile(file_);
    }
  }
  ~MappedRegion() {
    if (file_ != nullptr) ::munmap(file_, sizeof(ir::RegionFile));
    if (fd_ >= 0) ::close(fd_);
  }
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ir::RegionFile* file() { return file_; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  ir::RegionFile* file_ = nullptr;
};

}  // namespace gpushare::testing
