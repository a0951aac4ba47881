// base/sync.h: a mutex whose rules the compiler checks. clang's -Wthread-safety (the `make
// lint` build, docs/architecture.md) reads the annotations below: a member marked
// GPUSHARE_GUARDED_BY(mu_) may be touched only with mu_ held, a function marked
// GPUSHARE_REQUIRES(mu_) only called with it held. g++ ignores them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define GPUSHARE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GPUSHARE_THREAD_ANNOTATION(x)
#endif

#define GPUSHARE_CAPABILITY(x) GPUSHARE_THREAD_ANNOTATION(capability(x))
#define GPUSHARE_SCOPED_CAPABILITY GPUSHARE_THREAD_ANNOTATION(scoped_lockable)
#define GPUSHARE_GUARDED_BY(x) GPUSHARE_THREAD_ANNOTATION(guarded_by(x))
#define GPUSHARE_PT_GUARDED_BY(x) GPUSHARE_THREAD_ANNOTATION(pt_guarded_by(x))
#define GPUSHARE_REQUIRES(...) GPUSHARE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GPUSHARE_EXCLUDES(...) GPUSHARE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GPUSHARE_ACQUIRE(...) GPUSHARE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GPUSHARE_RELEASE(...) GPUSHARE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GPUSHARE_ACQUIRE_SHARED(...) \
  GPUSHARE_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define GPUSHARE_RELEASE_SHARED(...) \
  GPUSHARE_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define GPUSHARE_ASSERT_HELD(x) GPUSHARE_THREAD_ANNOTATION(assert_capability(x))
#define GPUSHARE_NO_THREAD_SAFETY_ANALYSIS GPUSHARE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace gpushare {

// std::mutex with capability annotations. Not recursive.
class GPUSHARE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() GPUSHARE_ACQUIRE() { mu_.lock(); }
  void Unlock() GPUSHARE_RELEASE() { mu_.unlock(); }
  // Tells the analysis that the caller holds the mutex (e.g. in a callback run under it).
  void AssertHeld() const GPUSHARE_ASSERT_HELD(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class GPUSHARE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) GPUSHARE_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() GPUSHARE_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// std::shared_mutex with capability annotations: one writer or many readers. A member marked
// GPUSHARE_GUARDED_BY(mu_) may be read under either lock and written only under the writer's.
class GPUSHARE_CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() GPUSHARE_ACQUIRE() { mu_.lock(); }
  void Unlock() GPUSHARE_RELEASE() { mu_.unlock(); }
  void LockShared() GPUSHARE_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() GPUSHARE_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex as its one writer for its scope.
class GPUSHARE_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) GPUSHARE_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() GPUSHARE_RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* mu_;
};

// Holds a SharedMutex as one of its readers for its scope.
class GPUSHARE_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) GPUSHARE_ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderLock() GPUSHARE_RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* mu_;
};

// A condition variable used with a Mutex the caller holds. The waits release the mutex while
// they sleep and hold it again when they return, as std::condition_variable does.
class CondVar {
 public:
  void Wait(Mutex* mu) GPUSHARE_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false when `timeout` passed without a notification (spurious wake-ups return true:
  // callers re-check their condition in a loop).
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) GPUSHARE_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline)
      GPUSHARE_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gpushare
