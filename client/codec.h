// The field-table JSON codec of the Kubernetes types (CODEC.md section 1): each type lists its
// fields once, in a Table specialisation, and the generic drivers below walk the tables to
// decode (with field paths, past the first problem) and to encode. Used by objects.cc,
// resource_slice.cc and the inventory's pool decoder. Tables are constants and the drivers are
// pure functions: thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/api_features.h"
#include "client/quantity.h"
#include "common/status.h"

namespace rsc::client {

using Json = nlohmann::json;

// A FieldPath names the field being decoded. Children are made on the stack
// as decoding descends and refer to their parent, so a path must not outlive
// the path it was made from; the text ("spec.devices[3].attributes[\"model\"]")
// is only built when a problem is kept.
class FieldPath {
 public:
  // A root: "" for the object itself, or a prefix such as "devices[3]".
  explicit FieldPath(std::string_view root) : text_(root) {}

  FieldPath field(std::string_view name) const { return {this, Kind::kField, name, 0}; }
  FieldPath index(size_t i) const { return {this, Kind::kIndex, {}, i}; }
  FieldPath key(std::string_view map_key) const { return {this, Kind::kKey, map_key, 0}; }

  std::string toString() const;
  // Bytes that order paths as the DOM driver meets them: members by key in
  // byte order (as nlohmann's std::map holds them), elements by index, a path
  // before the paths below it. Kept only by Problems::keepInPathOrder().
  std::string sortKey() const;

 private:
  enum class Kind { kRoot, kField, kIndex, kKey };
  void appendSortKey(std::string& out) const;
  FieldPath(const FieldPath* parent, Kind kind, std::string_view text, size_t index)
      : parent_(parent), kind_(kind), text_(text), index_(index) {}
  void appendTo(std::string& out) const;

  const FieldPath* parent_ = nullptr;
  Kind kind_ = Kind::kRoot;
  std::string_view text_;
  size_t index_ = 0;
};

// Returns `base` followed by `["key"]`, with quotes and backslashes in the
// key escaped: the one spelling of a map key in a field path.
std::string keyPath(std::string_view base, std::string_view key);

// InvalidArgument "<path>: <message>", with the same pair as its one detail.
Status fieldError(const FieldPath& at, std::string_view message);

// Checks a top-level object's apiVersion and kind where present (list items
// carry neither): "apiVersion: must be resource.k8s.io/v1, not ...".
Status checkTypeMeta(const Json& j, std::string_view api_version, std::string_view kind);

namespace codec {

// Go's `json:",omitempty"` (left out when empty or unset), or always written.
enum class Omit : uint8_t { kEmpty, kNever };

// What decoding does with a member that no table row lists.
enum class Unknown : uint8_t {
  kCapture,  // objects read from the API server: kept in `unknown`, written back unchanged
  kRefuse,   // pushed pools: a malformed problem "unknown field" at its path
  kSkip,     // fields never needed
};

// The API server's cap on the problems of one strict decoding error.
inline constexpr size_t kMaxProblemDetails = 100;

// Collects problems in document order. Keeps the first `max_details` of each
// class with their path text and counts the rest without building their text,
// so that millions of bad elements cost a counter.
class Problems {
 public:
  enum class Class : uint8_t { kMalformed, kInvalid };  // HTTP 400 and 422

  explicit Problems(size_t max_details = kMaxProblemDetails) : max_details_(max_details) {}

  void add(Class c, const FieldPath& at, std::string_view message);
  void add(Class c, std::string field, std::string message);

  // For a driver that meets members in the text's order (codec_sax.h): from
  // now on problems are kept with their path's sort key, and sortByPath() puts
  // them in the order the DOM driver, which walks members by key, adds them;
  // the first max_details in that order are kept, the rest counted.
  void keepInPathOrder() { in_path_order_ = true; }
  // Forgets the problems at `at` and below: a duplicate member, of which only
  // the last counts (as in the DOM). Problems already counted past the cap
  // cannot be told apart and stay counted.
  void eraseAt(const FieldPath& at);
  void sortByPath();

  const std::vector<FieldError>& details(Class c) const { return details_[index(c)]; }
  size_t omitted(Class c) const { return omitted_[index(c)]; }
  // Every problem of the class, the omitted ones included.
  size_t count(Class c) const {
    return details(c).size() + omitted(c) + unsorted_[index(c)].size();
  }
  bool empty() const { return count(Class::kMalformed) == 0 && count(Class::kInvalid) == 0; }

