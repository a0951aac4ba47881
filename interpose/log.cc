// See log.h.
#include "interpose/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "interpose/base.h"

namespace gpushare::interpose {
namespace {
constinit int g_level = kLogNotice;
const char* const kNames[] = {"error", "warn", "notice", "info", "debug"};
}  // namespace

void SetLogLevel(int level) {
  if (level < kLogError) level = kLogError;
  if (level > kLogDebug) level = kLogDebug;
  StoreRelaxed(&g_level, level);
}
int GetLogLevel() {
  return LoadRelaxed(&g_level);
}
bool LogEnabled(int level) {
  return level <= LoadRelaxed(&g_level);
}

void Log(int level, const char* fmt, ...) {
  if (!LogEnabled(level)) return;
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "gpushare-cuda: level=%s pid=%d ",
                   kNames[level < 0 ? 0 : (level > 4 ? 4 : level)], static_cast<int>(getpid()));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  ssize_t ignored = write(2, buf, len);
  (void)ignored;
}

}  // namespace gpushare::interpose
