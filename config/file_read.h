// ReadInputFile: how gpushare reads every input file a person or a mount gives it (the sharing
// config, the simulated inventory, the simulator's trace CSVs), so that no input can exhaust
// memory, block the reader, or hide a mistake:
//   - only a regular file (a symbolic link to one is followed) is read. A directory (an easy
//     mistake with a ConfigMap volume) is refused with the hint to name the file inside it,
//     never read as empty; a FIFO, a device or a socket is refused from its type, without
//     opening it first and so without blocking on a FIFO that has no writer;
//   - a size limit is checked on the opened file (fstat) before anything is read, and at most
//     limit + 1 bytes are ever read (a file that grows meanwhile is refused too).
// Messages name what was read, the path and why, e.g.
//   cannot read config file /etc/gpushare/big.yaml: 13680051 bytes (13.0 MiB), more than the
//   limit of 1048576 bytes (1 MiB)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpushare {

struct InputFileRules {
  std::string_view what;          // "config file": how messages name the file
  int64_t max_bytes = 0;          // the size limit
  std::string_view example_name;  // "config.yaml": suggested inside a directory given instead
};

// The whole content of `path`. kNotFound when it does not exist, kInvalidArgument otherwise.
Result<std::string> ReadInputFile(const std::string& path, const InputFileRules& rules);

// "13680051 bytes (13.0 MiB)", "1048576 bytes (1 MiB)", "17179869184 bytes (16.0 GiB)".
std::string DescribeBytes(int64_t bytes);

// "<size> bytes (...), more than the limit of <limit> bytes (...)"
std::string OverLimit(int64_t size, int64_t limit);

}  // namespace gpushare
