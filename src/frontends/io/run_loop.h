// The I/O threads' loop, shared by the HTTP port and the gRPC port's own
// HTTP/2 (Asio io_contexts).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>

namespace inferd::io {

// Runs `ioc` on the calling thread until it is stopped. A thread with
// nothing to do polls for `idle_spin` before it blocks in epoll, yielding the
// core between polls: an answer a model worker finishes right after (on a
// shared core: during the yield) is then written without a cross-thread
// wake-up. 0: block at once.
void RunWithIdleSpin(boost::asio::io_context& ioc, std::chrono::microseconds idle_spin);

}  // namespace inferd::io
