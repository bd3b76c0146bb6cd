// Scheduler: what the server hands accepted requests to. One per loaded
// model version.
//
// Ownership moves only on success: Enqueue leaves `pending` untouched when it
// returns an error, so the caller can answer the client itself.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <memory>

#include "core/status.h"
#include "scheduler/pending_request.h"

namespace inferd {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual Status Enqueue(std::unique_ptr<PendingRequest>& pending) = 0;
  // Blocks until the scheduler can take requests (e.g. every instance ran
  // its warm-up); the first error, or OK. A version is not READY before.
  virtual Status WaitReady() { return Status::OK(); }
  // Requests queued, not yet running.
  virtual size_t QueueSize() const = 0;
  // A hint read without locks: UNAVAILABLE (the message Enqueue would give)
  // when a request enqueued now would be refused because the queue is full.
  // Front ends ask before decoding a request's body, so a rejection under
  // overload costs little and the model keeps its CPU.
  virtual Status Admission() const { return Status::OK(); }
  // Memory the scheduler holds beyond what the version's load measured, that
  // grows and shrinks while it serves (a generative model's LoRA adapters in
  // host memory): counted with the version's resident bytes in the memory
  // budget. Thread-safe and cheap (a relaxed load).
  virtual uint64_t HeldBytes() const { return 0; }
  // Stops accepting (Enqueue answers UNAVAILABLE), runs everything already
  // accepted to completion, then joins the workers. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace inferd
