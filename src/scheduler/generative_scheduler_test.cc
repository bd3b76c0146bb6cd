// The generative scheduler over a fake decoder whose next token is a hash of
// the whole context as read back from the KV slots its block tables name: any
// mistake in paging, prefix sharing, chunking or preemption changes the text.
#include "scheduler/generative_scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "core/mutex.h"
#include "llm/lora_adapter.h"
#include "llm/tokenizer.h"

namespace inferd {
namespace {

constexpr int32_t kVocab = 258;  // bytes, then EOS (256) and an unused id
constexpr int32_t kEos = 256;

// One token per byte.
class ByteTokenizer final : public llm::Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool) const override {
    std::vector<int32_t> out;
    for (unsigned char c : text) out.push_back(c);
    return out;
  }
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 256)
        out.push_back(static_cast<char>(id));
      else if (!skip_special)
        out += "<eos>";
    }
    return out;
  }
  std::optional<int32_t> TokenId(std::string_view) const override { return std::nullopt; }
  bool IsSpecial(int32_t id) const override { return id >= 256; }
  int64_t vocab_size() const override { return kVocab; }
};

// The next token of a context: printable letters mostly, EOS when the hash says so. With a copy period, the token
// that many positions back (a model that repeats its text, as speculative decoding's drafts guess).
// `salt`: a LoRA adapter's (its rank), 0 for the base model.
int32_t NextToken(const std::vector<int32_t>& context, int eos_every, size_t copy_period = 0, uint64_t salt = 0) {
  if (copy_period > 0 && context.size() >= copy_period) return context[context.size() - copy_period];
  uint64_t h = 1469598103934665603ull ^ (salt * 0x9E3779B97F4A7C15ull);
  for (int32_t t : context) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  if (eos_every > 0 && h % static_cast<uint64_t>(eos_every) == 0) return kEos;
  return static_cast<int32_t>('a' + h % 26);
}

