// StopMatcher: finds stop strings in streamed text, even when one spans
// several tokens, and holds back only the text that could still turn out to
// begin a stop string, so a client never sees part of one.
//
// Thread-safety: a value used by one request's owner.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace inferd::llm {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends text; returns what may be sent now. After a stop string is seen,
  // stopped() is true, the text before it has been returned, and the rest
  // (the stop string included) is dropped.
  std::string Feed(std::string_view text);
  // The text held back, at the end of generation.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace inferd::llm