  // OK when empty; else InvalidArgument with the malformed problems when there
  // are any, or Unprocessable with the invalid ones: "<first> (and N more)".
  Status status() const;

 private:
  struct Keyed {
    std::string key;  // FieldPath::sortKey()
    FieldError error;
  };
  static size_t index(Class c) { return static_cast<size_t>(c); }
  // Keeps the first max_details_ of class c by sort key, counting the rest.
  void trim(size_t c);

  size_t max_details_;
  std::array<std::vector<FieldError>, 2> details_;
  std::array<size_t, 2> omitted_{};
  bool in_path_order_ = false;
  std::array<std::vector<Keyed>, 2> unsorted_;
};

// The state of one decoding: where problems go and what unknown members do.
class Decoder {
 public:
  Decoder(Problems& problems, Unknown unknown) : problems_(problems), unknown_(unknown) {}

  Unknown unknown() const { return unknown_; }
  Problems& problems() { return problems_; }
  // How many shape problems so far: a value decoded without adding any is good.
  size_t failures() const { return problems_.count(Problems::Class::kMalformed); }
  // A shape problem (HTTP 400): wrong type, bad quantity, unknown field.
  void fail(const FieldPath& at, std::string_view message) {
    problems_.add(Problems::Class::kMalformed, at, message);
  }

 private:
  Problems& problems_;
  Unknown unknown_;
};

// ---- Tables -----------------------------------------------------------------

// Table<T> lists the fields of T:
//   template <> struct Table<DeviceTaint> : TableKeepingUnknown<DeviceTaint> {
//     static constexpr auto kFields = std::tuple{
//         field("effect", &DeviceTaint::effect, Str{}, Omit::kNever), ...};
//   };
// Its base names the type the fields live in (Owner) and, for
// TableKeepingUnknown, the member that captures unknown fields (kUnknown); a
// table of TableOf<T> has no such member. Fields are listed in byte order of
// their JSON names (checked when used). Top-level kinds add kApiVersion and
// kKind: checked on decoding, written on encoding. kUnknownHint, where a table
// has one, follows "unknown field; ". A tag type whose Owner is another type
// (declared with `using Owner`) describes a nested JSON object whose fields
// live in that type (a TokenReview's "spec").
template <typename T>
struct Table;

template <typename T>
struct TableOf {
  using Owner = T;
};

template <typename T>
struct TableKeepingUnknown : TableOf<T> {
  static constexpr Json T::*kUnknown = &T::unknown;
};

template <typename Access, typename Codec>
struct Field {
  std::string_view name;  // JSON name, exactly as the API spells it
  Access access;          // a member pointer, or a function of the owner returning a reference
  Codec codec;            // the value codec
  Omit omit = Omit::kEmpty;
  Feature feature = Feature::kNone;  // gated, or newer than the oldest supported release
};

constexpr void applyOption(auto& f, Omit omit) { f.omit = omit; }
constexpr void applyOption(auto& f, Feature feature) { f.feature = feature; }

template <typename Access, typename Codec, typename... Options>
constexpr auto field(std::string_view name, Access access, Codec codec, Options... options) {
  Field<Access, Codec> f{name, access, codec};
  (applyOption(f, options), ...);
  return f;
}

// The accessor of a nested object stored in its parent's own type.
inline constexpr auto kSelf = [](auto& owner) -> auto& { return owner; };

template <typename T>
using OwnerOf = typename Table<T>::Owner;

template <typename T>
struct TableInfo {
  static constexpr auto& kFields = Table<T>::kFields;
  static constexpr size_t kSize = std::tuple_size_v<std::remove_cvref_t<decltype(kFields)>>;
  static constexpr std::array<std::string_view, kSize> kNames = [] {
    std::array<std::string_view, kSize> names{};
    size_t i = 0;
    std::apply([&](const auto&... f) { ((names[i++] = f.name), ...); }, kFields);
    return names;
  }();
  static_assert(std::is_sorted(kNames.begin(), kNames.end()),
                "a table lists its fields in byte order of their JSON names");
  static constexpr bool kCaptures = requires { Table<T>::kUnknown; };
  static constexpr bool kTypeMeta = requires { Table<T>::kKind; };

