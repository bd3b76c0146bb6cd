// Edits of a config.pbtxt that `inferd tune` makes: the serving settings it
// sweeps (instances, batching, parameters) applied to a model's own config,
// everything else kept. The result is parsed back (ParseModelConfig) before it
// is returned, so an edit never yields a config the server would refuse to
// read. Comments of the original are not kept (protobuf's text printer drops
// them); `header` is written first, as comment lines.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd {

struct ConfigEdit {
  // One KIND_CPU instance group of this many instances (the others dropped).
  std::optional<int> instance_count;
  // Preferred batch sizes above it are dropped.
  std::optional<int> max_batch_size;
  enum class Batching { kKeep, kOff, kOn };
  Batching batching = Batching::kKeep;
  // With kOn: dynamic_batching's max_queue_delay_microseconds.
  std::optional<uint64_t> max_queue_delay_us;
  // Set (a value) or removed (nullopt).
  std::map<std::string, std::optional<std::string>> parameters;
  std::string header;  // comment text, one "# " line per line; "" = none
};

// `text` is the config of model `model_name` (its directory's name).
Result<std::string> EditModelConfig(std::string_view text, std::string_view model_name, const ConfigEdit& edit);

}  // namespace inferd
