// log.h: structured (key=value) logging to stderr for libgpushare-cuda.so.
//
// Lines look like `gpushare-cuda: level=warn pid=42 msg="..." key=value`. The level comes from
// the configuration (log_level / LIBCUDA_LOG_LEVEL / GPUSHARE_LOG_LEVEL: 0 errors only, 1 warnings,
// 2 notices (default), 3 info, 4 debug). Writing uses vsnprintf into a stack buffer and one
// write(2): no allocation, no stdio locks, safe in any thread.
#pragma once

namespace gpushare::interpose {

enum LogLevel : int { kLogError = 0, kLogWarn = 1, kLogNotice = 2, kLogInfo = 3, kLogDebug = 4 };

void SetLogLevel(int level);
int GetLogLevel();
bool LogEnabled(int level);

// printf-style; the format should itself be key=value pairs, e.g. "msg=\"...\" dev=%d".
void Log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace gpushare::interpose