  // The row named `name`, or kSize.
  static size_t find(std::string_view name) {
    const auto* it = std::lower_bound(kNames.begin(), kNames.end(), name);
    return it != kNames.end() && *it == name ? static_cast<size_t>(it - kNames.begin()) : kSize;
  }
};

template <typename T>
void decodeObject(const Json& j, OwnerOf<T>& out, const FieldPath& at, Decoder& d);
template <typename T>
Json encodeObject(const OwnerOf<T>& value);
template <typename T>
bool isEmptyObject(const OwnerOf<T>& value);

// ---- Value codecs -----------------------------------------------------------
// Each has decode (null never reaches it: a null field reads as absent),
// isEmpty (for omitempty), and either encode (a leaf value, as a Json) or,
// for the containers (Opt, ListOf, MapOf, Obj), a writer of their own in the
// text encoder below: there is one encoder, and toJson() reads its text.

struct Str {
  using Type = std::string;
  static void decode(const Json& v, std::string& out, const FieldPath& at, Decoder& d) {
    if (!v.is_string()) return d.fail(at, "must be a string");
    out = v.get_ref<const std::string&>();
  }
  static bool isEmpty(const std::string& s) { return s.empty(); }
  static Json encode(const std::string& s) { return s; }
};

struct Bool {
  using Type = bool;
  static void decode(const Json& v, bool& out, const FieldPath& at, Decoder& d) {
    if (!v.is_boolean()) return d.fail(at, "must be a boolean");
    out = v.get<bool>();
  }
  static bool isEmpty(bool b) { return !b; }
  static Json encode(bool b) { return b; }
};

// Integers only: 1.0 and 1e3 are refused, as Go refuses them.
struct Int64 {
  using Type = int64_t;
  static void decode(const Json& v, int64_t& out, const FieldPath& at, Decoder& d);
  static bool isEmpty(int64_t i) { return i == 0; }
  static Json encode(int64_t i) { return i; }
};

struct Int32 {
  using Type = int32_t;
  static void decode(const Json& v, int32_t& out, const FieldPath& at, Decoder& d);
  static bool isEmpty(int32_t i) { return i == 0; }
  static Json encode(int32_t i) { return i; }
};

// A string, or a bare JSON number as Quantity's Go UnmarshalJSON accepts;
// written as the text given.
struct Qty {
  using Type = Quantity;
  static void decode(const Json& v, Quantity& out, const FieldPath& at, Decoder& d);
  static bool isEmpty(const Quantity& q) { return q.text().empty(); }
  static Json encode(const Quantity& q) { return q.text(); }
};

// Any JSON object, kept as it is: content this project copies and never
// interprets. `T` has a `Json value` member.
template <typename T>
struct RawObject {
  using Type = T;
  static void decode(const Json& v, T& out, const FieldPath& at, Decoder& d) {
    if (!v.is_object()) return d.fail(at, "must be an object");
    out.value = v;
  }
  static bool isEmpty(const T& x) { return x.value.empty(); }
  static Json encode(const T& x) { return x.value; }
};

template <typename V>
struct Opt {
  using Type = std::optional<typename V::Type>;
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    out.emplace();
    V::decode(v, *out, at, d);
  }
  // Unset; a set list that is empty is written as nothing too.
  static bool isEmpty(const Type& o) {
    if constexpr (requires { V::kListLike; }) {
      return !o.has_value() || V::isEmpty(*o);
    } else {
      return !o.has_value();
    }
  }
};

template <typename V>
struct ListOf {
  using Type = std::vector<typename V::Type>;
  static constexpr bool kListLike = true;
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    if (!v.is_array()) return d.fail(at, "must be a list");
    out.clear();
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].is_null()) {
        d.fail(at.index(i), "must not be null");
        continue;
      }
      typename V::Type item{};  // not decoded in place: std::vector<bool> has no element addresses
      const size_t before = d.failures();
      V::decode(v[i], item, at.index(i), d);
      // A bad element is left out: a list of a million bad ones costs no memory.
      if (d.failures() == before) out.push_back(std::move(item));
    }
  }
  static bool isEmpty(const Type& list) { return list.empty(); }
};

// A list of strings as metav1 and core types write them.
struct Strings {
  using Type = std::vector<std::string>;
  static constexpr bool kListLike = true;
  static constexpr bool kNullIsEmpty = true;  // as a map value: null reads as an empty list
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    if (!v.is_array()) return d.fail(at, "must be a list of strings");
    out.clear();
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        d.fail(at.index(i), "must be a string");
        continue;
      }
      out.push_back(v[i].get_ref<const std::string&>());
    }
  }
  static bool isEmpty(const Type& list) { return list.empty(); }
  static Json encode(const Type& list) { return list; }
};

