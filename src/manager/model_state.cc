#include "manager/model_state.h"

namespace inferd {
namespace {

using S = ModelState;
using E = LifecycleEvent;

Status Illegal(const char* scope, ModelState from, LifecycleEvent event) {
  return Status::Internal(std::string(scope) + " state " + StateName(from) + " does not allow event " +
                          EventName(event));
}

}  // namespace

const char* StateName(ModelState state) {
  switch (state) {
    case S::kLoading:
      return "LOADING";
    case S::kReady:
      return "READY";
    case S::kUnloading:
      return "UNLOADING";
    case S::kUnavailable:
      return "UNAVAILABLE";
    case S::kFailed:
      return "FAILED";
    case S::kEvicted:
      return "EVICTED";
  }
  return "UNAVAILABLE";
}

const char* WireName(ModelState state) {
  switch (state) {
    case S::kFailed:
    case S::kEvicted:
      return "UNAVAILABLE";
    default:
      return StateName(state);
  }
}

const char* EventName(LifecycleEvent event) {
  switch (event) {
    case E::kLoadStarted:
      return "load-started";
    case E::kLoadSucceeded:
      return "load-succeeded";
    case E::kLoadFailed:
      return "load-failed";
    case E::kUnloadStarted:
      return "unload-started";
    case E::kEvictStarted:
      return "evict-started";
    case E::kDrained:
      return "drained";
    case E::kIndexed:
      return "indexed";
  }
  return "?";
}

Result<ModelState> ModelTransition(ModelState from, LifecycleEvent event) {
  switch (from) {
    case S::kUnavailable:
      if (event == E::kLoadStarted) return S::kLoading;
      if (event == E::kLoadFailed) return S::kFailed;
      if (event == E::kUnloadStarted || event == E::kIndexed) return S::kUnavailable;
      break;
    case S::kLoading:
      if (event == E::kLoadSucceeded) return S::kReady;
      if (event == E::kLoadFailed) return S::kFailed;
      break;
    case S::kReady:
      if (event == E::kLoadStarted || event == E::kLoadSucceeded || event == E::kLoadFailed) return S::kReady;
      if (event == E::kUnloadStarted) return S::kUnloading;
      if (event == E::kEvictStarted) return S::kEvicted;
      break;
    case S::kUnloading:
      if (event == E::kDrained) return S::kUnavailable;
      break;
    case S::kFailed:
    case S::kEvicted:
      if (event == E::kLoadStarted) return S::kLoading;
      if (event == E::kLoadFailed) return S::kFailed;
      if (event == E::kUnloadStarted) return S::kUnavailable;
      if (event == E::kIndexed) return from;
      break;
  }
  return Illegal("model", from, event);
}

Result<ModelState> VersionTransition(ModelState from, LifecycleEvent event) {
  switch (from) {
    case S::kUnavailable:
      if (event == E::kLoadStarted) return S::kLoading;
      break;
    case S::kLoading:
      if (event == E::kLoadSucceeded) return S::kReady;
      if (event == E::kLoadFailed) return S::kFailed;
      if (event == E::kDrained) return S::kLoading;
      break;
    case S::kReady:
      if (event == E::kLoadStarted || event == E::kLoadSucceeded || event == E::kLoadFailed || event == E::kDrained)
        return S::kReady;
      if (event == E::kUnloadStarted || event == E::kEvictStarted) return S::kUnloading;
      break;
    case S::kUnloading:
      if (event == E::kLoadStarted) return S::kLoading;
      if (event == E::kDrained) return S::kUnavailable;
      break;
    case S::kFailed:
      if (event == E::kLoadStarted) return S::kLoading;
      if (event == E::kUnloadStarted) return S::kUnavailable;
      if (event == E::kDrained) return S::kFailed;
      break;
    case S::kEvicted:
      break;
  }
  return Illegal("version", from, event);
}

}  // namespace inferd
