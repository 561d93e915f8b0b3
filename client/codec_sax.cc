#include "client/codec_sax.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

namespace rsc::client::codec {

Json SaxScalar::toJson() const {
  switch (kind) {
    case Kind::kNull:
      return nullptr;
    case Kind::kBool:
      return boolean;
    case Kind::kInteger:
      return integer;
    case Kind::kUnsigned:
      return unsigned_integer;
    case Kind::kFloat:
      return floating;
    case Kind::kString:
      return std::move(*string);
  }
  return nullptr;
}

// ---- CanonicalText ------------------------------------------------------------

void CanonicalText::clear() {
  out_.clear();
  keys_.clear();
  levels_.clear();
  members_.clear();
}

void CanonicalText::beforeValue() {
  if (levels_.empty()) return;
  Level& level = levels_.back();
  if (level.object) return;  // key() wrote the comma
  if (level.count > 0) out_.push_back(',');
  ++level.count;
}

void CanonicalText::writeString(std::string_view s) {
  // Printable ASCII without quotes or backslashes is written as it is; anything else as the
  // serializer escapes it.
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {
    out_.push_back('"');
    out_.append(s);
    out_.push_back('"');
    return;
  }
  out_.append(Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace));
}

void CanonicalText::startContainer(bool object) {
  beforeValue();
  levels_.push_back({object, true, out_.size(), members_.size(), keys_.size(), 0});
  out_.push_back(object ? '{' : '[');
}

void CanonicalText::key(const std::string& key) {
  Level& level = levels_.back();
  if (level.count > 0) {
    Member& previous = members_.back();
    previous.end = out_.size();
    out_.push_back(',');
    if (!(std::string_view(keys_).substr(previous.key, previous.key_size) < key)) {
      level.sorted = false;
    }
  }
  members_.push_back({keys_.size(), key.size(), out_.size(), 0});
  keys_.append(key);
  writeString(key);
  out_.push_back(':');
  ++level.count;
}

void CanonicalText::scalar(const SaxScalar& value) {
  beforeValue();
  char digits[32];
  switch (value.kind) {
    case SaxScalar::Kind::kNull:
      out_.append("null");
      break;
    case SaxScalar::Kind::kBool:
      out_.append(value.boolean ? "true" : "false");
      break;
    case SaxScalar::Kind::kInteger:
      out_.append(digits, std::to_chars(digits, digits + sizeof digits, value.integer).ptr);
      break;
    case SaxScalar::Kind::kUnsigned:
      out_.append(digits,
                  std::to_chars(digits, digits + sizeof digits, value.unsigned_integer).ptr);
      break;
    case SaxScalar::Kind::kFloat:
      out_.append(Json(value.floating).dump());
      break;
    case SaxScalar::Kind::kString:
      writeString(*value.string);
      break;
  }
}

void CanonicalText::sortMembers(Level& level) {
  std::vector<Member> sorted(members_.begin() + static_cast<std::ptrdiff_t>(level.members),
                             members_.end());
  const std::string_view keys(keys_);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Member& a, const Member& b) {
    return keys.substr(a.key, a.key_size) < keys.substr(b.key, b.key_size);
  });
  scratch_.clear();
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Member& m = sorted[i];
    // Of equal keys the last in the text is kept, as the DOM parser keeps it.
    if (i + 1 < sorted.size() &&
        keys.substr(m.key, m.key_size) == keys.substr(sorted[i + 1].key, sorted[i + 1].key_size)) {
      continue;
    }
    if (!scratch_.empty()) scratch_.push_back(',');
    scratch_.append(out_, m.begin, m.end - m.begin);
  }
  out_.resize(level.begin + 1);
  out_.append(scratch_);
}

bool CanonicalText::endContainer() {
  Level& level = levels_.back();
  if (level.object && level.count > 0) {
    members_.back().end = out_.size();
    if (!level.sorted) sortMembers(level);
    members_.resize(level.members);
    keys_.resize(level.keys);
  }
  out_.push_back(level.object ? '}' : ']');
  levels_.pop_back();
  return levels_.empty();
}

// ---- DomBuilder ---------------------------------------------------------------

void DomBuilder::clear() {
  root_ = Json();
  open_.clear();
  slot_ = nullptr;
}

