#include "client/config.h"

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "client/base64.h"
#include "common/log.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Files and small text helpers.

std::string trimmed(std::string_view s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end &&
         (s[begin] == ' ' || s[begin] == '\t' || s[begin] == '\n' || s[begin] == '\r')) {
    ++begin;
  }
  while (end > begin &&
         (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\n' || s[end - 1] == '\r')) {
    --end;
  }
  return std::string(s.substr(begin, end - begin));
}

// Reads a whole file; the error says "file X not found" or why it could not
// be read, for the caller to prefix with the field that named it.
StatusOr<std::string> readFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status(StatusCode::kNotFound, "file " + path.string() + " not found");
  }
  if (fs::is_directory(path, ec)) {
    return invalidArgument("file " + path.string() + " is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return failedPrecondition("cannot read file " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) {
    return failedPrecondition("cannot read file " + path.string());
  }
  return out.str();
}

bool fileExists(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// ---------------------------------------------------------------------------
// The YAML subset of kubeconfig files.

struct YamlLine {
  int number = 0;
  int indent = 0;
  std::string text;  // after the indentation, without comment or trailing blanks
};

bool opensQuote(const std::string& s, size_t i) {
  if (i == 0) {
    return true;
  }
  char prev = s[i - 1];
  return prev == ' ' || prev == '[' || prev == '{' || prev == ',';
}

// Splits text into YamlLines, dropping blank and comment-only lines.
StatusOr<std::vector<YamlLine>> splitLines(std::string_view text) {
  std::vector<YamlLine> lines;
  int number = 0;
  bool seen_content = false;
  size_t pos = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    pos = 3;  // UTF-8 byte order mark
  }
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string raw(text.substr(pos, end - pos));
    pos = end + 1;
    ++number;
    if (!raw.empty() && raw.back() == '\r') {
      raw.pop_back();
    }

    size_t indent = 0;
    while (indent < raw.size() && raw[indent] == ' ') {
      ++indent;
    }
    if (indent < raw.size() && raw[indent] == '\t') {
      size_t rest = raw.find_first_not_of(" \t", indent);
      if (rest != std::string::npos && raw[rest] != '#') {
        return invalidArgument("line " + std::to_string(number) +
                               ": tabs are not allowed for indentation");
      }
    }
    // Cut a comment: '#' at the start or after a blank, outside quotes.
    std::string content = raw.substr(indent);
    char quote = 0;
    for (size_t i = 0; i < content.size(); ++i) {
      char c = content[i];
      if (quote == '"') {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          quote = 0;
        }
      } else if (quote == '\'') {
        if (c == '\'') {
          if (i + 1 < content.size() && content[i + 1] == '\'') {
            ++i;
          } else {
            quote = 0;
          }
        }
      } else if ((c == '"' || c == '\'') && opensQuote(content, i)) {
        quote = c;
      } else if (c == '#' && (i == 0 || content[i - 1] == ' ' || content[i - 1] == '\t')) {
        content.resize(i);
        break;
      }
    }
    while (!content.empty() && (content.back() == ' ' || content.back() == '\t')) {
      content.pop_back();
    }
    if (content.empty()) {
      continue;
    }
    if (indent == 0 && (content == "---" || content.starts_with("--- "))) {
      if (seen_content) {
        return invalidArgument("line " + std::to_string(number) + ": more than one YAML document");
      }
      content = trimmed(std::string_view(content).substr(3));
      if (content.empty()) {
        continue;
      }
    }
    if (indent == 0 && content == "...") {
      break;
    }
    if (indent == 0 && content[0] == '%') {
      return invalidArgument("line " + std::to_string(number) +
                             ": YAML directives are not supported");
    }
    seen_content = true;
    lines.push_back({number, static_cast<int>(indent), std::move(content)});
  }
  return lines;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Parses the values that fit on one line: scalars and flow collections.
class InlineParser {
 public:
  InlineParser(std::string_view text, int line) : text_(text), line_(line) {}

