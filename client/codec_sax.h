// The SAX driver of the field-table codec (CODEC.md section 1.4, step 8): decodes JSON text
// straight into the typed object from nlohmann's sax_parse events, by the same Table<T> rows and
// value codecs as the DOM driver in codec.h, with an explicit stack of frames instead of a DOM of
// the whole text. RestKubeApi decodes ResourceSlice list pages, watch events and write answers
// with it. One driver per decoding; not synchronised (the device intern table has its own lock).
//
// Results equal the DOM driver's: the same object, the same problems with the same paths, in the
// DOM's order (Problems::keepInPathOrder), and of duplicate members only the last counts (the DOM
// keeps the last). Values of codecs without a SAX form (Strings, StringMap, RawObject, ...) and
// captured unknown members are built as small DOMs; a codec that declares kTakesText (a device
// form) receives the value's text exactly as the DOM would dump it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/codec.h"

namespace rsc::client::codec {

// No Kubernetes object nests anywhere near this deep (the watch stream frames events at the same
// depth); deeper text is hostile or broken, and is refused before a frame is pushed for it.
inline constexpr size_t kMaxSaxDepth = 256;

// One scalar event of the parser.
struct SaxScalar {
  enum class Kind : uint8_t { kNull, kBool, kInteger, kUnsigned, kFloat, kString };
  Kind kind = Kind::kNull;
  bool boolean = false;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double floating = 0;
  std::string* string = nullptr;  // the parser's buffer, which may be moved from

  bool isNull() const { return kind == Kind::kNull; }
  // The value as the DOM parser would hold it (a string is moved out).
  Json toJson() const;
};

// Writes a JSON value, given as events, exactly as Json::dump(-1, ' ', false, replace) writes its
// DOM: compact, the members of every object in byte order of their keys, the last of equal keys
// kept. Members usually arrive sorted, and are then written once.
class CanonicalText {
 public:
  void clear();
  void startContainer(bool object);
  void key(const std::string& key);
  void scalar(const SaxScalar& value);
  // Closes the innermost container; true when that was the outermost one.
  bool endContainer();
  std::string_view text() const { return out_; }

 private:
  struct Level {
    bool object = false;
    bool sorted = true;  // every key so far after the one before it
    size_t begin = 0;    // offset of the opening bracket in out_
    size_t members = 0;  // first of its members in members_
    size_t keys = 0;     // where its keys start in keys_
    size_t count = 0;    // values written
  };
  struct Member {
    size_t key = 0;  // in keys_
    size_t key_size = 0;
    size_t begin = 0;  // in out_: from the key's opening quote...
    size_t end = 0;    // ...to the end of the value
  };
  void beforeValue();
  void writeString(std::string_view s);
  void sortMembers(Level& level);

  std::string out_;
  std::string keys_;  // the raw keys of the open objects' members
  std::vector<Level> levels_;
  std::vector<Member> members_;
  std::string scratch_;
};

// Builds the DOM of one value, given as events, as nlohmann's DOM parser does.
class DomBuilder {
 public:
  void clear();
  void startContainer(bool object);
  void key(const std::string& key);
  void scalar(const SaxScalar& value);
  bool endContainer();  // true when the outermost container closed
  Json take() { return std::move(root_); }

 private:
  Json* place(Json&& value);
  Json root_;
  std::vector<Json*> open_;
  Json* slot_ = nullptr;  // the member the next value of an object goes to
};

class SaxDriver;

// One open container that the tables describe: an object with a table, a list or a map.
struct SaxFrame;
struct SaxFrameOps {
  void (*key)(SaxDriver&, SaxFrame&, std::string& key);
  void (*scalar)(SaxDriver&, SaxFrame&, const SaxScalar& value);
  // A child container starts: the handler pushes a frame or begins a capture, a text or a skip,
  // and child_done is called when that container closes.
  void (*start)(SaxDriver&, SaxFrame&, bool object);
  void (*child_done)(SaxDriver&, SaxFrame&);
};

struct SaxFrame {
  const SaxFrameOps* ops = nullptr;
  void* target = nullptr;  // the object, list or map being filled
  FieldPath path{""};      // of this container
  FieldPath child{""};     // of the member or element being read
  std::string key;         // the member's key (child refers to it)
  size_t row = 0;          // the member's table row
  uint64_t seen = 0;       // table rows met, for duplicates
  size_t index = 0;        // next element index
  size_t before = 0;       // failures when the child began
};

// The event loop shared by every table type: depth, frames, and the three ways of reading a
// value without frames (a small DOM, canonical text, skipping).
class SaxDriver : public nlohmann::json_sax<Json> {
 public:
  using Captured = void (*)(SaxDriver&, void* out, const FieldPath& at, Json&& value);
  using Texted = void (*)(SaxDriver&, void* out, const FieldPath& at, std::string_view text);

