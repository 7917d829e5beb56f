// iteration_scheduler_core: vLLM v1's per-step rules, TensorRT-LLM's capacity policies, prefix
// caching, preemption by recompute and cancellation, in virtual time.
//
// The steps run against `kv_model`, a stand-in for a generative backend that keeps real state in
// the blocks the plan names: computing position p of a sequence writes its token into slot p of
// block block_table[p / block_size], and the next token is a hash of everything the sequence's
// blocks hold. So a block handed to two sequences at once, a prefix hit whose KV is not the
// prefix, or a recompute that misses a position changes the generated tokens, and every test
// compares them with `reference`, the same model run on one sequence alone.
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace iteration_scheduler_core_test {

using namespace std::chrono_literals;
using servekit::finish_reason;
using servekit::generation_event;
using servekit::generation_request;
using servekit::iteration_batching_options;
using servekit::iteration_scheduler_core;
using servekit::kv_block_id;
using servekit::kv_capacity_policy;
using servekit::scheduled_kind;
using servekit::step_output;
using servekit::step_plan;
using servekit::time_point;
using servekit::token_id;

/// The next token after `tokens`: a hash of all of them (so it depends on every position).
token_id next_token(const std::vector<token_id>& tokens) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const token_id t : tokens) {
    h = (h ^ static_cast<std::uint32_t>(t)) * 1099511628211ULL;
  }
  return static_cast<token_id>(h % 1000);
}

/// What a sequence generates alone: `max_new` tokens, or fewer up to `end`.
std::vector<token_id> reference(std::vector<token_id> tokens, std::uint32_t max_new,
                                std::optional<token_id> end = std::nullopt) {
  std::vector<token_id> out;
  while (out.size() < max_new) {
    const token_id t = next_token(tokens);
    out.push_back(t);
    tokens.push_back(t);
    if (end && t == *end) {
      break;
    }
  }
  return out;
}

/// A backend whose state lives in the KV blocks the plans name (see the file comment).
struct kv_model {
  static constexpr token_id unwritten = -1;
  std::uint32_t block_size;
  std::vector<std::vector<token_id>> kv; // per block, per slot: the token whose KV it holds
  std::map<std::uint64_t, std::uint32_t> computed; // per live sequence: positions it computed

  kv_model(std::uint32_t blocks, std::uint32_t size)
      : block_size{size}, kv(blocks, std::vector<token_id>(size, unwritten)) {}

  /// Runs one step; returns the sampled tokens. Checks what a backend relies on.
  std::vector<step_output> execute(const step_plan& plan) {
    for (const std::uint64_t id : plan.finished) {
      computed.erase(id);
    }
    for (const std::uint64_t id : plan.preempted) {
      computed.erase(id);
    }
    std::set<kv_block_id> written;
    std::vector<step_output> out;
    for (const auto& s : plan.sequences) {
      if (s.kind != scheduled_kind::continuing) {
        EXPECT_FALSE(computed.contains(s.id)) << s.id;
        EXPECT_EQ(s.cached_tokens, s.first_token);
        computed[s.id] = s.cached_tokens;
      }
      EXPECT_EQ(computed[s.id], s.first_token) << "sequence " << s.id << " skipped positions";
      EXPECT_GE(s.block_table.size() * block_size, std::size_t{s.first_token} + s.num_tokens);
      EXPECT_EQ(s.tokens.size(), s.num_tokens);
      for (std::uint32_t k = 0; k < s.num_tokens; ++k) {
        const std::uint32_t p = s.first_token + k;
        const kv_block_id b = s.block_table[p / block_size];
        written.insert(b);
        kv[b][p % block_size] = s.tokens[k];
      }
      computed[s.id] = s.first_token + s.num_tokens;
      if (s.samples) {
        // Read the whole sequence back from its blocks, as attention would.
        std::vector<token_id> seen;
        for (std::uint32_t p = 0; p < computed[s.id]; ++p) {
          seen.push_back(kv[s.block_table[p / block_size]][p % block_size]);
        }
        out.push_back({s.id, next_token(seen), false});
      }
    }
    // No block written in this step appears in two tables unless both only read it.
    std::map<kv_block_id, int> writers;
    for (const auto& s : plan.sequences) {
      std::set<kv_block_id> mine;
      for (std::uint32_t k = 0; k < s.num_tokens; ++k) {
        mine.insert(s.block_table[(s.first_token + k) / block_size]);
      }
      for (const kv_block_id b : mine) {
        EXPECT_EQ(++writers[b], 1) << "two sequences write block " << b;
      }
    }
    return out;
  }
};

