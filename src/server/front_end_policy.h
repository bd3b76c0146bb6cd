// FrontEndPolicy: what every front end checks before a call reaches the
// facade -- who may make it (auth/access_policy.h) and what a JSON body may
// hold (core/json_limits.h). Set by `serve` in ServerOptions; the front ends
// read it through InferenceServer::front_end().
//
// Thread-safety: immutable once the server is built (the access policy
// itself is thread-safe and swaps its tokens on reload).
#pragma once

#include <memory>

#include "auth/access_policy.h"
#include "core/json_limits.h"

namespace inferd {

struct FrontEndPolicy {
  // Never null once the server holds it: without tokens, an open policy (every route open).
  std::shared_ptr<const auth::AccessPolicy> access;
  JsonLimits json_limits;
};

}  // namespace inferd
