#pragma once
/// \file
/// What a benchmark reports: its figures by name, in the order measured, the ratios of
/// servekit's figures to the baselines' (run in the same process), its goals, and the one JSON
/// object every program prints on its last line (`{"key": value, ...}`; scripts and
/// docs/benchmarks.md read its keys).

#include "harness/machine.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit_bench {

/// `s` as a JSON string literal (control characters dropped).
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  return out + "\"";
}

/// `a / b`, or 0 when `b` is 0 (a section that measured nothing).
inline double ratio_of(double a, double b) { return b == 0 ? 0.0 : a / b; }

/// A JSON object written member by member, in order.
class json_object {
public:
  /// `value` in fmt's `spec` ("{:.6g}": six significant digits; "{:.2f}": two decimals).
  json_object& number(std::string_view key, double value, std::string_view spec = "{:.6g}") {
    return raw(key, fmt::format(fmt::runtime(spec), value));
  }
  /// `value` in its shortest exact form, with a decimal point ("5.0", "118.8"), as
  /// nlohmann::json writes a double.
  json_object& real(std::string_view key, double value) {
    std::string text = fmt::format("{}", value);
    if (text.find_first_of(".en") == std::string::npos) {
      text += ".0";
    }
    return raw(key, std::move(text));
  }
  json_object& integer(std::string_view key, std::int64_t value) {
    return raw(key, std::to_string(value));
  }
  json_object& count(std::string_view key, std::uint64_t value) {
    return raw(key, std::to_string(value));
  }
  json_object& boolean(std::string_view key, bool value) {
    return raw(key, value ? "true" : "false");
  }
  json_object& string(std::string_view key, std::string_view value) {
    return raw(key, json_string(value));
  }
  json_object& null(std::string_view key) { return raw(key, "null"); }
  json_object& object(std::string_view key, const json_object& value) {
    return raw(key, value.str());
  }
  /// `value` is already JSON.
  json_object& raw(std::string_view key, std::string value) {
    members_.emplace_back(std::string{key}, std::move(value));
    return *this;
  }

  [[nodiscard]] bool empty() const noexcept { return members_.empty(); }

  [[nodiscard]] std::string str() const {
    std::string out = "{";
    for (std::size_t i = 0; i < members_.size(); ++i) {
      out += fmt::format("{}{}: {}", i == 0 ? "" : ", ", json_string(members_[i].first),
                         members_[i].second);
    }
    return out + "}";
  }

private:
  std::vector<std::pair<std::string, std::string>> members_;
};

/// The figures of one run, in the order measured, then whatever else the program adds (its
/// settings, the machine, goals), printed as one JSON object.
class report : public json_object {
public:
  /// `spec`: how figures print (see json_object::number).
  explicit report(std::string spec = "{:.6g}") : spec_{std::move(spec)} {}

  /// Records a figure; a second figure of the same name is ignored.
  void put(const std::string& key, double value) {
    if (figures_.emplace(key, value).second) {
      number(key, value, spec_);
    }
  }

  [[nodiscard]] bool has(std::string_view key) const {
    return figures_.find(key) != figures_.end();
  }

  /// The figure `key`; 0 when it was not measured.
  [[nodiscard]] double get(std::string_view key) const {
    const auto it = figures_.find(key);
    return it == figures_.end() ? 0.0 : it->second;
  }

  /// Whether every one of `keys` was measured.
  [[nodiscard]] bool has_all(std::initializer_list<std::string_view> keys) const {
    for (const auto k : keys) {
      if (!has(k)) {
        return false;
      }
    }
    return true;
  }

  /// Whether the figure `key` is at least `min`; none when it was not measured.
  [[nodiscard]] std::optional<bool> at_least(std::string_view key, double min) const {
    return has(key) ? std::optional<bool>{get(key) >= min} : std::nullopt;
  }

  /// Whether the figure `key` is at most `max`; none when it was not measured.
  [[nodiscard]] std::optional<bool> at_most(std::string_view key, double max) const {
    return has(key) ? std::optional<bool>{get(key) <= max} : std::nullopt;
  }

  /// Records `key` = `numerator` / `denominator` (0 for a zero denominator) when both figures
  /// were measured; returns it.
  std::optional<double> ratio(const std::string& key, std::string_view numerator,
                              std::string_view denominator) {
    if (!has(numerator) || !has(denominator)) {
      return std::nullopt;
    }
    const double r = ratio_of(get(numerator), get(denominator));
    put(key, r);
    return r;
  }

  /// Records a figure and prints it as a table row: its name, its value, what it is.
  void row(const std::string& key, double value, std::string_view what = {}) {
    fmt::print("{:<38} {:>14.3f}{}{}\n", key, value, what.empty() ? "" : "  ", what);
    put(key, value);
  }

  /// What every benchmark's JSON ends with: whether it was a --quick run, the machine, and how
  /// many answers were wrong (or refused).
  void put_run(bool quick, const machine& host, std::uint64_t wrong) {
    boolean("quick", quick);
    count("nproc", host.nproc);
    number("load_average", host.load, "{:.2f}");
    count("wrong", wrong);
  }

  /// Prints the JSON object on a line of its own.
  void print_json() const { fmt::print("{}\n", str()); }

private:
  std::string spec_;
  std::map<std::string, double, std::less<>> figures_;
};

/// A run's goals: each printed as `[met ]` or `[MISS]`; a missed goal never fails a run (figures
/// on shared machines are noise), it is counted.
class goals {
public:
  goals() { fmt::print("goals:\n"); }

  /// Prints and counts `what` when `met` has a value (none: its section was left out).
  std::optional<bool> check(std::string_view what, std::optional<bool> met) {
    if (met) {
      missed_ += *met ? 0 : 1;
      fmt::print("  [{}] {}\n", *met ? "met " : "MISS", what);
    }
    return met;
  }

  [[nodiscard]] int missed() const noexcept { return missed_; }

private:
  int missed_ = 0;
};

} // namespace servekit_bench
