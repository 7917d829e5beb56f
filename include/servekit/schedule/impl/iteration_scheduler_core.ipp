#pragma once
/// \file
/// Definitions for servekit/schedule/iteration_scheduler_core.hpp. Compiled once into
/// servekit::servekit, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/assert.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

namespace servekit {

namespace detail {
[[nodiscard]] inline const iteration_batching_options&
checked_iteration_options(const iteration_batching_options& o) {
  validate(o);
  return o;
}
} // namespace detail

SERVEKIT_DECL
iteration_scheduler_core::iteration_scheduler_core(const iteration_batching_options& options)
    : options_{detail::checked_iteration_options(options)}, pool_{options.num_blocks,
                                                                  options.block_size,
                                                                  options.enable_prefix_caching} {
  plan_.sequences.reserve(options_.max_num_seqs);
  entry_slots_.reserve(options_.max_num_seqs);
  running_.reserve(options_.max_num_seqs);
}

SERVEKIT_DECL std::size_t
iteration_scheduler_core::lifetime_blocks(const sequence& s) const noexcept {
  const std::uint64_t life = std::min<std::uint64_t>(std::uint64_t{s.prompt_len} + s.max_new_tokens,
                                                     options_.max_model_len);
  return pool_.blocks_for(static_cast<std::size_t>(life - 1));
}

SERVEKIT_DECL std::uint32_t
iteration_scheduler_core::wanted_tokens(const sequence& s, std::uint32_t from,
                                        std::uint32_t budget) const noexcept {
  auto n = static_cast<std::uint32_t>(s.tokens.size()) - from;
  if (options_.enable_chunked_prefill && options_.long_prefill_token_threshold > 0) {
    n = std::min(n, options_.long_prefill_token_threshold);
  }
  n = std::min(n, budget);
  // The last position of a sequence is never computed: it is where generation stops.
  const std::uint32_t room =
      from < options_.max_model_len - 1 ? options_.max_model_len - 1 - from : 0;
  return std::min(n, room);
}

SERVEKIT_DECL status iteration_scheduler_core::add(generation_request r) {
  if (r.prompt.empty()) {
    return invalid_argument("sequence " + std::to_string(r.id) + ": the prompt is empty");
  }
  if (r.prompt.size() >= options_.max_model_len) {
    return invalid_argument("sequence " + std::to_string(r.id) + ": the prompt has " +
                            std::to_string(r.prompt.size()) + " tokens; max_model_len is " +
                            std::to_string(options_.max_model_len) +
                            " (prompt and generated tokens)");
  }
  if (r.max_new_tokens == 0) {
    return invalid_argument("sequence " + std::to_string(r.id) + ": max_tokens must be at least 1");
  }
  if (index_.contains(r.id)) {
    return invalid_argument("sequence " + std::to_string(r.id) + " is already queued or running");
  }
  // The KV of every token but the last, which ends the sequence before it is computed.
  const std::uint64_t life = std::min<std::uint64_t>(
      r.prompt.size() + std::uint64_t{r.max_new_tokens}, options_.max_model_len);
  if (pool_.blocks_for(life - 1) > pool_.num_blocks()) {
    return invalid_argument("sequence " + std::to_string(r.id) + ": its " + std::to_string(life) +
                            " tokens need " + std::to_string(pool_.blocks_for(life - 1)) +
                            " KV blocks; the cache has " + std::to_string(pool_.num_blocks()));
  }

  slot_index at = 0;
  if (free_slots_.empty()) {
    at = static_cast<slot_index>(slots_.size());
    slots_.emplace_back();
  } else {
    at = free_slots_.back();
    free_slots_.pop_back();
  }
  sequence& s = slots_[at];
  s.id = r.id;
  s.prompt_len = static_cast<std::uint32_t>(r.prompt.size());
  s.tokens = std::move(r.prompt);
  s.max_new_tokens = r.max_new_tokens;
  s.end_token = r.end_token;
  s.priority = r.priority;
  s.arrival = r.arrival;
  s.ttft_deadline =
      later_by(r.arrival, r.ttft_target > duration::zero() ? r.ttft_target : options_.ttft_target);
  s.order = next_order_++;
  s.computed = 0;
  s.blocks.clear();
  s.keyed_blocks = 0;
  s.preemptions = 0;
  s.entry = no_entry;
  s.where = place::waiting;
  s.cancelled = false;
  index_.emplace(s.id, at);
  waiting_.push_back(at);
  return ok_status();
}

SERVEKIT_DECL bool iteration_scheduler_core::cancel(std::uint64_t id) {
  const auto it = index_.find(id);
  if (it == index_.end() || slots_[it->second].cancelled) {
    return false;
  }
  const slot_index at = it->second;
  sequence& s = slots_[at];
  ++stats_.cancelled;
  if (s.where == place::waiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), at));
    retire(at);
  } else if (in_step_ && s.entry != no_entry) {
    s.cancelled = true; // the backend may be writing its blocks: update() frees them
  } else {
    remove_running(at);
    retire(at);
  }
  return true;
}

