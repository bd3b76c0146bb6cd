// Chat templates: a conversation (role, content) rendered as the prompt text
// a chat model was trained on. Hugging Face ships these as Jinja in
// tokenizer_config.json; inferd renders the common families natively, picked
// by name in config.pbtxt (parameter `chat_template`) or recognised from the
// Jinja text, so no template engine is needed.
//
// Families: chatml (<|im_start|>role\n...<|im_end|>: Qwen, many fine-tunes),
// llama2 ([INST] ... [/INST], <<SYS>>), llama3 (<|start_header_id|>),
// mistral ([INST] without <<SYS>>), zephyr (<|user|>), gemma
// (<start_of_turn>), plain ("role: content" lines; models without one).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd::llm {

enum class ChatTemplate { kChatML, kLlama2, kLlama3, kMistral, kZephyr, kGemma, kPlain };

struct ChatMessage {
  std::string role;  // system | user | assistant (| developer: treated as system)
  std::string content;
};

std::optional<ChatTemplate> ChatTemplateFromName(std::string_view name);
std::string_view ChatTemplateName(ChatTemplate t);
// The family a tokenizer_config.json Jinja template belongs to, if recognised.
std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja);

// The prompt text for `messages`, ending with the assistant's turn opening.
// `bos` / `eos` are the tokenizer's texts ("<s>", "</s>"; empty when none).
// INVALID_ARGUMENT (the message names the fault) for an unknown role, an
// empty conversation, or roles out of the order the family requires.
Result<std::string> RenderChat(ChatTemplate t, const std::vector<ChatMessage>& messages, std::string_view bos,
                               std::string_view eos);

// Token texts that end an assistant turn besides the model's EOS
// ("<|im_end|>" for chatml).
std::vector<std::string> ChatEndTokens(ChatTemplate t);

}  // namespace inferd::llm
