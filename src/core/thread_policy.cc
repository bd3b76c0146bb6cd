#include "core/thread_policy.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace inferd {

Status UseBatchScheduling() {
  sched_param p{};
  p.sched_priority = 0;
  if (sched_setscheduler(0, SCHED_BATCH, &p) != 0) {
    return Status::Internal(std::string("sched_setscheduler(SCHED_BATCH): ") + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace inferd