SERVEKIT_DECL std::size_t iteration_scheduler_core::pick_victim() const noexcept {
  if (options_.order != iteration_queue_order::priority) {
    return running_.size() - 1; // the last admitted
  }
  // The least urgent: the largest (priority, arrival order).
  std::size_t victim = 0;
  for (std::size_t i = 1; i < running_.size(); ++i) {
    const sequence& a = slots_[running_[i]];
    const sequence& v = slots_[running_[victim]];
    if (std::tie(a.priority, a.arrival, a.order) > std::tie(v.priority, v.arrival, v.order)) {
      victim = i;
    }
  }
  return victim;
}

SERVEKIT_DECL void iteration_scheduler_core::preempt(std::size_t running_index,
                                                     std::uint32_t& budget) {
  const slot_index at = running_[running_index];
  sequence& s = slots_[at];
  if (s.entry != no_entry) {
    scheduled_sequence& e = plan_.sequences[s.entry];
    budget += e.num_tokens;
    plan_.scheduled_tokens -= e.num_tokens;
    e.num_tokens = 0; // dropped when the plan is finished
    s.entry = no_entry;
  }
  pool_.release(s.blocks);
  s.blocks.clear();
  s.keyed_blocks = 0;
  s.computed = 0;
  ++s.preemptions;
  ++stats_.preemptions;
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  s.where = place::waiting;
  waiting_.push_front(at);
  plan_.preempted.push_back(s.id);
}

SERVEKIT_DECL void iteration_scheduler_core::record(slot_index at, std::uint32_t n) {
  sequence& s = slots_[at];
  s.entry = static_cast<std::uint32_t>(plan_.sequences.size());
  scheduled_sequence e;
  e.id = s.id;
  // Its first plan since admission tells the backend to set it up: what it holds so far are
  // its prefix-cache hits.
  e.kind = s.announced         ? scheduled_kind::continuing
           : s.preemptions > 0 ? scheduled_kind::resumed
                               : scheduled_kind::started;
  e.first_token = s.computed;
  e.num_tokens = n;
  e.cached_tokens = s.announced ? 0 : s.computed;
  s.announced = true;
  plan_.sequences.push_back(e);
  entry_slots_.push_back(at);
  plan_.scheduled_tokens += n;
  s.computed += n;
}

