#include "scheduler/generative_scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_map>

#include "llm/block_pool.h"
#include "llm/generation_request.h"
#include "llm/sampling.h"
#include "llm/stop_matcher.h"
#include "llm/unicode_tables.h"
#include "scheduler/generative_sequence.h"
#include "scheduler/prompt_lookup.h"
#include "scheduler/scheduler_factory.h"
#include "scheduler/structured_decoding.h"

namespace inferd {
namespace {

uint64_t Ns(Duration d) { return static_cast<uint64_t>(std::max<int64_t>(0, d.count())); }
double Seconds(Duration d) { return static_cast<double>(Ns(d)) / 1e9; }

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

Tensor BytesTensor(const char* name, std::string_view value) {
  auto buf = std::make_shared<std::string>();
  AppendBytesElement(buf.get(), value);
  return Tensor::Own(name, DataType::kBytes, {1}, std::move(buf));
}

}  // namespace

Result<std::unique_ptr<GenerativeScheduler>> GenerativeScheduler::Create(
    GenerativeOptions options, const ModelSpec& spec, std::unique_ptr<ModelInstance> instance, Clock* clock,
    std::shared_ptr<ModelStats> stats, const LoraCatalog* loras) {
  if (dynamic_cast<GenerativeInstance*>(instance.get()) == nullptr) {
    return Status::InvalidArgument("model '" + spec.name + "' has no generative instance");
  }
  std::unique_ptr<GenerativeScheduler> s(
      new GenerativeScheduler(std::move(options), spec, std::move(instance), clock, std::move(stats), loras));
  llm::DecoderModel& d = s->model_->decoder();
  if (loras != nullptr && d.config().architecture == llm::Architecture::kLlama) {
    llm::LoraLimits limits;
    limits.max_rank = s->options_.max_lora_rank;
    LoraLoader load = s->options_.lora_loader;
    if (!load) {
      load = [config = d.config(), limits](const LoraEntry& e) { return llm::LoadLoraAdapter(e.path, config, limits); };
    }
    GenerativeScheduler* p = s.get();
    s->lora_cache_ = std::make_unique<LoraCache>(s->options_.lora_cache, std::move(load), [p] {
      {
        MutexLock l(&p->mu_);
        p->lora_loaded_ = true;
      }
      p->cv_.NotifyAll();
    });
    s->gstats_->lora.Configure(
        s->options_.max_loras,
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
  s->max_model_len_ = s->options_.max_model_len > 0 ? std::min(s->options_.max_model_len, d.config().max_positions)
                                                    : d.config().max_positions;
  const int64_t per_block = d.CacheBytesPerBlock(s->options_.block_size);
  const int64_t blocks = s->options_.kv_cache_bytes / std::max<int64_t>(1, per_block);
  const int64_t one_sequence = (s->max_model_len_ + s->options_.block_size - 1) / s->options_.block_size;
  if (blocks < 1) {
    return Status::InvalidArgument("kv_cache_bytes " + std::to_string(s->options_.kv_cache_bytes) +
                                   " holds no KV block (one takes " + std::to_string(per_block) + " bytes)");
  }
  // More blocks than every sequence at full length could use is waste.
  s->num_blocks_ = static_cast<int32_t>(std::min<int64_t>({blocks, one_sequence * s->options_.max_num_seqs, 1 << 24}));
  // A budget smaller than one full-length sequence caps the context.
  s->max_model_len_ = std::min<int64_t>(s->max_model_len_, int64_t{s->num_blocks_} * s->options_.block_size);
  // The cache is allocated now, so a budget the machine cannot hold fails the load, not the first request.
  INFERD_RETURN_IF_ERROR(d.AllocateCache(s->num_blocks_, s->options_.block_size));
  s->loop_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

GenerativeScheduler::GenerativeScheduler(GenerativeOptions options, const ModelSpec& spec,
                                         std::unique_ptr<ModelInstance> instance, Clock* clock,
                                         std::shared_ptr<ModelStats> stats, const LoraCatalog* loras)
    : options_(std::move(options)),
      spec_(spec),
      instance_(std::move(instance)),
      model_(dynamic_cast<GenerativeInstance*>(instance_.get())),
      clock_(clock),
      stats_(std::move(stats)),
      loras_(loras) {
  if (stats_) {
    gstats_ = stats_->EnableGenerative();
  } else {
    own_stats_ = std::make_unique<GenerativeStats>();
    gstats_ = own_stats_.get();
  }
}

GenerativeScheduler::~GenerativeScheduler() { Shutdown(); }

uint64_t GenerativeScheduler::HeldBytes() const {
  return static_cast<uint64_t>(std::max<int64_t>(0, gstats_->lora.held_bytes.load(std::memory_order_relaxed)));
}

size_t GenerativeScheduler::QueueSize() const { return queued_.load(std::memory_order_relaxed); }

Status GenerativeScheduler::Admission() const {
  if (queued_.load(std::memory_order_relaxed) >= options_.max_queue) {
    return Status::Unavailable("model '" + spec_.name + "' has " + std::to_string(options_.max_queue) +
                               " requests waiting; retry later");
  }
  return Status::OK();
}

// On the caller's thread (a front end's I/O thread): only the cheap checks of
// the parameters. The prompt is rendered and tokenised on the loop thread
// (Tokenize), the model's side.
Status GenerativeScheduler::Enqueue(std::unique_ptr<PendingRequest>& pending) {
  INFERD_RETURN_IF_ERROR(Admission());
  INFERD_ASSIGN_OR_RETURN(llm::GenerationRequest gen, llm::ParseGenerationRequest(*pending->request));
  auto seq = std::make_unique<Sequence>();
  if (!gen.lora_adapter.empty()) {
    std::optional<LoraEntry> e = loras_ ? loras_->Find(gen.lora_adapter) : std::nullopt;
    if (!e || e->base_model != spec_.name) {
      return Status::NotFound("model '" + spec_.name + "' has no LoRA adapter '" + gen.lora_adapter.substr(0, 128) +
                              "'");
    }
    if (!lora_cache_) {
      return Status::InvalidArgument("model '" + spec_.name +
                                     "' cannot run LoRA adapters (Llama-architecture models can)");
    }
    seq->prefix_salt = (e->id * 0x9E3779B97F4A7C15ull) | 1;
    seq->lora_entry = std::move(e);
  }
  seq->streaming = static_cast<bool>(pending->partial);
  seq->gen = std::move(gen);
  {
    MutexLock l(&mu_);
    if (stopping_) return Status::Unavailable("model '" + spec_.name + "' is shutting down");
    seq->pending = std::move(pending);
    incoming_.push_back(std::move(seq));
    queued_.fetch_add(1, std::memory_order_relaxed);
  }
  if (stats_) stats_->AddPending(1);
  cv_.NotifyOne();
  return Status::OK();
}

// On the loop thread: the chat template, the tokenizer, the context check.
Status GenerativeScheduler::Tokenize(Sequence& seq) const {
  const llm::GenerationRequest& gen = seq.gen;
  const GenerativeModelInfo& info = model_->info();
  const llm::Tokenizer& tok = *info.tokenizer;
  if (gen.has_prompt_ids) {
    const int64_t vocab = model_->decoder().config().vocab_size;
    for (int32_t id : gen.prompt_ids) {
      if (id < 0 || id >= vocab) {
        return Status::InvalidArgument("input_ids holds token " + std::to_string(id) + ", outside the vocabulary of " +
                                       std::to_string(vocab));
      }
    }
    seq.tokens = gen.prompt_ids;
  } else {
    std::string prompt = gen.prompt;
    bool special = false;
    if (!gen.messages.empty()) {
      INFERD_ASSIGN_OR_RETURN(prompt, llm::RenderChat(info.chat_template, gen.messages, info.bos_text, info.eos_text));
      special = true;  // the template's own tokens (<|im_start|>) are tokens
    }
    if (info.add_bos && info.bos_id >= 0 && !(special && !info.bos_text.empty() && prompt.starts_with(info.bos_text))) {
      seq.tokens.push_back(info.bos_id);
    }
    const auto ids = tok.Encode(prompt, special);
    seq.tokens.insert(seq.tokens.end(), ids.begin(), ids.end());
  }
  if (seq.tokens.empty()) return Status::InvalidArgument("the prompt is empty");
  const int64_t prompt_len = static_cast<int64_t>(seq.tokens.size());
  const int64_t wanted = gen.max_tokens.value_or(std::max<int64_t>(1, max_model_len_ - prompt_len));
  if (prompt_len + wanted > max_model_len_) {
    return Status::InvalidArgument("This model's maximum context length is " + std::to_string(max_model_len_) +
                                   " tokens. However, you requested " + std::to_string(prompt_len + wanted) +
                                   " tokens (" + std::to_string(prompt_len) + " in the prompt, " +
                                   std::to_string(wanted) +
                                   " in the completion). Please reduce the prompt or max_tokens.");
  }
  seq.end_ids = info.end_ids;
  if (!gen.messages.empty()) seq.end_ids.insert(seq.end_ids.end(), info.chat_end_ids.begin(), info.chat_end_ids.end());
  seq.prompt_len = static_cast<size_t>(prompt_len);
  seq.max_tokens = wanted;
  seq.sampler = std::make_unique<llm::Sampler>(gen.sampling.seed);
  seq.detok = std::make_unique<llm::IncrementalDecoder>(
      &tok, std::span<const int32_t>(seq.tokens).subspan(seq.tokens.size() - std::min<size_t>(seq.tokens.size(), 5)),
      gen.skip_special_tokens);
  seq.stop = std::make_unique<llm::StopMatcher>(gen.stop);
  if (gen.speculative.value_or(options_.speculation.enabled) && !options_.static_batching) {
    seq.lookup = std::make_unique<PromptLookup>(options_.speculation);
  }
  return Status::OK();
}

void GenerativeScheduler::Shutdown() {
  {
    MutexLock l(&mu_);
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (loop_.joinable()) loop_.join();
}

// The loop's state and steps, apart from the locking around the queue.
class GenerativeStepper {
 public:
  using Sequence = GenerativeScheduler::Sequence;

  GenerativeStepper(const GenerativeOptions& o, GenerativeInstance* model, int32_t num_blocks, int64_t max_model_len,
                    Clock* clock, ModelStats* stats, GenerativeStats* counters, LoraCache* loras)
      : o_(o),
        model_(model),
        pool_(num_blocks, o.block_size, o.prefix_caching),
        max_model_len_(max_model_len),
        clock_(clock),
        stats_(stats),
        counters_(counters),
        loras_(loras) {}

  // Nothing to step (sequences waiting for their adapter's load do not count).
  bool busy() const { return !waiting_.empty() || !running_.empty(); }
  bool idle() const { return !busy() && parked_.empty(); }
  // A sequence whose adapter is not in host memory waits for its load apart (parked), and others go on.
  void Add(std::unique_ptr<Sequence> s) {
    if (s->lora_entry && !s->lora) {
      s->lora = loras_->Get(*s->lora_entry);
      if (!s->lora) {
        parked_.push_back(std::move(s));
        PublishLora();
        return;
      }
    }
    waiting_.push_back(std::move(s));
  }

  // The adapter loads that finished: their sequences wait for a step, or fail with the load's reason.
  void CollectLoads() {
    if (!loras_) return;
    for (LoraCache::Finished& f : loras_->TakeFinished()) {
      counters_->lora.AddLoad(f.entry.name, f.adapter.ok(), f.seconds);
      for (const std::string& name : f.evicted) counters_->lora.AddEviction(name);
      for (auto it = parked_.begin(); it != parked_.end();) {
        if ((*it)->lora_entry->id != f.entry.id) {
          ++it;
          continue;
        }
        std::unique_ptr<Sequence> seq = std::move(*it);
        it = parked_.erase(it);
        if (f.adapter.ok()) {
          seq->lora = *f.adapter;
          waiting_.push_back(std::move(seq));
        } else {
          Finish(*seq, Status(f.adapter.status().code(),
                              "LoRA adapter '" + f.entry.name + "' cannot be loaded: " + f.adapter.status().message()));
        }
      }
    }
    PublishLora();
  }

  // One iteration: schedule, run, sample, answer.
  void Step() {
    DropCancelled();
    std::vector<StepItem> batch;
    int64_t budget = o_.max_batched_tokens;
    const size_t running = running_.size();
    // Running sequences first, in admission order.
    for (size_t i = 0; i < running_.size() && budget > 0;) {
      Sequence* s = running_[i].get();
      const size_t n = std::min<size_t>(s->tokens.size() - s->computed, static_cast<size_t>(budget));
      if (!Reserve(s, s->computed + n, /*may_preempt=*/true)) {
        if (i >= running_.size() || running_[i].get() != s) continue;  // s itself was preempted
        ++i;
        continue;
      }
      budget -= static_cast<int64_t>(n);
      batch.push_back({s, n, n == 1 && s->lookup ? Draft(*s, running, static_cast<size_t>(budget)) : 0});
      budget -= static_cast<int64_t>(batch.back().draft);
      ++i;
    }
    // Then waiting ones (continuous: whenever there is room; static: only
    // when no batch runs, all that fit, to completion).
    const bool admit = !o_.static_batching || running_.empty();
    std::vector<uint64_t> adapters;  // distinct adapters of the running sequences (at most max_loras)
    if (loras_) {
      for (const auto& r : running_)
        if (r->lora_entry && std::find(adapters.begin(), adapters.end(), r->lora_entry->id) == adapters.end())
          adapters.push_back(r->lora_entry->id);
    }
    for (size_t w = 0;
         admit && w < waiting_.size() && budget > 0 && static_cast<int32_t>(running_.size()) < o_.max_num_seqs;) {
      Sequence* s = waiting_[w].get();
      if (s->lora_entry && std::find(adapters.begin(), adapters.end(), s->lora_entry->id) == adapters.end()) {
        if (static_cast<int32_t>(adapters.size()) >= o_.max_loras) {  // another adapter would exceed max_loras
          ++w;
          continue;
        }
        adapters.push_back(s->lora_entry->id);
      }
      if (s->blocks.empty()) {
        s->blocks = pool_.MatchPrefix(s->tokens, s->prefix_salt);
        s->computed = s->blocks.size() * static_cast<size_t>(o_.block_size);
        s->registered = s->blocks.size();
        if (!s->admitted_once) {
          s->cached_tokens = s->computed;
          counters_->prefix_queried_tokens += s->prompt_len;
          counters_->prefix_hit_tokens += s->computed;
        }
      }
      const size_t n = std::min<size_t>(s->tokens.size() - s->computed, static_cast<size_t>(budget));
      if (!Reserve(s, s->computed + n, /*may_preempt=*/false)) {
        pool_.Release(s->blocks);
        s->blocks.clear();
        s->computed = 0;
        s->registered = 0;
        break;
      }
      if (!s->admitted_once) s->admitted = clock_->Now();
      s->admitted_once = true;
      batch.push_back({s, n, 0});
      budget -= static_cast<int64_t>(n);
      running_.push_back(std::move(waiting_[w]));
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    }
    Publish();
    if (batch.empty()) return;
    Run(batch);
    Publish();
  }

 private:
  struct StepItem {
    Sequence* s;
    size_t n;      // tokens to run from s->computed
    size_t draft;  // speculative tokens after them (s->verify holds the n == 1 token and the draft)
  };

  // A decoding sequence's draft (s.verify: its next token, then the draft), fitted to the token budget, its
  // max_tokens and the context, in the blocks it holds or free ones (never preempting for a draft).
  size_t Draft(Sequence& s, size_t running, size_t budget) {
    const size_t left = static_cast<size_t>(std::max<int64_t>(0, s.max_tokens - static_cast<int64_t>(s.generated)));
    const size_t context =
        static_cast<size_t>(std::max<int64_t>(0, max_model_len_ - static_cast<int64_t>(s.tokens.size())));
    const size_t room = std::min({budget, left > 0 ? left - 1 : 0, context});
    std::span<const int32_t> d = s.lookup->Propose(s.tokens, running, room);
    size_t n = d.size();
    if (n > 0 && !Reserve(&s, s.computed + 1 + n, /*may_preempt=*/false))
      n = std::min(n, s.blocks.size() * static_cast<size_t>(o_.block_size) - s.computed - 1);
    if (n == 0) return 0;
    s.verify.assign(1, s.tokens[s.computed]);
    s.verify.insert(s.verify.end(), d.begin(), d.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
  }

  // Blocks for positions [0, end); preempts the most recently admitted
  // running sequences (never `s` unless it is the last) when may_preempt.
  bool Reserve(Sequence* s, size_t end, bool may_preempt) {
    const size_t bs = static_cast<size_t>(o_.block_size);
    while (s->blocks.size() * bs < end) {
      auto b = pool_.Allocate();
      if (b) {
        s->blocks.push_back(*b);
        continue;
      }
      if (!may_preempt || running_.empty()) return false;
      Sequence* victim = running_.back().get();
      Preempt();
      if (victim == s) return false;
    }
    return true;
  }

  void Preempt() {
    std::unique_ptr<Sequence> v = std::move(running_.back());
    running_.pop_back();
    pool_.Release(v->blocks);
    v->blocks.clear();
    v->computed = 0;
    v->registered = 0;
    ++v->preemptions;
    counters_->preemptions++;
    waiting_.push_front(std::move(v));  // ahead of new arrivals
  }

  void DropCancelled() {
    std::vector<std::unique_ptr<Sequence>> gone;
    auto drop = [&](std::deque<std::unique_ptr<Sequence>>& q) {
      for (auto it = q.begin(); it != q.end();) {
        if ((*it)->pending->request->cancelled()) {
          pool_.Release((*it)->blocks);
          (*it)->blocks.clear();
          gone.push_back(std::move(*it));
          it = q.erase(it);
        } else {
          ++it;
        }
      }
    };
    drop(running_);
    drop(waiting_);
    drop(parked_);
    if (gone.empty()) return;
    Publish();
    for (auto& s : gone) Finish(*s, Status::Cancelled("the client cancelled the request"));
  }

  void Publish() {
    counters_->running = static_cast<int64_t>(running_.size());
    counters_->waiting = static_cast<int64_t>(waiting_.size() + parked_.size());
    counters_->kv_usage = pool_.usage();
    PublishLora();
  }

  // The adapters of running and of waiting sequences (vllm:lora_requests_info), when they changed.
  void PublishLora() {
    if (!loras_) return;
    auto names = [](const auto& seqs, std::vector<std::string>* out) {
      for (const auto& s : seqs)
        if (s->lora_entry && std::find(out->begin(), out->end(), s->lora_entry->name) == out->end())
          out->push_back(s->lora_entry->name);
    };
    std::vector<std::string> running, waiting;
    names(running_, &running);
    names(waiting_, &waiting);
    names(parked_, &waiting);
    if (running == published_running_ && waiting == published_waiting_ && loras_->bytes() == published_bytes_ &&
        loras_->resident() == published_resident_)
      return;
    published_running_ = running;
    published_waiting_ = waiting;
    published_resident_ = loras_->resident();
    published_bytes_ = loras_->bytes();
    const double now_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    counters_->lora.SetActive(std::move(running), std::move(waiting), static_cast<int64_t>(loras_->resident()),
                              loras_->bytes(), now_s);
  }

  void Run(const std::vector<StepItem>& batch) {
    std::vector<llm::StepInput> inputs;
    inputs.reserve(batch.size());
    for (const StepItem& it : batch) {
      Sequence* s = it.s;
      if (it.draft > 0) {
        inputs.push_back({s->verify, static_cast<int64_t>(s->computed), s->blocks, static_cast<int32_t>(it.draft + 1),
                          s->lora.get()});
      } else {
        inputs.push_back({std::span<const int32_t>(s->tokens).subspan(s->computed, it.n),
                          static_cast<int64_t>(s->computed), s->blocks, s->computed + it.n == s->tokens.size(),
                          s->lora.get()});
      }
    }
    std::vector<float> logits;
    const Status st = model_->decoder().Forward(inputs, &logits);
    const int64_t vocab = model_->decoder().config().vocab_size;
    auto row_logits = [&](size_t row) {
      return std::span<float>(logits.data() + static_cast<int64_t>(row) * vocab, static_cast<size_t>(vocab));
    };
    size_t row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      Sequence* s = batch[i].s;
      if (!st.ok()) {
        s->finished = true;
        s->finish_reason = "error";
        continue;
      }
      if (batch[i].draft > 0) {
        // Verification: sample row by row while the draft agrees; the token sampled where it does not (or
        // after it) is kept too. Positions up to the last agreeing draft token hold the right keys and values.
        const size_t draft = batch[i].draft;
        size_t kept = 0, accepted = 0;
        for (size_t j = 0; j <= draft; ++j) {
          Advance(*s, row_logits(row + j));
          ++kept;
          if (s->finished || j == draft || s->tokens.back() != s->verify[j + 1]) break;
          ++accepted;
        }
        row += draft + 1;
        s->computed += kept;
        s->lookup->Record(draft, accepted);
        counters_->spec_drafts++;
        counters_->spec_draft_tokens += draft;
        counters_->spec_accepted_tokens += accepted;
        RegisterFull(*s);
        Send(*s);
        continue;
      }
      s->computed += batch[i].n;
      RegisterFull(*s);
      if (inputs[i].num_logits == 0) continue;
      Advance(*s, row_logits(row));
      Send(*s);
      ++row;
    }
    // Release the finished ones, publish the gauges, then answer (a client
    // that hears its answer sees the cache as it is without the request).
    std::vector<std::unique_ptr<Sequence>> done;
    for (auto it = running_.begin(); it != running_.end();) {
      if (!(*it)->finished) {
        ++it;
        continue;
      }
      pool_.Release((*it)->blocks);
      (*it)->blocks.clear();
      done.push_back(std::move(*it));
      it = running_.erase(it);
    }
    Publish();
    for (auto& s : done) Finish(*s, st.ok() ? Status::OK() : st);
  }

  // Samples the next token of `s` and sends what became final.
  void Advance(Sequence& s, std::span<float> logits) {
    if (s.grammar) {
      if (Status st = s.grammar->Mask(logits, s.gen.ignore_eos ? std::span<const int32_t>() : s.end_ids); !st.ok()) {
        Fail(s, std::move(st));
        return;
      }
    }
    const llm::SampledToken t = s.sampler->Sample(logits, s.gen.sampling, s.counts);
    const TimePoint now = clock_->Now();
    if (s.generated == 0) {
      s.first_token = now;
      counters_->time_to_first_token_s.Observe(Seconds(now - s.pending->arrival));
    } else {
      counters_->inter_token_latency_s.Observe(Seconds(now - s.last_token));
    }
    s.last_token = now;
    ++s.generated;
    ++s.counts[t.token];
    counters_->generation_tokens++;
    const bool can_stop = static_cast<int64_t>(s.generated) > s.gen.min_tokens;
    const bool is_end =
        can_stop && !s.gen.ignore_eos && std::find(s.end_ids.begin(), s.end_ids.end(), t.token) != s.end_ids.end();
    const bool is_stop_id = can_stop && std::find(s.gen.stop_token_ids.begin(), s.gen.stop_token_ids.end(), t.token) !=
                                            s.gen.stop_token_ids.end();
    std::string delta;
    if (is_end || is_stop_id) {
      s.finished = true;
      s.finish_reason = "stop";
      delta = s.stop->Feed(s.detok->Flush());
      delta += s.stop->Flush();
    } else {
      if (s.grammar) {
        if (Status st = s.grammar->Accept(t.token); !st.ok()) {
          Fail(s, std::move(st));
          return;
        }
      }
      s.tokens.push_back(t.token);
      delta = s.stop->Feed(s.detok->Push(t.token));
      if (s.stop->stopped()) {
        s.finished = true;
        s.finish_reason = "stop";
      } else if (s.grammar && s.grammar->finished()) {  // the structured output is complete
        s.finished = true;
        s.finish_reason = "stop";
        delta += s.stop->Feed(s.detok->Flush());
        delta += s.stop->Flush();
      } else if (static_cast<int64_t>(s.generated) >= s.max_tokens ||
                 static_cast<int64_t>(s.tokens.size()) >= max_model_len_) {
        s.finished = true;
        s.finish_reason = "length";
        delta += s.stop->Feed(s.detok->Flush());
        delta += s.stop->Flush();
      }
    }
    if (s.gen.sampling.logprobs >= 0 && !(is_end || is_stop_id)) AppendLogprobs(s, t);
    s.text += delta;
  }

  // After a step's tokens of `s`: a streaming client gets the text that became final (one part per step, however
  // many tokens it kept); the rest waits for the final answer.
  void Send(Sequence& s) {
    if (!s.streaming || s.finished || (s.text.empty() && s.logprobs.empty())) return;
    InferResponse part = Answer(s, s.text, /*final=*/false);
    s.text.clear();
    s.logprobs.clear();
    if (!s.pending->partial(std::move(part))) {
      s.finished = true;  // the client is gone
      s.finish_reason = "cancelled";
    }
  }

  // Registers the sequence's newly full blocks in the prefix cache.
  void RegisterFull(Sequence& s) {
    const size_t full = s.computed / static_cast<size_t>(o_.block_size);
    for (; s.registered < full; ++s.registered) pool_.Register(s.blocks, s.registered, s.tokens, s.prefix_salt);
  }

  void Fail(Sequence& s, Status why) {
    s.finished = true;
    s.finish_reason = "error";
    s.error = std::move(why);
  }

  void AppendLogprobs(Sequence& s, const llm::SampledToken& t) {
    const llm::Tokenizer& tok = *model_->info().tokenizer;
    auto entry = [&](int32_t id, float lp, std::string* out) {
      const std::string raw = tok.Decode(std::span<const int32_t>(&id, 1), false);
      out->append("{\"token\":");
      AppendJsonString(out, llm::SanitizeUtf8(raw));
      out->append(",\"token_id\":" + std::to_string(id) + ",\"logprob\":" + std::to_string(lp) + ",\"bytes\":[");
      for (size_t i = 0; i < raw.size(); ++i) {
        if (i) out->push_back(',');
        out->append(std::to_string(static_cast<unsigned char>(raw[i])));
      }
      out->push_back(']');
    };
    std::string one;
    entry(t.token, t.logprob, &one);
    one.append(",\"top_logprobs\":[");
    for (size_t i = 0; i < t.top.size(); ++i) {
      if (i) one.push_back(',');
      entry(t.top[i].first, t.top[i].second, &one);
      one.push_back('}');
    }
    one.append("]}");
    for (std::string* target : {&s.logprobs, &s.all_logprobs}) {
      if (!target->empty()) target->push_back(',');
      target->append(one);
    }
  }

  InferResponse Answer(Sequence& s, std::string_view text, bool final) {
    InferResponse r;
    r.model_name = s.pending->request->model_name;
    r.model_version = s.pending->request->model_version;
    r.id = s.pending->request->id;
    r.outputs.push_back(BytesTensor("text_output", text));
    if (s.gen.sampling.logprobs >= 0) {
      const std::string& lp = s.streaming ? s.logprobs : s.all_logprobs;
      r.outputs.push_back(BytesTensor("logprobs", "[" + lp + "]"));
    }
    if (final) {
      r.parameters["finish_reason"] = s.finish_reason;
      r.parameters["prompt_tokens"] = static_cast<int64_t>(s.prompt_len);
      r.parameters["completion_tokens"] = static_cast<int64_t>(s.generated);
      r.parameters["cached_tokens"] = static_cast<int64_t>(s.cached_tokens);
    }
    return r;
  }

  // A traced request's "generate" span (tokens, preemptions, time to first
  // token) with its queue, prefill and decode phases as children.
  void TraceGeneration(const Sequence& s, TimePoint now, const Status& status) {
    const std::shared_ptr<const TraceParent>& parent = s.pending->request->trace;
    const int64_t arrival = UnixNanos(s.pending->arrival), end = UnixNanos(now);
    Span gen(parent, "generate", SpanKind::kInternal, arrival);
    gen.SetAttribute("gen_ai.usage.input_tokens", static_cast<int64_t>(s.prompt_len));
    gen.SetAttribute("gen_ai.usage.output_tokens", static_cast<int64_t>(s.generated));
    gen.SetAttribute("inferd.cached_prompt_tokens", static_cast<int64_t>(s.cached_tokens));
    gen.SetAttribute("inferd.preemptions", s.preemptions);
    if (!s.finish_reason.empty()) gen.SetAttribute("gen_ai.response.finish_reasons", s.finish_reason);
    auto gen_parent = gen.AsParent();
    auto phase = [&](const char* name, TimePoint from, TimePoint to) {
      Span p(gen_parent, name, SpanKind::kInternal, UnixNanos(from));
      p.End(UnixNanos(to));
    };
    if (s.admitted_once) {
      phase("queue", s.pending->arrival, s.admitted);
      if (s.generated > 0) {
        gen.SetAttribute("inferd.time_to_first_token_ms",
                         static_cast<double>((s.first_token - s.pending->arrival).count()) / 1e6);
        gen.AddEvent("first_token", UnixNanos(s.first_token));
        phase("prefill", s.admitted, s.first_token);
        phase("decode", s.first_token, now);
      }
    }
    gen.End(end, status);
  }

  void Finish(Sequence& s, const Status& status) {
    const TimePoint now = clock_->Now();
    if (s.pending->request->trace) TraceGeneration(s, now, status);
    const uint64_t total = Ns(now - s.pending->arrival);
    counters_->prompt_tokens += s.prompt_len;
    if (s.lora_entry) counters_->lora.AddRequest(s.lora_entry->name, s.prompt_len, s.generated);
    if (stats_) stats_->AddPending(-1);
    if (!status.ok() || s.finish_reason == "cancelled" || s.finish_reason == "error") {
      const Status why = !status.ok() ? status : !s.error.ok() ? s.error : Status::Cancelled("the client went away");
      if (stats_) {
        stats_->RecordFailure(
            why.code() == StatusCode::kCancelled ? FailureReason::kCancelled : FailureReason::kBackend, total);
      }
      s.pending->callback(why);
      return;
    }
    counters_->e2e_latency_s.Observe(Seconds(now - s.pending->arrival));
    InferResponse r = Answer(s, s.text, /*final=*/true);
    if (stats_) {
      stats_->RecordSuccess(total, Ns(s.first_token - s.pending->arrival), 0, total, 0,
                            static_cast<uint64_t>(now.time_since_epoch().count() / 1000000));
    }
    s.pending->callback(std::move(r));
  }

  const GenerativeOptions& o_;
  GenerativeInstance* model_;
  llm::BlockPool pool_;
  int64_t max_model_len_;
  Clock* clock_;
  ModelStats* stats_;
  GenerativeStats* counters_;
  LoraCache* loras_;  // null: no adapters
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::deque<std::unique_ptr<Sequence>> running_;
  std::deque<std::unique_ptr<Sequence>> parked_;  // waiting for their adapter's load
  std::vector<std::string> published_running_, published_waiting_;
  size_t published_resident_ = 0;
  int64_t published_bytes_ = 0;
};

void GenerativeScheduler::Loop() {
  instance_->OnWorkerThreadStart();
  gstats_->kv_blocks = num_blocks_;
  GenerativeStepper stepper(options_, model_, num_blocks_, max_model_len_, clock_, stats_.get(), gstats_,
                            lora_cache_.get());
  StructuredDecoding structured(model_->info().tokenizer.get(), model_->decoder().config().vocab_size, gstats_);
  std::deque<std::unique_ptr<Sequence>> arrived;
  while (true) {
    bool stop = false, loaded = false;
    {
      MutexLock l(&mu_);
      // Sequences parked for an adapter's load wake the loop when it finishes.
      while (incoming_.empty() && !stepper.busy() && !lora_loaded_ && !(stopping_ && stepper.idle())) cv_.Wait(&mu_);
      arrived.swap(incoming_);
      stop = stopping_;
      loaded = lora_loaded_;
      lora_loaded_ = false;
    }
    if (loaded) stepper.CollectLoads();
    for (auto& seq : arrived) {
      queued_.fetch_sub(1, std::memory_order_relaxed);
      Status st = Tokenize(*seq);
      if (st.ok() && seq->gen.structured) {
        Result<std::unique_ptr<SequenceGrammar>> g = structured.Start(*seq->gen.structured);
        if (g.ok()) {
          seq->grammar = std::move(*g);
        } else {
          st = g.status();
        }
      }
      if (!st.ok()) {
        if (stats_) {
          stats_->AddPending(-1);
          stats_->RecordFailure(FailureReason::kInvalid, 0);
        }
        seq->pending->callback(st);
        continue;
      }
      stepper.Add(std::move(seq));
    }
    arrived.clear();
    if (stop && stepper.idle()) break;
    stepper.Step();
  }
}

Result<std::unique_ptr<Scheduler>> MakeGenerativeScheduler(SchedulerContext c) {
  if (c.instances.size() != 1) {
    return Status::InvalidArgument("model '" + c.spec->name +
                                   "': a generative model runs one instance (instance_group count 1)");
  }
  INFERD_ASSIGN_OR_RETURN(GenerativeOptions o, GenerativeOptions::FromSpec(*c.spec, c.default_max_queue_size));
  INFERD_ASSIGN_OR_RETURN(auto s, GenerativeScheduler::Create(std::move(o), *c.spec, std::move(c.instances[0]), c.clock,
                                                              std::move(c.stats), c.loras));
  return std::unique_ptr<Scheduler>(std::move(s));
}

}  // namespace inferd
