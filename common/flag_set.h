// FlagSet: a command line's flags, each bound to the variable it sets, as Go's
// flag package and pflag bind them. The variable's value when its flag is added
// is the flag's default, so a default is written once: in the struct that holds
// the variable, usually a component's Options. Flags are given as --flag=value,
// --flag value or -flag value; switches, and flags with an optional value, as
// --flag alone; shorthands as -c value, -cvalue or -c=value. Every error names
// the flag. Not thread-safe; the bound variables must outlive the set.
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/strings.h"

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
          std::optional<long long> n = parseWhole<long long>(v);
          if (!n) return "must be a number, not " + inQuotes(v);
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

  // Lets `-letter` stand for --name, as pflag's shorthands.
  void shorthand(const std::string& name, char letter);
  // Lets --name stand alone, as if given `--name=bare` (pflag's NoOptDefVal);
  // a value then needs the = form. Every switch is such a flag, with "true".
  void optionalValue(const std::string& name, std::string bare);

  // Sets the flags in args (argv[1..]), which hold nothing but flags. Fails
  // with InvalidArgument naming the flag; the variables of the flags before
  // it may be set.
  Status parse(const std::vector<std::string>& args) const;

  // As parse(), for a command line of flags and arguments in any order: the
  // arguments, in order. "--" ends the flags; "-" is an argument.
  StatusOr<std::vector<std::string>> parseInterspersed(const std::vector<std::string>& args) const;

  // Where the first argument of args stands, past the flags of this set and
  // their values, without setting anything: finds a command among the flags
  // every command takes. A flag the set does not know is taken to stand alone.
  std::optional<size_t> firstArgument(const std::vector<std::string>& args) const;

  // "true", "false" and Go's other spellings of them. The refusals of these
  // two say why without naming a flag, as a Setter's do.
  static StatusOr<bool> parseSwitch(const std::string& v);
  static Status checkChoice(const std::string& v, const std::vector<std::string>& choices);

  // Names what the set's flags are for in its refusals: "unknown flag --x for push".
  void setScope(std::string scope) { scope_ = std::move(scope); }

  // One entry a flag, in the order they were added: "  --name value\n      help (default D)\n".
  std::string usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    char shorthand = 0;
    // The value of the flag given alone; none: the flag needs a value.
    std::optional<std::string> bare;
    Setter set;
  };

  // One flag on the command line, as args[i] gives it.
  struct Given {
    const Flag* flag = nullptr;  // null: unknown
    std::string spelled;         // as typed, without "=value": "--wait", "-o"
    std::optional<std::string> value;
  };

  Given lookUp(const std::string& arg) const;
  Flag& find(const std::string& name);
  // Sets the flag at args[i], moving i past its value when that is args[i+1].
  Status apply(const std::vector<std::string>& args, size_t& i) const;

  static StatusOr<Clock::Duration> parseFlagDuration(const std::string& v, Clock::Duration min);

  std::vector<Flag> flags_;
  std::string scope_;
};

}  // namespace rsc
