#include "controller/http/http.h"

#include <utility>

namespace rsc::controller::http {

namespace {

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  auto it = headers.find(asciiLower(name));
  if (it == headers.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::optional<std::string_view> HttpResponse::header(std::string_view name) const {
  if (equalsIgnoreCase(name, "content-type") && !content_type.empty()) {
    return std::string_view(content_type);
  }
  for (const auto& [key, value] : headers) {
    if (equalsIgnoreCase(key, name)) return std::string_view(value);
  }
  return std::nullopt;
}

HttpResponse textResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

std::pair<std::string_view, std::string_view> splitTarget(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<std::string> percentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hexValue(text[i + 1]);
    const int lo = hexValue(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return std::nullopt;
    out.push_back(c);
    i += 2;
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    std::optional<std::string> key = percentDecode(part.substr(0, eq));
    std::optional<std::string> value =
        eq == std::string_view::npos ? std::string() : percentDecode(part.substr(eq + 1));
    if (!key || !value) return std::nullopt;
    out.emplace_back(std::move(*key), std::move(*value));
  }
  return out;
}

std::string asciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace rsc::controller::http