class FakeDecoder final : public llm::DecoderModel {
 public:
  explicit FakeDecoder(int eos_every, size_t copy_period = 0) : eos_every_(eos_every), copy_period_(copy_period) {
    config_.vocab_size = kVocab;
    config_.max_positions = 512;
  }
  const llm::DecoderConfig& config() const override { return config_; }
  int64_t CacheBytesPerBlock(int64_t block_size) const override { return block_size * 100; }
  Status AllocateCache(int64_t num_blocks, int64_t block_size) override {
    slots_.assign(static_cast<size_t>(num_blocks * block_size), -1);
    block_size_ = block_size;
    return Status::OK();
  }
  Status Forward(std::span<const llm::StepInput> batch, std::vector<float>* logits) override {
    {
      // The gate: a test holds steps until it has queued what it wants to run together.
      MutexLock l(&gate_mu_);
      ++entered_;
      gate_cv_.NotifyAll();
      while (!open_) gate_cv_.Wait(&gate_mu_);
    }
    logits->clear();
    ++steps;
    max_batch = std::max(max_batch, batch.size());
    std::vector<const llm::LoraAdapter*> adapters;
    for (const auto& in : batch)
      if (in.lora && std::find(adapters.begin(), adapters.end(), in.lora) == adapters.end())
        adapters.push_back(in.lora);
    max_adapters = std::max(max_adapters, adapters.size());
    for (const auto& in : batch) {
      const uint64_t salt = in.lora ? static_cast<uint64_t>(in.lora->config.rank) : 0;
      auto slot = [&](int64_t p) {
        return static_cast<size_t>(in.blocks[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_);
      };
      for (size_t i = 0; i < in.tokens.size(); ++i) slots_[slot(in.position + static_cast<int64_t>(i))] = in.tokens[i];
      const int64_t end = in.position + static_cast<int64_t>(in.tokens.size());
      for (int64_t last = end - in.num_logits; last < end; ++last) {  // logits after positions up to `last`
        std::vector<int32_t> context;
        for (int64_t p = 0; p <= last; ++p) context.push_back(slots_[slot(p)]);
        std::vector<float> row(kVocab, 0.0f);
        row[static_cast<size_t>(NextToken(context, eos_every_, copy_period_, salt))] = 10.0f;
        logits->insert(logits->end(), row.begin(), row.end());
      }
    }
    return Status::OK();
  }
  size_t steps = 0;
  size_t max_batch = 0;
  size_t max_adapters = 0;  // distinct LoRA adapters in one step

  void Close() {
    MutexLock l(&gate_mu_);
    open_ = false;
  }
  void Open() {
    MutexLock l(&gate_mu_);
    open_ = true;
    gate_cv_.NotifyAll();
  }
  // Waits (at most 30 s) until a step is held at the gate.
  bool WaitEntered() {
    MutexLock l(&gate_mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (entered_ == 0 && std::chrono::steady_clock::now() < deadline) {
      gate_cv_.WaitForReal(&gate_mu_, std::chrono::milliseconds(100));
    }
    return entered_ > 0;
  }

 private:
  Mutex gate_mu_;
  CondVar gate_cv_;
  bool open_ TSA_GUARDED_BY(gate_mu_) = true;
  size_t entered_ TSA_GUARDED_BY(gate_mu_) = 0;
  llm::DecoderConfig config_;
  int eos_every_;
  size_t copy_period_;
  std::vector<int32_t> slots_;
  int64_t block_size_ = 1;
};

class FakeInstance final : public GenerativeInstance {
 public:
  explicit FakeInstance(int eos_every, size_t copy_period = 0) : decoder_(eos_every, copy_period) {
    info_.tokenizer = std::make_shared<ByteTokenizer>();
    info_.end_ids = {kEos};
  }
  llm::DecoderModel& decoder() override { return decoder_; }
  const GenerativeModelInfo& info() const override { return info_; }
  FakeDecoder decoder_;

 private:
  GenerativeModelInfo info_;
};

// What greedy generation must give: the fake's tokens run without any cache.
std::string Reference(const std::string& prompt, int max_tokens, int eos_every, std::string* finish,
                      size_t copy_period = 0, uint64_t salt = 0) {
  std::vector<int32_t> ctx(prompt.begin(), prompt.end());
  std::string out;
  *finish = "length";
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t t = NextToken(ctx, eos_every, copy_period, salt);
    if (t == kEos) {
      *finish = "stop";
      break;
    }
    ctx.push_back(t);
    out.push_back(static_cast<char>(t));
  }
  return out;
}

struct Outcome {
  bool done = false;
  Result<InferResponse> final = Status::Internal("not answered");
  std::string streamed;
  int parts = 0;
};

class GenerativeSchedulerTest : public ::testing::Test {
 protected:
  void Start(GenerativeOptions o, int eos_every = 0, size_t copy_period = 0, const LoraCatalog* loras = nullptr) {
    auto inst = std::make_unique<FakeInstance>(eos_every, copy_period);
    fake_ = inst.get();
    spec_.name = "chat";
    auto s = GenerativeScheduler::Create(o, spec_, std::move(inst), &clock_, nullptr, loras);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(*s);
  }

  // Enqueues a prompt; the outcome is filled in when it is answered.
  Status Submit(const std::string& prompt, Parameters params, Outcome* out, bool stream = false,
                std::function<bool(int)> keep_streaming = nullptr) {
    auto r = std::make_unique<InferRequest>();
    r->model_name = "chat";
    auto buf = std::make_shared<std::string>();
    AppendBytesElement(buf.get(), prompt);
    r->inputs.push_back(Tensor::Own("text_input", DataType::kBytes, {1}, buf));
    r->parameters = std::move(params);
    auto p = std::make_unique<PendingRequest>();
    p->request = std::move(r);
    p->arrival = clock_.Now();
    p->callback = [this, out](Result<InferResponse> res) {
      MutexLock l(&mu_);
      out->final = std::move(res);
      out->done = true;
      cv_.NotifyAll();
    };
    if (stream) {
      p->partial = [this, out, keep_streaming](InferResponse part) {
        MutexLock l(&mu_);
        auto elems = SplitBytesElements(part.outputs[0].bytes());
        out->streamed += std::string((*elems)[0]);
        ++out->parts;
        return keep_streaming ? keep_streaming(out->parts) : true;
      };
    }
    return scheduler_->Enqueue(p);
  }