SERVEKIT_DECL void iteration_scheduler_core::schedule_running(std::uint32_t& budget,
                                                              bool& preempted) {
  std::size_t i = 0;
  while (i < running_.size() && budget > 0) {
    const slot_index at = running_[i];
    sequence& s = slots_[at];
    const auto remaining = static_cast<std::uint32_t>(s.tokens.size()) - s.computed;
    const std::uint32_t n = !options_.enable_chunked_prefill && remaining > budget
                                ? 0 // a whole prompt waits for a step with room for it
                                : wanted_tokens(s, s.computed, budget);
    if (n == 0) {
      ++i;
      continue;
    }
    const std::size_t need = pool_.blocks_for(std::size_t{s.computed} + n) - s.blocks.size();
    bool itself = false;
    while (!pool_.allocate(need, s.blocks)) {
      SERVEKIT_ASSERT(options_.capacity == kv_capacity_policy::max_utilization,
                      "a sequence's reserved KV blocks were not free");
      const std::size_t victim = pick_victim();
      itself = running_[victim] == at;
      preempt(victim, budget);
      preempted = true;
      if (itself) {
        break;
      }
      if (victim < i) {
        --i;
      }
    }
    if (itself) {
      break; // as vLLM: a sequence that preempted itself ends this step's running pass
    }
    record(at, n);
    budget -= n;
    ++i;
  }
}

SERVEKIT_DECL void iteration_scheduler_core::order_waiting(time_point now) {
  switch (options_.order) {
  case iteration_queue_order::fcfs:
    return; // arrival order, preempted sequences at the head: kept as they are queued
  case iteration_queue_order::priority:
    std::stable_sort(waiting_.begin(), waiting_.end(), [&](slot_index a, slot_index b) {
      const sequence& x = slots_[a];
      const sequence& y = slots_[b];
      return std::tie(x.priority, x.arrival, x.order) < std::tie(y.priority, y.arrival, y.order);
    });
    return;
  case iteration_queue_order::slo_aware:
    std::stable_sort(waiting_.begin(), waiting_.end(), [&](slot_index a, slot_index b) {
      const sequence& x = slots_[a];
      const sequence& y = slots_[b];
      // Preempted sequences were started already (most have had their first token): they go
      // first, oldest first. Then those that can still meet their deadline, earliest first;
      // then the late, oldest first.
      const bool xp = x.preemptions > 0;
      const bool yp = y.preemptions > 0;
      if (xp != yp) {
        return xp;
      }
      if (xp) {
        return x.order < y.order;
      }
      const bool x_late = x.ttft_deadline <= now;
      const bool y_late = y.ttft_deadline <= now;
      if (x_late != y_late) {
        return y_late;
      }
      if (x_late) {
        return x.order < y.order;
      }
      return std::tie(x.ttft_deadline, x.order) < std::tie(y.ttft_deadline, y.order);
    });
    return;
  }
}

SERVEKIT_DECL void iteration_scheduler_core::schedule_waiting(std::uint32_t& budget) {
  const bool reserve = options_.capacity != kv_capacity_policy::max_utilization;
  // guaranteed_no_evict: what running sequences may still need, set aside.
  std::size_t reserved = 0;
  if (reserve) {
    for (const slot_index at : running_) {
      const sequence& s = slots_[at];
      const std::size_t life = lifetime_blocks(s);
      reserved += life > s.blocks.size() ? life - s.blocks.size() : 0;
    }
  }
  // static_batch forms its batch by seats and KV, not by this step's token budget: a sequence
  // admitted without tokens now starts in a later step, before anything new is admitted.
  const bool by_seats = options_.capacity == kv_capacity_policy::static_batch;
  while (!waiting_.empty() && running_.size() < options_.max_num_seqs && (budget > 0 || by_seats)) {
    const slot_index at = waiting_.front();
    sequence& s = slots_[at];
    hits_.clear();
    std::size_t hit_blocks = 0;
    if (pool_.prefix_caching()) {
      // At most all but the last token: the step must compute one to sample.
      hit_blocks = pool_.match_prefix(s.tokens, s.tokens.size() - 1, hits_);
    }
    const auto hit_tokens = static_cast<std::uint32_t>(hit_blocks * pool_.block_size());
    const auto remaining = static_cast<std::uint32_t>(s.tokens.size()) - hit_tokens;
    const bool whole_later = !options_.enable_chunked_prefill && remaining > budget;
    if (whole_later && !by_seats) {
      break;
    }
    const std::uint32_t n = whole_later ? 0 : wanted_tokens(s, hit_tokens, budget);
    if (n == 0 && !by_seats) {
      break;
    }
    const std::size_t need_now = pool_.blocks_for(std::size_t{hit_tokens} + n) - hit_blocks;
    const std::size_t hits_free = pool_.count_free(hits_);
    const std::size_t free = pool_.free_blocks();
    std::size_t life_need = need_now;
    if (reserve) {
      life_need = lifetime_blocks(s) - hit_blocks;
      if (life_need + hits_free + reserved > free) {
        break; // head of line: the first that does not fit stops admission
      }
    } else if (need_now + hits_free > free) {
      break;
    }
    pool_.acquire(hits_);
    s.blocks.assign(hits_.begin(), hits_.end());
    [[maybe_unused]] const bool got = pool_.allocate(need_now, s.blocks);
    SERVEKIT_ASSERT(got, "blocks counted free could not be allocated");
    if (reserve) {
      reserved += life_need - need_now;
    }
    s.keyed_blocks = hit_blocks;
    s.computed = hit_tokens;
    s.announced = false;
    waiting_.pop_front();
    s.where = place::running;
    running_.push_back(at);
    if (n > 0) {
      record(at, n);
      budget -= n;
    }
  }
}

