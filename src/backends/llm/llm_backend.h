// The generative backend ("llm"): decoder-only transformers in the Hugging
// Face layout, a model version folder holding config.json, model.safetensors
// (or its shards and model.safetensors.index.json) and the tokenizer
// (tokenizer.json, tokenizer.model, or vocab.json + merges.txt), with
// tokenizer_config.json and generation_config.json when present.
//
// Its models run under the generative scheduler (scheduler_kind
// "generative"); instances are GenerativeInstances over the ATen decoder
// (aten_decoder.h). Config parameters read here: chat_template (chatml,
// llama2, llama3, mistral, zephyr, gemma, plain; default: recognised from
// tokenizer_config.json), INTRA_OP_THREAD_COUNT; the scheduler reads its own.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeLlmBackend();
Status RegisterLlmBackend(BackendRegistry* registry);

}  // namespace inferd
