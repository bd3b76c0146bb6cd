// gRPC byte buffers <-> strings (the gRPC port's relay and the cluster's gRPC forwarder).
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

namespace inferd::grpcfe {

// The buffer's bytes in one string ("" when it cannot be read).
inline std::string BytesOf(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!b.Dump(&slices).ok()) return out;
  out.reserve(b.Length());
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A buffer holding a copy of `s`.
inline grpc::ByteBuffer BufferOf(const std::string& s) {
  grpc::Slice slice(s.data(), s.size());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace inferd::grpcfe
