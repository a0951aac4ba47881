// See signals.h.
#include "base/signals.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include <cerrno>

namespace gpushare {

UniqueFd BlockSignals(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    errno = rc;
    return UniqueFd();
  }
  return UniqueFd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
}

int ReadSignal(const UniqueFd& fd) {
  if (!fd) return 0;
  signalfd_siginfo si;
  if (::read(fd.get(), &si, sizeof(si)) != static_cast<ssize_t>(sizeof(si))) return 0;
  return static_cast<int>(si.ssi_signo);
}

int WaitSignal(const UniqueFd& fd, int timeout_ms) {
  if (!fd) return 0;
  for (;;) {
    if (const int sig = ReadSignal(fd)) return sig;
    pollfd p{fd.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    if (const int sig = ReadSignal(fd)) return sig;
    if (timeout_ms >= 0) return 0;  // readable but taken meanwhile: the caller's timeout applies
  }
}

}  // namespace gpushare