SERVEKIT_DECL const step_plan& iteration_scheduler_core::schedule(time_point now) {
  SERVEKIT_ASSERT(!in_step_, "iteration_scheduler_core::schedule before update() of the last plan");
  plan_.sequences.clear();
  plan_.preempted.clear();
  plan_.finished.swap(finished_pending_);
  finished_pending_.clear();
  plan_.scheduled_tokens = 0;
  entry_slots_.clear();

  std::uint32_t budget = options_.max_num_batched_tokens;
  bool preempted = false;
  const bool was_running = !running_.empty();
  schedule_running(budget, preempted);
  const bool admit =
      !preempted && (options_.capacity != kv_capacity_policy::static_batch || !was_running);
  if (admit) {
    order_waiting(now);
    schedule_waiting(budget);
  }

  // Drop the entries of sequences preempted after they were scheduled, then point the spans at
  // the sequences' tokens and blocks, which no longer change until update().
  std::size_t kept = 0;
  for (std::size_t i = 0; i < plan_.sequences.size(); ++i) {
    if (plan_.sequences[i].num_tokens == 0) {
      continue;
    }
    plan_.sequences[kept] = plan_.sequences[i];
    entry_slots_[kept] = entry_slots_[i];
    sequence& s = slots_[entry_slots_[kept]];
    s.entry = static_cast<std::uint32_t>(kept);
    scheduled_sequence& e = plan_.sequences[kept];
    e.samples = s.computed == s.tokens.size();
    e.tokens = std::span<const token_id>{s.tokens}.subspan(e.first_token, e.num_tokens);
    e.block_table = s.blocks;
    ++kept;
  }
  plan_.sequences.resize(kept);
  entry_slots_.resize(kept);
  SERVEKIT_ASSERT(plan_.scheduled_tokens <= options_.max_num_batched_tokens,
                  "a step scheduled more tokens than its budget");
  SERVEKIT_ASSERT(running_.size() <= options_.max_num_seqs, "more sequences run than allowed");
  in_step_ = !plan_.sequences.empty();
  if (in_step_) {
    ++stats_.steps;
    stats_.scheduled_tokens += plan_.scheduled_tokens;
  }
  return plan_;
}

