#include "kube/timestamps.h"

#include <cstdio>
#include <ctime>

namespace gpushare::kube {
namespace {

// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

std::string FormatSeconds(std::chrono::system_clock::time_point t, long micros, bool with_micros) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  if (with_micros) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

}  // namespace

std::string FormatTimestamp(std::chrono::system_clock::time_point t) {
  return FormatSeconds(std::chrono::floor<std::chrono::seconds>(t), 0, false);
}

Result<std::chrono::system_clock::time_point> ParseTimestamp(std::string_view s) {
  auto bad = [&] {
    return Status::InvalidArgument("timestamp \"" + std::string(s) +
                                   "\": want RFC 3339, e.g. 2026-12-02T10:04:05Z");
  };
  auto num = [&](size_t pos, size_t len, int* out) {
    if (pos + len > s.size()) return false;
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
  };
  int year, mon, day, hour, min, sec;
  if (!num(0, 4, &year) || s.size() < 20 || s[4] != '-' || !num(5, 2, &mon) || s[7] != '-' ||
      !num(8, 2, &day) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !num(11, 2, &hour) ||
      s[13] != ':' || !num(14, 2, &min) || s[16] != ':' || !num(17, 2, &sec)) {
    return bad();
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) return bad();
  size_t i = 19;
  int64_t nanos = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (digits < 9) nanos = nanos * 10 + (s[i] - '0');
      ++digits;
      ++i;
    }
    if (digits == 0) return bad();
    for (int d = digits; d < 9; ++d) nanos *= 10;
  }
  int64_t offset_s = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh, om;
    if (!num(i + 1, 2, &oh) || i + 3 >= s.size() || s[i + 3] != ':' || !num(i + 4, 2, &om))
      return bad();
    offset_s = (oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return bad();
  }
  if (i != s.size()) return bad();
  int64_t days = DaysFromCivil(year, static_cast<unsigned>(mon), static_cast<unsigned>(day));
  int64_t epoch_s = days * 86400 + hour * 3600 + min * 60 + sec - offset_s;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(epoch_s) + std::chrono::nanoseconds(nanos)));
}

}  // namespace gpushare::kube