// A map of strings (labels, annotations).
struct StringMap {
  using Type = std::map<std::string, std::string>;
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    if (!v.is_object()) return d.fail(at, "must be an object");
    out.clear();
    for (const auto& [key, value] : v.items()) {
      if (!value.is_string()) {
        d.fail(at.key(key), "must be a string");
        continue;
      }
      out.emplace_hint(out.end(), key, value.get_ref<const std::string&>());
    }
  }
  static bool isEmpty(const Type& map) { return map.empty(); }
  static Json encode(const Type& map) { return map; }
};

template <typename V>
struct MapOf {
  using Type = std::map<std::string, typename V::Type>;
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    if (!v.is_object()) return d.fail(at, "must be an object");
    out.clear();
    for (const auto& [key, value] : v.items()) {
      FieldPath item_path = at.key(key);
      typename V::Type item{};
      const size_t before = d.failures();
      if (!value.is_null()) {
        V::decode(value, item, item_path, d);
      } else if constexpr (!requires { V::kNullIsEmpty; }) {
        d.fail(item_path, "must not be null");
      }
      if (d.failures() == before) out.emplace_hint(out.end(), key, std::move(item));
    }
  }
  static bool isEmpty(const Type& map) { return map.empty(); }
};

// A nested object with its own table.
template <typename T>
struct Obj {
  using Type = OwnerOf<T>;
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    decodeObject<T>(v, out, at, d);
  }
  static bool isEmpty(const Type& x) { return isEmptyObject<T>(x); }
};

// ---- Drivers ----------------------------------------------------------------

namespace detail {

template <typename T, size_t I>
void decodeField(const Json& v, OwnerOf<T>& out, const FieldPath& at, Decoder& d) {
  const auto& f = std::get<I>(Table<T>::kFields);
  std::remove_cvref_t<decltype(f.codec)>::decode(v, std::invoke(f.access, out), at, d);
}

template <typename T, size_t... I>
constexpr auto fieldDecoders(std::index_sequence<I...> /*unused*/) {
  using Fn = void (*)(const Json&, OwnerOf<T>&, const FieldPath&, Decoder&);
  return std::array<Fn, sizeof...(I)>{&decodeField<T, I>...};
}

}  // namespace detail

// Decodes the members of `j` into `out` by the table of T, continuing past
// problems so that every one is reported. A null member reads as absent.
template <typename T>
void decodeObject(const Json& j, OwnerOf<T>& out, const FieldPath& at, Decoder& d) {
  using Info = TableInfo<T>;
  static constexpr auto kDecoders =
      detail::fieldDecoders<T>(std::make_index_sequence<Info::kSize>());
  if (!j.is_object()) return d.fail(at, "must be an object");
  for (const auto& [key, value] : j.items()) {
    const size_t row = Info::find(key);
    if (row == Info::kSize) {
      if constexpr (Info::kTypeMeta) {
        if (key == "apiVersion" || key == "kind") continue;  // checked by decode<T>
      }
      if (d.unknown() == Unknown::kRefuse) {
        if constexpr (requires { Table<T>::kUnknownHint; }) {
          d.fail(at.field(key), "unknown field; " + std::string(Table<T>::kUnknownHint));
        } else {
          d.fail(at.field(key), "unknown field");
        }
      } else if constexpr (Info::kCaptures) {
        if (d.unknown() == Unknown::kCapture) (out.*Table<T>::kUnknown)[key] = value;
      }
      continue;
    }
    if (value.is_null()) continue;
    kDecoders[row](value, out, at.field(key), d);
  }
}

template <typename T>
std::string toJsonText(const OwnerOf<T>& value);

// The tree of `value`, read from the text encoder's output (below): one
// encoder, so the two forms cannot disagree.
template <typename T>
Json encodeObject(const OwnerOf<T>& value) {
  return Json::parse(toJsonText<T>(value));
}

// True when every field is empty and nothing was captured.
template <typename T>
bool isEmptyObject(const OwnerOf<T>& value) {
  if constexpr (TableInfo<T>::kCaptures) {
    const Json& unknown = value.*Table<T>::kUnknown;
    if (!unknown.is_null() && !unknown.empty()) return false;
  }
  return std::apply(
      [&](const auto&... f) {
        return (std::remove_cvref_t<decltype(f.codec)>::isEmpty(std::invoke(f.access, value)) &&
                ...);
      },
      TableInfo<T>::kFields);
}

// Calls visitor.object<T>(value) for `value` and, parents first, for every
// object nested in it.
template <typename T, typename Visitor>
void visitObjects(const OwnerOf<T>& value, Visitor& visitor);

