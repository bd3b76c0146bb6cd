#include "llm/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace inferd::llm {

std::string StopMatcher::Feed(std::string_view text) {
  if (stopped_) return "";
  pending_.append(text);
  if (stops_.empty()) return std::exchange(pending_, std::string());
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest end of the text that begins some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Flush() { return stopped_ ? "" : std::exchange(pending_, std::string()); }

}  // namespace inferd::llm