/// The core, the model, and what each sequence generated.
struct harness {
  iteration_scheduler_core core;
  kv_model model;
  std::map<std::uint64_t, std::vector<token_id>> generated;
  std::map<std::uint64_t, finish_reason> reasons;
  std::vector<step_plan> plans; // copies (spans dropped) for tests that look back
  time_point now{};

  explicit harness(const iteration_batching_options& o)
      : core{o}, model{o.num_blocks, o.block_size} {}

  void add(std::uint64_t id, std::vector<token_id> prompt, std::uint32_t max_new,
           std::uint32_t priority = 0) {
    generation_request r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.max_new_tokens = max_new;
    r.priority = priority;
    r.arrival = now;
    ASSERT_TRUE(core.add(std::move(r)).ok());
  }

  /// One step; false when there was nothing to run.
  bool step() {
    const step_plan& plan = core.schedule(now);
    check_invariants(plan);
    step_plan copy = plan;
    for (auto& s : copy.sequences) {
      s.tokens = {};
      s.block_table = {};
    }
    plans.push_back(copy);
    if (plan.empty()) {
      return false;
    }
    const auto outputs = model.execute(plan);
    std::vector<generation_event> events;
    EXPECT_TRUE(core.update(outputs, events).ok());
    for (const auto& e : events) {
      generated[e.id].push_back(e.token);
      EXPECT_EQ(e.generated, generated[e.id].size());
      if (e.finished) {
        reasons[e.id] = e.reason;
      }
    }
    now += 10ms;
    return true;
  }

  void run(int max_steps = 10000) {
    for (int i = 0; i < max_steps && !core.idle(); ++i) {
      step();
    }
    ASSERT_TRUE(core.idle()) << "did not finish in " << max_steps << " steps";
  }

  void check_invariants(const step_plan& plan) const {
    const auto& o = core.options();
    EXPECT_LE(plan.scheduled_tokens, o.max_num_batched_tokens);
    EXPECT_LE(core.num_running(), o.max_num_seqs);
    std::uint32_t sum = 0;
    for (const auto& s : plan.sequences) {
      sum += s.num_tokens;
      EXPECT_GT(s.num_tokens, 0U);
      EXPECT_LT(s.first_token + s.num_tokens, o.max_model_len + 1);
      for (const kv_block_id b : s.block_table) {
        EXPECT_GT(core.blocks().ref_count(b), 0U) << "a plan names a block nobody holds";
      }
    }
    EXPECT_EQ(sum, plan.scheduled_tokens);
  }
};

iteration_batching_options options(std::uint32_t num_blocks, std::uint32_t block_size = 4) {
  iteration_batching_options o;
  o.num_blocks = num_blocks;
  o.block_size = block_size;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  o.max_model_len = 256;
  return o;
}

std::vector<token_id> prompt_of(std::size_t n, token_id first) {
  std::vector<token_id> p(n);
  std::iota(p.begin(), p.end(), first);
  return p;
}

TEST(IterationSchedulerCore, PrefillThenOneTokenPerStepUntilMaxTokens) {
  harness h{options(64)};
  h.add(1, prompt_of(5, 10), 3);
  ASSERT_TRUE(h.step());
  const auto& first = h.plans.back().sequences;
  ASSERT_EQ(first.size(), 1U);
  EXPECT_EQ(first[0].kind, scheduled_kind::started);
  EXPECT_EQ(first[0].first_token, 0U);
  EXPECT_EQ(first[0].num_tokens, 5U) << "the whole prompt in one step";
  EXPECT_TRUE(first[0].samples);
  ASSERT_TRUE(h.step());
  EXPECT_EQ(h.plans.back().sequences[0].kind, scheduled_kind::continuing);
  EXPECT_EQ(h.plans.back().sequences[0].first_token, 5U);
  EXPECT_EQ(h.plans.back().sequences[0].num_tokens, 1U) << "a decode is the same rule";
  h.run();
  EXPECT_EQ(h.generated[1], reference(prompt_of(5, 10), 3));
  EXPECT_EQ(h.reasons[1], finish_reason::max_tokens);
  EXPECT_EQ(h.core.blocks().free_blocks(), 64U) << "a finished sequence frees its blocks";
  EXPECT_FALSE(h.step());
  EXPECT_EQ(h.plans.back().finished, std::vector<std::uint64_t>{1}) << "listed once, next plan";
  EXPECT_FALSE(h.step());
  EXPECT_TRUE(h.plans.back().finished.empty());
}

