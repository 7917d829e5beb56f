#pragma once
// hash_llm: a generative backend for tests whose state lives in the KV blocks the scheduler
// assigns, like a transformer's. Tokens are bytes; computing position p writes its token into
// slot p of the sequence's block table, and the next token is a hash of everything the
// sequence's blocks hold, mapped to 'a'..'z' (or '.' every so often: the end token, when the
// model's parameter `end_token` is "true"). A block given to two writers, a wrong prefix hit,
// a skipped position or a preemption that does not recompute changes the output, which tests
// compare with reference(), the same sequence generated alone without any cache.
//
// Faults for tests: a prompt containing "THROW" makes the step that computes it throw; the
// parameter `step_gate` (a decimal address of a hash_llm_gate) holds every step until opened.
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace hash_llm_test {

/// Lets the steps of hash_llm instances start only while fewer than `allowed` have; counts them.
struct hash_llm_gate {
  std::mutex mutex;
  std::condition_variable changed;
  int allowed = 1 << 30;
  int steps = 0;

  void pass() {
    std::unique_lock lock{mutex};
    ++steps;
    changed.notify_all();
    changed.wait(lock, [&] { return steps <= allowed; });
  }
  void allow(int n) {
    const std::lock_guard lock{mutex};
    allowed = n;
    changed.notify_all();
  }
  /// Waits until at least `n` steps have started.
  void wait_steps(int n) {
    std::unique_lock lock{mutex};
    changed.wait(lock, [&] { return steps >= n; });
  }
};

/// The token after `seen`: a hash of every token, mapped to a letter, or '.' (when the end token
/// is on) about one time in 8.
inline servekit::token_id next_token(std::span<const servekit::token_id> seen, bool with_end) {
  std::uint64_t h = 1469598103934665603U;
  for (const auto t : seen) {
    h = (h ^ static_cast<std::uint32_t>(t)) * std::uint64_t{1099511628211U};
  }
  h ^= h >> 29;
  if (with_end && h % 8 == 0) {
    return '.';
  }
  return static_cast<servekit::token_id>('a' + (h >> 3) % 26);
}

/// What hash_llm generates for `prompt`, alone: at most `max_tokens`, stopping after '.' when the
/// end token is on, or when the sequence reaches `max_model_len` tokens.
inline std::string reference(std::string_view prompt, std::uint32_t max_tokens, bool with_end,
                             std::uint32_t max_model_len = 2048) {
  std::vector<servekit::token_id> seen(prompt.begin(), prompt.end());
  std::string out;
  while (out.size() < max_tokens && seen.size() < max_model_len) {
    const auto t = next_token(seen, with_end);
    seen.push_back(t);
    out.push_back(static_cast<char>(t));
    if (with_end && t == '.') {
      break;
    }
  }
  return out;
}

class hash_llm {
public:
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"text_input", servekit::data_type::bytes, {1}},
      {"stream", servekit::data_type::boolean, {1}, false, true},
      {"max_tokens", servekit::data_type::int32, {1}, false, true},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"text_output", servekit::data_type::bytes, {1}},
  };

  explicit hash_llm(const servekit::instance_context& context) {
    const auto o = servekit::read_iteration_batching(*context.parameters);
    block_size_ = o.block_size;
    blocks_ = o.num_blocks == 0 ? 64 : o.num_blocks;
    kv_.assign(static_cast<std::size_t>(blocks_) * block_size_, unwritten);
    with_end_ = context.parameter("end_token") == std::optional<std::string_view>{"true"};
    if (const auto g = context.parameter("step_gate")) {
      gate_ = reinterpret_cast<hash_llm_gate*>(
          static_cast<std::uintptr_t>(std::stoull(std::string{*g})));
    }
  }

  [[nodiscard]] std::uint32_t kv_cache_blocks() const noexcept { return blocks_; }
  [[nodiscard]] std::optional<servekit::token_id> end_token() const {
    return with_end_ ? std::optional<servekit::token_id>{'.'} : std::nullopt;
  }

  servekit::status tokenize(const servekit::request& r,
                            std::vector<servekit::token_id>& prompt) const {
    const auto text = r.input("text_input").strings();
    prompt.assign(text.front().begin(), text.front().end());
    for (auto& t : prompt) {
      t = static_cast<unsigned char>(t);
    }
    return {};
  }

  void execute_step(const servekit::step_plan& plan, std::vector<servekit::step_output>& out) {
    if (gate_ != nullptr) {
      gate_->pass();
    }
    for (const auto& s : plan.sequences) {
      if (s.first_token == 0) {
        const std::vector<servekit::token_id> t(s.tokens.begin(), s.tokens.end());
        if (std::string{t.begin(), t.end()}.find("THROW") != std::string::npos) {
          throw std::runtime_error{"injected fault"};
        }
      }
      for (std::uint32_t k = 0; k < s.num_tokens; ++k) {
        const std::uint32_t p = s.first_token + k;
        kv_[slot(s.block_table, p)] = s.tokens[k];
      }
      if (s.samples) {
        std::vector<servekit::token_id> seen;
        for (std::uint32_t p = 0; p < s.first_token + s.num_tokens; ++p) {
          seen.push_back(kv_[slot(s.block_table, p)]);
        }
        out.push_back({s.id, next_token(seen, with_end_), false});
      }
    }
  }

  void respond(const servekit::request& /*r*/, std::span<const servekit::token_id> tokens,
               servekit::response& out) const {
    std::string text;
    for (const auto t : tokens) {
      text.push_back(static_cast<char>(t));
    }
    out.outputs.push_back(
        servekit::make_tensor("text_output", servekit::shape{1}, {std::string_view{text}}));
  }

private:
  static constexpr servekit::token_id unwritten = -1;

  [[nodiscard]] std::size_t slot(std::span<const servekit::kv_block_id> table,
                                 std::uint32_t p) const {
    return static_cast<std::size_t>(table[p / block_size_]) * block_size_ + p % block_size_;
  }

  std::uint32_t block_size_ = 16;
  std::uint32_t blocks_ = 64;
  std::vector<servekit::token_id> kv_;
  bool with_end_ = false;
  hash_llm_gate* gate_ = nullptr;
};

} // namespace hash_llm_test
