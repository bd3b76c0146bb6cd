#include "frontends/io/run_loop.h"

#include <sched.h>

namespace inferd::io {

void RunWithIdleSpin(boost::asio::io_context& ioc, std::chrono::microseconds idle_spin) {
  while (!ioc.stopped()) {
    if (ioc.poll() > 0) continue;
    if (idle_spin.count() > 0) {
      const auto until = std::chrono::steady_clock::now() + idle_spin;
      bool ran = false;
      // Yielding between polls: on a shared core the model worker that will finish the request runs now (it
      // does not preempt this thread: SCHED_BATCH), and this thread finds its answer without a wake-up.
      while (!ran && !ioc.stopped() && std::chrono::steady_clock::now() < until) {
        ran = ioc.poll() > 0;
        if (!ran) sched_yield();
      }
      if (ran) continue;
    }
    ioc.run_one();
  }
}

}  // namespace inferd::io
