#include "gpu/inventory_source.h"

namespace gpushare {

InitFailureDecision DecideOnInitFailure(const Status& error, bool fail_on_init_error) {
  InitFailureDecision d;
  if (fail_on_init_error) {
    d.action = InitFailureAction::kExit;
    d.exit_code = 1;
    d.message = "cannot discover GPUs: " + error.message() +
                " (failOnInitError is true, so gpushare-node exits; set "
                "flags.failOnInitError: false or FAIL_ON_INIT_ERROR=false to wait idle instead "
                "on nodes without GPUs)";
  } else {
    d.action = InitFailureAction::kWaitIdle;
    d.exit_code = 0;
    d.message = "cannot discover GPUs: " + error.message() +
                " (failOnInitError is false, so gpushare-node serves nothing and waits; send "
                "SIGTERM to stop)";
  }
  return d;
}

}  // namespace gpushare
