// Parsers of what users put in a repository or on the command line for the
// model lifecycle: version_labels.json and byte sizes (--memory-budget, the
// `memory_bytes` config parameter). A parsed labels file must write back and
// re-parse to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/byte_size.h"
#include "lifecycle/version_labels.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto bytes = inferd::ParseByteSize(text); bytes.ok()) (void)inferd::FormatBytes(*bytes);
  auto labels = inferd::ParseVersionLabelsJson(text);
  if (!labels.ok()) return 0;
  auto again = inferd::ParseVersionLabelsJson(inferd::VersionLabelsToJson(*labels));
  if (!again.ok() || again->labels != labels->labels || again->history != labels->history) std::abort();
  return 0;
}
