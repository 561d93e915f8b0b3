#include "common/flag_set.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/duration.h"
#include "common/strings.h"

namespace rsc {

std::string formatFlagDuration(Clock::Duration d) {
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 3'600'000 == 0 && ms != 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms != 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

void FlagSet::add(std::string name, std::string help, std::string default_text, Setter set) {
  Flag& flag = flags_.emplace_back();
  flag.name = std::move(name);
  flag.help = std::move(help);
  flag.default_text = std::move(default_text);
  flag.set = std::move(set);
}

void FlagSet::addSwitch(std::string name, std::string help, bool* value) {
  add(std::move(name), std::move(help), *value ? "true" : "",
      [value](const std::string& v) -> std::optional<std::string> {
        const StatusOr<bool> on = parseSwitch(v);
        if (!on.ok()) return on.status().message();
        *value = *on;
        return std::nullopt;
      });
  flags_.back().bare = "true";
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
        if (Status refused = checkChoice(v, choices); !refused.ok()) return refused.message();
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
        for (const std::string_view item : split(v, ',')) {
          if (item.empty()) return "must be a comma-separated list without empty items";
          items.emplace_back(item);
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
                 ", not " + inQuotes(v);
        }
        *value = q;
        return std::nullopt;
      });
}

StatusOr<bool> FlagSet::parseSwitch(const std::string& v) {
  if (v == "true" || v == "1" || v == "t" || v == "TRUE" || v == "True") return true;
  if (v == "false" || v == "0" || v == "f" || v == "FALSE" || v == "False") return false;
  return invalidArgument("must be true or false, not " + inQuotes(v));
}

Status FlagSet::checkChoice(const std::string& v, const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return okStatus();
  std::string want;
  for (size_t i = 0; i < choices.size(); ++i) {
    want += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return invalidArgument("must be " + want + ", not " + inQuotes(v));
}

StatusOr<Clock::Duration> FlagSet::parseFlagDuration(const std::string& v, Clock::Duration min) {
  ASSIGN_OR_RETURN(Clock::Duration d, parseDuration(v));
  if (d < min) return invalidArgument("must be at least " + formatFlagDuration(min));
  return d;
}

FlagSet::Flag& FlagSet::find(const std::string& name) {
  const auto flag =
      std::find_if(flags_.begin(), flags_.end(), [&name](const Flag& f) { return f.name == name; });
  if (flag == flags_.end()) {
    std::fprintf(stderr, "FlagSet: no flag --%s\n", name.c_str());
    std::abort();  // a shorthand or bare value for a flag not added
  }
  return *flag;
}

void FlagSet::shorthand(const std::string& name, char letter) { find(name).shorthand = letter; }

void FlagSet::optionalValue(const std::string& name, std::string bare) {
  find(name).bare = std::move(bare);
}

FlagSet::Given FlagSet::lookUp(const std::string& arg) const {
  // --name[=value]; -name[=value] as Go's flag package; -c, -cvalue, -c=value.
  const bool dashes = arg.starts_with("--");
  Given given;
  std::string name = arg.substr(dashes ? 2 : 1);
  if (const size_t eq = name.find('='); eq != std::string::npos) {
    given.value = name.substr(eq + 1);
    name.resize(eq);
  }
  given.spelled = (dashes ? "--" : "-") + name;
  for (const Flag& f : flags_) {
    if (f.name == name) given.flag = &f;
  }
  if (given.flag != nullptr || dashes) return given;
  for (const Flag& f : flags_) {
    if (f.shorthand == 0 || f.shorthand != arg[1]) continue;
    given.flag = &f;
    given.spelled = arg.substr(0, 2);
    if (arg.size() > 2) given.value = arg.substr(arg[2] == '=' ? 3 : 2);
  }
  return given;
}

Status FlagSet::apply(const std::vector<std::string>& args, size_t& i) const {
  Given given = lookUp(args[i]);
  if (given.flag == nullptr) {
    return invalidArgument("unknown flag " + given.spelled +
                           (scope_.empty() ? "" : " for " + scope_) + " (see --help)");
  }
  const std::string& name = given.flag->name;
  if (!given.value) {
    if (given.flag->bare) {
      given.value = given.flag->bare;
    } else if (i + 1 < args.size()) {
      given.value = args[++i];
    } else {
      return invalidArgument("flag --" + name + " needs a value");
    }
  }
  if (std::optional<std::string> why = given.flag->set(*given.value)) {
    return invalidArgument("flag --" + name + ": " + *why);
  }
  return okStatus();
}

StatusOr<std::vector<std::string>> FlagSet::parseInterspersed(
    const std::vector<std::string>& args) const {
  std::vector<std::string> arguments;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      arguments.insert(arguments.end(), args.begin() + static_cast<ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (args[i].size() < 2 || args[i][0] != '-') {
      arguments.push_back(args[i]);
      continue;
    }
    RETURN_IF_ERROR(apply(args, i));
  }
  return arguments;
}

Status FlagSet::parse(const std::vector<std::string>& args) const {
  ASSIGN_OR_RETURN(const std::vector<std::string> arguments, parseInterspersed(args));
  if (!arguments.empty()) {
    return invalidArgument("unexpected argument " + inQuotes(arguments.front()) +
                           " (flags start with --)");
  }
  return okStatus();
}

std::optional<size_t> FlagSet::firstArgument(const std::vector<std::string>& args) const {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return i + 1 < args.size() ? std::optional(i + 1) : std::nullopt;
    if (arg.size() < 2 || arg[0] != '-') return i;
    const Given given = lookUp(arg);
    if (given.flag != nullptr && !given.value && !given.flag->bare) ++i;
  }
  return std::nullopt;
}

std::string FlagSet::usage() const {
  std::string out;
  for (const Flag& f : flags_) {
    out += "  ";
    if (f.shorthand != 0) out += std::string{'-', f.shorthand, ',', ' '};
    out += "--" + f.name;
    if (f.bare != "true") out += f.bare ? "[=value]" : " value";
    out += "\n      " + f.help;
    if (!f.default_text.empty()) out += " (default " + f.default_text + ")";
    out += "\n";
  }
  return out;
}

}  // namespace rsc