  SaxDriver(Decoder& decoder, size_t max_depth) : decoder_(decoder), max_depth_(max_depth) {}

  Decoder& decoder() { return decoder_; }
  void fail(const FieldPath& at, std::string_view message) { decoder_.fail(at, message); }

  // For the value handlers, on the start of a child container (exactly one each).
  void push(const SaxFrameOps* ops, void* target, const FieldPath& path);
  void beginCapture(bool object, Captured done, void* out, const FieldPath& at);
  void beginText(bool object, Texted done, void* out, const FieldPath& at);
  void beginSkip();

  // apiVersion or kind met on `frame`: the decoder of a top-level kind keeps them when `frame` is
  // its top object, to check them as decode<T> does; everywhere else they are ignored, as
  // decodeObject ignores them.
  virtual void noteTypeMeta(const SaxFrame& /*frame*/, bool /*kind*/, Json&& /*value*/) {}
  bool isTopObject(const SaxFrame& frame) const {
    return frames_.size() >= 2 && &frame == &frames_[1];
  }

  // Called before each member of an object read by frames; false ends the reading before it:
  // sax_parse returns false, and stopped() tells that apart from a syntax error.
  virtual bool readMember(const SaxFrame& /*frame*/, const std::string& /*key*/) { return true; }
  bool stopped() const { return stopped_; }

  bool syntaxError() const { return !syntax_error_.empty(); }
  bool tooDeep() const { return too_deep_; }
  const std::string& syntaxErrorMessage() const { return syntax_error_; }
  size_t depth() const { return depth_; }
  size_t maxDepth() const { return max_depth_; }

  // nlohmann::json_sax
  bool null() override { return scalar(SaxScalar{}); }
  bool boolean(bool value) override;
  bool number_integer(number_integer_t value) override;
  bool number_unsigned(number_unsigned_t value) override;
  bool number_float(number_float_t value, const string_t& text) override;
  bool string(string_t& value) override;
  bool binary(binary_t& value) override;
  bool start_object(std::size_t /*elements*/) override { return start(true); }
  bool key(string_t& value) override;
  bool end_object() override { return end(); }
  bool start_array(std::size_t /*elements*/) override { return start(false); }
  bool end_array() override { return end(); }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& error) override;

 protected:
  // Starts over with `root` as the only frame (its path the root path).
  void reset(const SaxFrameOps* root_ops, void* root_target, const FieldPath& root);

 private:
  enum class Mode : uint8_t { kFrames, kCapture, kText, kSkip };
  bool scalar(const SaxScalar& value);
  bool start(bool object);
  bool end();
  void childDone();

  Decoder& decoder_;
  size_t max_depth_;
  size_t depth_ = 0;
  bool too_deep_ = false;
  bool stopped_ = false;
  std::string syntax_error_;
  // References into it stay valid as frames are pushed and popped: paths refer to their parents.
  std::deque<SaxFrame> frames_;
  Mode mode_ = Mode::kFrames;
  size_t mode_depth_ = 0;  // containers open inside the capture, text or skip
  void* mode_out_ = nullptr;
  const FieldPath* mode_at_ = nullptr;
  Captured captured_ = nullptr;
  Texted texted_ = nullptr;
  DomBuilder dom_;
  CanonicalText text_;
};

// ---- Value handlers ---------------------------------------------------------
// SaxValue<Codec> reads one value of Codec into its member: a scalar at once, a container by a
// frame, a capture, canonical text or a skip. The default captures the value as a DOM and calls
// the codec's own decode(), so every codec works and the messages are the codec's own.

template <typename Codec>
struct SaxValue {
  using Type = typename Codec::Type;
  static void scalar(SaxDriver& s, Type& out, const SaxScalar& v, const FieldPath& at) {
    Codec::decode(v.toJson(), out, at, s.decoder());
  }
  static void start(SaxDriver& s, Type& out, bool object, const FieldPath& at) {
    if constexpr (requires { Codec::kTakesText; }) {
      s.beginText(object, &texted, &out, at);
    } else {
      s.beginCapture(object, &captured, &out, at);
    }
  }
  static void captured(SaxDriver& s, void* out, const FieldPath& at, Json&& value) {
    Codec::decode(value, *static_cast<Type*>(out), at, s.decoder());
  }
  static void texted(SaxDriver& s, void* out, const FieldPath& at, std::string_view text) {
    Codec::decodeText(text, *static_cast<Type*>(out), at, s.decoder());
  }
};

