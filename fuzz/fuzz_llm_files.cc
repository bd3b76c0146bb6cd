// The files of a generative model folder that inferd parses itself:
// model.safetensors headers, config.json, tokenizer.json and vocab.json +
// merges.txt (byte-level BPE, then encoding and decoding text with the
// result), and chat rendering. The first byte picks the parser.
// Invariants: no crash; a tokenizer that loads encodes any text to ids inside
// its vocabulary, and decoding them gives the text back (byte-level BPE is
// lossless when the vocabulary holds all 256 bytes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "llm/bpe_tokenizer.h"
#include "llm/chat_template.h"
#include "llm/decoder_config.h"
#include "llm/generation_request.h"
#include "llm/safetensors.h"
#include "llm/stop_matcher.h"
#include "llm/tokenizer.h"
#include "llm/unicode_tables.h"

namespace {

void CheckTokenizer(const inferd::llm::Tokenizer& t, std::string_view text) {
  for (bool special : {false, true}) {
    auto ids = t.Encode(text, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= t.vocab_size()) std::abort();
    }
    inferd::llm::IncrementalDecoder dec(&t, {}, false);
    std::string streamed;
    for (int32_t id : ids) streamed += dec.Push(id);
    streamed += dec.Flush();
    (void)inferd::llm::SanitizeUtf8(t.Decode(ids, true));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 7) {
    case 0: {
      auto f = inferd::llm::SafetensorsFile::FromBytes(std::string(in));
      if (f.ok()) {
        for (const auto& [name, e] : (*f)->header().tensors) {
          if ((*f)->Data(e).size() != e.end - e.begin) std::abort();
        }
      }
      break;
    }
    case 1:
      (void)inferd::llm::ParseDecoderConfig(in);
      break;
    case 2: {
      // tokenizer.json, then text to encode after a NUL.
      const size_t nul = in.find('\0');
      auto t = inferd::llm::ByteLevelBpe::FromTokenizerJson(in.substr(0, nul));
      if (t.ok() && nul != std::string_view::npos) CheckTokenizer(**t, in.substr(nul + 1));
      break;
    }
    case 3: {
      // vocab.json NUL merges.txt NUL text.
      const size_t a = in.find('\0');
      if (a == std::string_view::npos) break;
      const size_t b = in.find('\0', a + 1);
      auto t = inferd::llm::ByteLevelBpe::FromVocabAndMerges(in.substr(0, a), in.substr(a + 1, b - a - 1));
      if (t.ok() && b != std::string_view::npos) CheckTokenizer(**t, in.substr(b + 1));
      break;
    }
    case 4: {
      // Messages: lines "role\tcontent"; every template family.
      std::vector<inferd::llm::ChatMessage> messages;
      size_t pos = 0;
      while (pos < in.size() && messages.size() < 64) {
        size_t eol = in.find('\n', pos);
        if (eol == std::string_view::npos) eol = in.size();
        std::string_view line = in.substr(pos, eol - pos);
        const size_t tab = line.find('\t');
        messages.push_back(
            {std::string(line.substr(0, tab)), tab == std::string_view::npos ? "" : std::string(line.substr(tab + 1))});
        pos = eol + 1;
      }
      for (const char* name : {"chatml", "llama2", "llama3", "mistral", "zephyr", "gemma", "plain"}) {
        (void)inferd::llm::RenderChat(*inferd::llm::ChatTemplateFromName(name), messages, "<s>", "</s>");
      }
      (void)inferd::llm::DetectChatTemplate(in);
      break;
    }
    case 5:
      // A chat request's messages (the OpenAI route's JSON, carried to the scheduler).
      (void)inferd::llm::ParseChatMessages(in);
      break;
    case 6: {
      // Stop strings (before the first NUL, one per line) over text fed in pieces of 1-4 bytes:
      // what is sent never contains a stop string, and with none found it is all the text.
      const size_t nul = in.find('\0');
      if (nul == std::string_view::npos) break;
      std::vector<std::string> stops;
      for (size_t pos = 0; pos < nul && stops.size() < 8;) {
        size_t eol = in.find('\n', pos);
        if (eol == std::string_view::npos || eol > nul) eol = nul;
        if (eol > pos) stops.emplace_back(in.substr(pos, eol - pos));
        pos = eol + 1;
      }
      inferd::llm::StopMatcher m(stops);
      const std::string_view text = in.substr(nul + 1);
      std::string sent;
      for (size_t pos = 0; pos < text.size() && !m.stopped();) {
        const size_t n = 1 + (static_cast<unsigned char>(text[pos]) % 4);
        sent += m.Feed(text.substr(pos, n));
        pos += n;
      }
      sent += m.Flush();
      for (const auto& s : stops) {
        if (sent.find(s) != std::string::npos) std::abort();
      }
      if (!m.stopped() && sent != text) std::abort();
      break;
    }
  }
  return 0;
}
