#include "common/flag_set.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "common/duration.h"

namespace rsc {

std::string formatFlagDuration(Clock::Duration d) {
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 3'600'000 == 0 && ms != 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms != 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

void FlagSet::add(std::string name, std::string help, std::string default_text, Setter set) {
  flags_.push_back(
      {std::move(name), std::move(help), std::move(default_text), false, std::move(set)});
}

void FlagSet::addSwitch(std::string name, std::string help, bool* value) {
  add(std::move(name), std::move(help), *value ? "true" : "",
      [value](const std::string& v) -> std::optional<std::string> {
        if (v == "true" || v == "1" || v == "t" || v == "TRUE" || v == "True") {
          *value = true;
        } else if (v == "false" || v == "0" || v == "f" || v == "FALSE" || v == "False") {
          *value = false;
        } else {
          return "must be true or false, not \"" + v + "\"";
        }
        return std::nullopt;
      });
  flags_.back().boolean = true;
}

void FlagSet::addString(std::string name, std::string help, std::string* value) {
  add(std::move(name), std::move(help), *value, [value](const std::string& v) {
    *value = v;
    return std::optional<std::string>();
  });
}

void FlagSet::addText(std::string name, std::string help, std::string* value) {
  add(std::move(name), std::move(help), *value,
      [value](const std::string& v) -> std::optional<std::string> {
        if (v.empty()) return "must not be empty";
        *value = v;
        return std::nullopt;
      });
}

void FlagSet::addChoice(std::string name, std::string help, std::string* value,
                        std::vector<std::string> choices) {
  add(std::move(name), std::move(help), *value,
      [value, choices = std::move(choices)](const std::string& v) -> std::optional<std::string> {
        if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
          std::string want;
          for (size_t i = 0; i < choices.size(); ++i) {
            want += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
          }
          return "must be " + want + ", not \"" + v + "\"";
        }
        *value = v;
        return std::nullopt;
      });
}

void FlagSet::addList(std::string name, std::string help, std::vector<std::string>* value) {
  std::string shown;
  for (const std::string& item : *value) shown += (shown.empty() ? "" : ",") + item;
  add(std::move(name), std::move(help), shown,
      [value](const std::string& v) -> std::optional<std::string> {
        std::vector<std::string> items;
        size_t start = 0;
        while (start <= v.size()) {
          const size_t comma = std::min(v.find(',', start), v.size());
          if (comma == start) return "must be a comma-separated list without empty items";
          items.push_back(v.substr(start, comma - start));
          start = comma + 1;
        }
        *value = std::move(items);
        return std::nullopt;
      });
}

void FlagSet::addRate(std::string name, std::string help, double* value, bool zero_ok) {
  std::ostringstream shown;
  if (*value != 0) shown << *value;
  add(std::move(name), std::move(help), shown.str(),
      [value, zero_ok](const std::string& v) -> std::optional<std::string> {
        double q = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), q);
        if (ec != std::errc() || end != v.data() + v.size() || !(q > 0 || (zero_ok && q == 0))) {
          return std::string(zero_ok ? "must be a number >= 0" : "must be a positive number") +
                 ", not \"" + v + "\"";
        }
        *value = q;
        return std::nullopt;
      });
}

std::optional<long long> FlagSet::parseWholeNumber(const std::string& v) {
  long long n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return n;
}

StatusOr<Clock::Duration> FlagSet::parseFlagDuration(const std::string& v, Clock::Duration min) {
  ASSIGN_OR_RETURN(Clock::Duration d, parseDuration(v));
  if (d < min) return invalidArgument("must be at least " + formatFlagDuration(min));
  return d;
}

Status FlagSet::parse(const std::vector<std::string>& args) const {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      return invalidArgument("unexpected argument \"" + arg + "\" (flags start with --)");
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    if (name == "h") name = "help";
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const auto flag = std::find_if(flags_.begin(), flags_.end(),
                                   [&name](const Flag& f) { return f.name == name; });
    if (flag == flags_.end()) return invalidArgument("unknown flag --" + name + " (see --help)");
    if (!value) {
      if (flag->boolean) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return invalidArgument("flag --" + name + " needs a value");
      }
    }
    if (std::optional<std::string> why = flag->set(*value)) {
      return invalidArgument("flag --" + name + ": " + *why);
    }
  }
  return okStatus();
}

std::string FlagSet::usage() const {
  std::string out;
  for (const Flag& f : flags_) {
    out += "  --" + f.name + (f.boolean ? "" : " value") + "\n      " + f.help;
    if (!f.default_text.empty()) out += " (default " + f.default_text + ")";
    out += "\n";
  }
  return out;
}

}  // namespace rsc
