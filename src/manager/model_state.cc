#include "manager/model_state.h"

namespace inferd {

const char* StateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnloading:
      return "UNLOADING";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
    case ModelState::kFailed:
      return "FAILED";
    case ModelState::kEvicted:
      return "EVICTED";
  }
  return "UNAVAILABLE";
}

const char* WireName(ModelState state) {
  switch (state) {
    case ModelState::kFailed:
    case ModelState::kEvicted:
      return "UNAVAILABLE";
    default:
      return StateName(state);
  }
}

}  // namespace inferd
