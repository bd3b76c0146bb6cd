// OutputRule: a business rule over one model output, declared in the config
// and computed by the server on the model's answer (no code): softmax,
// top-k, argmax to a label, a confidence threshold with a fallback label,
// label maps. A rule adds an output of its own name; the model is unchanged.
//
// Syntax, one config parameter per rule (key "rule:<new output name>"):
//   parameters { key: "rule:label"
//                value: { string_value: "probabilities | softmax | argmax | threshold 0.9 others | label" } }
// The first word names the model output the rule reads (it must be listed in
// the config); each `|` step transforms every batch row in turn:
//   softmax            scores -> probabilities (exp, normalised per row)
//   top_k K            scores -> the K best entries, highest first (ties: lower index first)
//   argmax             top_k 1
//   threshold T LABEL  (after top_k) an entry scoring below T becomes LABEL (index -1)
//   label              (after top_k) entries -> labels from the source output's label_filename
//   map A=B C=D        (after label) renames labels; others stay
//   score              (after top_k) entries -> their scores
// What the rule answers follows from its last step: scores (no top_k) FP32
// with the source's shape; entries INT64 indices [K] (-1 below a
// threshold); labels BYTES [K]; score FP32 [K]; each with the batch
// dimension in front when the model batches.
// Thread-safety: plain data.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/datatype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd {

struct OutputRule {
  enum class Op { kSoftmax, kTopK, kThreshold, kLabel, kMap, kScore };
  struct Step {
    Op op = Op::kSoftmax;
    int64_t k = 0;                               // kTopK
    double threshold = 0;                        // kThreshold
    std::string fallback;                        // kThreshold
    std::map<std::string, std::string> renames;  // kMap
  };
  std::string name;    // the output the rule adds
  std::string source;  // the model output it reads
  std::vector<Step> steps;
  std::string text;  // as written in the config

  // What the rule answers (without the batch dimension); `source_dims` are
  // the source output's dims.
  DataType dtype() const;
  Shape dims(const Shape& source_dims) const;
  int64_t top_k() const;  // 0 without a top_k step
};

// Parses a rule's text (above); INVALID_ARGUMENT naming the rule and step.
Result<OutputRule> ParseOutputRule(const std::string& name, std::string_view text);

}  // namespace inferd
