// node/region_reader.h against region files in every bad state: valid, truncated, garbage, an
// unknown layout, not ready, not a regular file, left by dead processes, held by live ones
// (flock), written concurrently, and with its mutex held by another thread the whole time (the
// reader never takes it, so it completes).
#include "node/region_reader.h"

#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "tests/deviceplugin/fixtures.h"
#include "tests/node/region_fixture.h"

namespace gpushare::node {
namespace {

using testing::GpuUuid;
using testing::MappedRegion;
using testing::TempDir;
namespace ir = gpushare::interpose;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// Liveness by (pid, start time) decided by the test: only `live` is alive.
RegionReaderOptions PidProbe(int32_t live) {
  RegionReaderOptions o;
  o.process_alive = [live](int32_t pid, uint64_t) { return pid == live; };
  o.pids_comparable = true;
  return o;
}

FileKey KeyOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return {major(st.st_dev), minor(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

TEST(RegionReader, ReadsDevicesLimitsUsageAndLastLaunch) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  ASSERT_NE(r.file(), nullptr);
  testing::AddDevice(r.file(), 0, GpuUuid(1), 4 * kGiB, 25);
  testing::AddProcess(r.file(), 0, 100, 7, 0, kGiB);
  testing::AddProcess(r.file(), 1, 101, 8, 0, 2 * kGiB);
  r.file()->devices[0].last_launch_s = 1'700'000'000;
  RegionSkip skip;
  RegionReading got = ReadRegion(r.path(), PidProbe(101), &skip);
  ASSERT_EQ(skip, RegionSkip::kNone);
  ASSERT_EQ(got.devices.size(), 1u);
  EXPECT_EQ(got.devices[0].uuid_hex, UuidHex(GpuUuid(1)));
  EXPECT_TRUE(got.devices[0].memory_limited);
  EXPECT_EQ(got.devices[0].memory_limit, 4 * kGiB);
  EXPECT_EQ(got.devices[0].used, 2 * kGiB) << "pid 100 is dead: only pid 101's usage counts";
  EXPECT_EQ(got.devices[0].sm_limit, 25u);
  EXPECT_EQ(got.devices[0].last_launch_s, 1'700'000'000u);
  EXPECT_EQ(got.devices[0].context_charge, 0u) << "no context yet";
  EXPECT_EQ(got.devices[0].context_charge_source, "none");
  r.file()->devices[0].context_charge = 518 * kMiB;
  r.file()->devices[0].context_charge_source = 1;
  got = ReadRegion(r.path(), PidProbe(101), &skip);
  EXPECT_EQ(got.devices[0].context_charge, 518 * kMiB);
  EXPECT_EQ(got.devices[0].context_charge_source, "measured");
  r.file()->devices[0].context_charge_source = 99;  // from a newer library: not guessed
  got = ReadRegion(r.path(), PidProbe(101), &skip);
  EXPECT_EQ(got.devices[0].context_charge_source, "none");
  EXPECT_EQ(got.devices[0].context_charge, 0u);
  EXPECT_EQ(got.processes, 1);
  EXPECT_TRUE(got.live);
}

TEST(RegionReader, DeadProcessesLeaveNoUsage) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  testing::AddDevice(r.file(), 0, GpuUuid(0), 4 * kGiB);
  testing::AddProcess(r.file(), 0, 100, 7, 0, 3 * kGiB);
  r.file()->devices[0].last_launch_s = 5;
  RegionSkip skip;
  RegionReading got = ReadRegion(r.path(), PidProbe(-1), &skip);
  ASSERT_EQ(skip, RegionSkip::kNone);
  EXPECT_FALSE(got.live);
  EXPECT_EQ(got.processes, 0);
  ASSERT_EQ(got.devices.size(), 1u);
  EXPECT_EQ(got.devices[0].used, 0u);
  EXPECT_EQ(got.devices[0].memory_limit, 4 * kGiB) << "the limit is still known";
}

TEST(RegionReader, DefaultProbeUsesProcLikeTheInterposer) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  testing::AddDevice(r.file(), 0, GpuUuid(0), 4 * kGiB);
  // This process (alive) with a wrong start time: a reused PID, so dead.
  testing::AddProcess(r.file(), 0, ::getpid(), 1, 0, kGiB);
  RegionSkip skip;
  RegionReaderOptions same_ns;
  same_ns.pids_comparable = true;
  EXPECT_FALSE(ReadRegion(r.path(), same_ns, &skip).live);
  r.file()->slots[0].start_time = 0;  // unknown start time: the PID alone decides
  RegionReading got = ReadRegion(r.path(), same_ns, &skip);
  EXPECT_TRUE(got.live);
  EXPECT_EQ(got.devices[0].used, kGiB);
  EXPECT_FALSE(ProcessAlive(0, 0));
  EXPECT_FALSE(ProcessAlive(-5, 0));
}

TEST(RegionReader, FlockHoldersDecideLivenessAcrossPidNamespaces) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  testing::AddDevice(r.file(), 0, GpuUuid(0), 4 * kGiB);
  // PIDs of another namespace mean nothing here: the flock is what counts.
  testing::AddProcess(r.file(), 0, 999999, 1, 0, kGiB);
  RegionReaderOptions o;
  o.locks_known = true;
  o.locks_complete = true;
  RegionSkip skip;
  EXPECT_FALSE(ReadRegion(r.path(), o, &skip).live) << "nobody holds the file";
  ASSERT_EQ(::flock(r.fd(), LOCK_SH), 0);  // what every attached process holds
  std::set<FileKey> locked;
  ASSERT_TRUE(ReadFlockedFiles(&locked));
  EXPECT_EQ(locked.count(KeyOf(r.path())), 1u) << "/proc/locks lists our flock";
  o.flocked = locked;
  RegionReading got = ReadRegion(r.path(), o, &skip);
  EXPECT_TRUE(got.live);
  EXPECT_EQ(got.devices[0].used, kGiB);
  EXPECT_EQ(got.processes, 1);
}

// The agent in its own PID namespace (the default DaemonSet): a region without a visible flock
// and without a visible process may still be in use; the interposer's totals are reported as
// they are. In the host PID namespace every flock is visible, so none means dead.
TEST(RegionReader, WithoutVisibleLocksOrProcessesLivenessIsUnknownUnlessLocksAreComplete) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  testing::AddDevice(r.file(), 0, GpuUuid(0), 4 * kGiB);
  testing::AddProcess(r.file(), 0, 999999, 1, 0, kGiB);  // another namespace's PID
  RegionReaderOptions o;
  o.locks_known = true;
  RegionSkip skip;
  RegionReading got = ReadRegion(r.path(), o, &skip);
  EXPECT_FALSE(got.liveness_known);
  EXPECT_EQ(got.devices[0].used, kGiB);
  o.locks_complete = true;
  got = ReadRegion(r.path(), o, &skip);
  EXPECT_TRUE(got.liveness_known);
  EXPECT_FALSE(got.live);
  EXPECT_EQ(got.devices[0].used, 0u);
}

