// The C interface of libinferd_sentencepiece.so, a small shim over Debian's
// libsentencepiece that inferd loads with dlmopen into a namespace of its own.
//
// Why: Debian's libsentencepiece carries its own copy of protobuf 3.14 and
// exports its symbols; loaded beside the system libprotobuf 3.21 (which inferd
// uses for configs and gRPC, and libtorch links) one copy's symbols replace the
// other's and the process crashes at start-up, or protobuf aborts on the
// version mismatch. In a separate link namespace each library binds to its own
// copy. Only plain C types cross the boundary: memory is always the caller's.
#pragma once

#include <stddef.h>

extern "C" {

struct InferdSentencePieceApi {
  int version;  // kInferdSentencePieceApiVersion
  // A processor from a serialized model; null with a message in `err` on failure.
  void* (*load)(const char* bytes, size_t n, char* err, size_t err_cap);
  void (*release)(void* handle);
  int (*vocab_size)(void* handle);
  // 0: BOS, 1: EOS, 2: UNK, 3: PAD (-1 when the model has none).
  int (*special_id)(void* handle, int which);
  // Bit 0: control, bit 1: unknown, bit 2: byte, bit 3: unused.
  int (*piece_type)(void* handle, int id);
  // The piece's text length; copies min(length, cap) bytes into buf.
  long (*piece)(void* handle, int id, char* buf, size_t cap);
  int (*piece_to_id)(void* handle, const char* s, size_t n);
  // Number of ids; copies at most cap. -1 on error.
  long (*encode)(void* handle, const char* text, size_t n, int* ids, size_t cap);
  // Number of bytes; copies at most cap. -1 on error.
  long (*decode)(void* handle, const int* ids, size_t n, char* buf, size_t cap);
};

inline constexpr int kInferdSentencePieceApiVersion = 1;

const InferdSentencePieceApi* inferd_sentencepiece_api();
}
