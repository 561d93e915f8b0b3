// FlagSet: a command line's flags, each bound to the variable it sets, as Go's
// flag package and pflag bind them. The variable's value when its flag is added
// is the flag's default, so a default is written once: in the struct that holds
// the variable, usually a component's Options. parse() accepts --flag=value,
// --flag value, -flag, and for booleans --flag and --flag=false; -h is --help.
// Every error names the flag. Not thread-safe; the bound variables must outlive
// the set.
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace rsc {

// "2m", "15s", "500ms": a duration as flags take it.
std::string formatFlagDuration(Clock::Duration d);

class FlagSet {
 public:
  // Applies a flag's text to its variable; returns why the text is refused,
  // without the flag's name ("must be at least 1").
  using Setter = std::function<std::optional<std::string>(const std::string& value)>;

  // A flag of its own kind. `default_text` is shown by usage() when not empty.
  void add(std::string name, std::string help, std::string default_text, Setter set);
  void addSwitch(std::string name, std::string help, bool* value);

  // Any string, the empty one included.
  void addString(std::string name, std::string help, std::string* value);
  // A string that must not be empty.
  void addText(std::string name, std::string help, std::string* value);
  // One of `choices`.
  void addChoice(std::string name, std::string help, std::string* value,
                 std::vector<std::string> choices);
  // A comma-separated list of non-empty items.
  void addList(std::string name, std::string help, std::vector<std::string>* value);
  // A rate: positive, or with `zero_ok` also 0.
  void addRate(std::string name, std::string help, double* value, bool zero_ok = false);

  // A whole number of at least `min`.
  template <std::integral T>
  void addNumber(std::string name, std::string help, T* value, T min) {
    add(std::move(name), std::move(help), *value == 0 ? "" : std::to_string(*value),
        [value, min](const std::string& v) -> std::optional<std::string> {
          std::optional<long long> n = parseWholeNumber(v);
          if (!n) return "must be a number, not \"" + v + "\"";
          if (*n < static_cast<long long>(min)) return "must be at least " + std::to_string(min);
          *value = static_cast<T>(*n);
          return std::nullopt;
        });
  }

  // A Go-style duration ("1m30s") of at least `min`, rounded to the
  // variable's unit.
  template <typename Rep, typename Period>
  void addDuration(std::string name, std::string help, std::chrono::duration<Rep, Period>* value,
                   Clock::Duration min = Clock::Duration::zero()) {
    using D = std::chrono::duration<Rep, Period>;
    add(std::move(name), std::move(help),
        value->count() == 0 ? "" : formatFlagDuration(std::chrono::round<Clock::Duration>(*value)),
        [value, min](const std::string& v) -> std::optional<std::string> {
          StatusOr<Clock::Duration> d = parseFlagDuration(v, min);
          if (!d.ok()) return d.status().message();
          *value = std::chrono::round<D>(*d);
          return std::nullopt;
        });
  }

  // Sets the flags in args (argv[1..]). Fails with InvalidArgument naming the
  // flag; the variables of the flags before it are set.
  Status parse(const std::vector<std::string>& args) const;

  // One entry a flag, in the order they were added: "  --name value\n      help (default D)\n".
  std::string usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool boolean = false;
    Setter set;
  };

  static std::optional<long long> parseWholeNumber(const std::string& v);
  static StatusOr<Clock::Duration> parseFlagDuration(const std::string& v, Clock::Duration min);

  std::vector<Flag> flags_;
};

}  // namespace rsc