  // Parses the whole text as one value.
  StatusOr<Json> parseAll() {
    ASSIGN_OR_RETURN(Json value, parseValue(/*in_flow=*/false));
    skipBlanks();
    if (pos_ != text_.size()) {
      return error("unexpected text after the value: '" + std::string(text_.substr(pos_)) + "'");
    }
    return value;
  }

  // Parses a quoted scalar at the start of the text and returns it with the
  // number of characters it used.
  StatusOr<std::pair<std::string, size_t>> quotedPrefix() {
    ASSIGN_OR_RETURN(std::string value, parseQuoted());
    return std::make_pair(std::move(value), pos_);
  }

 private:
  Status error(const std::string& message) const {
    return invalidArgument("line " + std::to_string(line_) + ": " + message);
  }

  void skipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  StatusOr<Json> parseValue(bool in_flow) {
    skipBlanks();
    if (pos_ >= text_.size()) {
      return Json(nullptr);
    }
    char c = text_[pos_];
    if (c == '"' || c == '\'') {
      ASSIGN_OR_RETURN(std::string s, parseQuoted());
      return Json(std::move(s));
    }
    if (c == '[') {
      return parseFlowSequence();
    }
    if (c == '{') {
      return parseFlowMapping();
    }
    if (c == '&' || c == '*' || c == '!') {
      return error("anchors, aliases and tags are not supported");
    }
    if (c == '|' || c == '>') {
      return error("block scalars ('|' and '>') are not supported");
    }
    if (c == '@' || c == '`') {
      return error("a plain value cannot start with '" + std::string(1, c) + "'");
    }
    // A plain scalar: to the end of the text, or in a flow collection to the
    // next ',', ']' or '}'.
    size_t start = pos_;
    while (pos_ < text_.size()) {
      char d = text_[pos_];
      if (in_flow && (d == ',' || d == ']' || d == '}')) {
        break;
      }
      if (in_flow && d == ':' && (pos_ + 1 == text_.size() || text_[pos_ + 1] == ' ')) {
        break;
      }
      ++pos_;
    }
    return plainScalar(trimmed(text_.substr(start, pos_ - start)));
  }

  static Json plainScalar(const std::string& s) {
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
      return nullptr;
    }
    if (s == "true" || s == "True" || s == "TRUE") {
      return true;
    }
    if (s == "false" || s == "False" || s == "FALSE") {
      return false;
    }
    size_t digits = s[0] == '-' || s[0] == '+' ? 1 : 0;
    if (digits < s.size() && s.size() - digits <= 18 &&
        s.find_first_not_of("0123456789", digits) == std::string::npos) {
      return static_cast<int64_t>(std::strtoll(s.c_str(), nullptr, 10));
    }
    return s;
  }

  StatusOr<std::string> parseQuoted() {
    char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (quote == '\'') {
        if (c != '\'') {
          out.push_back(c);
        } else if (pos_ < text_.size() && text_[pos_] == '\'') {
          out.push_back('\'');
          ++pos_;
        } else {
          return out;
        }
        continue;
      }
      if (c == '"') {
        return out;
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) {
        break;
      }
      char e = text_[pos_++];
      switch (e) {
        case '0':
          out.push_back('\0');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'e':
          out.push_back('\x1b');
          break;
        case ' ':
          out.push_back(' ');
          break;
        case '"':
          out.push_back('"');
          break;
        case '/':
          out.push_back('/');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > text_.size()) {
            return error("incomplete escape \\" + std::string(1, e));
          }
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            char h = text_[pos_++];
            int v = (h >= '0' && h <= '9')   ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (v < 0) {
              return error("bad hex digit in escape \\" + std::string(1, e));
            }
            cp = cp * 16 + static_cast<uint32_t>(v);
          }
          if (cp > 0x10FFFF) {
            return error("escape \\" + std::string(1, e) + " out of range");
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          return error("unknown escape \\" + std::string(1, e) + " in a double-quoted value");
      }
    }
    return error(std::string("unterminated ") + (quote == '"' ? "double" : "single") +
                 "-quoted value (multi-line values are not supported)");
  }

  StatusOr<Json> parseFlowSequence() {
    ++pos_;  // '['
    Json out = Json::array();
    skipBlanks();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return out;
    }
    while (true) {
      ASSIGN_OR_RETURN(Json item, parseValue(/*in_flow=*/true));
      out.push_back(std::move(item));
      skipBlanks();
      if (pos_ >= text_.size()) {
        return error("unterminated '[' (multi-line flow is not supported)");
      }
      char c = text_[pos_++];
      if (c == ']') {
        return out;
      }
      if (c != ',') {
        return error("expected ',' or ']' in a flow sequence");
      }
      skipBlanks();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return out;
      }
    }
  }

  StatusOr<Json> parseFlowMapping() {
    ++pos_;  // '{'
    Json out = Json::object();
    skipBlanks();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return out;
    }
    while (true) {
      ASSIGN_OR_RETURN(Json key, parseValue(/*in_flow=*/true));
      if (key.is_object() || key.is_array() || key.is_null()) {
        return error("a flow mapping key must be a scalar");
      }
      std::string name = key.is_string() ? key.get<std::string>() : key.dump();
      skipBlanks();
      if (pos_ >= text_.size() || text_[pos_] != ':') {
        return error("expected ':' after key '" + name + "' in a flow mapping");
      }
      ++pos_;
      ASSIGN_OR_RETURN(Json value, parseValue(/*in_flow=*/true));
      if (out.contains(name)) {
        return error("duplicate key '" + name + "'");
      }
      out[name] = std::move(value);
      skipBlanks();
      if (pos_ >= text_.size()) {
        return error("unterminated '{' (multi-line flow is not supported)");
      }
      char c = text_[pos_++];
      if (c == '}') {
        return out;
      }
      if (c != ',') {
        return error("expected ',' or '}' in a flow mapping");
      }
    }
  }

  std::string_view text_;
  int line_;
  size_t pos_ = 0;
};

