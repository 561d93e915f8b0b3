#include "client/names.h"

namespace rsc::client {

namespace {

bool isLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool isAlnum(char c) { return isLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::string tooLong(size_t max) {
  return "must be no more than " + std::to_string(max) + " characters";
}

bool isDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > kDnsLabelMaxLength) return false;
  if (!isLowerAlnum(s.front()) || !isLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!isLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool isDnsSubdomainShape(std::string_view s) {
  if (s.empty()) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view label = s.substr(start, dot - start);
    if (label.empty() || !isLowerAlnum(label.front()) || !isLowerAlnum(label.back())) return false;
    for (char c : label) {
      if (!isLowerAlnum(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool isCIdentifier(std::string_view s) {
  if (s.empty()) return false;
  if (!(s.front() == '_' || (s.front() >= 'a' && s.front() <= 'z') ||
        (s.front() >= 'A' && s.front() <= 'Z'))) {
    return false;
  }
  for (char c : s) {
    if (!isAlnum(c) && c != '_') return false;
  }
  return true;
}

// The name part of a label key, and a non-empty label value.
bool isLabelName(std::string_view s) {
  if (s.empty()) return false;
  if (!isAlnum(s.front()) || !isAlnum(s.back())) return false;
  for (char c : s) {
    if (!isAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

constexpr std::string_view kSubdomainShape =
    "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', "
    "starting and ending with an alphanumeric character";

// What a name, or one part of a name, must be: no longer than max_length and
// of the shape `fits` checks, which `shape` describes.
struct NameRule {
  size_t max_length;
  bool (*fits)(std::string_view);
  std::string_view shape;
};

constexpr NameRule kDnsLabel{kDnsLabelMaxLength, isDnsLabel,
                             "must be a lowercase RFC 1123 label: lower case alphanumeric "
                             "characters or '-', starting and ending with an alphanumeric "
                             "character"};
constexpr NameRule kDnsSubdomain{kDnsSubdomainMaxLength, isDnsSubdomainShape, kSubdomainShape};
constexpr NameRule kDriverName{kDriverNameMaxLength, isDnsSubdomainShape, kSubdomainShape};
constexpr NameRule kDeviceDomain{kDeviceMaxDomainLength, isDnsSubdomainShape, kSubdomainShape};
constexpr NameRule kDeviceId{
    kDeviceMaxIdLength, isCIdentifier,
    "must be a C identifier: letters, digits and '_', not starting with a digit"};
constexpr NameRule kLabelName{kDnsLabelMaxLength, isLabelName,
                              "must consist of alphanumeric characters, '-', '_' or '.', starting "
                              "and ending with an alphanumeric character"};
constexpr NameRule kLabelValue{kLabelValueMaxLength, isLabelName,
                               "must be empty or consist of alphanumeric characters, '-', '_' or "
                               "'.', starting and ending with an alphanumeric character"};

// The first rule `text` breaks: `empty` when it is empty, else the length or
// the shape, prefixed by `what` ("the domain ").
Status ruleError(std::string_view text, const NameRule& rule,
                 std::string_view empty = "must not be empty", std::string_view what = "") {
  if (text.empty()) return invalidArgument(std::string(empty));
  if (text.size() > rule.max_length)
    return invalidArgument(std::string(what) + tooLong(rule.max_length));
  if (!rule.fits(text)) return invalidArgument(std::string(what).append(rule.shape));
  return okStatus();
}

// One part of a prefixed name, and how its errors name it.
struct PartRule {
  NameRule rule;
  std::string_view empty;
  std::string_view what;
};

// A name with an optional "prefix/" (a label key, a qualified device name).
// `two_slashes`, when not empty, refuses a second '/' before the parts are
// checked.
Status prefixedNameError(std::string_view text, const PartRule& prefix, const PartRule& name,
                         std::string_view two_slashes = "") {
  if (text.empty()) return invalidArgument("must not be empty");
  const size_t slash = text.find('/');
  std::string_view rest = text;
  if (slash != std::string_view::npos) {
    rest = text.substr(slash + 1);
    if (!two_slashes.empty() && rest.find('/') != std::string_view::npos) {
      return invalidArgument(std::string(two_slashes));
    }
    Status error = ruleError(text.substr(0, slash), prefix.rule, prefix.empty, prefix.what);
    if (!error.ok()) return error;
  }
  return ruleError(rest, name.rule, name.empty, name.what);
}

// One SemVer identifier list ("rc.1", "build.5"): non-empty dot-separated
// identifiers of [0-9A-Za-z-]; numeric ones without leading zeros when
// `numeric_no_leading_zero`.
bool isSemverIdentifiers(std::string_view s, bool numeric_no_leading_zero) {
  if (s.empty()) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view id = s.substr(start, dot - start);
    if (id.empty()) return false;
    bool all_digits = true;
    for (char c : id) {
      if (!isAlnum(c) && c != '-') return false;
      if (!isDigit(c)) all_digits = false;
    }
    if (numeric_no_leading_zero && all_digits && id.size() > 1 && id.front() == '0') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool isSemverNumber(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!isDigit(c)) return false;
  }
  return s.size() == 1 || s.front() != '0';
}

}  // namespace

Status dnsLabelError(std::string_view text) { return ruleError(text, kDnsLabel); }

Status dnsSubdomainError(std::string_view text) { return ruleError(text, kDnsSubdomain); }

Status driverNameError(std::string_view text) { return ruleError(text, kDriverName); }

Status poolNameError(std::string_view text) {
  if (text.empty()) return invalidArgument("must not be empty");
  if (text.size() > kPoolNameMaxLength) return invalidArgument(tooLong(kPoolNameMaxLength));
  size_t start = 0;
  while (true) {
    const size_t slash = text.find('/', start);
    const std::string_view part = text.substr(start, slash - start);
    if (!isDnsSubdomainShape(part)) {
      return invalidArgument("must consist of '/'-separated lowercase RFC 1123 subdomains");
    }
    if (slash == std::string_view::npos) return okStatus();
    start = slash + 1;
  }
}

Status nodeNameError(std::string_view text) { return dnsSubdomainError(text); }

Status deviceQualifiedNameError(std::string_view text) {
  return prefixedNameError(
      text, {kDeviceDomain, "the domain before '/' must not be empty", "the domain "},
      {kDeviceId, "the name after the domain must not be empty", "the name "},
      "must be a C identifier, optionally prefixed by a domain and '/'; more than one '/' is not "
      "allowed");
}

Status labelKeyError(std::string_view text) {
  // A second '/' falls to the name part's shape.
  return prefixedNameError(
      text, {kDnsSubdomain, "the prefix before '/' must not be empty", "the prefix "},
      {kLabelName, "the name part must not be empty", "the name part "});
}

Status labelValueError(std::string_view text) {
  if (text.empty()) return okStatus();
  return ruleError(text, kLabelValue);
}

Status semverError(std::string_view text) {
  constexpr std::string_view kMessage =
      "must be a semantic version (semver.org 2.0.0), such as 1.2.3";
  std::string_view core = text;
  std::string_view pre;
  std::string_view build;
  bool has_pre = false;
  bool has_build = false;
  if (const size_t plus = core.find('+'); plus != std::string_view::npos) {
    build = core.substr(plus + 1);
    core = core.substr(0, plus);
    has_build = true;
  }
  if (const size_t dash = core.find('-'); dash != std::string_view::npos) {
    pre = core.substr(dash + 1);
    core = core.substr(0, dash);
    has_pre = true;
  }
  // MAJOR.MINOR.PATCH
  const size_t d1 = core.find('.');
  if (d1 == std::string_view::npos) return invalidArgument(std::string(kMessage));
  const size_t d2 = core.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return invalidArgument(std::string(kMessage));
  if (!isSemverNumber(core.substr(0, d1)) || !isSemverNumber(core.substr(d1 + 1, d2 - d1 - 1)) ||
      !isSemverNumber(core.substr(d2 + 1))) {
    return invalidArgument(std::string(kMessage));
  }
  if (has_pre && !isSemverIdentifiers(pre, true)) return invalidArgument(std::string(kMessage));
  if (has_build && !isSemverIdentifiers(build, false))
    return invalidArgument(std::string(kMessage));
  return okStatus();
}

}  // namespace rsc::client