// Strings are moved from the parser's buffer.
template <>
struct SaxValue<Str> {
  static void scalar(SaxDriver& s, std::string& out, const SaxScalar& v, const FieldPath& at) {
    if (v.kind != SaxScalar::Kind::kString) return s.fail(at, "must be a string");
    out = std::move(*v.string);
  }
  static void start(SaxDriver& s, std::string& /*out*/, bool /*object*/, const FieldPath& at) {
    s.fail(at, "must be a string");
    s.beginSkip();
  }
};

template <typename V>
struct SaxValue<Opt<V>> {
  using Type = typename Opt<V>::Type;
  static void scalar(SaxDriver& s, Type& out, const SaxScalar& v, const FieldPath& at) {
    out.emplace();
    SaxValue<V>::scalar(s, *out, v, at);
  }
  static void start(SaxDriver& s, Type& out, bool object, const FieldPath& at) {
    out.emplace();
    SaxValue<V>::start(s, *out, object, at);
  }
};

template <typename T>
struct SaxObjectFrame;
template <typename V>
struct SaxListFrame;
template <typename V>
struct SaxMapFrame;

template <typename T>
struct SaxValue<Obj<T>> {
  static void scalar(SaxDriver& s, OwnerOf<T>& /*out*/, const SaxScalar& /*v*/,
                     const FieldPath& at) {
    s.fail(at, "must be an object");
  }
  static void start(SaxDriver& s, OwnerOf<T>& out, bool object, const FieldPath& at) {
    if (!object) {
      s.fail(at, "must be an object");
      return s.beginSkip();
    }
    s.push(&SaxObjectFrame<T>::kOps, &out, at);
  }
};

template <typename V>
struct SaxValue<ListOf<V>> {
  using Type = typename ListOf<V>::Type;
  static void scalar(SaxDriver& s, Type& /*out*/, const SaxScalar& /*v*/, const FieldPath& at) {
    s.fail(at, "must be a list");
  }
  static void start(SaxDriver& s, Type& out, bool object, const FieldPath& at) {
    if (object) {
      s.fail(at, "must be a list");
      return s.beginSkip();
    }
    out.clear();
    s.push(&SaxListFrame<V>::kOps, &out, at);
  }
};

template <typename V>
struct SaxValue<MapOf<V>> {
  using Type = typename MapOf<V>::Type;
  static void scalar(SaxDriver& s, Type& /*out*/, const SaxScalar& /*v*/, const FieldPath& at) {
    s.fail(at, "must be an object");
  }
  static void start(SaxDriver& s, Type& out, bool object, const FieldPath& at) {
    if (!object) {
      s.fail(at, "must be an object");
      return s.beginSkip();
    }
    out.clear();
    s.push(&SaxMapFrame<V>::kOps, &out, at);
  }
};

// ---- Frames -----------------------------------------------------------------

// An object with a table: as decodeObject, member by member.
template <typename T>
struct SaxObjectFrame {
  using Info = TableInfo<T>;
  using Owner = OwnerOf<T>;
  static constexpr size_t kUnknownRow = Info::kSize;
  static constexpr size_t kApiVersionRow = Info::kSize + 1;
  static constexpr size_t kKindRow = Info::kSize + 2;
  static_assert(Info::kSize <= 64, "seen bits");

  static Owner& owner(SaxFrame& f) { return *static_cast<Owner*>(f.target); }

