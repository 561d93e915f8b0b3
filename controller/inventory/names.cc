#include "controller/inventory/names.h"

namespace rsc::controller::inventory {

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

std::optional<std::string> dnsLabelError(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > kDnsLabelMaxLength) return tooLong(kDnsLabelMaxLength);
  if (!isDnsLabel(text)) {
    return "must be a lowercase RFC 1123 label: lower case alphanumeric characters or '-', "
           "starting and ending with an alphanumeric character";
  }
  return std::nullopt;
}

std::optional<std::string> dnsSubdomainError(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > kDnsSubdomainMaxLength) return tooLong(kDnsSubdomainMaxLength);
  if (!isDnsSubdomainShape(text)) return std::string(kSubdomainShape);
  return std::nullopt;
}

std::optional<std::string> driverNameError(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > kDriverNameMaxLength) return tooLong(kDriverNameMaxLength);
  if (!isDnsSubdomainShape(text)) return std::string(kSubdomainShape);
  return std::nullopt;
}

std::optional<std::string> poolNameError(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > kPoolNameMaxLength) return tooLong(kPoolNameMaxLength);
  size_t start = 0;
  while (true) {
    const size_t slash = text.find('/', start);
    const std::string_view part = text.substr(start, slash - start);
    if (!isDnsSubdomainShape(part)) {
      return "must consist of '/'-separated lowercase RFC 1123 subdomains";
    }
    if (slash == std::string_view::npos) return std::nullopt;
    start = slash + 1;
  }
}

std::optional<std::string> nodeNameError(std::string_view text) { return dnsSubdomainError(text); }

std::optional<std::string> deviceQualifiedNameError(std::string_view text) {
  if (text.empty()) return "must not be empty";
  const size_t slash = text.find('/');
  std::string_view id = text;
  if (slash != std::string_view::npos) {
    const std::string_view domain = text.substr(0, slash);
    id = text.substr(slash + 1);
    if (id.find('/') != std::string_view::npos) {
      return "must be a C identifier, optionally prefixed by a domain and '/'; "
             "more than one '/' is not allowed";
    }
    if (domain.empty()) return "the domain before '/' must not be empty";
    if (domain.size() > kDeviceMaxDomainLength) {
      return "the domain " + tooLong(kDeviceMaxDomainLength);
    }
    if (!isDnsSubdomainShape(domain)) return "the domain " + std::string(kSubdomainShape);
  }
  if (id.empty()) return "the name after the domain must not be empty";
  if (id.size() > kDeviceMaxIdLength) return "the name " + tooLong(kDeviceMaxIdLength);
  if (!isCIdentifier(id)) {
    return "the name must be a C identifier: letters, digits and '_', not starting with a digit";
  }
  return std::nullopt;
}

std::optional<std::string> labelKeyError(std::string_view text) {
  if (text.empty()) return "must not be empty";
  const size_t slash = text.find('/');
  std::string_view name = text;
  if (slash != std::string_view::npos) {
    const std::string_view prefix = text.substr(0, slash);
    name = text.substr(slash + 1);
    if (prefix.empty()) return "the prefix before '/' must not be empty";
    if (prefix.size() > kDnsSubdomainMaxLength) {
      return "the prefix " + tooLong(kDnsSubdomainMaxLength);
    }
    if (!isDnsSubdomainShape(prefix)) return "the prefix " + std::string(kSubdomainShape);
  }
  if (name.empty()) return "the name part must not be empty";
  if (name.size() > kDnsLabelMaxLength) return "the name part " + tooLong(kDnsLabelMaxLength);
  if (!isLabelName(name)) {
    return "the name part must consist of alphanumeric characters, '-', '_' or '.', "
           "starting and ending with an alphanumeric character";
  }
  return std::nullopt;
}

std::optional<std::string> labelValueError(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.size() > kLabelValueMaxLength) return tooLong(kLabelValueMaxLength);
  if (!isLabelName(text)) {
    return "must be empty or consist of alphanumeric characters, '-', '_' or '.', "
           "starting and ending with an alphanumeric character";
  }
  return std::nullopt;
}

std::optional<std::string> semverError(std::string_view text) {
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
  if (d1 == std::string_view::npos) return std::string(kMessage);
  const size_t d2 = core.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return std::string(kMessage);
  if (!isSemverNumber(core.substr(0, d1)) || !isSemverNumber(core.substr(d1 + 1, d2 - d1 - 1)) ||
      !isSemverNumber(core.substr(d2 + 1))) {
    return std::string(kMessage);
  }
  if (has_pre && !isSemverIdentifiers(pre, true)) return std::string(kMessage);
  if (has_build && !isSemverIdentifiers(build, false)) return std::string(kMessage);
  return std::nullopt;
}

}  // namespace rsc::controller::inventory