TEST(RegionReader, ParsesProcLocks) {
  TempDir dir;
  std::ofstream(dir.Sub("locks")) << "1: FLOCK  ADVISORY  READ  1234 fd:01:5678 0 EOF\n"
                                  << "1: -> FLOCK  ADVISORY  WRITE 1235 fd:01:5678 0 EOF\n"
                                  << "2: POSIX  ADVISORY  WRITE 99 08:02:77 0 EOF\n"
                                  << "3: OFDLCK ADVISORY  READ  -1 00:1b:42 0 EOF\n"
                                  << "garbage line\n";
  std::set<FileKey> got;
  ASSERT_TRUE(ReadFlockedFiles(&got, dir.Sub("locks")));
  EXPECT_EQ(got, (std::set<FileKey>{{0xfd, 1, 5678}}));
  EXPECT_FALSE(ReadFlockedFiles(&got, dir.Sub("absent")));
}

TEST(RegionReader, SkipsWhatIsNotARegionOfThisLayout) {
  TempDir dir;
  RegionSkip skip;
  ReadRegion(dir.Sub("absent"), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kMissing);
  ReadRegion(dir.path(), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kNotRegular);
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  ReadRegion(dir.Sub("fifo"), {}, &skip);  // must not block
  EXPECT_EQ(skip, RegionSkip::kNotRegular);
  std::ofstream(dir.Sub("short")) << "KSHSREG1";
  ReadRegion(dir.Sub("short"), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kTruncated);
  {
    std::ofstream g(dir.Sub("garbage"), std::ios::binary);
    std::string junk(sizeof(ir::RegionFile), '\xab');
    g << junk;
  }
  ReadRegion(dir.Sub("garbage"), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kUnknownLayout);

  MappedRegion future(dir.Sub("v2"));
  future.file()->header.layout_version = 2;
  ReadRegion(future.path(), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kUnknownLayout);
  MappedRegion bigger(dir.Sub("bigger"));
  bigger.file()->header.file_size += 4096;
  ReadRegion(bigger.path(), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kUnknownLayout);
  MappedRegion initialising(dir.Sub("init"));
  initialising.file()->header.ready = 0;
  ReadRegion(initialising.path(), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kNotReady);

  // A valid header in a file cut short (a writer truncated it, or a copy was cut).
  MappedRegion cut(dir.Sub("cut"));
  ASSERT_EQ(::ftruncate(cut.fd(), sizeof(ir::RegionHeader) + 100), 0);
  ReadRegion(cut.path(), {}, &skip);
  EXPECT_EQ(skip, RegionSkip::kTruncated);
}

