// The "client calls two models back to back" baseline of the pipeline
// benchmark (`inferd bench --then MODEL`): each send posts the prepared v2
// JSON request to the first model, turns its answer's outputs into the
// second model's inputs (renamed by `rename`, others dropped when it is not
// empty) and posts that to the second model, as a client without ensembles
// would. Latency covers both calls.
//
// Thread-safety: one sender per load-generator worker (not shared).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "bench/load_generator.h"
#include "core/status.h"

namespace inferd::bench {

SenderFactory ChainedHttpSenderFactory(std::string host, uint16_t port, std::string then_model,
                                       std::map<std::string, std::string> rename);

// "a=b,c=d" -> {a: b, c: d}; "" -> {}.
Result<std::map<std::string, std::string>> ParseRenames(const std::string& text);

// The second request's body from the first answer (exposed for tests).
Result<std::string> ChainedBody(const std::string& first_answer, const std::map<std::string, std::string>& rename);

}  // namespace inferd::bench
