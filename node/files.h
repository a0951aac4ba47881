// Host files the node agent writes (per-container interposer state, the installed library):
// directories made with exact permissions, files written atomically. Errors name the path and
// the reason (errno text).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace gpushare::node {

// "<what> <path>: <strerror(errno)>" as Unavailable.
Status ErrnoStatus(const std::string& what, const std::string& path);

// Creates a directory (an existing one is fine) and sets its mode exactly (umask-proof).
Status MakeDir(const std::string& path, mode_t mode);

// Creates every missing directory of an absolute path (mode 0755; existing ones untouched).
Status MakeDirs(const std::string& path);

// FNV-1a, 64 bits, of `data`: names content (the installed library's directory) and tells
// whether a file changed (the config watch). Not cryptographic.
uint64_t ContentHash64(const std::string& data);
// The same as 16 lower-case hex digits.
std::string ContentHashHex(const std::string& data);

// Writes a file atomically: a temporary name in the same directory, fsync, chmod, rename.
Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode);

}  // namespace gpushare::node