bool isSequenceItem(std::string_view text) { return text == "-" || text.starts_with("- "); }

// Parses block mappings and sequences over the lines, one node at a time.
class BlockParser {
 public:
  explicit BlockParser(std::vector<YamlLine> lines) : lines_(std::move(lines)) {}

  StatusOr<Json> parseDocument() {
    if (lines_.empty()) {
      return Json(nullptr);
    }
    ASSIGN_OR_RETURN(Json root, parseNode());
    if (pos_ < lines_.size()) {
      return error(lines_[pos_], "unexpected indentation");
    }
    return root;
  }

 private:
  static Status error(const YamlLine& line, const std::string& message) {
    return invalidArgument("line " + std::to_string(line.number) + ": " + message);
  }

  // Where the ':' after a mapping key is, or npos when `text` is not
  // "key: value". Sets `key` to the unquoted key.
  static StatusOr<size_t> findKey(const YamlLine& line, std::string_view text, std::string* key) {
    if (text.empty()) {
      return std::string_view::npos;
    }
    if (text[0] == '[' || text[0] == '{') {
      return std::string_view::npos;
    }
    if (text[0] == '?' && (text.size() == 1 || text[1] == ' ')) {
      return error(line, "complex mapping keys ('? ') are not supported");
    }
    if (text[0] == '"' || text[0] == '\'') {
      InlineParser parser(text, line.number);
      auto quoted = parser.quotedPrefix();
      if (!quoted.ok()) {
        return std::string_view::npos;  // a quoted value, reported later
      }
      size_t i = quoted->second;
      while (i < text.size() && text[i] == ' ') {
        ++i;
      }
      if (i < text.size() && text[i] == ':' && (i + 1 == text.size() || text[i + 1] == ' ')) {
        *key = quoted->first;
        return i;
      }
      return std::string_view::npos;
    }
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == ':' && (i + 1 == text.size() || text[i + 1] == ' ')) {
        *key = trimmed(text.substr(0, i));
        return i;
      }
    }
    return std::string_view::npos;
  }

  // Parses the node that starts at the current line.
  StatusOr<Json> parseNode() {
    const YamlLine& line = lines_[pos_];
    if (isSequenceItem(line.text)) {
      return parseSequence(line.indent);
    }
    std::string key;
    ASSIGN_OR_RETURN(size_t colon, findKey(line, line.text, &key));
    if (colon != std::string_view::npos) {
      return parseMapping(line.indent);
    }
    ++pos_;
    return InlineParser(line.text, line.number).parseAll();
  }

  // Parses the value after "key:" whose text on the key's line is `rest`.
  StatusOr<Json> parseValueAfterKey(const YamlLine& line, const std::string& rest, int indent) {
    if (!rest.empty()) {
      return InlineParser(rest, line.number).parseAll();
    }
    if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
      return parseNode();
    }
    // A sequence may sit at the key's own indentation ("users:\n- name: a").
    if (pos_ < lines_.size() && lines_[pos_].indent == indent &&
        isSequenceItem(lines_[pos_].text)) {
      return parseSequence(indent);
    }
    return Json(nullptr);
  }

  StatusOr<Json> parseMapping(int indent) {
    Json out = Json::object();
    while (pos_ < lines_.size()) {
      const YamlLine line = lines_[pos_];
      if (line.indent < indent) {
        break;
      }
      if (line.indent > indent) {
        return error(line, "unexpected indentation (multi-line values are not supported)");
      }
      if (isSequenceItem(line.text)) {
        return error(line, "a list item where a mapping key was expected");
      }
      std::string key;
      ASSIGN_OR_RETURN(size_t colon, findKey(line, line.text, &key));
      if (colon == std::string_view::npos) {
        return error(line, "expected 'key: value'");
      }
      if (key.empty()) {
        return error(line, "empty mapping key");
      }
      if (out.contains(key)) {
        return error(line, "duplicate key '" + key + "'");
      }
      ++pos_;
      ASSIGN_OR_RETURN(Json value,
                       parseValueAfterKey(line, trimmed(line.text.substr(colon + 1)), indent));
      out[key] = std::move(value);
    }
    return out;
  }

  StatusOr<Json> parseSequence(int indent) {
    Json out = Json::array();
    while (pos_ < lines_.size()) {
      YamlLine& line = lines_[pos_];
      if (line.indent < indent) {
        break;
      }
      if (line.indent > indent) {
        return error(line, "unexpected indentation");
      }
      if (!isSequenceItem(line.text)) {
        break;  // the parent mapping's next key
      }
      size_t offset = 1;
      while (offset < line.text.size() && line.text[offset] == ' ') {
        ++offset;
      }
      std::string rest = line.text.substr(offset);
      if (rest.empty()) {
        ++pos_;
        if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
          ASSIGN_OR_RETURN(Json item, parseNode());
          out.push_back(std::move(item));
        } else {
          out.push_back(nullptr);
        }
        continue;
      }
      std::string key;
      ASSIGN_OR_RETURN(size_t colon, findKey(line, rest, &key));
      if (colon != std::string_view::npos || isSequenceItem(rest)) {
        // "- key: value" opens a mapping (or "- - x" a sequence) whose
        // indentation is the column of its first key: parse this line again
        // as if it started there.
        line.indent += static_cast<int>(offset);
        line.text = rest;
        ASSIGN_OR_RETURN(Json item, parseNode());
        out.push_back(std::move(item));
        continue;
      }
      ++pos_;
      ASSIGN_OR_RETURN(Json item, InlineParser(rest, line.number).parseAll());
      out.push_back(std::move(item));
    }
    return out;
  }

  std::vector<YamlLine> lines_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// Kubeconfig interpretation.

