#include "base/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace gpushare {

bool ConfigureLogging(std::string_view level) {
  const std::string name(level);
  const spdlog::level::level_enum l = spdlog::level::from_str(name);
  if (l == spdlog::level::off && name != "off") return false;
  auto logger = spdlog::get("gpushare");
  if (!logger) logger = spdlog::stderr_logger_mt("gpushare");
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  logger->set_level(l);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return true;
}

}  // namespace gpushare