SERVEKIT_DECL status iteration_scheduler_core::update(std::span<const step_output> outputs,
                                                      std::vector<generation_event>& events) {
  if (!in_step_) {
    return invalid_argument("update() without a step in flight");
  }
  // Check first, apply after: a bad answer changes nothing. A sequence cancelled during the
  // step may be answered or not; every other one that sampled must be, once.
  // The position of each sequence's output (no_entry: none yet).
  std::vector<std::uint32_t>& answer = answers_;
  answer.assign(plan_.sequences.size(), no_entry);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto it = index_.find(outputs[k].id);
    const std::uint32_t entry = it == index_.end() ? no_entry : slots_[it->second].entry;
    if (entry == no_entry || !plan_.sequences[entry].samples) {
      return invalid_argument("an output for sequence " + std::to_string(outputs[k].id) +
                              ", which the step did not sample");
    }
    if (answer[entry] != no_entry) {
      return invalid_argument("two outputs for sequence " + std::to_string(outputs[k].id));
    }
    answer[entry] = static_cast<std::uint32_t>(k);
  }
  for (std::size_t i = 0; i < plan_.sequences.size(); ++i) {
    const scheduled_sequence& e = plan_.sequences[i];
    if (e.samples && answer[i] == no_entry && !slots_[entry_slots_[i]].cancelled) {
      return invalid_argument("no output for sequence " + std::to_string(e.id) +
                              ", which the step sampled");
    }
  }

  for (std::size_t i = 0; i < plan_.sequences.size(); ++i) {
    const slot_index at = entry_slots_[i];
    sequence& s = slots_[at];
    s.entry = no_entry;
    if (s.cancelled) {
      remove_running(at);
      retire(at);
      continue;
    }
    // Blocks whose every token's KV is now computed can serve later prefixes.
    s.keyed_blocks = pool_.cache_full_blocks(std::span<const token_id>{s.tokens}.first(s.computed),
                                             s.blocks, s.keyed_blocks);
    if (answer[i] == no_entry) {
      continue; // a prefill chunk: nothing sampled yet
    }
    const step_output& out = outputs[answer[i]];
    s.tokens.push_back(out.token);
    generation_event ev;
    ev.id = s.id;
    ev.token = out.token;
    ev.generated = static_cast<std::uint32_t>(s.tokens.size()) - s.prompt_len;
    if (out.stop) {
      ev.finished = true;
      ev.reason = finish_reason::stopped;
    } else if (s.end_token && out.token == *s.end_token) {
      ev.finished = true;
      ev.reason = finish_reason::end_token;
    } else if (ev.generated >= s.max_new_tokens) {
      ev.finished = true;
      ev.reason = finish_reason::max_tokens;
    } else if (s.tokens.size() >= options_.max_model_len) {
      ev.finished = true;
      ev.reason = finish_reason::max_model_len;
    }
    events.push_back(ev);
    if (ev.finished) {
      ++stats_.finished;
      remove_running(at);
      retire(at);
    }
  }
  in_step_ = false;
  return ok_status();
}

SERVEKIT_DECL void iteration_scheduler_core::remove_running(slot_index at) {
  running_.erase(std::find(running_.begin(), running_.end(), at));
}

SERVEKIT_DECL void iteration_scheduler_core::retire(slot_index at) {
  sequence& s = slots_[at];
  pool_.release(s.blocks);
  s.blocks.clear();
  s.tokens.clear();
  s.where = place::free;
  s.cancelled = false;
  finished_pending_.push_back(s.id);
  index_.erase(s.id);
  free_slots_.push_back(at);
}

SERVEKIT_DECL std::optional<std::span<const token_id>>
iteration_scheduler_core::tokens_of(std::uint64_t id) const {
  const auto it = index_.find(id);
  if (it == index_.end()) {
    return std::nullopt;
  }
  return std::span<const token_id>{slots_[it->second].tokens};
}

SERVEKIT_DECL std::optional<std::uint32_t>
iteration_scheduler_core::preemptions_of(std::uint64_t id) const {
  const auto it = index_.find(id);
  if (it == index_.end()) {
    return std::nullopt;
  }
  return slots_[it->second].preemptions;
}

} // namespace servekit
