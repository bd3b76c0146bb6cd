// Built into libinferd_sentencepiece.so (a module; see sp_shim.h).
#include "llm/sentencepiece/sp_shim.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

using sentencepiece::SentencePieceProcessor;

SentencePieceProcessor* P(void* h) { return static_cast<SentencePieceProcessor*>(h); }

long CopyOut(const std::string& s, char* buf, size_t cap) {
  std::memcpy(buf, s.data(), std::min(cap, s.size()));
  return static_cast<long>(s.size());
}

void* Load(const char* bytes, size_t n, char* err, size_t err_cap) {
  try {
    auto* sp = new SentencePieceProcessor();
    auto s = sp->LoadFromSerializedProto(absl::string_view(bytes, n));
    if (!s.ok()) {
      const std::string m = s.ToString();
      if (err_cap > 0) {
        const size_t k = std::min(err_cap - 1, m.size());
        std::memcpy(err, m.data(), k);
        err[k] = '\0';
      }
      delete sp;
      return nullptr;
    }
    return sp;
  } catch (...) {
    if (err_cap > 0) std::snprintf(err, err_cap, "sentencepiece threw while loading");
    return nullptr;
  }
}

void Release(void* h) { delete P(h); }
int VocabSize(void* h) { return P(h)->GetPieceSize(); }

int SpecialId(void* h, int which) {
  switch (which) {
    case 0:
      return P(h)->bos_id();
    case 1:
      return P(h)->eos_id();
    case 2:
      return P(h)->unk_id();
    case 3:
      return P(h)->pad_id();
    default:
      return -1;
  }
}

int PieceType(void* h, int id) {
  if (id < 0 || id >= P(h)->GetPieceSize()) return 0;
  return (P(h)->IsControl(id) ? 1 : 0) | (P(h)->IsUnknown(id) ? 2 : 0) | (P(h)->IsByte(id) ? 4 : 0) |
         (P(h)->IsUnused(id) ? 8 : 0);
}

long Piece(void* h, int id, char* buf, size_t cap) {
  if (id < 0 || id >= P(h)->GetPieceSize()) return 0;
  return CopyOut(P(h)->IdToPiece(id), buf, cap);
}

int PieceToId(void* h, const char* s, size_t n) { return P(h)->PieceToId(absl::string_view(s, n)); }

long Encode(void* h, const char* text, size_t n, int* ids, size_t cap) {
  try {
    std::vector<int> v;
    if (!P(h)->Encode(absl::string_view(text, n), &v).ok()) return -1;
    std::copy_n(v.begin(), std::min(cap, v.size()), ids);
    return static_cast<long>(v.size());
  } catch (...) {
    return -1;
  }
}

long Decode(void* h, const int* ids, size_t n, char* buf, size_t cap) {
  try {
    std::string out;
    if (!P(h)->Decode(std::vector<int>(ids, ids + n), &out).ok()) return -1;
    return CopyOut(out, buf, cap);
  } catch (...) {
    return -1;
  }
}

const InferdSentencePieceApi kApi = {
    kInferdSentencePieceApiVersion, Load, Release, VocabSize, SpecialId, PieceType, Piece, PieceToId, Encode, Decode};

}  // namespace

extern "C" __attribute__((visibility("default"))) const InferdSentencePieceApi* inferd_sentencepiece_api() {
  return &kApi;
}