  template <size_t I>
  static void scalarRow(SaxDriver& s, Owner& o, const SaxScalar& v, const FieldPath& at) {
    const auto& row = std::get<I>(Table<T>::kFields);
    SaxValue<std::remove_cvref_t<decltype(row.codec)>>::scalar(s, std::invoke(row.access, o), v,
                                                               at);
  }
  template <size_t I>
  static void startRow(SaxDriver& s, Owner& o, bool object, const FieldPath& at) {
    const auto& row = std::get<I>(Table<T>::kFields);
    SaxValue<std::remove_cvref_t<decltype(row.codec)>>::start(s, std::invoke(row.access, o), object,
                                                              at);
  }
  // A duplicate member: the value before it is forgotten. A nested object kept in the owner's
  // own type (kSelf) is not reset; no type read by this driver has one.
  template <size_t I>
  static void resetRow(Owner& o) {
    const auto& row = std::get<I>(Table<T>::kFields);
    if constexpr (std::is_member_object_pointer_v<std::remove_cvref_t<decltype(row.access)>>) {
      auto& member = std::invoke(row.access, o);
      member = std::remove_cvref_t<decltype(member)>{};
    }
  }
  template <size_t... I>
  static constexpr auto scalars(std::index_sequence<I...> /*unused*/) {
    using Fn = void (*)(SaxDriver&, Owner&, const SaxScalar&, const FieldPath&);
    return std::array<Fn, sizeof...(I)>{&scalarRow<I>...};
  }
  template <size_t... I>
  static constexpr auto starts(std::index_sequence<I...> /*unused*/) {
    using Fn = void (*)(SaxDriver&, Owner&, bool, const FieldPath&);
    return std::array<Fn, sizeof...(I)>{&startRow<I>...};
  }
  template <size_t... I>
  static constexpr auto resets(std::index_sequence<I...> /*unused*/) {
    using Fn = void (*)(Owner&);
    return std::array<Fn, sizeof...(I)>{&resetRow<I>...};
  }
  static constexpr auto kScalars = scalars(std::make_index_sequence<Info::kSize>());
  static constexpr auto kStarts = starts(std::make_index_sequence<Info::kSize>());
  static constexpr auto kResets = resets(std::make_index_sequence<Info::kSize>());

  static void key(SaxDriver& s, SaxFrame& f, std::string& k) {
    f.row = Info::find(k);
    f.key = std::move(k);
    f.child = f.path.field(f.key);
    if (f.row < Info::kSize) {
      const uint64_t bit = uint64_t{1} << f.row;
      if ((f.seen & bit) != 0) {
        kResets[f.row](owner(f));
        s.decoder().problems().eraseAt(f.child);
      }
      f.seen |= bit;
      return;
    }
    if constexpr (Info::kTypeMeta) {
      if (f.key == "apiVersion" || f.key == "kind") {
        f.row = f.key == "kind" ? kKindRow : kApiVersionRow;
        return;
      }
    }
    if (s.decoder().unknown() == Unknown::kRefuse) {
      s.decoder().problems().eraseAt(f.child);
      if constexpr (requires { Table<T>::kUnknownHint; }) {
        s.fail(f.child, "unknown field; " + std::string(Table<T>::kUnknownHint));
      } else {
        s.fail(f.child, "unknown field");
      }
    }
  }

  static bool capturing(SaxDriver& s) {
    return Info::kCaptures && s.decoder().unknown() == Unknown::kCapture;
  }

  static void scalar(SaxDriver& s, SaxFrame& f, const SaxScalar& v) {
    if (f.row < Info::kSize) {
      if (!v.isNull()) kScalars[f.row](s, owner(f), v, f.child);  // null reads as absent
      return;
    }
    if (f.row != kUnknownRow) return typeMeta(s, f, v.toJson());
    if constexpr (Info::kCaptures) {
      if (capturing(s)) (owner(f).*Table<T>::kUnknown)[f.key] = v.toJson();
    }
  }

  static void start(SaxDriver& s, SaxFrame& f, bool object) {
    if (f.row < Info::kSize) return kStarts[f.row](s, owner(f), object, f.child);
    if (f.row != kUnknownRow) {
      typeMeta(s, f, Json::array());  // neither null nor a string
      return s.beginSkip();
    }
    if constexpr (Info::kCaptures) {
      if (capturing(s)) {
        Json& slot = (owner(f).*Table<T>::kUnknown)[f.key];
        return s.beginCapture(
            object,
            [](SaxDriver& /*s*/, void* out, const FieldPath& /*at*/, Json&& value) {
              *static_cast<Json*>(out) = std::move(value);
            },
            &slot, f.child);
      }
    }
    s.beginSkip();
  }

  static void typeMeta(SaxDriver& s, SaxFrame& f, Json&& value) {
    s.noteTypeMeta(f, f.row == kKindRow, std::move(value));
  }

  static void childDone(SaxDriver& /*s*/, SaxFrame& /*f*/) {}

  static constexpr SaxFrameOps kOps{&key, &scalar, &start, &childDone};
};

template <typename V>
struct SaxListFrame {
  using Item = typename V::Type;
  using List = std::vector<Item>;
  static List& list(SaxFrame& f) { return *static_cast<List*>(f.target); }

  static void key(SaxDriver& /*s*/, SaxFrame& /*f*/, std::string& /*k*/) {}  // arrays have none

