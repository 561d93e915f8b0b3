#include "client/codec.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

namespace rsc::client {
namespace {

void appendKey(std::string& out, std::string_view key) {
  out.append("[\"");
  for (char c : key) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  out.append("\"]");
}

}  // namespace

std::string keyPath(std::string_view base, std::string_view key) {
  std::string out(base);
  appendKey(out, key);
  return out;
}

void FieldPath::appendTo(std::string& out) const {
  if (parent_ != nullptr) {
    parent_->appendTo(out);
  }
  switch (kind_) {
    case Kind::kRoot:
      out.append(text_);
      break;
    case Kind::kField:
      if (!out.empty()) {
        out.push_back('.');
      }
      out.append(text_);
      break;
    case Kind::kIndex:
      out.push_back('[');
      out.append(std::to_string(index_));
      out.push_back(']');
      break;
    case Kind::kKey:
      appendKey(out, text_);
      break;
  }
}

// Keys end with 0x00 0x01 and escape their own 0x00 as 0x00 0xff, so that a
// key sorts before every longer key it begins and before its own children;
// indices are 8 bytes, most significant first.
void FieldPath::appendSortKey(std::string& out) const {
  if (parent_ != nullptr) {
    parent_->appendSortKey(out);
  }
  if (kind_ == Kind::kIndex) {
    for (int shift = 56; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((static_cast<uint64_t>(index_) >> shift) & 0xff));
    }
    return;
  }
  for (char c : text_) {
    out.push_back(c);
    if (c == '\0') {
      out.push_back('\xff');
    }
  }
  out.push_back('\0');
  out.push_back('\x01');
}

std::string FieldPath::sortKey() const {
  std::string out;
  appendSortKey(out);
  return out;
}

std::string FieldPath::toString() const {
  std::string out;
  appendTo(out);
  return out;
}

Status fieldError(const FieldPath& at, std::string_view message) {
  std::string path = at.toString();
  std::string text = path.empty() ? std::string(message) : path + ": " + std::string(message);
  return Status(StatusCode::kInvalidArgument, std::move(text),
                {FieldError{std::move(path), std::string(message)}});
}

Status checkTypeMeta(const Json& j, std::string_view api_version, std::string_view kind) {
  for (const auto& [name, want] : {std::pair{"apiVersion", api_version}, std::pair{"kind", kind}}) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
      continue;
    }
    FieldPath at(name);
    if (!it->is_string()) {
      return fieldError(at, "must be a string");
    }
    const auto& value = it->get_ref<const std::string&>();
    if (!value.empty() && value != want) {
      return fieldError(at, "must be " + std::string(want) + ", not " + value);
    }
  }
  return okStatus();
}

namespace codec {

void Problems::add(Class c, const FieldPath& at, std::string_view message) {
  if (in_path_order_) {
    unsorted_[index(c)].push_back({at.sortKey(), {at.toString(), std::string(message)}});
    if (unsorted_[index(c)].size() > 2 * max_details_ + 16) trim(index(c));
    return;
  }
  if (details_[index(c)].size() >= max_details_) {
    ++omitted_[index(c)];
    return;
  }
  details_[index(c)].push_back({at.toString(), std::string(message)});
}

void Problems::add(Class c, std::string field, std::string message) {
  if (in_path_order_) {
    FieldPath at(field);
    unsorted_[index(c)].push_back({at.sortKey(), {std::move(field), std::move(message)}});
    if (unsorted_[index(c)].size() > 2 * max_details_ + 16) trim(index(c));
    return;
  }
  if (details_[index(c)].size() >= max_details_) {
    ++omitted_[index(c)];
    return;
  }
  details_[index(c)].push_back({std::move(field), std::move(message)});
}

void Problems::trim(size_t c) {
  auto& kept = unsorted_[c];
  std::stable_sort(kept.begin(), kept.end(),
                   [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
  if (kept.size() > max_details_) {
    omitted_[c] += kept.size() - max_details_;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(max_details_), kept.end());
  }
}

void Problems::eraseAt(const FieldPath& at) {
  if (unsorted_[0].empty() && unsorted_[1].empty()) {
    return;
  }
  const std::string prefix = at.sortKey();
  for (auto& kept : unsorted_) {
    std::erase_if(kept, [&](const Keyed& k) { return k.key.starts_with(prefix); });
  }
}

void Problems::sortByPath() {
  for (size_t c = 0; c < 2; ++c) {
    trim(c);
    for (Keyed& k : unsorted_[c]) {
      details_[c].push_back(std::move(k.error));
    }
    unsorted_[c].clear();
  }
  in_path_order_ = false;
}

Status Problems::status() const {
  const Class c = count(Class::kMalformed) > 0 ? Class::kMalformed : Class::kInvalid;
  if (count(c) == 0) {
    return okStatus();
  }
  std::string message;
  if (details(c).empty()) {
    message = std::to_string(count(c)) + " problems";
  } else {
    const FieldError& first = details(c).front();
    message = first.field.empty() ? first.message : first.field + ": " + first.message;
  }
  if (count(c) > 1) {
    message += " (and " + std::to_string(count(c) - 1) + " more)";
  }
  return Status(c == Class::kMalformed ? StatusCode::kInvalidArgument : StatusCode::kUnprocessable,
                std::move(message), details(c));
}

void Int64::decode(const Json& v, int64_t& out, const FieldPath& at, Decoder& d) {
  if (v.is_number_unsigned()) {
    auto value = v.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return d.fail(at, "out of range for a 64-bit integer");
    }
    out = static_cast<int64_t>(value);
    return;
  }
  if (!v.is_number_integer()) {
    return d.fail(at, "must be an integer");
  }
  out = v.get<int64_t>();
}

void Int32::decode(const Json& v, int32_t& out, const FieldPath& at, Decoder& d) {
  const size_t before = d.failures();
  int64_t value = 0;
  Int64::decode(v, value, at, d);
  if (d.failures() != before) {
    return;
  }
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return d.fail(at, "out of range for a 32-bit integer");
  }
  out = static_cast<int32_t>(value);
}

void Qty::decode(const Json& v, Quantity& out, const FieldPath& at, Decoder& d) {
  if (!v.is_string() && !v.is_number()) {
    return d.fail(at, "must be a quantity string such as \"40Gi\"");
  }
  StatusOr<Quantity> parsed =
      Quantity::parse(v.is_string() ? v.get_ref<const std::string&>() : v.dump());
  if (!parsed.ok()) {
    return d.fail(at, parsed.status().message());
  }
  out = std::move(parsed).value();
}

}  // namespace codec
}  // namespace rsc::client