struct KubeconfigFile {
  fs::path path;
  Json root;
};

// A named cluster, user or context, with where it was defined.
struct NamedEntry {
  const Json* body = nullptr;  // the "cluster", "user" or "context" mapping
  const KubeconfigFile* file = nullptr;
  std::string field;  // "clusters[0].cluster"
};

std::string filePrefix(const KubeconfigFile& file) { return "kubeconfig " + file.path.string(); }

Status entryError(const NamedEntry& entry, const std::string& key, const std::string& message) {
  return invalidArgument(filePrefix(*entry.file) + ": " + entry.field + "." + key + ": " + message);
}

StatusOr<std::string> stringAt(const NamedEntry& entry, const std::string& key) {
  auto it = entry.body->find(key);
  if (it == entry.body->end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return entryError(entry, key, "must be a string");
  }
  return it->get<std::string>();
}

bool hasValue(const NamedEntry& entry, const std::string& key) {
  auto it = entry.body->find(key);
  if (it == entry.body->end() || it->is_null()) {
    return false;
  }
  if (it->is_string()) {
    return !it->get<std::string>().empty();
  }
  if (it->is_object() || it->is_array()) {
    return !it->empty();
  }
  return true;
}

// Reads a file named by a field, relative to the kubeconfig's folder.
StatusOr<std::string> readReferencedFile(const NamedEntry& entry, const std::string& key,
                                         const std::string& name) {
  fs::path path(name);
  if (path.is_relative()) {
    path = entry.file->path.parent_path() / path;
  }
  auto content = readFile(path);
  if (!content.ok()) {
    return entryError(entry, key, content.status().message());
  }
  return content;
}

