// base/signals.h: the daemons' one way to take signals. They are blocked in the calling thread
// (call it before starting any other: threads inherit the mask) and read from a signalfd, in the
// loop that owns the reaction; no work ever happens in a signal handler. gpushare-node's agent
// polls the descriptor beside its other events; gpushare-scheduler waits on it.
#pragma once

#include <initializer_list>

#include "base/unique_fd.h"

namespace gpushare {

// Blocks `signals` in the calling thread and returns a signalfd (close-on-exec, non-blocking)
// that is readable while one of them is pending. Invalid, with errno set, when either fails.
UniqueFd BlockSignals(std::initializer_list<int> signals);

// The next pending signal's number, without waiting; 0 when none is pending.
int ReadSignal(const UniqueFd& fd);

// Waits until a signal is pending on `fd` and returns its number (poll, so EINTR is retried); 0
// after `timeout_ms` (-1: no timeout) or when `fd` cannot be polled.
int WaitSignal(const UniqueFd& fd, int timeout_ms = -1);

}  // namespace gpushare
