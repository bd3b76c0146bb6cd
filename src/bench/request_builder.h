// Builds the request bodies the load generator sends: from a model's KServe
// v2 metadata (random data, fixed seed) or from a perf_analyzer-style JSON
// data file, in one of the wire protocols inferd speaks.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace inferd::bench {

enum class Protocol { kV2Json, kV2Binary, kV1 };
Result<Protocol> ParseProtocol(const std::string& name);  // "v2-json" | "v2-binary" | "v1"

struct InputDesc {
  std::string name;
  DataType dtype = DataType::kFp32;
  Shape shape;  // as metadata gives it (-1 = variable)
};

struct ModelDesc {
  std::string name;
  std::vector<InputDesc> inputs;
  bool batched = false;  // metadata shapes lead with -1
};

// Parses a GET /v2/models/{m} response.
Result<ModelDesc> ParseModelMetadata(const std::string& json);

struct PreparedRequest {
  std::string path;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// How random inputs are drawn (`inferd bench` flags).
struct RandomOptions {
  int64_t length = 1;                       // variable dims other than the batch dim (--sequence-lengths)
  double int_lo = -50, int_hi = 50;         // integer inputs: uniform in [lo, hi) (--int-range)
  std::map<std::string, double> constants;  // inputs filled with one value (--constant-input, e.g. a mask)
};

// Concrete input tensors: variable dims become `batch_size` (first dim of a
// batched model) or options.length; values are random (seeded).
std::vector<Tensor> RandomInputs(const ModelDesc& model, int batch_size, uint64_t seed,
                                 const RandomOptions& options = {});

// "LO-HI" (lengths drawn uniformly in [LO, HI]) or "N" (all N); LO >= 1.
Result<std::pair<int64_t, int64_t>> ParseLengthRange(const std::string& text);

// Reads a perf_analyzer-style file {"data": [{"name": [flat values] |
// {"content": [...], "shape": [...]}}, ...]}: one input set per entry.
Result<std::vector<std::vector<Tensor>>> InputsFromFile(const std::string& path, const ModelDesc& model);

// A request-level parameter, perf_analyzer's `--request-parameter
// name:value:type` (type: string | int | bool).
struct RequestParameter {
  std::string name;
  std::string value;
  enum class Type { kString, kInt, kBool } type = Type::kString;
};
Result<RequestParameter> ParseRequestParameter(const std::string& text);

// Encodes one request. `version` may be empty. `parameters` go into the v2
// request's "parameters" (v2-json, v2-binary; INVALID_ARGUMENT for v1).
Result<PreparedRequest> EncodeRequest(Protocol protocol, const ModelDesc& model, const std::string& version,
                                      const std::vector<Tensor>& inputs,
                                      const std::vector<RequestParameter>& parameters = {});

}  // namespace inferd::bench
