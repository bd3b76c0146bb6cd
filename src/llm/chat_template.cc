#include "llm/chat_template.h"

#include "core/number_text.h"

namespace inferd::llm {
namespace {

struct Named {
  std::string_view name;
  ChatTemplate t;
};
constexpr Named kNames[] = {{"chatml", ChatTemplate::kChatML}, {"llama2", ChatTemplate::kLlama2},
                            {"llama3", ChatTemplate::kLlama3}, {"mistral", ChatTemplate::kMistral},
                            {"zephyr", ChatTemplate::kZephyr}, {"gemma", ChatTemplate::kGemma},
                            {"plain", ChatTemplate::kPlain}};

std::string Strip(std::string_view s) { return std::string(TrimSpace(s)); }

// Roles normalised: "developer" is OpenAI's newer name for "system".
Result<std::vector<ChatMessage>> Normalise(const std::vector<ChatMessage>& in) {
  if (in.empty()) return Status::InvalidArgument("messages must not be empty");
  std::vector<ChatMessage> out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ChatMessage m = in[i];
    if (m.role == "developer") m.role = "system";
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return Status::InvalidArgument("messages[" + std::to_string(i) + "].role '" + m.role.substr(0, 32) +
                                     "' is not system, user or assistant");
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The [INST] families: an optional system message first, then user and
// assistant alternating, starting with user.
Status CheckAlternating(const std::vector<ChatMessage>& m, size_t first) {
  for (size_t i = first; i < m.size(); ++i) {
    const char* want = (i - first) % 2 == 0 ? "user" : "assistant";
    if (m[i].role != want) {
      return Status::InvalidArgument("conversation roles must alternate user/assistant/user/... (messages[" +
                                     std::to_string(i) + "] is " + m[i].role + ")");
    }
  }
  if (first >= m.size()) return Status::InvalidArgument("the conversation has no user message");
  return Status::OK();
}

}  // namespace

std::optional<ChatTemplate> ChatTemplateFromName(std::string_view name) {
  for (const Named& n : kNames)
    if (n.name == name) return n.t;
  return std::nullopt;
}

std::string_view ChatTemplateName(ChatTemplate t) {
  for (const Named& n : kNames)
    if (n.t == t) return n.name;
  return "plain";
}

std::optional<ChatTemplate> DetectChatTemplate(std::string_view j) {
  auto has = [&](std::string_view s) { return j.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) return ChatTemplate::kChatML;
  if (has("<|start_header_id|>")) return ChatTemplate::kLlama3;
  if (has("<start_of_turn>")) return ChatTemplate::kGemma;
  if (has("<<SYS>>")) return ChatTemplate::kLlama2;
  if (has("[INST]")) return ChatTemplate::kMistral;
  if (has("<|user|>") && has("<|assistant|>")) return ChatTemplate::kZephyr;
  return std::nullopt;
}

Result<std::string> RenderChat(ChatTemplate t, const std::vector<ChatMessage>& raw, std::string_view bos,
                               std::string_view eos) {
  INFERD_ASSIGN_OR_RETURN(std::vector<ChatMessage> m, Normalise(raw));
  std::string out;
  switch (t) {
    case ChatTemplate::kChatML:
      for (const auto& x : m) {
        out.append("<|im_start|>").append(x.role).append("\n").append(x.content).append("<|im_end|>\n");
      }
      out.append("<|im_start|>assistant\n");
      return out;
    case ChatTemplate::kLlama3:
      out.append(bos);
      for (const auto& x : m) {
        out.append("<|start_header_id|>").append(x.role).append("<|end_header_id|>\n\n");
        out.append(Strip(x.content)).append("<|eot_id|>");
      }
      out.append("<|start_header_id|>assistant<|end_header_id|>\n\n");
      return out;
    case ChatTemplate::kZephyr:
      for (const auto& x : m) {
        out.append("<|").append(x.role).append("|>\n").append(x.content).append(eos).append("\n");
      }
      out.append("<|assistant|>\n");
      return out;
    case ChatTemplate::kPlain:
      for (const auto& x : m) out.append(x.role).append(": ").append(x.content).append("\n");
      out.append("assistant:");
      return out;
    case ChatTemplate::kLlama2:
    case ChatTemplate::kMistral:
    case ChatTemplate::kGemma: {
      std::string system;
      size_t first = 0;
      if (m[0].role == "system") {
        if (t == ChatTemplate::kGemma) return Status::InvalidArgument("this model's chat template has no system role");
        system = Strip(m[0].content);
        first = 1;
      }
      INFERD_RETURN_IF_ERROR(CheckAlternating(m, first));
      if (m.back().role != "user") return Status::InvalidArgument("the last message must be the user's");
      if (t == ChatTemplate::kGemma) out.append(bos);
      for (size_t i = first; i < m.size(); ++i) {
        const bool user = m[i].role == "user";
        std::string content = Strip(m[i].content);
        if (t == ChatTemplate::kGemma) {
          out.append("<start_of_turn>").append(user ? "user" : "model").append("\n");
          out.append(content).append("<end_of_turn>\n");
          continue;
        }
        if (user) {
          if (i == first && !system.empty()) {
            content = t == ChatTemplate::kLlama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
                                                 : system + "\n\n" + content;
          }
          out.append(bos).append("[INST] ").append(content).append(" [/INST]");
        } else if (t == ChatTemplate::kLlama2) {
          out.append(" ").append(content).append(" ").append(eos);
        } else {
          out.append(content).append(eos);
        }
      }
      if (t == ChatTemplate::kGemma) out.append("<start_of_turn>model\n");
      return out;
    }
  }
  return Status::Internal("unknown chat template");
}

std::vector<std::string> ChatEndTokens(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatML:
      return {"<|im_end|>"};
    case ChatTemplate::kLlama3:
      return {"<|eot_id|>"};
    case ChatTemplate::kGemma:
      return {"<end_of_turn>"};
    default:
      return {};
  }
}

}  // namespace inferd::llm