// Reads PEM data given inline (base64, "-data") or as a file.
StatusOr<std::string> pemField(const NamedEntry& entry, const std::string& file_key) {
  const std::string data_key = file_key + "-data";
  ASSIGN_OR_RETURN(std::string file, stringAt(entry, file_key));
  ASSIGN_OR_RETURN(std::string data, stringAt(entry, data_key));
  if (!file.empty() && !data.empty()) {
    return invalidArgument(filePrefix(*entry.file) + ": " + entry.field + ": " + file_key +
                           " and " + data_key + " are both set; set one");
  }
  std::string pem;
  std::string key = data_key;
  if (!data.empty()) {
    auto decoded = decodeBase64(data);
    if (!decoded) {
      return entryError(entry, data_key, "not valid base64");
    }
    pem = std::move(*decoded);
  } else if (!file.empty()) {
    ASSIGN_OR_RETURN(pem, readReferencedFile(entry, file_key, file));
    key = file_key;
  } else {
    return std::string();
  }
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return entryError(entry, key, "does not contain PEM data");
  }
  return pem;
}

Status collectEntries(const KubeconfigFile& file, const char* list_key, const char* body_key,
                      std::map<std::string, NamedEntry>& out) {
  auto it = file.root.find(list_key);
  if (it == file.root.end() || it->is_null()) {
    return okStatus();
  }
  if (!it->is_array()) {
    return invalidArgument(filePrefix(file) + ": " + list_key + ": must be a list");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& item = (*it)[i];
    const std::string field = std::string(list_key) + "[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      return invalidArgument(filePrefix(file) + ": " + field + ": must be a mapping");
    }
    auto name = item.find("name");
    if (name == item.end() || !name->is_string() || name->get<std::string>().empty()) {
      return invalidArgument(filePrefix(file) + ": " + field + ".name: missing");
    }
    auto body = item.find(body_key);
    if (body == item.end() || !body->is_object()) {
      return invalidArgument(filePrefix(file) + ": " + field + "." + body_key +
                             ": missing or not a mapping");
    }
    // The first definition of a name wins, as kubectl merges.
    out.try_emplace(name->get<std::string>(), NamedEntry{&*body, &file, field + "." + body_key});
  }
  return okStatus();
}

