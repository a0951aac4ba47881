// base.h: the freestanding toolbox of libgpushare-cuda.so.
//
// The library is loaded into arbitrary processes, so it uses no C++ standard library runtime:
// no exceptions, no RTTI, no operator new, no std:: containers, no static initialisers that
// run code. This header gives it what it needs instead: saturating arithmetic (no accounting
// value can underflow or wrap), relaxed/acquire/release atomics on plain integers (they also
// work on memory shared between processes), small string helpers, the HAMi-compatible size
// parser ("3g", "1024m", "1048576k", plain bytes) and UUID parsing/formatting.
// Everything here is header-only and constexpr-friendly so unit tests can include it.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gpushare::interpose {

// ---- saturating arithmetic ------------------------------------------------------------------
inline constexpr uint64_t kU64Max = ~uint64_t{0};

constexpr uint64_t SatAdd(uint64_t a, uint64_t b) {
  return a > kU64Max - b ? kU64Max : a + b;
}
constexpr uint64_t SatSub(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}
constexpr uint64_t SatMul(uint64_t a, uint64_t b) {
  return (a != 0 && b > kU64Max / a) ? kU64Max : a * b;
}
constexpr uint64_t Min(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}
constexpr uint64_t Max(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}
// Rounds up to a multiple of `unit` (unit > 0), saturating.
constexpr uint64_t RoundUp(uint64_t v, uint64_t unit) {
  if (unit == 0) return v;
  uint64_t r = v % unit;
  return r == 0 ? v : SatAdd(v, unit - r);
}

// ---- atomics on plain integers (also valid on MAP_SHARED memory) -----------------------------
template <typename T>
inline T LoadRelaxed(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <typename T>
inline T LoadAcquire(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T>
inline void StoreRelaxed(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
template <typename T>
inline void StoreRelease(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
template <typename T>
inline bool CasStrong(T* p, T* expected, T desired) {
  return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}
template <typename T>
inline T FetchAdd(T* p, T v) {
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}

// ---- strings ---------------------------------------------------------------------------------
constexpr size_t StrLen(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}
constexpr bool StrEq(const char* a, const char* b) {
  if (a == nullptr || b == nullptr) return a == b;
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}
constexpr bool StartsWith(const char* s, const char* prefix) {
  while (*prefix != '\0') {
    if (*s != *prefix) return false;
    ++s;
    ++prefix;
  }
  return true;
}
// Copies at most cap-1 bytes and always terminates (cap > 0). Returns false if truncated.
inline bool CopyStr(char* dst, size_t cap, const char* src, size_t len = kU64Max) {
  size_t i = 0;
  for (; i + 1 < cap && i < len && src[i] != '\0'; ++i) dst[i] = src[i];
  dst[i] = '\0';
  return i == len || src[i] == '\0';
}
constexpr char ToLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}
constexpr bool EqualsIgnoreCase(const char* a, size_t alen, const char* b) {
  size_t i = 0;
  for (; i < alen && b[i] != '\0'; ++i) {
    if (ToLower(a[i]) != ToLower(b[i])) return false;
  }
  return i == alen && b[i] == '\0';
}

// ---- numbers ---------------------------------------------------------------------------------
// Parses a decimal unsigned integer that is the whole of [s, s+len). False on empty input,
// any non-digit, or overflow.
constexpr bool ParseU64(const char* s, size_t len, uint64_t* out) {
  if (len == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < len; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (kU64Max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// Parses a HAMi-style memory size: plain bytes, or a number with a k/K, m/M or g/G suffix
// (1024-based), optionally followed by "b"/"B" or "i"+"b" ("3g", "3G", "3GiB", "512MB").
// Surrounding spaces are ignored. False on anything else or on overflow.
constexpr bool ParseSize(const char* s, size_t len, uint64_t* out) {
  while (len > 0 && (*s == ' ' || *s == '\t')) {
    ++s;
    --len;
  }
  while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r')) --len;
  size_t digits = 0;
  while (digits < len && s[digits] >= '0' && s[digits] <= '9') ++digits;
  uint64_t n = 0;
  if (!ParseU64(s, digits, &n)) return false;
  const char* suf = s + digits;
  size_t slen = len - digits;
  uint64_t mult = 1;
  if (slen > 0) {
    char c = ToLower(suf[0]);
    if (c == 'k')
      mult = 1024ull;
    else if (c == 'm')
      mult = 1024ull * 1024;
    else if (c == 'g')
      mult = 1024ull * 1024 * 1024;
    else if (c == 't')
      mult = 1024ull * 1024 * 1024 * 1024;
    else if (c == 'b' && slen == 1)
      mult = 1;
    else
      return false;
    if (c != 'b') {
      const char* rest = suf + 1;
      size_t rlen = slen - 1;
      if (!(rlen == 0 || EqualsIgnoreCase(rest, rlen, "b") || EqualsIgnoreCase(rest, rlen, "ib")))
        return false;
    }
  }
  if (n != 0 && mult > kU64Max / n) return false;
  *out = n * mult;
  return true;
}

// ---- UUIDs -----------------------------------------------------------------------------------
constexpr int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "MIG-..." or the bare 32-hex-digit form with
// or without dashes into 16 bytes. The prefix is not part of the key: CUDA reports the same 16
// bytes for a device that NVML names "GPU-..." or "MIG-...".
constexpr bool ParseUuid(const char* s, size_t len, uint8_t out[16]) {
  if (len >= 4 && (StartsWith(s, "GPU-") || StartsWith(s, "MIG-"))) {
    s += 4;
    len -= 4;
  }
  int nibbles = 0;
  uint8_t acc = 0;
  for (size_t i = 0; i < len; ++i) {
    if (s[i] == '-') continue;
    int h = HexValue(s[i]);
    if (h < 0 || nibbles >= 32) return false;
    acc = static_cast<uint8_t>((acc << 4) | h);
    if (++nibbles % 2 == 0) {
      out[nibbles / 2 - 1] = acc;
      acc = 0;
    }
  }
  return nibbles == 32;
}

// Formats 16 bytes as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (41 bytes with the NUL).
inline void FormatUuid(const uint8_t u[16], char out[41]) {
  const char* hex = "0123456789abcdef";
  int o = 0;
  out[o++] = 'G';
  out[o++] = 'P';
  out[o++] = 'U';
  out[o++] = '-';
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = hex[u[i] >> 4];
    out[o++] = hex[u[i] & 15];
  }
  out[o] = '\0';
}

constexpr bool UuidEq(const uint8_t a[16], const uint8_t b[16]) {
  for (int i = 0; i < 16; ++i)
    if (a[i] != b[i]) return false;
  return true;
}
constexpr bool UuidIsZero(const uint8_t a[16]) {
  for (int i = 0; i < 16; ++i)
    if (a[i] != 0) return false;
  return true;
}

}  // namespace gpushare::interpose