  static void scalar(SaxDriver& s, SaxFrame& f, const SaxScalar& v) {
    f.child = f.path.index(f.index++);
    if (v.isNull()) return s.fail(f.child, "must not be null");
    Item item{};
    const size_t before = s.decoder().failures();
    SaxValue<V>::scalar(s, item, v, f.child);
    // A bad element is left out, as by ListOf::decode.
    if (s.decoder().failures() == before) list(f).push_back(std::move(item));
  }

  static void start(SaxDriver& s, SaxFrame& f, bool object) {
    f.child = f.path.index(f.index++);
    f.before = s.decoder().failures();
    if constexpr (std::is_same_v<Item, bool>) {  // no element addresses; a container is no bool
      s.fail(f.child, "must be a boolean");
      s.beginSkip();
    } else {
      list(f).emplace_back();
      SaxValue<V>::start(s, list(f).back(), object, f.child);
    }
  }

  static void childDone(SaxDriver& s, SaxFrame& f) {
    if constexpr (!std::is_same_v<Item, bool>) {
      if (s.decoder().failures() != f.before) list(f).pop_back();
    }
  }

  static constexpr SaxFrameOps kOps{&key, &scalar, &start, &childDone};
};

template <typename V>
struct SaxMapFrame {
  using Item = typename V::Type;
  using Map = typename MapOf<V>::Type;
  static Map& map(SaxFrame& f) { return *static_cast<Map*>(f.target); }

  static void key(SaxDriver& s, SaxFrame& f, std::string& k) {
    f.key = std::move(k);
    f.child = f.path.key(f.key);
    // A duplicate key: the last counts.
    if (auto it = map(f).find(f.key); it != map(f).end()) map(f).erase(it);
    s.decoder().problems().eraseAt(f.child);
  }

  static void scalar(SaxDriver& s, SaxFrame& f, const SaxScalar& v) {
    Item item{};
    const size_t before = s.decoder().failures();
    if (!v.isNull()) {
      SaxValue<V>::scalar(s, item, v, f.child);
    } else if constexpr (!requires { V::kNullIsEmpty; }) {
      s.fail(f.child, "must not be null");
    }
    if (s.decoder().failures() == before) map(f).emplace(f.key, std::move(item));
  }

  static void start(SaxDriver& s, SaxFrame& f, bool object) {
    f.before = s.decoder().failures();
    Item& item = map(f).try_emplace(f.key).first->second;
    SaxValue<V>::start(s, item, object, f.child);
  }

  static void childDone(SaxDriver& s, SaxFrame& f) {
    if (s.decoder().failures() != f.before) map(f).erase(f.key);
  }

  static constexpr SaxFrameOps kOps{&key, &scalar, &start, &childDone};
};

// ---- Decoding a whole value ---------------------------------------------------

// Decodes JSON text into a T, as decode<T>(Json::parse(text), root, options) would, or events
// forwarded to it one value at a time (begin(), the events, finish()): a list page's items, a
// watch event's object.
template <typename T>
class SaxDecoder : private Problems, private Decoder, public SaxDriver {
 public:
  explicit SaxDecoder(std::string_view root = "", const DecodeOptions& options = {},
                      size_t max_depth = kMaxSaxDepth)
      : Problems(options.max_details),
        Decoder(static_cast<Problems&>(*this), options.unknown),
        SaxDriver(static_cast<Decoder&>(*this), max_depth),
        root_(root),
        options_(options) {
    begin();
  }

  // Ready for the next value.
  void begin() {
    static_cast<Problems&>(*this) = Problems(options_.max_details);
    keepInPathOrder();
    out_ = OwnerOf<T>{};
    object_ = false;
    type_meta_[0] = type_meta_[1] = nullptr;
    reset(&kRootOps, this, FieldPath(root_));
  }

  // Ends the reading before the member `key` of the top object when `when`, given the object as
  // read so far, says so; finish() then returns that much, and stopped() is true.
  void stopBefore(std::string_view key, std::function<bool(const OwnerOf<T>&)> when) {
    stop_key_ = key;
    stop_when_ = std::move(when);
  }
  bool readMember(const SaxFrame& frame, const std::string& key) override {
    return !(stop_when_ && key == stop_key_ && isTopObject(frame) && stop_when_(out_));
  }

