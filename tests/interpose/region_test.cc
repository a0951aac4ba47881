// The shared region: atomic reservation across processes, robust recovery from a process killed
// inside the critical section, reclaim of dead processes (SIGKILL, zombies, reused PIDs),
// saturating arithmetic, and versioned files.
#include "interpose/region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "tests/interpose/probe.h"

namespace gpushare::interpose {
namespace {

using testing::ScratchDir;

uint8_t kUuid[16] = {0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

DeviceLimits Limit(uint64_t bytes) {
  DeviceLimits l;
  l.memory_limited = true;
  l.memory_limit = bytes;
  return l;
}

int32_t Self() {
  return static_cast<int32_t>(getpid());
}

// This process's view of a region file: attached, registered, with the test device (limit 1000).
struct Member {
  Region region;
  int slot = -1;
  int dev = -1;
  bool Join(const std::string& path) {
    char err[256];
    if (!region.Attach(path.c_str(), err, sizeof(err))) return false;
    slot = region.RegisterProcess(Self(), ProcStartTime(Self()));
    dev = region.FindOrAddDevice(kUuid, Limit(1000));
    return slot >= 0 && dev >= 0;
  }
};

TEST(Region, ReservesUpToTheLimitExactly) {
  ScratchDir dir;
  Region r;
  char err[256];
  ASSERT_TRUE(r.Attach(dir.File("region").c_str(), err, sizeof(err))) << err;
  int slot = r.RegisterProcess(Self(), ProcStartTime(Self()));
  ASSERT_GE(slot, 0);
  int dev = r.FindOrAddDevice(kUuid, Limit(1000));
  ASSERT_GE(dev, 0);
  EXPECT_EQ(r.Reserve(slot, dev, 600), ReserveResult::kOk);
  EXPECT_EQ(r.Reserve(slot, dev, 401), ReserveResult::kOverLimit);
  EXPECT_EQ(r.Reserve(slot, dev, 400), ReserveResult::kOk) << "the exact boundary fits";
  EXPECT_EQ(r.Reserve(slot, dev, 1), ReserveResult::kOverLimit);
  EXPECT_EQ(r.Used(dev), 1000u);
  r.Release(slot, dev, 600);
  EXPECT_EQ(r.Used(dev), 400u);
  // Releasing more than was charged never wraps the counters.
  r.Release(slot, dev, 5000);
  EXPECT_EQ(r.Used(dev), 0u);
  EXPECT_EQ(r.SlotUsed(slot, dev), 0u);
  // A forced charge may exceed the limit; the next reservation then sees no room, no underflow.
  r.Charge(slot, dev, 1500);
  EXPECT_EQ(r.Reserve(slot, dev, 1), ReserveResult::kOverLimit);
  EXPECT_EQ(r.Used(dev), 1500u);
  r.Detach();
}

TEST(Region, DevicesAreKeyedByUuidAndKeepTheFirstLimits) {
  ScratchDir dir;
  Region a, b;
  char err[256];
  ASSERT_TRUE(a.Attach(dir.File("region").c_str(), err, sizeof(err))) << err;
  ASSERT_TRUE(b.Attach(dir.File("region").c_str(), err, sizeof(err))) << err;
  int da = a.FindOrAddDevice(kUuid, Limit(1000));
  uint8_t other[16] = {7};
  int db_other = b.FindOrAddDevice(other, Limit(50));
  int db = b.FindOrAddDevice(kUuid, Limit(999999));
  EXPECT_EQ(da, db);
  EXPECT_NE(db_other, db);
  EXPECT_EQ(b.file()->devices[db].memory_limit, 1000u);
  a.Detach();
  b.Detach();
}

TEST(Region, FirstAttachReinitialisesStaleOrForeignFiles) {
  ScratchDir dir;
  std::string path = dir.File("region");
  // A truncated file and a file from another layout version, with nobody attached: replaced.
  dir.Write("region", "garbage");
  Region r;
  char err[256];
  ASSERT_TRUE(r.Attach(path.c_str(), err, sizeof(err))) << err;
  EXPECT_EQ(r.file()->header.magic, kRegionMagic);
  int slot = r.RegisterProcess(Self(), 0);
  int dev = r.FindOrAddDevice(kUuid, Limit(100));
  EXPECT_EQ(r.Reserve(slot, dev, 100), ReserveResult::kOk);
  r.file()->header.layout_version = 99;
  r.Detach();
  Region again;
  ASSERT_TRUE(again.Attach(path.c_str(), err, sizeof(err))) << err;
  EXPECT_EQ(again.file()->header.layout_version, kRegionLayoutVersion);
  EXPECT_EQ(again.file()->devices[0].in_use, 0u) << "usage of processes that are gone is dropped";
  again.Detach();
}

TEST(Region, RefusesAnUnknownLayoutThatIsStillInUse) {
  ScratchDir dir;
  std::string path = dir.File("region");
  dir.Write("region", std::string(4096, 'x'));
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  pid_t child = fork();
  if (child == 0) {  // an "old library" process holding the file
    int fd = open(path.c_str(), O_RDWR);
    flock(fd, LOCK_SH);
    char c = 1;
    ssize_t ignored = write(hold[1], &c, 1);
    (void)ignored;
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(hold[0], &c, 1), 1);
  Region r;
  char err[512];
  EXPECT_FALSE(r.Attach(path.c_str(), err, sizeof(err)));
  EXPECT_NE(std::string(err).find("unknown layout"), std::string::npos) << err;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(r.Attach(path.c_str(), err, sizeof(err))) << "alone again: reinitialised";
  r.Detach();
}

// N processes race for the same limit for many rounds. Each round every process tries to
// reserve `chunk` at the same instant; winners hold it until everyone has tried. A shared
// counter of bytes actually held proves the limit is never exceeded, and exactly
// limit / chunk processes win each round.
TEST(Region, ConcurrentProcessesNeverOvercommit) {
  ScratchDir dir;
  std::string path = dir.File("region");
  constexpr int kProcs = 8;
  constexpr int kRounds = 300;
  constexpr uint64_t kLimit = 1000, kChunk = 300;
  struct Shared {
    pthread_barrier_t barrier;
    std::atomic<uint64_t> held;
    std::atomic<uint64_t> held_max;
    std::atomic<int> wins[kRounds];
  };
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(sh, MAP_FAILED);
  memset(static_cast<void*>(sh), 0, sizeof(Shared));
  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &ba, kProcs);
  {
    Region setup;
    char err[256];
    ASSERT_TRUE(setup.Attach(path.c_str(), err, sizeof(err))) << err;
    setup.FindOrAddDevice(kUuid, Limit(kLimit));
    setup.Detach();
  }
  pid_t kids[kProcs];
  for (int i = 0; i < kProcs; ++i) {
    kids[i] = fork();
    if (kids[i] == 0) {
      Region r;
      char err[256];
      if (!r.Attach(path.c_str(), err, sizeof(err))) _exit(3);
      int slot = r.RegisterProcess(Self(), ProcStartTime(Self()));
      int dev = r.FindOrAddDevice(kUuid, Limit(kLimit));
      for (int round = 0; round < kRounds; ++round) {
        pthread_barrier_wait(&sh->barrier);
        bool won = r.Reserve(slot, dev, kChunk) == ReserveResult::kOk;
        if (won) {
          uint64_t now = sh->held.fetch_add(kChunk) + kChunk;
          uint64_t m = sh->held_max.load();
          while (now > m && !sh->held_max.compare_exchange_weak(m, now)) {
          }
          sh->wins[round].fetch_add(1);
        }
        pthread_barrier_wait(&sh->barrier);
        if (won) {
          sh->held.fetch_sub(kChunk);
          r.Release(slot, dev, kChunk);
        }
        pthread_barrier_wait(&sh->barrier);
      }
      _exit(0);
    }
  }
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  EXPECT_LE(sh->held_max.load(), kLimit);
  for (int round = 0; round < kRounds; ++round)
    ASSERT_EQ(sh->wins[round].load(), static_cast<int>(kLimit / kChunk)) << "round " << round;
  munmap(sh, sizeof(Shared));
}

int g_park_fd = -1;
void ParkInCriticalSection() {
  char c = 1;
  ssize_t ignored = write(g_park_fd, &c, 1);
  (void)ignored;
  for (;;) pause();
}

TEST(Region, ProcessKilledInsideTheCriticalSectionBlocksNobody) {
  ScratchDir dir;
  std::string path = dir.File("region");
  Member m;
  ASSERT_TRUE(m.Join(path));
  Region& r = m.region;
  int me = m.slot, dev = m.dev;
  int parked[2];
  ASSERT_EQ(pipe(parked), 0);
  pid_t child = fork();
  if (child == 0) {
    Member member;
    if (!member.Join(path) || member.region.Reserve(member.slot, dev, 700) != ReserveResult::kOk)
      _exit(4);
    g_park_fd = parked[1];
    Region::test_hook_in_critical_section = &ParkInCriticalSection;
    member.region.Reserve(member.slot, dev, 100);  // parks holding the lock, mid-update
    _exit(5);
  }
  char c;
  ASSERT_EQ(read(parked[0], &c, 1), 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto start = std::chrono::steady_clock::now();
  // The lock comes back at once (EOWNERDEAD), the dead child's 700 bytes are reclaimed, and the
  // full limit is available to this process.
  EXPECT_EQ(r.Reserve(me, dev, 1000), ReserveResult::kOk);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(r.file()->header.repairs, 1u);
  EXPECT_EQ(r.Used(dev), 1000u);
  uint64_t sum = 0;
  for (const RegionSlot& s : r.file()->slots)
    if (s.pid != 0) sum += s.used[dev];
  EXPECT_EQ(sum, r.Used(dev)) << "totals recomputed from the live slots";
  r.Detach();
}

TEST(Region, DeadAndZombieProcessesAreReclaimedOnTheNextQuery) {
  ScratchDir dir;
  std::string path = dir.File("region");
  Member m;
  ASSERT_TRUE(m.Join(path));
  Region& r = m.region;
  int me = m.slot, dev = m.dev;
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  pid_t killed = fork();
  if (killed == 0) {
    Member child;
    if (child.Join(path)) child.region.Reserve(child.slot, dev, 400);
    char c = 1;
    ssize_t ignored = write(done[1], &c, 1);
    (void)ignored;
    pause();
    _exit(0);
  }
  pid_t zombie = fork();
  if (zombie == 0) {
    Member child;
    if (child.Join(path)) child.region.Reserve(child.slot, dev, 300);
    _exit(0);  // exits holding its charge; not reaped yet: a zombie
  }
  char c;
  ASSERT_EQ(read(done[0], &c, 1), 1);
  // Wait until the zombie has exited (its /proc state turns Z).
  for (int i = 0; i < 200; ++i) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == zombie)
      break;
    usleep(10000);
  }
  EXPECT_EQ(r.UsedNoReclaim(dev), 700u);
  kill(killed, SIGKILL);
  waitpid(killed, nullptr, 0);
  EXPECT_EQ(r.Used(dev), 0u) << "the query reclaimed both";
  EXPECT_EQ(r.Reserve(me, dev, 1000), ReserveResult::kOk);
  waitpid(zombie, nullptr, 0);
  r.Detach();
}

TEST(Region, AReusedPidDoesNotInheritTheOldSlot) {
  ScratchDir dir;
  Region r;
  char err[256];
  ASSERT_TRUE(r.Attach(dir.File("region").c_str(), err, sizeof(err))) << err;
  int dev = r.FindOrAddDevice(kUuid, Limit(1000));
  pid_t live = fork();
  if (live == 0) {
    pause();
    _exit(0);
  }
  uint64_t start = 0;
  for (int i = 0; i < 100 && start == 0; ++i) {
    start = ProcStartTime(live);
    usleep(1000);
  }
  ASSERT_NE(start, 0u);
  // Two slots claim the live PID: one with its real start time, one recorded by an earlier
  // process that had the same PID (different start time). Only the latter is dead.
  int real = r.RegisterProcess(live, start);
  r.Reserve(real, dev, 100);
  RegionSlot& stale = r.file()->slots[real + 1];
  stale.pid = live;
  stale.start_time = start - 1;
  stale.used[dev] = 500;
  r.file()->devices[dev].used += 500;
  r.file()->header.slot_high_water = static_cast<uint32_t>(real + 2);
  EXPECT_EQ(r.ReclaimDead(), 1);
  EXPECT_EQ(r.Used(dev), 100u);
  EXPECT_EQ(r.file()->slots[real].pid, live);
  EXPECT_EQ(r.file()->slots[real + 1].pid, 0);
  // The process itself registering again (after exec) replaces its stale slot too.
  int again = r.RegisterProcess(live, start);
  EXPECT_GE(again, 0);
  EXPECT_EQ(r.Used(dev), 0u);
  kill(live, SIGKILL);
  waitpid(live, nullptr, 0);
  r.Detach();
}

bool FakeAlive(int32_t pid, uint64_t start) {
  return pid == 4242 && start == 7;
}

TEST(Region, InjectedProbeDecidesLiveness) {
  static RegionFile file;
  Region r;
  r.AttachMemory(&file, true);
  r.set_probe(ProcessProbe{&FakeAlive});
  int live = r.RegisterProcess(4242, 7);
  int dead = r.RegisterProcess(4343, 7);
  int dev = r.FindOrAddDevice(kUuid, Limit(100));
  EXPECT_EQ(r.Reserve(live, dev, 50), ReserveResult::kOk);
  r.Charge(dead, dev, 50);
  // Full: the refusal path reclaims the dead slot first and then succeeds.
  EXPECT_EQ(r.Reserve(live, dev, 50), ReserveResult::kOk);
  EXPECT_EQ(r.Used(dev), 100u);
  EXPECT_EQ(r.file()->slots[dead].pid, 0);
}

TEST(Region, SlotsRunOutOnlyWhenAllOwnersLive) {
  static RegionFile file;
  Region r;
  r.AttachMemory(&file, true);
  r.set_probe(ProcessProbe{[](int32_t pid, uint64_t) { return pid % 2 == 0; }});
  for (int i = 0; i < kMaxSlots; ++i) ASSERT_GE(r.RegisterProcess(2 * i + 2, 1), 0);
  EXPECT_EQ(r.RegisterProcess(1000001, 1), -1) << "every slot is held by a live process";
  static RegionFile file2;
  Region q;
  q.AttachMemory(&file2, true);
  q.set_probe(ProcessProbe{[](int32_t pid, uint64_t) { return pid > 1000; }});
  for (int i = 0; i < kMaxSlots; ++i) ASSERT_GE(q.RegisterProcess(i + 1, 1), 0);
  EXPECT_GE(q.RegisterProcess(5000, 1), 0) << "dead owners' slots are reused";
}

}  // namespace
}  // namespace gpushare::interpose
