// Comparing a shadow version's answer with the one the client got.
//
// Outputs are matched by name. Two answers agree when every output of the
// served answer is in the shadow's with the same datatype and shape, and:
// for floating-point outputs whose last dimension has several classes
// (classifiers: [batch, classes]), the top-1 class of every row is the same;
// for other numeric outputs, every element is within `tolerance` (absolute,
// scaled by 1 + |value|); for BYTES, the bytes are equal. The largest
// absolute difference of numeric elements is reported either way.
//
// Thread-safety: pure functions.
#pragma once

#include "core/infer_request.h"

namespace inferd {

struct ShadowVerdict {
  bool agreed = false;
  double max_abs_diff = 0;  // over numeric outputs present in both
  std::string why;          // when not agreed: the first difference found
};

ShadowVerdict CompareAnswers(const InferResponse& served, const InferResponse& shadow, double tolerance = 1e-4);

}  // namespace inferd