Status applyCluster(const NamedEntry& cluster, ClientConfig& config) {
  if (hasValue(cluster, "proxy-url")) {
    return entryError(cluster, "proxy-url", "is not supported");
  }
  ASSIGN_OR_RETURN(config.server, stringAt(cluster, "server"));
  if (config.server.empty()) {
    return entryError(cluster, "server", "missing");
  }
  if (!config.server.starts_with("https://") && !config.server.starts_with("http://")) {
    return entryError(cluster, "server",
                      "\"" + config.server + "\" is not an http:// or https:// URL");
  }
  while (config.server.size() > 8 && config.server.back() == '/') {
    config.server.pop_back();
  }
  ASSIGN_OR_RETURN(config.ca_pem, pemField(cluster, "certificate-authority"));
  if (auto it = cluster.body->find("insecure-skip-tls-verify");
      it != cluster.body->end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return entryError(cluster, "insecure-skip-tls-verify", "must be true or false");
    }
    config.insecure_skip_tls_verify = it->get<bool>();
  }
  if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    return entryError(cluster, "insecure-skip-tls-verify",
                      "cannot be used together with a certificate authority");
  }
  ASSIGN_OR_RETURN(config.tls_server_name, stringAt(cluster, "tls-server-name"));
  return okStatus();
}

Status applyUser(const NamedEntry& user, ClientConfig& config) {
  struct Unsupported {
    const char* key;
    const char* what;
  };
  static constexpr auto kUnsupported = std::to_array<Unsupported>({
      {"exec", "exec credential plugins are not supported"},
      {"auth-provider", "auth providers are not supported"},
      {"username", "basic authentication is not supported"},
      {"password", "basic authentication is not supported"},
      {"as", "impersonation is not supported"},
      {"as-uid", "impersonation is not supported"},
      {"as-groups", "impersonation is not supported"},
      {"as-user-extra", "impersonation is not supported"},
  });
  for (const auto& u : kUnsupported) {
    if (hasValue(user, u.key)) {
      return entryError(user, u.key,
                        std::string(u.what) + "; use a token, tokenFile or client certificate");
    }
  }
  ASSIGN_OR_RETURN(config.client_cert_pem, pemField(user, "client-certificate"));
  ASSIGN_OR_RETURN(config.client_key_pem, pemField(user, "client-key"));
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    const char* missing = config.client_cert_pem.empty() ? "client-certificate" : "client-key";
    const char* present = config.client_cert_pem.empty() ? "client-key" : "client-certificate";
    return entryError(user, missing, std::string("missing, but ") + present + " is set");
  }
  ASSIGN_OR_RETURN(config.bearer_token, stringAt(user, "token"));
  ASSIGN_OR_RETURN(std::string token_file, stringAt(user, "tokenFile"));
  if (!token_file.empty()) {
    fs::path path(token_file);
    if (path.is_relative()) {
      path = user.file->path.parent_path() / path;
    }
    // Read once now so that a missing file fails at startup, not at the
    // first request.
    RETURN_IF_ERROR(readReferencedFile(user, "tokenFile", path.string()).status());
    config.token_file = path.string();
  }
  return okStatus();
}

StatusOr<KubeconfigFile> readKubeconfigFile(const fs::path& path) {
  KubeconfigFile file{path, Json()};
  auto text = readFile(path);
  if (!text.ok()) {
    return text.status().withContext("kubeconfig");
  }
  auto root = parseKubeconfigText(*text);
  if (!root.ok()) {
    return root.status().withContext(filePrefix(file));
  }
  file.root = std::move(*root);
  if (file.root.is_null()) {
    file.root = Json::object();
  }
  if (!file.root.is_object()) {
    return invalidArgument(filePrefix(file) + ": the top level must be a mapping");
  }
  return file;
}

std::string joinPaths(const std::vector<fs::path>& files) {
  std::string out;
  for (const auto& f : files) {
    if (!out.empty()) {
      out += ", ";
    }
    out += f.string();
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------

std::optional<std::string> ConfigEnvironment::get(const std::string& name) const {
  auto it = variables.find(name);
  if (it == variables.end() || it->second.empty()) {
    return std::nullopt;
  }
  return it->second;
}

ConfigEnvironment ConfigEnvironment::fromProcess() {
  ConfigEnvironment env;
  for (const char* name : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
                           "KUBECONFIG", "HOME"}) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at startup.
    if (const char* value = std::getenv(name)) {
      env.variables[name] = value;
    }
  }
  return env;
}