  void WaitAll(std::vector<Outcome>& outs) {
    MutexLock l(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto all = [&] { return std::all_of(outs.begin(), outs.end(), [](const Outcome& o) { return o.done; }); };
    while (!all() && std::chrono::steady_clock::now() < deadline) cv_.WaitForReal(&mu_, std::chrono::milliseconds(100));
    ASSERT_TRUE(all()) << "generation did not finish within 30 s";
  }

  static std::string Text(const InferResponse& r) {
    auto elems = SplitBytesElements(r.outputs[0].bytes());
    return std::string((*elems)[0]);
  }
  static std::string Param(const InferResponse& r, const char* name) {
    const auto& v = r.parameters.at(name);
    if (const auto* s = std::get_if<std::string>(&v)) return *s;
    return std::to_string(std::get<int64_t>(v));
  }

  SteadyClock clock_;
  ModelSpec spec_;
  FakeInstance* fake_ = nullptr;
  std::unique_ptr<GenerativeScheduler> scheduler_;
  Mutex mu_;
  CondVar cv_;
};

Parameters Greedy(int64_t max_tokens) { return {{"max_tokens", max_tokens}, {"temperature", 0.0}}; }

TEST_F(GenerativeSchedulerTest, ManyConcurrentRequestsMatchTheirSoloRuns) {
  GenerativeOptions o;
  o.block_size = 4;
  o.kv_cache_bytes = 4 * 100 * 40;  // 40 blocks: far fewer than 24 requests need at once, so some are preempted
  o.max_batched_tokens = 64;
  o.max_num_seqs = 16;
  Start(o, /*eos_every=*/37);
  std::vector<Outcome> outs(24);
  std::vector<std::string> prompts;
  // The first request's step is held until every request is queued, so they all run together.
  fake_->decoder_.Close();
  for (size_t i = 0; i < outs.size(); ++i) {
    prompts.push_back("prompt number " + std::to_string(i) + std::string(i * 3, 'x'));
    ASSERT_TRUE(Submit(prompts[i], Greedy(20 + static_cast<int64_t>(i)), &outs[i]).ok());
    if (i == 0) ASSERT_TRUE(fake_->decoder_.WaitEntered());
  }
  fake_->decoder_.Open();
  WaitAll(outs);
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_TRUE(outs[i].final.ok()) << outs[i].final.status().ToString();
    std::string finish;
    EXPECT_EQ(Text(*outs[i].final), Reference(prompts[i], 20 + static_cast<int>(i), 37, &finish)) << i;
    EXPECT_EQ(Param(*outs[i].final, "finish_reason"), finish) << i;
    EXPECT_EQ(Param(*outs[i].final, "prompt_tokens"), std::to_string(prompts[i].size()));
  }
  EXPECT_GT(scheduler_->counters().preemptions.load(), 0u);
  EXPECT_GT(fake_->decoder_.max_batch, 1u);
  EXPECT_EQ(scheduler_->counters().kv_usage.load(), 0.0);  // every block back once idle
}

TEST_F(GenerativeSchedulerTest, PrefixCacheServesTheSharedPromptAndGivesTheSameText) {
  GenerativeOptions o;
  o.block_size = 4;
  Start(o);
  const std::string system(64, 's');
  std::vector<Outcome> first(1), second(1);
  ASSERT_TRUE(Submit(system + " first question", Greedy(8), &first[0]).ok());
  WaitAll(first);
  ASSERT_TRUE(Submit(system + " first question", Greedy(8), &second[0]).ok());
  WaitAll(second);
  ASSERT_TRUE(second[0].final.ok());
  EXPECT_EQ(Text(*second[0].final), Text(*first[0].final));
  EXPECT_EQ(Param(*first[0].final, "cached_tokens"), "0");
  EXPECT_GE(std::stoi(Param(*second[0].final, "cached_tokens")), 64);
  EXPECT_GT(scheduler_->counters().prefix_hit_tokens.load(), 0u);
}

TEST_F(GenerativeSchedulerTest, StreamedPartsAddUpToTheWholeText) {
  GenerativeOptions o;
  Start(o);
  std::vector<Outcome> outs(2);
  ASSERT_TRUE(Submit("hello", Greedy(12), &outs[0], /*stream=*/true).ok());
  ASSERT_TRUE(Submit("hello", Greedy(12), &outs[1]).ok());
  WaitAll(outs);
  ASSERT_TRUE(outs[0].final.ok() && outs[1].final.ok());
  EXPECT_EQ(outs[0].streamed + Text(*outs[0].final), Text(*outs[1].final));
  EXPECT_GE(outs[0].parts, 10);
}

TEST_F(GenerativeSchedulerTest, AClientThatGoesAwayFreesItsBlocks) {
  GenerativeOptions o;
  o.block_size = 4;
  Start(o);
  std::vector<Outcome> outs(1);
  ASSERT_TRUE(Submit("tell me a long story", Greedy(200), &outs[0], true, [](int parts) { return parts < 3; }).ok());
  WaitAll(outs);
  EXPECT_EQ(outs[0].final.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(outs[0].parts, 3);
  EXPECT_EQ(scheduler_->counters().kv_usage.load(), 0.0);
}

TEST_F(GenerativeSchedulerTest, StopStringsSpanningTokensCutTheText) {
  GenerativeOptions o;
  Start(o);
  std::string finish;
  const std::string full = Reference("abc", 30, 0, &finish);
  const std::string stop = full.substr(10, 3);  // three tokens
  const std::string want = full.substr(0, full.find(stop));
  std::vector<Outcome> outs(2);
  ASSERT_TRUE(Submit("abc", {{"max_tokens", int64_t{30}}, {"temperature", 0.0}, {"stop", stop}}, &outs[0], true).ok());
  ASSERT_TRUE(
      Submit("abc", {{"max_tokens", int64_t{30}}, {"temperature", 0.0}, {"stop", "[\"" + stop + "\"]"}}, &outs[1])
          .ok());
  WaitAll(outs);
  ASSERT_TRUE(outs[0].final.ok() && outs[1].final.ok());
  EXPECT_EQ(outs[0].streamed + Text(*outs[0].final), want);
  EXPECT_EQ(Text(*outs[1].final), want);
  EXPECT_EQ(Param(*outs[1].final, "finish_reason"), "stop");
}

TEST_F(GenerativeSchedulerTest, StaticBatchingGivesTheSameTexts) {
  GenerativeOptions o;
  o.static_batching = true;
  Start(o, 11);
  std::vector<Outcome> outs(6);
  for (size_t i = 0; i < outs.size(); ++i) ASSERT_TRUE(Submit("q" + std::to_string(i), Greedy(15), &outs[i]).ok());
  WaitAll(outs);
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string finish;
    ASSERT_TRUE(outs[i].final.ok());
    EXPECT_EQ(Text(*outs[i].final), Reference("q" + std::to_string(i), 15, 11, &finish));
  }
}

// Bad parameters are refused by Enqueue, on the caller's thread; what needs the tokenizer (the prompt's length
// against the context, an empty prompt) is answered through the callback from the loop thread, which tokenises.
TEST_F(GenerativeSchedulerTest, InvalidRequestsAreRefused) {
  GenerativeOptions o;
  o.max_model_len = 32;
  Start(o);
  Outcome out;
  EXPECT_EQ(Submit("hi", {{"temperature", 3.0}}, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Submit("hi", {{"top_p", 0.0}}, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Submit("hi", {{"max_tokens", int64_t{0}}}, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Submit("hi", {{"stop", int64_t{3}}}, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(out.done);  // none of them reached the loop
  std::vector<Outcome> outs(2);
  ASSERT_TRUE(Submit(std::string(30, 'x'), Greedy(10), &outs[0]).ok());
  ASSERT_TRUE(Submit("", Greedy(1), &outs[1]).ok());
  WaitAll(outs);
  EXPECT_EQ(outs[0].final.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outs[0].final.status().message().find("maximum context length is 32"), std::string::npos)
      << outs[0].final.status().message();
  EXPECT_EQ(outs[1].final.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(outs[1].final.status().message(), "the prompt is empty");
  EXPECT_EQ(scheduler_->QueueSize(), 0u);
}

TEST_F(GenerativeSchedulerTest, SeededSamplingIsReproducible) {
  GenerativeOptions o;
  Start(o);
  std::vector<Outcome> outs(2);
  Parameters p = {{"max_tokens", int64_t{10}}, {"temperature", 1.0}, {"seed", int64_t{7}}};
  ASSERT_TRUE(Submit("x", p, &outs[0]).ok());
  ASSERT_TRUE(Submit("x", p, &outs[1]).ok());
  WaitAll(outs);
  ASSERT_TRUE(outs[0].final.ok() && outs[1].final.ok());
  EXPECT_EQ(Text(*outs[0].final), Text(*outs[1].final));
}

GenerativeOptions Speculating() {
  GenerativeOptions o;
  o.block_size = 4;
  o.speculation.enabled = true;
  o.speculation.num_tokens = 5;
  return o;
}

// Prompt-lookup speculation on a model that repeats its text: drafts are kept, several tokens come from one step,
// and the text is still exactly the model's (the fake reads every context back from the KV slots, so a rejected
// draft's keys left in place, or a position counted twice, would change it). Streamed, one part per step.
TEST_F(GenerativeSchedulerTest, SpeculationKeepsDraftsOfARepeatingModelAndItsExactText) {
  Start(Speculating(), /*eos_every=*/0, /*copy_period=*/11);
  const std::string prompt = "the quick brown fox jumps";
  std::vector<Outcome> outs(3);
  ASSERT_TRUE(Submit(prompt, Greedy(60), &outs[0]).ok());
  ASSERT_TRUE(Submit(prompt, Greedy(60), &outs[1], /*stream=*/true).ok());
  ASSERT_TRUE(Submit(prompt + " over", Greedy(60), &outs[2]).ok());
  WaitAll(outs);
  std::string finish;
  const std::string want = Reference(prompt, 60, 0, &finish, 11);
  ASSERT_TRUE(outs[0].final.ok() && outs[1].final.ok() && outs[2].final.ok());
  EXPECT_EQ(Text(*outs[0].final), want);
  EXPECT_EQ(outs[1].streamed + Text(*outs[1].final), want);
  EXPECT_EQ(Text(*outs[2].final), Reference(prompt + " over", 60, 0, &finish, 11));
  EXPECT_EQ(Param(*outs[0].final, "completion_tokens"), "60");
  const GenerativeStats& c = scheduler_->counters();
  EXPECT_GT(c.spec_drafts.load(), 0u);
  EXPECT_GT(c.spec_accepted_tokens.load(), c.spec_draft_tokens.load() * 8 / 10);
  EXPECT_EQ(c.generation_tokens.load(), 180u);
  EXPECT_LT(fake_->decoder_.steps, 90u);  // 3 x 60 tokens in far fewer steps
  EXPECT_LT(outs[1].parts, 40);           // parts are per step, not per token
  EXPECT_EQ(c.kv_usage.load(), 0.0);
}

// A model whose text does not repeat its prompt: drafts are mostly refused, the text is exactly the plain one,
// greedy and seeded sampling alike (a kept token is a sample of the model's own distribution), and a sequence
// whose drafts keep failing stops drafting for a while (fewer drafts than steps).
TEST_F(GenerativeSchedulerTest, RefusedDraftsLeaveTheTextUnchanged) {
  GenerativeOptions o = Speculating();
  o.speculation.ngram_min = o.speculation.ngram_max = 1;  // draft after any single letter seen before: many drafts
  Start(o, /*eos_every=*/29);
  std::vector<Outcome> outs(3);
  const std::string prompt = "abcabcabdabcab";
  Parameters sampled = {{"max_tokens", int64_t{40}}, {"temperature", 1.0}, {"seed", int64_t{3}}};
  Parameters sampled_plain = sampled;
  sampled_plain["speculative_decoding"] = false;
  ASSERT_TRUE(Submit(prompt, Greedy(40), &outs[0]).ok());
  ASSERT_TRUE(Submit(prompt, sampled, &outs[1]).ok());
  ASSERT_TRUE(Submit(prompt, sampled_plain, &outs[2]).ok());
  WaitAll(outs);
  std::string finish;
  for (auto& out : outs) ASSERT_TRUE(out.final.ok()) << out.final.status().ToString();
  EXPECT_EQ(Text(*outs[0].final), Reference(prompt, 40, 29, &finish));
  EXPECT_EQ(Param(*outs[0].final, "finish_reason"), finish);
  EXPECT_EQ(Text(*outs[1].final), Text(*outs[2].final));
  const GenerativeStats& c = scheduler_->counters();
  EXPECT_GT(c.spec_drafts.load(), 0u);
  EXPECT_LT(c.spec_accepted_tokens.load(), c.spec_draft_tokens.load() / 2);
  EXPECT_EQ(c.kv_usage.load(), 0.0);
}

// On by request where the model's default is off; off by request where it is on.
TEST_F(GenerativeSchedulerTest, ARequestTurnsSpeculationOnOrOff) {
  GenerativeOptions o;
  o.block_size = 4;
  Start(o, 0, /*copy_period=*/7);
  std::vector<Outcome> outs(1);
  ASSERT_TRUE(Submit("abcdefghij", Greedy(30), &outs[0]).ok());
  WaitAll(outs);
  EXPECT_EQ(scheduler_->counters().spec_drafts.load(), 0u);
  outs = std::vector<Outcome>(1);
  Parameters on = Greedy(30);
  on["speculative_decoding"] = true;
  ASSERT_TRUE(Submit("abcdefghij", on, &outs[0]).ok());
  WaitAll(outs);
  std::string finish;
  ASSERT_TRUE(outs[0].final.ok());
  EXPECT_EQ(Text(*outs[0].final), Reference("abcdefghij", 30, 0, &finish, 7));
  EXPECT_GT(scheduler_->counters().spec_drafts.load(), 0u);
}

// LoRA adapters: the fake decoder salts its tokens with the adapter's rank, so a sequence run with the wrong adapter
// (or none) gives another text. Loads go through a fake loader a test can hold.
class LoraSchedulerTest : public GenerativeSchedulerTest {
 protected:
  void StartWithAdapters(GenerativeOptions o, std::vector<std::pair<std::string, int32_t>> adapters) {
    for (const auto& [name, rank] : adapters) {
      ASSERT_TRUE(catalog_.Add(LoraEntry{name, "chat", "/nowhere/" + name}).ok());
      ranks_[name] = rank;
    }
    o.lora_loader = [this](const LoraEntry& e) -> Result<std::shared_ptr<const llm::LoraAdapter>> {
      MutexLock l(&load_mu_);
      ++loads_started_;
      load_cv_.NotifyAll();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (held_ && std::chrono::steady_clock::now() < deadline)
        load_cv_.WaitForReal(&load_mu_, std::chrono::milliseconds(100));
      if (ranks_.at(e.name) < 0) return Status::InvalidArgument("adapter tensor 'x' is [3, 4]; needs [3, 8]");
      auto a = std::make_shared<llm::LoraAdapter>();
      a->config.rank = ranks_.at(e.name);
      a->layers.resize(1);
      a->layers[0][0].in = 100;  // bytes(): 100 * rank * 4
      a->layers[0][0].a.assign(static_cast<size_t>(100 * a->config.rank), 0.0f);
      return std::shared_ptr<const llm::LoraAdapter>(std::move(a));
    };
    Start(std::move(o), 0, 0, &catalog_);
  }
  void Hold(bool held) {
    MutexLock l(&load_mu_);
    held_ = held;
    load_cv_.NotifyAll();
  }
  bool WaitLoadStarted(int n) {
    MutexLock l(&load_mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (loads_started_ < n && std::chrono::steady_clock::now() < deadline)
      load_cv_.WaitForReal(&load_mu_, std::chrono::milliseconds(100));
    return loads_started_ >= n;
  }
  static Parameters With(const std::string& adapter, int64_t max_tokens = 12) {
    Parameters p = Greedy(max_tokens);
    p["lora_adapter"] = adapter;
    return p;
  }
  std::string Want(const std::string& prompt, const std::string& adapter, int max_tokens = 12) {
    std::string finish;
    return Reference(prompt, max_tokens, 0, &finish, 0, adapter.empty() ? 0 : static_cast<uint64_t>(ranks_[adapter]));
  }

  LoraCatalog catalog_;
  std::map<std::string, int32_t> ranks_;  // -1: the load fails
  Mutex load_mu_;
  CondVar load_cv_;
  bool held_ TSA_GUARDED_BY(load_mu_) = false;
  int loads_started_ TSA_GUARDED_BY(load_mu_) = 0;
};

TEST_F(LoraSchedulerTest, AnAdapterLoadingDoesNotHoldOtherRequests) {
  GenerativeOptions o;
  o.block_size = 4;
  StartWithAdapters(o, {{"sql", 3}, {"poet", 5}});
  Hold(true);
  std::vector<Outcome> adapter(1), base(1), poet(1);
  ASSERT_TRUE(Submit("hello there", With("sql"), &adapter[0]).ok());
  ASSERT_TRUE(WaitLoadStarted(1));
  // sql's load is held: the base model's request is answered meanwhile.
  ASSERT_TRUE(Submit("hello there", Greedy(12), &base[0]).ok());
  WaitAll(base);
  ASSERT_TRUE(base[0].final.ok()) << base[0].final.status().ToString();
  EXPECT_EQ(Text(*base[0].final), Want("hello there", ""));
  {
    MutexLock l(&mu_);
    EXPECT_FALSE(adapter[0].done);
  }
  Hold(false);
  ASSERT_TRUE(Submit("hello there", With("poet"), &poet[0], /*stream=*/true).ok());
  WaitAll(adapter);
  WaitAll(poet);
  ASSERT_TRUE(adapter[0].final.ok()) << adapter[0].final.status().ToString();
  EXPECT_EQ(Text(*adapter[0].final), Want("hello there", "sql"));
  ASSERT_TRUE(poet[0].final.ok());
  EXPECT_EQ(poet[0].streamed + Text(*poet[0].final), Want("hello there", "poet"));
  EXPECT_NE(Want("hello there", "sql"), Want("hello there", ""));
  const LoraStats::Snapshot snap = scheduler_->counters().lora.snapshot();
  EXPECT_EQ(snap.adapters.at("sql").requests, 1u);
  EXPECT_EQ(snap.adapters.at("sql").loads, 1u);
  EXPECT_EQ(snap.adapters.at("poet").generation_tokens, 12u);
  EXPECT_EQ(snap.max_loras, 16);
  EXPECT_EQ(snap.resident, 2);
  EXPECT_TRUE(snap.running.empty());
}

TEST_F(LoraSchedulerTest, UnknownAndBrokenAdaptersFailAlone) {
  GenerativeOptions o;
  StartWithAdapters(o, {{"ok", 2}, {"broken", -1}});
  ASSERT_TRUE(catalog_.Add(LoraEntry{"elsewhere", "another-model", "/x"}).ok());
  std::vector<Outcome> outs(3);
  EXPECT_EQ(Submit("hi", With("nope"), &outs[0]).code(), StatusCode::kNotFound);
  EXPECT_EQ(Submit("hi", With("elsewhere"), &outs[0]).code(), StatusCode::kNotFound);  // another base model's
  Parameters bad = Greedy(4);
  bad["lora_adapter"] = int64_t{3};
  EXPECT_EQ(Submit("hi", bad, &outs[0]).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(Submit("hi", With("broken"), &outs[0]).ok());
  ASSERT_TRUE(Submit("hi", With("ok"), &outs[1]).ok());
  ASSERT_TRUE(Submit("hi", Greedy(12), &outs[2]).ok());
  WaitAll(outs);
  EXPECT_EQ(outs[0].final.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outs[0].final.status().message().find("LoRA adapter 'broken' cannot be loaded: adapter tensor"),
            std::string::npos)
      << outs[0].final.status().ToString();
  ASSERT_TRUE(outs[1].final.ok());
  EXPECT_EQ(Text(*outs[1].final), Want("hi", "ok"));
  ASSERT_TRUE(outs[2].final.ok());
  EXPECT_EQ(scheduler_->counters().lora.snapshot().adapters.at("broken").load_failures, 1u);
}

TEST_F(LoraSchedulerTest, AnAdapterLargerThanTheCacheFailsItsRequests) {
  GenerativeOptions o;
  o.lora_cache.max_bytes = 100 * 4 * 2;
  StartWithAdapters(o, {{"big", 3}, {"small", 2}});
  std::vector<Outcome> outs(2);
  ASSERT_TRUE(Submit("x", With("big", 2), &outs[0]).ok());
  ASSERT_TRUE(Submit("x", With("small", 2), &outs[1]).ok());
  WaitAll(outs);
  EXPECT_EQ(outs[0].final.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(outs[0].final.status().message().find("more than the model's lora_cache_bytes"), std::string::npos);
  ASSERT_TRUE(outs[1].final.ok());
  EXPECT_EQ(scheduler_->HeldBytes(), 100u * 4 * 2);
}

TEST_F(LoraSchedulerTest, MaxLorasBoundsTheAdaptersOfAStep) {
  GenerativeOptions o;
  o.block_size = 4;
  o.max_loras = 2;
  StartWithAdapters(o, {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}});
  // Every adapter resident first, so the requests below are all waiting together.
  std::vector<Outcome> warm(4);
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(Submit("w", With(std::string(1, 'a' + i), 1), &warm[i]).ok());
  WaitAll(warm);
  fake_->decoder_.Close();
  std::vector<Outcome> outs(9);
  ASSERT_TRUE(Submit("first", Greedy(20), &outs[8]).ok());
  ASSERT_TRUE(fake_->decoder_.WaitEntered());
  for (size_t i = 0; i < 8; ++i)
    ASSERT_TRUE(Submit("prompt " + std::to_string(i), With(std::string(1, 'a' + i % 4)), &outs[i]).ok());
  fake_->decoder_.Open();
  WaitAll(outs);
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(outs[i].final.ok()) << outs[i].final.status().ToString();
    EXPECT_EQ(Text(*outs[i].final), Want("prompt " + std::to_string(i), std::string(1, 'a' + i % 4))) << i;
  }
  EXPECT_EQ(fake_->decoder_.max_adapters, 2u);
  EXPECT_GT(fake_->decoder_.max_batch, 2u);  // the base model's sequence and two adapters' ran together
}

TEST_F(LoraSchedulerTest, PrefixCacheIsKeyedByAdapter) {
  GenerativeOptions o;
  o.block_size = 4;
  StartWithAdapters(o, {{"a", 7}});
  const std::string prompt = std::string(40, 'p') + " question";
  std::vector<Outcome> first(1), base(1), again(1);
  ASSERT_TRUE(Submit(prompt, With("a"), &first[0]).ok());
  WaitAll(first);
  ASSERT_TRUE(Submit(prompt, Greedy(12), &base[0]).ok());
  WaitAll(base);
  ASSERT_TRUE(Submit(prompt, With("a"), &again[0]).ok());
  WaitAll(again);
  ASSERT_TRUE(first[0].final.ok() && base[0].final.ok() && again[0].final.ok());
  EXPECT_EQ(Param(*base[0].final, "cached_tokens"), "0");  // a's blocks hold a's keys, not the base model's
  EXPECT_EQ(Text(*base[0].final), Want(prompt, ""));
  EXPECT_GE(std::stoi(Param(*again[0].final, "cached_tokens")), 40);
  EXPECT_EQ(Text(*again[0].final), Want(prompt, "a"));
}

TEST_F(LoraSchedulerTest, TheCacheEvictsTheLeastRecentlyUsedAdapter) {
  GenerativeOptions o;
  o.lora_cache.max_bytes = 100 * 4 * 5;  // room for ranks adding up to 5
  StartWithAdapters(o, {{"a", 2}, {"b", 3}, {"c", 3}});
  for (const char* name : {"a", "b", "a", "c", "a", "b"}) {
    std::vector<Outcome> outs(1);
    ASSERT_TRUE(Submit("x", With(name, 2), &outs[0]).ok());
    WaitAll(outs);
    ASSERT_TRUE(outs[0].final.ok()) << name;
    EXPECT_EQ(Text(*outs[0].final), Want("x", name, 2)) << name;
  }
  const LoraStats::Snapshot snap = scheduler_->counters().lora.snapshot();
  // a, b; a used; c evicts b (used longer ago than a); a used; b evicts c (used longer ago than a).
  EXPECT_EQ(snap.adapters.at("a").loads, 1u);
  EXPECT_EQ(snap.adapters.at("b").loads, 2u);
  EXPECT_EQ(snap.adapters.at("b").evictions, 1u);
  EXPECT_EQ(snap.adapters.at("c").evictions, 1u);
  EXPECT_LE(snap.bytes, 100 * 4 * 5);
  EXPECT_EQ(snap.bytes, 100 * 4 * (2 + 3));                               // a and b resident
  EXPECT_EQ(scheduler_->HeldBytes(), static_cast<uint64_t>(snap.bytes));  // counted in the model's memory
}

}  // namespace
}  // namespace inferd