namespace detail {

template <typename Codec>
struct Children {  // values without objects inside
  template <typename Visitor>
  static void visit(const typename Codec::Type& /*unused*/, Visitor& /*unused*/) {}
};
template <typename T>
struct Children<Obj<T>> {
  template <typename Visitor>
  static void visit(const OwnerOf<T>& value, Visitor& visitor) {
    visitObjects<T>(value, visitor);
  }
};
template <typename V>
struct Children<Opt<V>> {
  template <typename Visitor>
  static void visit(const typename Opt<V>::Type& value, Visitor& visitor) {
    if (value) Children<V>::visit(*value, visitor);
  }
};
template <typename V>
struct Children<ListOf<V>> {
  template <typename Visitor>
  static void visit(const typename ListOf<V>::Type& list, Visitor& visitor) {
    for (const auto& item : list) Children<V>::visit(item, visitor);
  }
};
template <typename V>
struct Children<MapOf<V>> {
  template <typename Visitor>
  static void visit(const typename MapOf<V>::Type& map, Visitor& visitor) {
    for (const auto& [key, item] : map) Children<V>::visit(item, visitor);
  }
};

}  // namespace detail

template <typename T, typename Visitor>
void visitObjects(const OwnerOf<T>& value, Visitor& visitor) {
  visitor.template object<T>(value);
  std::apply(
      [&](const auto&... f) {
        (detail::Children<std::remove_cvref_t<decltype(f.codec)>>::visit(
             std::invoke(f.access, value), visitor),
         ...);
      },
      TableInfo<T>::kFields);
}

struct DecodeOptions {
  Unknown unknown = Unknown::kCapture;
  size_t max_details = kMaxProblemDetails;
};

// Decodes one object whose paths start at `root` ("" for a top-level kind,
// "metadata" for metadata alone). A top-level kind must be a JSON object and
// its apiVersion and kind, where present, must match.
template <typename T>
StatusOr<OwnerOf<T>> decode(const Json& j, std::string_view root,
                            const DecodeOptions& options = {}) {
  if constexpr (TableInfo<T>::kTypeMeta) {
    if (!j.is_object()) {
      return invalidArgument(std::string(Table<T>::kKind) + ": must be a JSON object");
    }
    RETURN_IF_ERROR(checkTypeMeta(j, Table<T>::kApiVersion, Table<T>::kKind));
  }
  Problems problems(options.max_details);
  Decoder decoder(problems, options.unknown);
  OwnerOf<T> out{};
  decodeObject<T>(j, out, FieldPath(root), decoder);
  RETURN_IF_ERROR(problems.status());
  return out;
}

// For callers that collect problems across many objects.
template <typename T>
void decodeInto(const Json& j, const FieldPath& at, OwnerOf<T>& out, Decoder& decoder) {
  decodeObject<T>(j, out, at, decoder);
}

template <typename T>
Json toJson(const OwnerOf<T>& value) {
  return encodeObject<T>(value);
}

// ---- Text encoding ------------------------------------------------------------
// The encoder: writes JSON text into a string without building a DOM (keys in
// byte order, captured members merged in, a written table field winning a
// tie, invalid UTF-8 replaced). A value codec with `write(value, JsonWriter&)`
// writes its own text: device forms splice the JSON they hold, which is how
// request bodies are built; a leaf codec's encode() is written as dump() would.

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out)
      : out_(out),
        serializer_(nlohmann::detail::output_adapter<char, std::string>(out), ' ',
                    Json::error_handler_t::replace) {}

  // Text that is JSON already.
  void raw(std::string_view text) { out_.append(text); }
  void raw(char c) { out_.push_back(c); }
  // Any value, as dump() writes it.
  void value(const Json& j) { serializer_.dump(j, false, false, 0); }
  // A string, quoted and escaped.
  void string(std::string_view s) { value(Json(s)); }

 private:
  std::string& out_;
  nlohmann::detail::serializer<Json> serializer_;
};

template <typename T>
void writeObject(const OwnerOf<T>& value, JsonWriter& w);

