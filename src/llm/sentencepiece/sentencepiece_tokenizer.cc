#include "llm/sentencepiece/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "llm/bpe_tokenizer.h"
#include "llm/sentencepiece/sp_shim.h"

namespace inferd::llm {
namespace {

namespace fs = std::filesystem;

// Where libinferd_sentencepiece.so may be: named by the environment, beside
// the executable, in an installed tree, or in the build tree.
std::vector<std::string> ShimCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("INFERD_SENTENCEPIECE_SHIM"); env != nullptr && *env != '\0') out.push_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / "libinferd_sentencepiece.so").string());
    out.push_back((exe.parent_path().parent_path() / "lib" / "inferd" / "libinferd_sentencepiece.so").string());
  }
#ifdef INFERD_SENTENCEPIECE_SHIM_BUILD
  out.push_back(INFERD_SENTENCEPIECE_SHIM_BUILD);
#endif
  return out;
}

// The shim, loaded once per process into a link namespace of its own (sp_shim.h).
Result<const InferdSentencePieceApi*> Api() {
  static std::once_flag once;
  static const InferdSentencePieceApi* api = nullptr;
  static std::string error;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : ShimCandidates()) {
      if (!fs::exists(path)) {
        tried += " " + path;
        continue;
      }
      void* lib = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) {
        const char* e = dlerror();
        error = "cannot load " + path + ": " + (e ? e : "unknown error");
        return;
      }
      auto get = reinterpret_cast<const InferdSentencePieceApi* (*)()>(dlsym(lib, "inferd_sentencepiece_api"));
      if (get == nullptr || get()->version != kInferdSentencePieceApiVersion) {
        error = path + " is not inferd's sentencepiece shim of this version";
        return;
      }
      api = get();  // the library stays loaded for the life of the process
      return;
    }
    error = "libinferd_sentencepiece.so not found (looked at" + tried + "; set INFERD_SENTENCEPIECE_SHIM)";
  });
  if (api == nullptr) return Status::Unavailable("SentencePiece tokenizers need " + error);
  return api;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> Create(std::string_view bytes) {
    if (bytes.size() > kMaxTokenizerFileBytes) return Status::InvalidArgument("tokenizer.model is larger than 64 MiB");
    INFERD_ASSIGN_OR_RETURN(const InferdSentencePieceApi* api, Api());
    char err[512] = {0};
    void* h = api->load(bytes.data(), bytes.size(), err, sizeof(err));
    if (h == nullptr) return Status::InvalidArgument(std::string("tokenizer.model: ") + err);
    std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer(api, h));
    const int n = api->vocab_size(h);
    if (n <= 0) return Status::InvalidArgument("tokenizer.model: the vocabulary is empty");
    t->control_.assign(static_cast<size_t>(n), false);
    t->pieces_.resize(static_cast<size_t>(n));
    t->byte_.assign(static_cast<size_t>(n), -1);
    for (int id = 0; id < n; ++id) {
      char buf[256];
      const long len = api->piece(h, id, buf, sizeof(buf));
      std::string piece(buf, static_cast<size_t>(std::min<long>(len, sizeof(buf))));
      const int type = api->piece_type(h, id);
      if ((type & 4) && piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>') {
        t->byte_[static_cast<size_t>(id)] = static_cast<int16_t>(std::stoi(piece.substr(3, 2), nullptr, 16));
      }
      if (type & 1) {
        t->control_[static_cast<size_t>(id)] = true;
        if (!piece.empty()) t->specials_.push_back({piece, id});
      }
      t->pieces_[static_cast<size_t>(id)] = std::move(piece);
    }
    std::sort(t->specials_.begin(), t->specials_.end(),
              [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
    t->bos_ = api->special_id(h, 0);
    t->eos_ = api->special_id(h, 1);
    t->unk_ = api->special_id(h, 2);
    return std::unique_ptr<Tokenizer>(std::move(t));
  }

  ~SentencePieceTokenizer() override { api_->release(handle_); }

  std::vector<int32_t> Encode(std::string_view text, bool parse_special) const override {
    std::vector<int32_t> out;
    EncodeAroundVerbatim(
        text, parse_special ? std::span<const VerbatimToken>(specials_) : std::span<const VerbatimToken>(),
        [this](std::string_view part, std::vector<int32_t>* ids) { EncodePart(part, ids); }, &out);
    return out;
  }

  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::vector<int> keep;
    keep.reserve(ids.size());
    std::string out;
    auto flush = [&] {
      if (keep.empty()) return;
      std::string text(keep.size() * 16 + 16, '\0');
      long n = api_->decode(handle_, keep.data(), keep.size(), text.data(), text.size());
      if (n > static_cast<long>(text.size())) {
        text.resize(static_cast<size_t>(n));
        n = api_->decode(handle_, keep.data(), keep.size(), text.data(), text.size());
      }
      if (n > 0) out.append(text, 0, static_cast<size_t>(n));
      keep.clear();
    };
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= control_.size()) continue;
      if (control_[static_cast<size_t>(id)]) {
        // Control pieces decode to nothing in sentencepiece: spelt out unless skipped.
        if (!skip_special) {
          flush();
          out.append(pieces_[static_cast<size_t>(id)]);
        }
        continue;
      }
      keep.push_back(id);
    }
    flush();
    return out;
  }

  std::optional<int32_t> TokenId(std::string_view token) const override {
    const int id = api_->piece_to_id(handle_, token.data(), token.size());
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return std::nullopt;
    if (id == unk_ && pieces_[static_cast<size_t>(id)] != token) return std::nullopt;
    return id;
  }
  // The piece with its word-boundary mark as a space; a byte piece as its byte.
  std::string TokenBytes(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size() || control_[static_cast<size_t>(id)] || id == unk_) {
      return {};
    }
    if (byte_[static_cast<size_t>(id)] >= 0) return std::string(1, static_cast<char>(byte_[static_cast<size_t>(id)]));
    std::string out;
    const std::string& p = pieces_[static_cast<size_t>(id)];
    for (size_t i = 0; i < p.size(); ++i) {
      if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
        out.push_back(' ');
        i += 2;
      } else {
        out.push_back(p[i]);
      }
    }
    return out;
  }
  bool IsSpecial(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < control_.size() && control_[static_cast<size_t>(id)];
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  bool adds_bos() const override { return bos_ >= 0; }

 private:
  SentencePieceTokenizer(const InferdSentencePieceApi* api, void* handle) : api_(api), handle_(handle) {}

  void EncodePart(std::string_view text, std::vector<int32_t>* out) const {
    if (text.empty()) return;
    // At most one id per byte, plus the dummy prefix.
    std::vector<int> ids(text.size() + 8);
    long n = api_->encode(handle_, text.data(), text.size(), ids.data(), ids.size());
    if (n > static_cast<long>(ids.size())) {
      ids.resize(static_cast<size_t>(n));
      n = api_->encode(handle_, text.data(), text.size(), ids.data(), ids.size());
    }
    if (n > 0) out->insert(out->end(), ids.begin(), ids.begin() + std::min<long>(n, static_cast<long>(ids.size())));
  }

  const InferdSentencePieceApi* api_;
  void* handle_;
  std::vector<bool> control_;
  std::vector<std::string> pieces_;
  std::vector<int16_t> byte_;            // a byte piece's byte, else -1
  std::vector<VerbatimToken> specials_;  // control pieces, longest first
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> SentencePieceFromBytes(std::string_view bytes) {
  return SentencePieceTokenizer::Create(bytes);
}

Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return Status::NotFound("cannot read " + path);
  if (size > kMaxTokenizerFileBytes) return Status::InvalidArgument("tokenizer.model is larger than 64 MiB");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return SentencePieceTokenizer::Create(ss.str());
}

}  // namespace inferd::llm
