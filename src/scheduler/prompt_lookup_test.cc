#include "scheduler/prompt_lookup.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

std::vector<int32_t> Draft(std::vector<int32_t> tokens, int32_t lo, int32_t hi, size_t max) {
  std::vector<int32_t> d = {99};  // cleared by FindDraft
  FindDraft(tokens, lo, hi, max, &d);
  return d;
}

TEST(FindDraftTest, TheLongestSuffixsLatestOccurrenceGivesTheDraft) {
  // Suffix "2 3": seen at 1 (followed by 4 5 6) and at 5 (followed by 9 2): the latest wins.
  EXPECT_EQ(Draft({1, 2, 3, 4, 5, 2, 3, 9, 2, 3}, 1, 3, 4), (std::vector<int32_t>{9, 2, 3}));
  // The 3-gram "7 2 3" occurs once before: it beats the 2-gram's later match.
  EXPECT_EQ(Draft({7, 2, 3, 4, 5, 2, 3, 9, 7, 2, 3}, 1, 3, 2), (std::vector<int32_t>{4, 5}));
  // Nothing recurs; too short for the smallest n-gram; no room.
  EXPECT_TRUE(Draft({1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(Draft({5}, 1, 3, 4).empty());
  EXPECT_TRUE(Draft({}, 1, 3, 4).empty());
  EXPECT_TRUE(Draft({1, 2, 1, 2}, 1, 3, 0).empty());
  // ngram_min 2: a single recurring token is not enough.
  EXPECT_TRUE(Draft({1, 5, 6, 1}, 2, 3, 4).empty());
  EXPECT_EQ(Draft({1, 5, 6, 1}, 1, 3, 4), (std::vector<int32_t>{5, 6, 1}));
}

TEST(PromptLookupTest, DraftsGrowWhileKeptAndShrinkWhenCut) {
  SpeculationOptions o;
  o.num_tokens = 6;
  PromptLookup p(o);
  const std::vector<int32_t> text = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2};
  EXPECT_EQ(p.Propose(text, 1, 10).size(), 3u);  // half of num_tokens first
  p.Record(3, 3);
  EXPECT_EQ(p.Propose(text, 1, 10).size(), 5u);
  p.Record(5, 5);
  EXPECT_EQ(p.Propose(text, 1, 10).size(), 6u);  // num_tokens at most
  EXPECT_EQ(p.Propose(text, 1, 4).size(), 4u);   // and the room given
  p.Record(6, 1);
  EXPECT_EQ(p.Propose(text, 1, 10).size(), 2u);  // what was kept, + 1
}

TEST(PromptLookupTest, NoDraftsInALargeBatchAndAPauseAfterFailures) {
  SpeculationOptions o;
  o.num_tokens = 3;
  o.max_batch = 2;
  PromptLookup p(o);
  const std::vector<int32_t> text = {1, 2, 3, 4, 1, 2};
  EXPECT_EQ(p.Propose(text, 1, 10).size(), 2u);  // 3 4, after the earlier "1 2"
  EXPECT_EQ(p.Propose(text, 3, 10).size(), 0u);  // three sequences running
  EXPECT_EQ(p.Propose(text, 1, 1).size(), 1u);   // room for one
  int drafts_until_pause = 0;
  while (!p.paused() && drafts_until_pause < 20) {
    p.Record(3, 0);
    ++drafts_until_pause;
  }
  EXPECT_TRUE(p.paused());
  EXPECT_LE(drafts_until_pause, 2);  // cautious at first
  int quiet = 0;
  while (p.Propose(text, 1, 10).empty() && quiet < 100) ++quiet;
  EXPECT_EQ(quiet, 16);  // the first pause
  // Failing again soon: a longer pause.
  while (!p.paused()) p.Record(3, 0);
  quiet = 0;
  while (p.Propose(text, 1, 10).empty() && quiet < 100) ++quiet;
  EXPECT_EQ(quiet, 32);
  // Kept drafts keep it going.
  for (int i = 0; i < 50; ++i) p.Record(3, 3);
  EXPECT_FALSE(p.paused());
  EXPECT_FALSE(p.Propose(text, 1, 10).empty());
}

TEST(SpeculationOptionsTest, ReadsTheConfigAndNamesBadValues) {
  ModelSpec spec;
  auto d = SpeculationOptions::FromSpec(spec);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->enabled);
  spec.parameters = {{"speculative_decoding", "prompt_lookup"},
                     {"num_speculative_tokens", "6"},
                     {"prompt_lookup_max", "4"},
                     {"prompt_lookup_min", "2"},
                     {"speculative_max_batch", "8"},
                     {"speculative_min_acceptance", "0.5"}};
  auto o = SpeculationOptions::FromSpec(spec);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->enabled);
  EXPECT_EQ(o->num_tokens, 6);
  EXPECT_EQ(o->ngram_max, 4);
  EXPECT_EQ(o->ngram_min, 2);
  EXPECT_EQ(o->max_batch, 8);
  EXPECT_DOUBLE_EQ(o->min_acceptance, 0.5);
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"speculative_decoding", "ngram2"},
                                                                             {"num_speculative_tokens", "0"},
                                                                             {"num_speculative_tokens", "x"},
                                                                             {"prompt_lookup_max", "99"},
                                                                             {"speculative_min_acceptance", "1.5"},
                                                                             {"speculative_min_acceptance", "nan"}}) {
    ModelSpec bad;
    bad.parameters[k] = v;
    auto r = SpeculationOptions::FromSpec(bad);
    ASSERT_FALSE(r.ok()) << k << "=" << v;
    EXPECT_NE(r.status().message().find(k), std::string::npos) << r.status().message();
  }
  ModelSpec crossed;
  crossed.parameters = {{"prompt_lookup_min", "3"}, {"prompt_lookup_max", "2"}};
  EXPECT_FALSE(SpeculationOptions::FromSpec(crossed).ok());
}

}  // namespace
}  // namespace inferd