namespace detail {

template <typename Codec>
struct Writer {
  static void write(const typename Codec::Type& v, JsonWriter& w) {
    if constexpr (requires { Codec::write(v, w); }) {
      Codec::write(v, w);
    } else {
      w.value(Codec::encode(v));
    }
  }
};
template <typename T>
struct Writer<Obj<T>> {
  static void write(const OwnerOf<T>& v, JsonWriter& w) { writeObject<T>(v, w); }
};
template <typename V>
struct Writer<Opt<V>> {
  static void write(const typename Opt<V>::Type& v, JsonWriter& w) {
    if (v) {
      Writer<V>::write(*v, w);
    } else {
      w.raw("null");
    }
  }
};
template <typename V>
struct Writer<ListOf<V>> {
  static void write(const typename ListOf<V>::Type& list, JsonWriter& w) {
    w.raw('[');
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0) w.raw(',');
      Writer<V>::write(list[i], w);
    }
    w.raw(']');
  }
};
template <typename V>
struct Writer<MapOf<V>> {
  static void write(const typename MapOf<V>::Type& map, JsonWriter& w) {
    w.raw('{');
    bool first = true;
    for (const auto& [key, item] : map) {
      if (!first) w.raw(',');
      first = false;
      w.string(key);
      w.raw(':');
      Writer<V>::write(item, w);
    }
    w.raw('}');
  }
};

// Writes row I as `"name":value` unless omitted; false when omitted.
template <typename T, size_t I>
bool writeField(const OwnerOf<T>& value, JsonWriter& w, bool comma) {
  const auto& row = std::get<I>(Table<T>::kFields);
  using Codec = std::remove_cvref_t<decltype(row.codec)>;
  const auto& member = std::invoke(row.access, value);
  if (row.omit == Omit::kEmpty && Codec::isEmpty(member)) return false;
  if (comma) w.raw(',');
  w.raw('"');
  w.raw(row.name);
  w.raw("\":");
  Writer<Codec>::write(member, w);
  return true;
}

template <typename T, size_t... I>
constexpr auto fieldWriters(std::index_sequence<I...> /*unused*/) {
  using Fn = bool (*)(const OwnerOf<T>&, JsonWriter&, bool);
  return std::array<Fn, sizeof...(I)>{&writeField<T, I>...};
}

}  // namespace detail

template <typename T>
void writeObject(const OwnerOf<T>& value, JsonWriter& w) {
  using Info = TableInfo<T>;
  static constexpr auto kWriters = detail::fieldWriters<T>(std::make_index_sequence<Info::kSize>());
  // The object's own keys in byte order: table rows, and apiVersion and kind
  // (rows kSize and kSize + 1) for top-level kinds.
  struct Key {
    std::string_view name;
    size_t row;
  };
  static const std::vector<Key> kKeys = [] {
    std::vector<Key> keys;
    for (size_t i = 0; i < Info::kSize; ++i) keys.push_back({Info::kNames[i], i});
    if constexpr (Info::kTypeMeta) {
      keys.push_back({"apiVersion", Info::kSize});
      keys.push_back({"kind", Info::kSize + 1});
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return a.name < b.name; });
    return keys;
  }();
  const auto writeKey = [&](const Key& key, bool comma) {
    if constexpr (Info::kTypeMeta) {
      if (key.row >= Info::kSize) {
        if (comma) w.raw(',');
        w.raw(key.row == Info::kSize ? "\"apiVersion\":" : "\"kind\":");
        w.string(key.row == Info::kSize ? Table<T>::kApiVersion : Table<T>::kKind);
        return true;
      }
    }
    return kWriters[key.row](value, w, comma);
  };

  w.raw('{');
  bool comma = false;
  auto next = kKeys.begin();
  if constexpr (Info::kCaptures) {
    const Json& unknown = value.*Table<T>::kUnknown;
    if (unknown.is_object()) {
      for (const auto& [name, member] : unknown.items()) {
        for (; next != kKeys.end() && next->name < name; ++next) {
          comma = writeKey(*next, comma) || comma;
        }
        // A tie: the table's field when it is written, else the captured one.
        if (next != kKeys.end() && next->name == name) {
          const bool written = writeKey(*next++, comma);
          comma = written || comma;
          if (written) continue;
        }
        if (comma) w.raw(',');
        w.string(name);
        w.raw(':');
        w.value(member);
        comma = true;
      }
    }
  }
  for (; next != kKeys.end(); ++next) comma = writeKey(*next, comma) || comma;
  w.raw('}');
}

// The JSON text of `value`: toJson(value).dump(), without the DOM.
template <typename T>
std::string toJsonText(const OwnerOf<T>& value) {
  std::string out;
  JsonWriter writer(out);
  writeObject<T>(value, writer);
  return out;
}

}  // namespace codec
}  // namespace rsc::client