  // After the value's last event. A syntax error or too deep a text is InvalidArgument; check
  // syntaxError() where that must read differently.
  StatusOr<OwnerOf<T>> finish() {
    if (syntaxError()) return invalidArgument("malformed JSON: " + syntaxErrorMessage());
    if (tooDeep()) {
      return invalidArgument("JSON nested deeper than " + std::to_string(maxDepth()) + " levels");
    }
    if constexpr (TableInfo<T>::kTypeMeta) {
      if (!object_) {
        return invalidArgument(std::string(Table<T>::kKind) + ": must be a JSON object");
      }
      if (!type_meta_[0].is_null() || !type_meta_[1].is_null()) {
        Json meta = Json::object();
        if (!type_meta_[0].is_null()) meta["apiVersion"] = std::move(type_meta_[0]);
        if (!type_meta_[1].is_null()) meta["kind"] = std::move(type_meta_[1]);
        RETURN_IF_ERROR(checkTypeMeta(meta, Table<T>::kApiVersion, Table<T>::kKind));
      }
    }
    sortByPath();
    RETURN_IF_ERROR(Problems::status());
    return std::move(out_);
  }

  StatusOr<OwnerOf<T>> decode(std::string_view text) {
    begin();
    Json::sax_parse(text, this, nlohmann::json::input_format_t::json, /*strict=*/true);
    return finish();
  }

  void noteTypeMeta(const SaxFrame& frame, bool kind, Json&& value) override {
    if (isTopObject(frame)) type_meta_[kind ? 1 : 0] = std::move(value);
  }

 private:
  static SaxDecoder& self(SaxFrame& f) { return *static_cast<SaxDecoder*>(f.target); }
  static void rootKey(SaxDriver& /*s*/, SaxFrame& /*f*/, std::string& /*k*/) {}
  static void rootScalar(SaxDriver& s, SaxFrame& f, const SaxScalar& /*v*/) {
    if constexpr (!TableInfo<T>::kTypeMeta) s.fail(f.path, "must be an object");
  }
  static void rootStart(SaxDriver& s, SaxFrame& f, bool object) {
    if (object) {
      self(f).object_ = true;
      return s.push(&SaxObjectFrame<T>::kOps, &self(f).out_, f.path);
    }
    rootScalar(s, f, SaxScalar{});
    s.beginSkip();
  }
  static void rootDone(SaxDriver& /*s*/, SaxFrame& /*f*/) {}
  static constexpr SaxFrameOps kRootOps{&rootKey, &rootScalar, &rootStart, &rootDone};

  std::string root_;
  DecodeOptions options_;
  std::string stop_key_;
  std::function<bool(const OwnerOf<T>&)> stop_when_;
  OwnerOf<T> out_{};
  bool object_ = false;
  Json type_meta_[2];
};

// decode<T> from text; the syntax errors read "malformed JSON: ...".
template <typename T>
StatusOr<OwnerOf<T>> decodeText(std::string_view text, std::string_view root = "",
                                const DecodeOptions& options = {}) {
  SaxDecoder<T> decoder(root, options);
  return decoder.decode(text);
}

// decodeInto<T> from text that is known to be JSON (a codec's kTakesText value): problems go to
// `decoder`, paths start at `at`.
template <typename T>
class SaxInto : public SaxDriver {
 public:
  SaxInto(Decoder& decoder, const FieldPath& at, OwnerOf<T>& out)
      : SaxDriver(decoder, kMaxSaxDepth), out_(out) {
    reset(&kRootOps, this, at);
  }

 private:
  static void rootKey(SaxDriver& /*s*/, SaxFrame& /*f*/, std::string& /*k*/) {}
  static void rootScalar(SaxDriver& s, SaxFrame& f, const SaxScalar& /*v*/) {
    s.fail(f.path, "must be an object");
  }
  static void rootStart(SaxDriver& s, SaxFrame& f, bool object) {
    if (object) {
      return s.push(&SaxObjectFrame<T>::kOps, &static_cast<SaxInto*>(f.target)->out_, f.path);
    }
    s.fail(f.path, "must be an object");
    s.beginSkip();
  }
  static void rootDone(SaxDriver& /*s*/, SaxFrame& /*f*/) {}
  static constexpr SaxFrameOps kRootOps{&rootKey, &rootScalar, &rootStart, &rootDone};

  OwnerOf<T>& out_;
};

template <typename T>
void decodeTextInto(std::string_view text, const FieldPath& at, OwnerOf<T>& out, Decoder& d) {
  SaxInto<T> driver(d, at, out);
  Json::sax_parse(text, &driver, nlohmann::json::input_format_t::json, /*strict=*/true);
}

}  // namespace rsc::client::codec