Json* DomBuilder::place(Json&& value) {
  if (open_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  Json& container = *open_.back();
  if (container.is_array()) {
    container.push_back(std::move(value));
    return &container.back();
  }
  *slot_ = std::move(value);
  return slot_;
}

void DomBuilder::startContainer(bool object) {
  open_.push_back(place(Json(object ? Json::value_t::object : Json::value_t::array)));
}

void DomBuilder::key(const std::string& key) { slot_ = &(*open_.back())[key]; }

void DomBuilder::scalar(const SaxScalar& value) { place(value.toJson()); }

bool DomBuilder::endContainer() {
  open_.pop_back();
  return open_.empty();
}

// ---- SaxDriver ----------------------------------------------------------------

void SaxDriver::reset(const SaxFrameOps* root_ops, void* root_target, const FieldPath& root) {
  depth_ = 0;
  too_deep_ = false;
  stopped_ = false;
  syntax_error_.clear();
  frames_.clear();
  mode_ = Mode::kFrames;
  mode_depth_ = 0;
  push(root_ops, root_target, root);
}

void SaxDriver::push(const SaxFrameOps* ops, void* target, const FieldPath& path) {
  SaxFrame& frame = frames_.emplace_back();
  frame.ops = ops;
  frame.target = target;
  frame.path = path;
}

void SaxDriver::beginCapture(bool object, Captured done, void* out, const FieldPath& at) {
  mode_ = Mode::kCapture;
  mode_depth_ = 1;
  captured_ = done;
  mode_out_ = out;
  mode_at_ = &at;
  dom_.clear();
  dom_.startContainer(object);
}

void SaxDriver::beginText(bool object, Texted done, void* out, const FieldPath& at) {
  mode_ = Mode::kText;
  mode_depth_ = 1;
  texted_ = done;
  mode_out_ = out;
  mode_at_ = &at;
  text_.clear();
  text_.startContainer(object);
}

void SaxDriver::beginSkip() {
  mode_ = Mode::kSkip;
  mode_depth_ = 1;
}

bool SaxDriver::scalar(const SaxScalar& value) {
  switch (mode_) {
    case Mode::kSkip:
      break;
    case Mode::kCapture:
      dom_.scalar(value);
      break;
    case Mode::kText:
      text_.scalar(value);
      break;
    case Mode::kFrames:
      if (frames_.empty()) return false;  // a second value: not ours
      frames_.back().ops->scalar(*this, frames_.back(), value);
      break;
  }
  return true;
}

bool SaxDriver::start(bool object) {
  if (++depth_ > max_depth_) {
    too_deep_ = true;
    return false;
  }
  switch (mode_) {
    case Mode::kSkip:
      ++mode_depth_;
      break;
    case Mode::kCapture:
      ++mode_depth_;
      dom_.startContainer(object);
      break;
    case Mode::kText:
      ++mode_depth_;
      text_.startContainer(object);
      break;
    case Mode::kFrames:
      if (frames_.empty()) return false;
      frames_.back().ops->start(*this, frames_.back(), object);
      break;
  }
  return true;
}

bool SaxDriver::key(string_t& value) {
  switch (mode_) {
    case Mode::kSkip:
      break;
    case Mode::kCapture:
      dom_.key(value);
      break;
    case Mode::kText:
      text_.key(value);
      break;
    case Mode::kFrames:
      if (!readMember(frames_.back(), value)) {
        stopped_ = true;
        return false;
      }
      frames_.back().ops->key(*this, frames_.back(), value);
      break;
  }
  return true;
}

bool SaxDriver::end() {
  --depth_;
  switch (mode_) {
    case Mode::kFrames:
      frames_.pop_back();
      childDone();
      return true;
    case Mode::kSkip:
      break;
    case Mode::kCapture:
      dom_.endContainer();
      break;
    case Mode::kText:
      text_.endContainer();
      break;
  }
  if (--mode_depth_ > 0) return true;
  const Mode ended = mode_;
  mode_ = Mode::kFrames;
  if (ended == Mode::kCapture) captured_(*this, mode_out_, *mode_at_, dom_.take());
  if (ended == Mode::kText) texted_(*this, mode_out_, *mode_at_, text_.text());
  childDone();
  return true;
}

void SaxDriver::childDone() {
  if (!frames_.empty()) frames_.back().ops->child_done(*this, frames_.back());
}

bool SaxDriver::boolean(bool value) {
  SaxScalar v;
  v.kind = SaxScalar::Kind::kBool;
  v.boolean = value;
  return scalar(v);
}

bool SaxDriver::number_integer(number_integer_t value) {
  SaxScalar v;
  v.kind = SaxScalar::Kind::kInteger;
  v.integer = value;
  return scalar(v);
}

bool SaxDriver::number_unsigned(number_unsigned_t value) {
  SaxScalar v;
  v.kind = SaxScalar::Kind::kUnsigned;
  v.unsigned_integer = value;
  return scalar(v);
}

bool SaxDriver::number_float(number_float_t value, const string_t& /*text*/) {
  SaxScalar v;
  v.kind = SaxScalar::Kind::kFloat;
  v.floating = value;
  return scalar(v);
}

bool SaxDriver::string(string_t& value) {
  SaxScalar v;
  v.kind = SaxScalar::Kind::kString;
  v.string = &value;
  return scalar(v);
}

bool SaxDriver::binary(binary_t& /*value*/) { return false; }  // never in JSON text

bool SaxDriver::parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                            const nlohmann::detail::exception& error) {
  syntax_error_ = error.what();
  if (syntax_error_.empty()) syntax_error_ = "syntax error";
  return false;
}

}  // namespace rsc::client::codec