StatusOr<Json> parseKubeconfigText(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) {
      // Not JSON after all: YAML flow mappings also start with '{'.
      auto lines = splitLines(text);
      if (!lines.ok()) {
        return lines.status();
      }
      return BlockParser(std::move(*lines)).parseDocument();
    }
    return root;
  }
  ASSIGN_OR_RETURN(auto lines, splitLines(text));
  return BlockParser(std::move(lines)).parseDocument();
}

StatusOr<ClientConfig> loadKubeconfig(const std::vector<fs::path>& paths) {
  if (paths.empty()) {
    return invalidArgument("kubeconfig: no file given");
  }
  // Parse every file; entries point into `files`, which must not move.
  std::vector<KubeconfigFile> files;
  files.reserve(paths.size());
  for (const auto& path : paths) {
    ASSIGN_OR_RETURN(KubeconfigFile file, readKubeconfigFile(path));
    files.push_back(std::move(file));
  }

  // Merge: the first file to define a name (or current-context) wins.
  std::map<std::string, NamedEntry> clusters;
  std::map<std::string, NamedEntry> users;
  std::map<std::string, NamedEntry> contexts;
  std::string current_context;
  const KubeconfigFile* current_context_file = nullptr;
  for (const auto& file : files) {
    RETURN_IF_ERROR(collectEntries(file, "clusters", "cluster", clusters));
    RETURN_IF_ERROR(collectEntries(file, "users", "user", users));
    RETURN_IF_ERROR(collectEntries(file, "contexts", "context", contexts));
    auto it = file.root.find("current-context");
    if (it == file.root.end() || it->is_null()) {
      continue;
    }
    if (!it->is_string()) {
      return invalidArgument(filePrefix(file) + ": current-context: must be a string");
    }
    if (current_context.empty() && !it->get<std::string>().empty()) {
      current_context = it->get<std::string>();
      current_context_file = &file;
    }
  }
  if (current_context_file == nullptr) {  // set with a non-empty current_context
    return invalidArgument("kubeconfig " + joinPaths(paths) + ": current-context is not set");
  }

  // Select the context, then its cluster and user.
  auto context_it = contexts.find(current_context);
  if (context_it == contexts.end()) {
    return invalidArgument(filePrefix(*current_context_file) + ": current-context: context \"" +
                           current_context + "\" not found");
  }
  const NamedEntry& context = context_it->second;
  ASSIGN_OR_RETURN(std::string cluster_name, stringAt(context, "cluster"));
  ASSIGN_OR_RETURN(std::string user_name, stringAt(context, "user"));
  ASSIGN_OR_RETURN(std::string namespace_name, stringAt(context, "namespace"));
  if (cluster_name.empty()) {
    return entryError(context, "cluster", "missing");
  }
  auto cluster_it = clusters.find(cluster_name);
  if (cluster_it == clusters.end()) {
    return entryError(context, "cluster", "cluster \"" + cluster_name + "\" not found");
  }

  ClientConfig config;
  RETURN_IF_ERROR(applyCluster(cluster_it->second, config));
  if (!user_name.empty()) {
    auto user_it = users.find(user_name);
    if (user_it == users.end()) {
      return entryError(context, "user", "user \"" + user_name + "\" not found");
    }
    RETURN_IF_ERROR(applyUser(user_it->second, config));
  }
  if (!namespace_name.empty()) {
    config.namespace_ = namespace_name;
  }
  config.source = "kubeconfig " + joinPaths(paths) + ", context " + current_context;
  return config;
}

