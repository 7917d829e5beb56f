#pragma once
/// \file
/// The benchmark programs' command line: each program declares its flags (bound to its own
/// variables), and parse() fills them in or exits. One behaviour for every program: `--name
/// VALUE` and `--name=VALUE` both work; `--help` prints the usage on stdout and exits 0; a bad
/// or unknown flag prints why and the usage on stderr and exits 2.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit_bench {

/// The names of a comma-separated list ("direct,oldest").
inline std::set<std::string, std::less<>> split_names(std::string_view list) {
  std::set<std::string, std::less<>> out;
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    out.emplace(list.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

/// The sections a run was restricted to with `--only a,b,...`; empty: all of them.
struct section_filter {
  std::set<std::string, std::less<>> names;

  [[nodiscard]] bool runs(std::string_view section) const {
    return names.empty() || names.find(section) != names.end();
  }
};

class command_line {
public:
  explicit command_line(std::string program) : program_{std::move(program)} {}
  // The --quick defaults point back at this object.
  command_line(const command_line&) = delete;
  command_line& operator=(const command_line&) = delete;

  /// `--name` alone sets `target`.
  command_line& flag(std::string name, bool& target, std::string help) {
    return add(std::move(name), "", std::move(help), [&target](const std::string&) {
      target = true;
      return std::string{};
    });
  }

  /// The flag every benchmark has: its figures as one JSON object on the last line.
  command_line& json(bool& target) {
    return flag("--json", target, "print every figure as one JSON object on the last line");
  }

  /// `--quick`: a short run (the ctest smoke test). Values declared with when_quick take their
  /// quick default unless given.
  command_line& quick(bool& target, std::string help) {
    quick_ = &target;
    return flag("--quick", target, std::move(help));
  }

  /// With --quick and without `name`, `target` becomes `value` (after parse).
  template <class T>
  command_line& when_quick(std::string name, T& target, T value) {
    quick_defaults_.push_back([this, name = std::move(name), &target, value] {
      if (quick_ != nullptr && *quick_ && !given(name)) {
        target = value;
      }
    });
    return *this;
  }

  /// `--seconds X`: the length of each throughput window, 1 s with --quick.
  command_line& window_seconds(double& target) {
    return number("--seconds", target, 1e-3, 1e6,
                  "length of each throughput window (default 5; warm-up 1 s before each)")
        .when_quick("--seconds", target, 1.0);
  }

  /// `--name X`: a finite number in [min, max].
  command_line& number(std::string name, double& target, double min, double max, std::string help) {
    return add(std::move(name), "X", std::move(help), [&target, min, max](const std::string& v) {
      const std::optional<double> d = parse_number(v);
      if (!d || *d < min || *d > max) {
        return fmt_range("a number", min, max);
      }
      target = *d;
      return std::string{};
    });
  }

  /// `--name N`: an integer in [min, max].
  template <std::integral T>
  command_line& integer(std::string name, T& target, double min, double max, std::string help) {
    return add(std::move(name), "N", std::move(help), [&target, min, max](const std::string& v) {
      const std::optional<double> d = parse_number(v);
      if (!d || *d < min || *d > max || std::floor(*d) != *d) {
        return fmt_range("an integer", min, max);
      }
      target = static_cast<T>(*d);
      return std::string{};
    });
  }

  /// `--name WORD`: a non-empty word, one of `choices` unless that is empty.
  command_line& text(std::string name, std::string& target, std::vector<std::string> choices,
                     std::string help) {
    return add(std::move(name), "WORD", std::move(help),
               [&target, choices = std::move(choices)](const std::string& v) {
                 if (v.empty() || (!choices.empty() &&
                                   std::find(choices.begin(), choices.end(), v) == choices.end())) {
                   std::string why = "needs ";
                   for (std::size_t i = 0; i < choices.size(); ++i) {
                     why += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
                   }
                   return choices.empty() ? std::string{"needs a value"} : why;
                 }
                 target = v;
                 return std::string{};
               });
  }

  /// `--only a,b,...`: run only these sections (for profiling one of them).
  command_line& only(section_filter& target, std::string_view sections) {
    return add("--only", "LIST",
               "run only these sections: " + std::string{sections} + " (for profiling one of them)",
               [&target](const std::string& v) {
                 target.names = split_names(v);
                 return std::string{};
               });
  }

  /// Fills in the declared variables from argv, or exits (0 after --help, 2 after an error).
  void parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string name{argv[i]};
      std::optional<std::string> value;
      if (const auto eq = name.find('='); name.starts_with("--") && eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      if (name == "--help" || name == "-h") {
        std::fputs(usage().c_str(), stdout);
        std::exit(0);
      }
      const auto o = std::find_if(options_.begin(), options_.end(),
                                  [&](const option& x) { return x.name == name; });
      if (o == options_.end()) {
        fail("unknown flag '" + std::string{argv[i]} + "'");
      }
      if (o->metavar.empty() && value) {
        fail(name + " takes no value");
      }
      if (!o->metavar.empty() && !value) {
        if (i + 1 >= argc) {
          fail(name + " needs a value");
        }
        value = argv[++i];
      }
      if (const std::string why = o->apply(value.value_or("")); !why.empty()) {
        fail(name + ": bad value '" + *value + "': " + why);
      }
      given_.insert(name);
    }
    for (const auto& apply : quick_defaults_) {
      apply();
    }
  }

  /// Whether the command line had `--name`.
  [[nodiscard]] bool given(std::string_view name) const {
    return given_.find(name) != given_.end();
  }

  [[nodiscard]] std::string usage() const {
    std::string out = "usage: " + program_ + " [flags]\n";
    std::size_t width = 0;
    for (const auto& o : options_) {
      width = std::max(width, o.name.size() + o.metavar.size() + 1);
    }
    for (const auto& o : options_) {
      std::string left = o.name + (o.metavar.empty() ? "" : " " + o.metavar);
      left.resize(width, ' ');
      out += "  " + left + "  " + o.help + "\n";
    }
    return out;
  }

private:
  struct option {
    std::string name;
    std::string metavar; ///< empty: a flag without a value
    std::string help;
    std::function<std::string(const std::string&)> apply; ///< returns why the value is bad
  };

  command_line& add(std::string name, std::string metavar, std::string help,
                    std::function<std::string(const std::string&)> apply) {
    options_.push_back({std::move(name), std::move(metavar), std::move(help), std::move(apply)});
    return *this;
  }

  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\n%s", program_.c_str(), why.c_str(), usage().c_str());
    std::exit(2);
  }

  static std::optional<double> parse_number(const std::string& s) {
    try {
      std::size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) {
        return d;
      }
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }

  static std::string fmt_range(const char* what, double min, double max) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "needs %s from %g to %g", what, min, max);
    return buf;
  }

  std::string program_;
  std::vector<option> options_;
  std::set<std::string, std::less<>> given_;
  bool* quick_ = nullptr;
  std::vector<std::function<void()>> quick_defaults_;
};

} // namespace servekit_bench