TEST(RegionReader, ClampsImplausibleValues) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  testing::AddDevice(r.file(), 0, GpuUuid(0), ~uint64_t{0}, 250);
  r.file()->devices[0].used = ~uint64_t{0};
  r.file()->header.slot_high_water = 1u << 30;  // beyond kMaxSlots
  r.file()->slots[0].pid = 10;
  r.file()->slots[0].used[0] = ~uint64_t{0};
  r.file()->slots[1].pid = 11;
  r.file()->slots[1].used[0] = ~uint64_t{0};
  RegionSkip skip;
  RegionReading got = ReadRegion(r.path(), PidProbe(10), &skip);
  ASSERT_EQ(skip, RegionSkip::kNone);
  EXPECT_EQ(got.devices[0].memory_limit, kMaxPlausibleBytes);
  EXPECT_EQ(got.devices[0].used, kMaxPlausibleBytes);
  EXPECT_EQ(got.devices[0].sm_limit, 100u);
}

// A writer thread charges and releases in a loop (as processes allocating do) and holds the
// region's mutex for long stretches; every read completes with values the writer could have
// left (never torn beyond the two values it alternates between).
TEST(RegionReader, ConcurrentWriterAndHeldMutexNeverBlockOrTearTheReader) {
  TempDir dir;
  MappedRegion r(dir.Sub("region"));
  testing::AddDevice(r.file(), 0, GpuUuid(0), 8 * kGiB);
  testing::AddProcess(r.file(), 0, 100, 1, 0, kGiB);
  ir::RegionFile* f = r.file();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    uint64_t i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t v = (++i % 2 == 0) ? kGiB : 3 * kGiB;
      __atomic_store_n(&f->slots[0].used[0], v, __ATOMIC_RELAXED);
      __atomic_store_n(&f->devices[0].used, v, __ATOMIC_RELAXED);
      __atomic_store_n(&f->devices[0].last_launch_s, i, __ATOMIC_RELAXED);
    }
  });
  // The region's lock, held by another thread for the whole test.
  std::atomic<bool> locked{false};
  std::thread holder([&] {
    pthread_mutex_lock(&f->header.mutex);
    locked = true;
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pthread_mutex_unlock(&f->header.mutex);
  });
  while (!locked) std::this_thread::yield();
  RegionReaderOptions o;
  o.locks_known = true;
  o.flocked.insert(KeyOf(r.path()));
  int reads = 0;
  for (; reads < 2000; ++reads) {
    RegionSkip skip;
    RegionReading got = ReadRegion(r.path(), o, &skip);
    ASSERT_EQ(skip, RegionSkip::kNone);
    ASSERT_EQ(got.devices.size(), 1u);
    const uint64_t u = got.devices[0].used;
    ASSERT_TRUE(u == kGiB || u == 3 * kGiB) << u;
  }
  stop = true;
  writer.join();
  holder.join();
  EXPECT_EQ(reads, 2000);
}

TEST(RegionReader, UuidHex) {
  EXPECT_EQ(UuidHex("GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"),
            "00000001aaaabbbbccccdddddddddddd");
  EXPECT_EQ(UuidHex("MIG-00000001-AAAA-bbbb-cccc-dddddddddddd"),
            "00000001aaaabbbbccccdddddddddddd");
  EXPECT_EQ(UuidHex("GPU-0000"), "");
  EXPECT_EQ(UuidHex("GPU-0000000x-aaaa-bbbb-cccc-dddddddddddd"), "");
}

}  // namespace
}  // namespace gpushare::node