StatusOr<ClientConfig> loadInClusterConfig(const ConfigEnvironment& env) {
  auto host = env.get("KUBERNETES_SERVICE_HOST");
  auto port = env.get("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    return failedPrecondition(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  ClientConfig config;
  // An IPv6 literal needs brackets in a URL.
  const bool ipv6 = host->find(':') != std::string::npos && host->front() != '[';
  config.server = "https://" + (ipv6 ? "[" + *host + "]" : *host) + ":" + *port;

  const fs::path token_file = env.service_account_dir / "token";
  auto token = readFile(token_file);
  if (!token.ok()) {
    return token.status().withContext("in-cluster config: token");
  }
  config.token_file = token_file.string();

  auto ca = readFile(env.service_account_dir / "ca.crt");
  if (!ca.ok()) {
    return ca.status().withContext("in-cluster config: CA");
  }
  if (ca->find("-----BEGIN ") == std::string::npos) {
    return invalidArgument(
        "in-cluster config: CA: " + (env.service_account_dir / "ca.crt").string() +
        " does not contain PEM data");
  }
  config.ca_pem = std::move(*ca);

  if (auto ns = env.get("POD_NAMESPACE")) {
    config.namespace_ = *ns;
  } else if (auto file = readFile(env.service_account_dir / "namespace"); file.ok()) {
    std::string ns_name = trimmed(*file);
    if (!ns_name.empty()) {
      config.namespace_ = ns_name;
    }
  }
  config.source = "in-cluster";
  return config;
}

StatusOr<ClientConfig> loadConfig(const std::string& explicit_kubeconfig_path,
                                  const ConfigEnvironment& env) {
  // 1. --kubeconfig: it must exist.
  if (!explicit_kubeconfig_path.empty()) {
    return loadKubeconfig({explicit_kubeconfig_path});
  }

  // 2. In-cluster, when the environment says so and a token is mounted (a pod
  // without automounted credentials may still bring its own kubeconfig).
  std::string tried;
  if (env.get("KUBERNETES_SERVICE_HOST") && env.get("KUBERNETES_SERVICE_PORT")) {
    if (fileExists(env.service_account_dir / "token")) {
      return loadInClusterConfig(env);
    }
    tried = "in-cluster (" + (env.service_account_dir / "token").string() + " not found)";
  } else {
    tried = "in-cluster (KUBERNETES_SERVICE_HOST/PORT not set)";
  }

  // 3. $KUBECONFIG: the files of the list that exist, merged.
  if (auto list = env.get("KUBECONFIG")) {
    std::vector<fs::path> existing;
    std::stringstream items(*list);
    std::string item;
    while (std::getline(items, item, ':')) {
      if (!item.empty() && fileExists(item)) {
        existing.emplace_back(item);
      }
    }
    if (!existing.empty()) {
      return loadKubeconfig(existing);
    }
    tried += ", $KUBECONFIG (no file of \"" + *list + "\" exists)";
  } else {
    tried += ", $KUBECONFIG (not set)";
  }

  // 4. ~/.kube/config.
  if (auto home = env.get("HOME")) {
    fs::path path = fs::path(*home) / ".kube" / "config";
    if (fileExists(path)) {
      return loadKubeconfig({path});
    }
    tried += ", " + path.string() + " (not found)";
  } else {
    tried += ", ~/.kube/config ($HOME not set)";
  }
  return failedPrecondition("no Kubernetes client configuration found; tried " + tried +
                            "; pass --kubeconfig");
}

// ---------------------------------------------------------------------------

BearerTokenSource::BearerTokenSource(std::string token, std::string token_file, Clock& clock)
    : token_file_(std::move(token_file)), clock_(clock), token_(std::move(token)) {}

void BearerTokenSource::reload() {
  read_at_ = clock_.now();
  auto content = readFile(token_file_);
  if (!content.ok()) {
    log::warning("cannot re-read the bearer token file; keeping the last token",
                 {{"file", token_file_}, {"error", content.status().message()}});
    return;
  }
  std::string token = trimmed(*content);
  if (!token.empty()) {
    token_ = std::move(token);
  }
}

std::string BearerTokenSource::token() {
  std::lock_guard lock(mu_);
  if (!token_file_.empty() && (!read_at_ || clock_.now() - *read_at_ >= kRereadInterval)) {
    reload();
  }
  return token_;
}

bool BearerTokenSource::reloadAfterUnauthorized() {
  if (token_file_.empty()) {
    return false;
  }
  std::lock_guard lock(mu_);
  std::string before = token_;
  reload();
  return token_ != before;
}

}  // namespace rsc::client