TEST(IterationSchedulerCore, ChunkedPrefillSplitsAPromptOverTheBudget) {
  auto o = options(64);
  o.max_num_batched_tokens = 8;
  harness h{o};
  h.add(1, prompt_of(20, 0), 2);
  std::vector<std::uint32_t> chunks;
  std::vector<bool> samples;
  while (h.step()) {
    chunks.push_back(h.plans.back().sequences[0].num_tokens);
    samples.push_back(h.plans.back().sequences[0].samples);
  }
  EXPECT_EQ(chunks, (std::vector<std::uint32_t>{8, 8, 4, 1}));
  EXPECT_EQ(samples, (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(h.generated[1], reference(prompt_of(20, 0), 2));
}

TEST(IterationSchedulerCore, RunningSequencesComeBeforeNewPrefills) {
  auto o = options(64);
  o.max_num_batched_tokens = 10;
  harness h{o};
  h.add(1, prompt_of(4, 0), 5);
  h.step(); // 1 prefills
  h.add(2, prompt_of(30, 100), 1);
  h.step();
  const auto& seqs = h.plans.back().sequences;
  ASSERT_EQ(seqs.size(), 2U);
  EXPECT_EQ(seqs[0].id, 1U);
  EXPECT_EQ(seqs[0].num_tokens, 1U) << "the decode first";
  EXPECT_EQ(seqs[1].id, 2U);
  EXPECT_EQ(seqs[1].num_tokens, 9U) << "the prefill gets what is left";
  h.run();
  EXPECT_EQ(h.generated[1], reference(prompt_of(4, 0), 5));
  EXPECT_EQ(h.generated[2], reference(prompt_of(30, 100), 1));
}

TEST(IterationSchedulerCore, LongPrefillThresholdCapsEachSequencesShare) {
  auto o = options(64);
  o.long_prefill_token_threshold = 6;
  harness h{o};
  h.add(1, prompt_of(20, 0), 1);
  h.add(2, prompt_of(20, 50), 1);
  h.step();
  const auto& seqs = h.plans.back().sequences;
  ASSERT_EQ(seqs.size(), 2U);
  EXPECT_EQ(seqs[0].num_tokens, 6U);
  EXPECT_EQ(seqs[1].num_tokens, 6U);
  h.run();
  EXPECT_EQ(h.generated[2], reference(prompt_of(20, 50), 1));
}

TEST(IterationSchedulerCore, WithoutChunkingAPromptThatDoesNotFitStopsAdmission) {
  auto o = options(64);
  o.enable_chunked_prefill = false;
  o.max_model_len = 32;
  o.max_num_batched_tokens = 32;
  harness h{o};
  h.add(1, prompt_of(20, 0), 3);
  h.add(2, prompt_of(20, 30), 3); // does not fit beside 1's 20
  h.add(3, prompt_of(2, 60), 3);  // would fit, but admission is in order
  h.step();
  ASSERT_EQ(h.plans.back().sequences.size(), 1U);
  EXPECT_EQ(h.plans.back().sequences[0].num_tokens, 20U);
  h.step(); // 1's decode, then 2 whole (never chunked), then 3
  ASSERT_EQ(h.plans.back().sequences.size(), 3U);
  EXPECT_EQ(h.plans.back().sequences[1].id, 2U);
  EXPECT_EQ(h.plans.back().sequences[1].num_tokens, 20U);
  EXPECT_EQ(h.plans.back().sequences[2].id, 3U);
  h.run();
  EXPECT_EQ(h.generated[3], reference(prompt_of(2, 60), 3));
}

TEST(IterationSchedulerCore, AtMostMaxNumSeqsRun) {
  auto o = options(64);
  o.max_num_seqs = 2;
  harness h{o};
  for (std::uint64_t id = 1; id <= 5; ++id) {
    h.add(id, prompt_of(3, static_cast<token_id>(id * 10)), 4);
  }
  h.step();
  EXPECT_EQ(h.plans.back().sequences.size(), 2U);
  EXPECT_EQ(h.core.num_waiting(), 3U);
  h.run();
  for (std::uint64_t id = 1; id <= 5; ++id) {
    EXPECT_EQ(h.generated[id], reference(prompt_of(3, static_cast<token_id>(id * 10)), 4)) << id;
  }
}

TEST(IterationSchedulerCore, MaxUtilizationPreemptsTheLastAdmittedAndRecomputesIt) {
  // 6 blocks of 4 tokens; two sequences of 8-token prompts growing by 8: they cannot both finish.
  auto o = options(6);
  o.enable_prefix_caching = false;
  harness h{o};
  h.add(1, prompt_of(8, 0), 8);
  h.add(2, prompt_of(8, 100), 8);
  bool saw_preemption = false;
  bool saw_resume = false;
  while (!h.core.idle()) {
    h.step();
    const auto& plan = h.plans.back();
    if (!plan.preempted.empty()) {
      saw_preemption = true;
      EXPECT_EQ(plan.preempted, std::vector<std::uint64_t>{2}) << "the last admitted";
      for (const auto& s : plan.sequences) {
        EXPECT_NE(s.kind, scheduled_kind::started) << "no admission in a step that preempted";
        EXPECT_NE(s.id, 2U);
      }
    }
    for (const auto& s : plan.sequences) {
      if (s.kind == scheduled_kind::resumed) {
        saw_resume = true;
        EXPECT_EQ(s.id, 2U);
        EXPECT_EQ(s.first_token, 0U) << "recomputed from the start";
        EXPECT_GT(s.num_tokens, 8U) << "its generated tokens too";
      }
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_TRUE(saw_resume);
  EXPECT_GE(h.core.stats().preemptions, 1U);
  EXPECT_EQ(h.generated[1], reference(prompt_of(8, 0), 8));
  EXPECT_EQ(h.generated[2], reference(prompt_of(8, 100), 8)) << "recompute gives the same tokens";
  EXPECT_EQ(h.core.blocks().free_blocks(), 6U);
}

TEST(IterationSchedulerCore, PriorityOrderPreemptsTheLeastUrgent) {
  auto o = options(6);
  o.enable_prefix_caching = false;
  o.order = servekit::iteration_queue_order::priority;
  harness h{o};
  h.add(1, prompt_of(8, 0), 8, /*priority=*/5); // admitted first but least urgent
  h.add(2, prompt_of(8, 100), 8, /*priority=*/1);
  h.step();
  EXPECT_EQ(h.plans.back().sequences[0].id, 2U) << "the more urgent is admitted first";
  std::vector<std::uint64_t> preempted;
  while (!h.core.idle()) {
    h.step();
    for (const auto id : h.plans.back().preempted) {
      preempted.push_back(id);
    }
  }
  ASSERT_FALSE(preempted.empty());
  EXPECT_EQ(preempted.front(), 1U);
  EXPECT_EQ(h.generated[1], reference(prompt_of(8, 0), 8));
  EXPECT_EQ(h.generated[2], reference(prompt_of(8, 100), 8));
}

TEST(IterationSchedulerCore, GuaranteedNoEvictAdmitsOnlyWhatCanFinishAndNeverPreempts) {
  auto o = options(6);
  o.enable_prefix_caching = false;
  o.capacity = kv_capacity_policy::guaranteed_no_evict;
  harness h{o};
  h.add(1, prompt_of(8, 0), 8); // 16 tokens: 4 blocks for its life
  h.add(2, prompt_of(8, 100), 8);
  h.step();
  ASSERT_EQ(h.plans.back().sequences.size(), 1U) << "2's life does not fit beside 1's";
  EXPECT_EQ(h.core.num_waiting(), 1U);
  h.run();
  EXPECT_EQ(h.core.stats().preemptions, 0U);
  EXPECT_EQ(h.generated[1], reference(prompt_of(8, 0), 8));
  EXPECT_EQ(h.generated[2], reference(prompt_of(8, 100), 8));
}

TEST(IterationSchedulerCore, StaticBatchAdmitsOnlyWhenNothingRuns) {
  auto o = options(64);
  o.capacity = kv_capacity_policy::static_batch;
  harness h{o};
  h.add(1, prompt_of(4, 0), 2);
  h.add(2, prompt_of(4, 10), 6);
  h.step();
  EXPECT_EQ(h.plans.back().sequences.size(), 2U);
  h.add(3, prompt_of(4, 20), 1);
  int steps_before_3 = 0;
  while (h.step()) {
    bool has3 = false;
    for (const auto& s : h.plans.back().sequences) {
      has3 = has3 || s.id == 3;
    }
    if (has3) {
      break;
    }
    ++steps_before_3;
  }
  EXPECT_EQ(steps_before_3, 5) << "3 waits for the longest of the batch (2's 6 tokens)";
  h.run();
  EXPECT_EQ(h.generated[3], reference(prompt_of(4, 20), 1));
}

TEST(IterationSchedulerCore, StaticBatchFillsItsSeatsBeyondOneStepsBudget) {
  auto o = options(1000);
  o.capacity = kv_capacity_policy::static_batch;
  o.max_num_batched_tokens = 64;
  harness h{o};
  for (std::uint64_t id = 1; id <= 8; ++id) {
    h.add(id, prompt_of(32, static_cast<token_id>(id * 100)), 3);
  }
  h.step();
  EXPECT_EQ(h.plans.back().sequences.size(), 2U) << "the budget holds two prompts";
  EXPECT_EQ(h.core.num_running(), 8U) << "but the batch took all eight seats";
  h.add(9, prompt_of(4, 0), 1);
  std::set<std::uint64_t> started;
  while (h.core.num_running() > 0 && h.step()) {
    for (const auto& s : h.plans.back().sequences) {
      EXPECT_NE(s.id, 9U) << "nothing joins a running batch";
      if (s.kind == scheduled_kind::started) {
        started.insert(s.id);
      }
    }
  }
  EXPECT_EQ(started.size(), 6U) << "the other six start in later steps, as `started`";
  h.run();
  for (std::uint64_t id = 1; id <= 8; ++id) {
    EXPECT_EQ(h.generated[id], reference(prompt_of(32, static_cast<token_id>(id * 100)), 3));
  }
}

TEST(IterationSchedulerCore, TheLastTokenNeedsNoKvBlock) {
  harness h{options(4)};        // 16 tokens of KV
  h.add(1, prompt_of(8, 0), 9); // 17 tokens, of which 16 are ever computed
  h.run();
  EXPECT_EQ(h.generated[1], reference(prompt_of(8, 0), 9));
}

TEST(IterationSchedulerCore, PrefixHitsSkipCachedBlocksButNeverTheLastToken) {
  harness h{options(64)};
  h.add(1, prompt_of(12, 0), 1); // three full blocks
  h.run();
  auto same = prompt_of(12, 0);
  h.add(2, same, 2); // same 12 tokens: at most 8 may hit (the last must be computed)
  auto longer = prompt_of(14, 0);
  h.add(3, longer, 2); // 3 full blocks hit, 2 tokens computed
  h.step();
  const auto& seqs = h.plans.back().sequences;
  ASSERT_EQ(seqs.size(), 2U);
  EXPECT_EQ(seqs[0].cached_tokens, 8U);
  EXPECT_EQ(seqs[0].first_token, 8U);
  EXPECT_EQ(seqs[0].num_tokens, 4U);
  EXPECT_EQ(seqs[1].cached_tokens, 12U);
  EXPECT_EQ(seqs[1].num_tokens, 2U);
  h.run();
  EXPECT_EQ(h.generated[2], reference(same, 2));
  EXPECT_EQ(h.generated[3], reference(longer, 2));
  EXPECT_GT(h.core.blocks().stats().hit_rate(), 0.0);
}

TEST(IterationSchedulerCore, CancelFreesBlocksAtOnceOrAfterTheStepInFlight) {
  harness h{options(16)};
  h.add(1, prompt_of(6, 0), 50);
  h.add(2, prompt_of(6, 10), 50);
  h.add(3, prompt_of(6, 20), 50);
  h.step();
  const auto free_before = h.core.blocks().free_blocks();
  // Between steps: freed now.
  EXPECT_TRUE(h.core.cancel(1));
  EXPECT_GT(h.core.blocks().free_blocks(), free_before);
  EXPECT_FALSE(h.core.cancel(1)) << "once";
  // During a step: the backend may be writing 2's blocks, so they are freed by update().
  const step_plan& plan = h.core.schedule(h.now);
  EXPECT_EQ(plan.finished, std::vector<std::uint64_t>{1}) << "listed in the next plan";
  const auto outputs = h.model.execute(plan);
  const auto free_mid = h.core.blocks().free_blocks();
  EXPECT_TRUE(h.core.cancel(2));
  EXPECT_EQ(h.core.blocks().free_blocks(), free_mid);
  std::vector<generation_event> events;
  std::vector<step_output> without_2;
  for (const auto& out : outputs) {
    if (out.id != 2) {
      without_2.push_back(out);
    }
  }
  ASSERT_TRUE(h.core.update(without_2, events).ok()) << "a cancelled sequence needs no output";
  EXPECT_GT(h.core.blocks().free_blocks(), free_mid);
  for (const auto& e : events) {
    EXPECT_NE(e.id, 2U) << "a cancelled sequence gets no more tokens";
    h.generated[e.id].push_back(e.token);
  }
  h.step();
  EXPECT_EQ(h.plans.back().finished, std::vector<std::uint64_t>{2});
  EXPECT_EQ(h.core.num_running(), 1U);
  EXPECT_EQ(h.core.stats().cancelled, 2U);
}

TEST(IterationSchedulerCore, StopsOnEndTokenBackendStopAndModelLength) {
  auto o = options(64);
  o.max_model_len = 10;
  harness h{o};
  const auto expect = reference(prompt_of(3, 0), 5);
  generation_request r;
  r.id = 1;
  r.prompt = prompt_of(3, 0);
  r.max_new_tokens = 100;
  r.end_token = expect[2];
  ASSERT_TRUE(h.core.add(r).ok());
  h.add(2, prompt_of(6, 40), 100); // 4 generated reach max_model_len 10
  h.run();
  EXPECT_EQ(h.generated[1], reference(prompt_of(3, 0), 100, expect[2]));
  EXPECT_EQ(h.reasons[1], finish_reason::end_token);
  EXPECT_EQ(h.generated[2].size(), 4U);
  EXPECT_EQ(h.reasons[2], finish_reason::max_model_len);

  h.add(3, prompt_of(2, 0), 100);
  const step_plan& plan = h.core.schedule(h.now);
  ASSERT_EQ(plan.sequences.size(), 1U);
  std::vector<generation_event> events;
  const std::vector<step_output> stop{{3, 7, true}};
  ASSERT_TRUE(h.core.update(stop, events).ok());
  ASSERT_EQ(events.size(), 1U);
  EXPECT_TRUE(events[0].finished);
  EXPECT_EQ(events[0].reason, finish_reason::stopped);
}

TEST(IterationSchedulerCore, RefusesBadSequencesAndBadOutputs) {
  harness h{options(4)}; // 16 tokens of KV
  generation_request r;
  r.id = 1;
  EXPECT_FALSE(h.core.add(r).ok()) << "empty prompt";
  r.prompt = prompt_of(256, 0);
  EXPECT_FALSE(h.core.add(r).ok()) << "prompt of max_model_len";
  r.prompt = prompt_of(4, 0);
  r.max_new_tokens = 0;
  EXPECT_FALSE(h.core.add(r).ok()) << "max_tokens 0";
  r.max_new_tokens = 20;
  const auto too_big = h.core.add(r);
  EXPECT_FALSE(too_big.ok());
  EXPECT_NE(too_big.message().find("KV blocks"), std::string::npos) << too_big.message();
  r.max_new_tokens = 4;
  ASSERT_TRUE(h.core.add(r).ok());
  EXPECT_FALSE(h.core.add(r).ok()) << "the same id twice";

  const step_plan& plan = h.core.schedule(h.now);
  ASSERT_EQ(plan.sequences.size(), 1U);
  std::vector<generation_event> events;
  EXPECT_FALSE(h.core.update({}, events).ok()) << "a missing output";
  const std::vector<step_output> wrong{{9, 1, false}};
  EXPECT_FALSE(h.core.update(wrong, events).ok()) << "an unknown sequence";
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(h.core.in_step()) << "a refused update changes nothing";
  const std::vector<step_output> right{{1, 1, false}};
  EXPECT_TRUE(h.core.update(right, events).ok());

  iteration_batching_options bad = options(0);
  EXPECT_THROW(iteration_scheduler_core{bad}, servekit::config_error);
  bad = options(4);
  bad.max_num_batched_tokens = 4; // fewer than max_num_seqs (8)
  EXPECT_THROW(iteration_scheduler_core{bad}, servekit::config_error);
}

TEST(IterationSchedulerCore, SloAwareServesFeasibleDeadlinesFirstAndLateOnesLast) {
  auto o = options(64);
  o.order = servekit::iteration_queue_order::slo_aware;
  o.max_num_seqs = 1;
  o.max_num_batched_tokens = 8;
  harness h{o};
  h.add(9, prompt_of(2, 0), 30); // keeps the only seat busy
  h.step();
  auto add_at = [&](std::uint64_t id, std::int64_t arrival_ms, std::int64_t target_ms) {
    generation_request r;
    r.id = id;
    r.prompt = prompt_of(2, static_cast<token_id>(id));
    r.max_new_tokens = 1;
    r.arrival = time_point{} + std::chrono::milliseconds{arrival_ms};
    r.ttft_target = std::chrono::milliseconds{target_ms};
    ASSERT_TRUE(h.core.add(std::move(r)).ok());
  };
  add_at(1, 0, 50);   // deadline 50 ms: late by the time the seat frees
  add_at(2, 0, 5000); // deadline 5 s
  add_at(3, 0, 1000); // deadline 1 s: first
  std::vector<std::uint64_t> order;
  while (!h.core.idle()) {
    h.step();
    for (const auto& s : h.plans.back().sequences) {
      if (s.kind == scheduled_kind::started) {
        order.push_back(s.id);
      }
    }
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{3, 2, 1}));
}

/// Random arrivals, lengths and cancellations under every policy and a tight cache: the
/// invariants hold at every step and every sequence that was not cancelled generates exactly
/// its reference tokens, through chunking, preemption and prefix hits.
TEST(IterationSchedulerCore, RandomWorkloadsGenerateTheReferenceTokensUnderEveryPolicy) {
  for (const auto capacity :
       {kv_capacity_policy::max_utilization, kv_capacity_policy::guaranteed_no_evict,
        kv_capacity_policy::static_batch}) {
    for (const auto order :
         {servekit::iteration_queue_order::fcfs, servekit::iteration_queue_order::priority,
          servekit::iteration_queue_order::slo_aware}) {
      SCOPED_TRACE(std::string{to_string(capacity)} + " " + std::string{to_string(order)});
      auto o = options(24, 4);
      o.capacity = capacity;
      o.order = order;
      o.max_num_batched_tokens = 16;
      o.long_prefill_token_threshold = 8;
      harness h{o};
      std::mt19937 rng{42};
      std::map<std::uint64_t, std::vector<token_id>> prompts;
      std::map<std::uint64_t, std::uint32_t> max_new;
      std::set<std::uint64_t> cancelled;
      std::uint64_t next_id = 1;
      for (int step = 0; step < 3000 && (next_id <= 60 || !h.core.idle()); ++step) {
        if (next_id <= 60 && rng() % 3 == 0) {
          // Shared prefixes (4 kinds of first 8 tokens) give prefix hits.
          auto p = prompt_of(8, static_cast<token_id>(rng() % 4 * 100));
          const auto extra = rng() % 20;
          for (std::uint32_t k = 0; k < extra; ++k) {
            p.push_back(static_cast<token_id>(rng() % 1000));
          }
          const auto n = static_cast<std::uint32_t>(1 + rng() % 30);
          prompts[next_id] = p;
          max_new[next_id] = n;
          h.add(next_id, p, n, static_cast<std::uint32_t>(rng() % 3));
          ++next_id;
        }
        if (rng() % 40 == 0 && next_id > 1) {
          const std::uint64_t victim = 1 + rng() % (next_id - 1);
          if (h.core.cancel(victim)) {
            cancelled.insert(victim);
          }
        }
        h.step();
      }
      ASSERT_TRUE(h.core.idle());
      for (const auto& [id, p] : prompts) {
        if (!cancelled.contains(id)) {
          EXPECT_EQ(h.generated[id], reference(p, max_new[id])) << "sequence " << id;
        }
      }
      EXPECT_EQ(h.core.blocks().free_blocks(), 24U);
      if (capacity != kv_capacity_policy::max_utilization) {
        EXPECT_EQ(h.core.stats().preemptions, 0U);
      } else {
        EXPECT_GT(h.core.stats().preemptions, 0U) << "the cache is meant to be too small";
      }
      EXPECT_GT(h.core.blocks().stats().prefix_hit_tokens, 0U);
      EXPECT_FALSE(cancelled.empty());
    }
  }
}

} // namespace iteration_scheduler_core_test
