#include "scheduler/wire.h"

#include <cctype>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "net/http_wire.h"

namespace gpushare::scheduler {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The first byte in [p, end) that a JSON string cannot carry as it is: '"', '\\', a control
// character, or a non-ASCII byte; `end` when there is none. Node names are plain ASCII, so the
// scan is the whole cost of reading and writing them: 16 bytes at a time where SSE2 exists.
const char* FindSpecial(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  // Signed compare: bytes 0x80..0xff are negative, so "< 0x20" also catches non-ASCII.
  auto hits = [&](const char* at) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    return static_cast<unsigned>(_mm_movemask_epi8(
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space))));
  };
  if (end - p >= 16) {
    for (; end - p >= 16; p += 16)
      if (const unsigned bits = hits(p)) return p + __builtin_ctz(bits);
    if (p == end) return end;
    // The last 1..15 bytes: the 16 that end at `end` (already inside the range), minus those
    // before p.
    const char* q = end - 16;
    const unsigned bits = hits(q) & (0xFFFFu << (p - q));
    return bits ? q + __builtin_ctz(bits) : end;
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
  return end;
}

// Appends `s` as a JSON string. `s` comes from a parsed request (valid UTF-8) or from our own
// messages; only the characters JSON requires are escaped (non-ASCII bytes are copied).
void AppendString(std::string* out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out->push_back('"');
  const char* p = s.data();
  const char* const end = p + s.size();
  for (;;) {
    const char* q = FindSpecial(p, end);
    out->append(p, static_cast<size_t>(q - p));  // in bulk: names rarely need escapes
    if (q == end) break;
    const unsigned char u = static_cast<unsigned char>(*q);
    if (u >= 0x80) {
      out->push_back(*q);
    } else if (u == '"' || u == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(u));
    } else {
      out->append("\\u00");
      out->push_back(hex[u >> 4]);
      out->push_back(hex[u & 15]);
    }
    p = q + 1;
  }
  out->push_back('"');
}

// Go's encoding/json folds keys with bytes.EqualFold semantics: ASCII case plus the two
// non-ASCII runes that fold to ASCII letters, KELVIN SIGN (k) and LATIN SMALL LETTER LONG S (s).
std::string FoldKey(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c == 0xE2 && key.substr(i, 3) == "\xE2\x84\xAA") {
      out += 'k';
      i += 2;
    } else if (c == 0xC5 && key.substr(i, 2) == "\xC5\xBF") {
      out += 's';
      i += 1;
    } else {
      out += static_cast<char>(std::tolower(c));
    }
  }
  return out;
}

std::string_view TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::discarded:
      return "invalid";
    default:
      return "a number";
  }
}

Status WrongType(std::string_view field, std::string_view want, const json& got) {
  return Status::InvalidArgument(std::string(field) + ": must be " + std::string(want) + ", got " +
                                 std::string(TypeName(got)));
}

// A string field; null or absent is "".
Status StringField(const json& obj, std::string_view name, std::string* out) {
  GPUSHARE_ASSIGN_OR_RETURN(const json* f, FindField(obj, name));
  if (f == nullptr || f->is_null()) return Status::Ok();
  if (!f->is_string()) return WrongType(name, "a string", *f);
  *out = f->get<std::string>();
  return Status::Ok();
}

json NullableMap(const std::map<std::string, std::string>& m) {
  json o = json::object();
  for (const auto& [k, v] : m) o[k] = v;
  return o;
}

// JSON text has no raw NUL byte anywhere (a control character is not allowed even inside a
// string), and nlohmann's lexer reads one as the end of the input: `{"a":1}<NUL>junk` would parse.
// So a NUL is refused before any parser sees the body.
Status NulProblem(std::string_view body) {
  const size_t at = body.find('\0');
  if (at == std::string_view::npos) return Status::Ok();
  return Status::InvalidArgument("malformed JSON: NUL byte at offset " + std::to_string(at));
}

}  // namespace

Result<json> ParseBody(std::string_view body, int max_depth) {
  if (Status nul = NulProblem(body); !nul.ok()) return nul;
  int depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        return Status::InvalidArgument("malformed JSON: nesting deeper than " +
                                       std::to_string(max_depth) + " levels at offset " +
                                       std::to_string(i));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  if (body.empty()) return Status::InvalidArgument("malformed JSON: empty body");
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) return WrongType("request body", "a JSON object", j);
  return j;
}

Result<const json*> FindField(const json& obj, std::string_view name) {
  if (!obj.is_object()) return static_cast<const json*>(nullptr);
  const std::string want = FoldKey(name);
  const json* found = nullptr;
  std::string found_key;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.key().size() < name.size() || it.key().size() > name.size() * 3) continue;
    if (FoldKey(it.key()) != want) continue;
    if (found != nullptr)
      return Status::InvalidArgument("field " + std::string(name) + " appears twice (as \"" +
                                     found_key + "\" and \"" + it.key() + "\")");
    found = &it.value();
    found_key = it.key();
  }
  return found;
}

std::vector<std::string_view> ExtenderArgs::CandidateNames() const {
  if (node_names) return *node_names;
  std::vector<std::string_view> out;
  if (nodes) {
    out.reserve(nodes->size());
    for (const json& n : *nodes) out.push_back(n["metadata"]["name"].get_ref<const std::string&>());
  }
  return out;
}

namespace {

Status DecodeNodes(json&& list, ExtenderArgs* a) {
  if (list.is_null()) return Status::Ok();
  if (!list.is_object()) return WrongType("Nodes", "a NodeList object or null", list);
  std::vector<json> items;
  auto it = list.find("items");
  if (it != list.end() && !it->is_null()) {
    if (!it->is_array()) return WrongType("Nodes.items", "an array", *it);
    items.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      json& n = (*it)[i];
      const std::string path = "Nodes.items[" + std::to_string(i) + "]";
      if (!n.is_object()) return WrongType(path, "a Node object", n);
      auto meta = n.find("metadata");
      if (meta == n.end() || !meta->is_object())
        return Status::InvalidArgument(path + ".metadata: missing");
      auto name = meta->find("name");
      if (name == meta->end() || !name->is_string() || name->get<std::string>().empty())
        return Status::InvalidArgument(path + ".metadata.name: missing or not a string");
      items.push_back(std::move(n));
    }
  }
  a->nodes = std::move(items);
  return Status::Ok();
}

// SAX handler for ExtenderArgs: builds the Pod and Nodes values with nlohmann's DOM builder,
// collects NodeNames directly, skips everything else.
class ArgsSax {
 public:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;
  enum class Field { kNone, kPod, kNodes, kNames, kSkip };

  explicit ArgsSax(int max_depth) : max_depth_(max_depth) {}

  bool null() { return Scalar(json(nullptr)); }
  bool boolean(bool v) { return Scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return Scalar(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return Scalar(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return Scalar(json(v)); }
  bool string(std::string& v) {
    if (depth_ == 2 && field_ == Field::kNames && in_names_) {
      names_.push_back(std::move(v));
      return true;
    }
    return Scalar(json(std::move(v)));
  }
  bool binary(json::binary_t&) { return Fail("unexpected binary value"); }

  bool start_object(std::size_t n) { return Open(true, n); }
  bool start_array(std::size_t n) { return Open(false, n); }
  bool end_object() { return Close(true); }
  bool end_array() { return Close(false); }

  bool key(std::string& k) {
    if (dom_) return dom_->key(k);
    if (depth_ != 1) return true;  // inside a skipped value
    const std::string folded = FoldKey(k);
    Field f = Field::kSkip;
    if (folded == "pod") f = Field::kPod;
    if (folded == "nodes") f = Field::kNodes;
    if (folded == "nodenames") f = Field::kNames;
    if (f != Field::kSkip) {
      std::string& first = seen_[static_cast<int>(f)];
      if (!first.empty())
        return Fail("field " +
                    std::string(f == Field::kPod     ? "Pod"
                                : f == Field::kNodes ? "Nodes"
                                                     : "NodeNames") +
                    " appears twice (as \"" + first + "\" and \"" + k + "\")");
      first = k;
    }
    field_ = f;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    return Fail(std::string("malformed JSON: ") + e.what());
  }

  Status Finish(ExtenderArgs* a) {
    if (!error_.empty()) return Status::InvalidArgument(error_);
    if (!root_object_)
      return Status::InvalidArgument("request body: must be a JSON object, got " + root_type_);
    if (seen_[static_cast<int>(Field::kPod)].empty() || pod_.is_null())
      return Status::InvalidArgument("Pod: missing or null");
    if (!pod_.is_object()) return WrongType("Pod", "an object", pod_);
    a->pod = std::move(pod_);
    if (have_names_) {
      // Views are taken only now: the strings no longer move (a moved vector keeps its buffer).
      auto owned = std::make_unique<std::vector<std::string>>(std::move(names_));
      a->node_names.emplace(owned->begin(), owned->end());
      a->unescaped_names = std::move(owned);
    }
    return DecodeNodes(std::move(nodes_), a);
  }

 private:
  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  // A scalar: the root (an error), a field's value, or part of a built or skipped value.
  bool Scalar(json v) {
    if (depth_ == 0) {
      root_type_ = std::string(TypeName(v));
      return true;
    }
    if (dom_) return Forward(std::move(v));
    if (depth_ != 1) {
      if (field_ == Field::kNames && in_names_ && depth_ == 2)
        return Fail("NodeNames[" + std::to_string(names_.size()) + "]: must be a string, got " +
                    std::string(TypeName(v)));
      return true;
    }
    switch (field_) {
      case Field::kPod:
        pod_ = std::move(v);
        break;
      case Field::kNodes:
        nodes_ = std::move(v);
        break;
      case Field::kNames:
        if (!v.is_null()) return WrongTypeFail("NodeNames", "an array of strings or null", v);
        break;
      default:
        break;
    }
    field_ = Field::kNone;
    return true;
  }
  bool WrongTypeFail(std::string_view f, std::string_view want, const json& got) {
    return Fail(WrongType(f, want, got).message());
  }
  bool Forward(json v) {
    switch (v.type()) {
      case json::value_t::null:
        return dom_->null();
      case json::value_t::boolean:
        return dom_->boolean(v.get<bool>());
      case json::value_t::number_integer:
        return dom_->number_integer(v.get<json::number_integer_t>());
      case json::value_t::number_unsigned:
        return dom_->number_unsigned(v.get<json::number_unsigned_t>());
      case json::value_t::number_float:
        return dom_->number_float(v.get<json::number_float_t>(), "");
      default:
        return dom_->string(v.get_ref<std::string&>());
    }
  }
  bool Open(bool object, std::size_t n) {
    if (++depth_ > max_depth_)
      return Fail("malformed JSON: nesting deeper than " + std::to_string(max_depth_) + " levels");
    if (depth_ == 1) {
      if (!object) {
        root_type_ = "an array";
        return Fail("request body: must be a JSON object, got an array");
      }
      root_object_ = true;
      return true;
    }
    if (dom_) return object ? dom_->start_object(n) : dom_->start_array(n);
    if (depth_ == 2 && (field_ == Field::kPod || field_ == Field::kNodes)) {
      built_ = json();
      dom_ = std::make_unique<Dom>(built_, true);
      return object ? dom_->start_object(n) : dom_->start_array(n);
    }
    if (depth_ == 2 && field_ == Field::kNames) {
      if (object) return Fail("NodeNames: must be an array of strings or null, got an object");
      in_names_ = true;
      have_names_ = true;
      return true;
    }
    if (depth_ == 3 && field_ == Field::kNames && in_names_)
      return Fail("NodeNames[" + std::to_string(names_.size()) + "]: must be a string, got " +
                  (object ? "an object" : "an array"));
    return true;  // a skipped value
  }
  bool Close(bool object) {
    const int d = depth_--;
    if (dom_) {
      const bool ok = object ? dom_->end_object() : dom_->end_array();
      if (d == 2) {
        dom_.reset();
        (field_ == Field::kPod ? pod_ : nodes_) = std::move(built_);
        field_ = Field::kNone;
      }
      return ok;
    }
    if (d == 2 && field_ == Field::kNames) {
      in_names_ = false;
      field_ = Field::kNone;
    } else if (d == 2) {
      field_ = Field::kNone;
    }
    return true;
  }

  int max_depth_;
  int depth_ = 0;
  bool root_object_ = false;
  std::string root_type_ = "nothing";
  Field field_ = Field::kNone;
  std::string seen_[5];
  std::unique_ptr<Dom> dom_;
  json built_, pod_, nodes_;
  std::vector<std::string> names_;
  bool in_names_ = false, have_names_ = false;
  std::string error_;
};

// The fast path for what kube-scheduler really sends: an object whose keys are plain ASCII,
// NodeNames an array of plain ASCII strings (node names are DNS names). It scans the top level
// itself, reads NodeNames without a JSON lexer, and hands every other value's text to
// nlohmann's parser, which validates it. It answers only for a request it decodes completely;
// anything else (escapes, non-ASCII, malformed or unusual input, too deep, a decoding error)
// returns false and the SAX path decides, with its messages.
class FastArgs {
 public:
  FastArgs(std::string_view body, int max_depth)
      : p_(body.data()), end_(body.data() + body.size()), max_depth_(max_depth) {}

  bool Decode(ExtenderArgs* a) {
    Ws();
    if (!Eat('{')) return false;
    json pod, nodes;
    std::vector<std::string_view> names;
    bool have_pod = false, have_nodes = false, have_names_key = false, have_names = false;
    Ws();
    if (Peek() == '}') return false;  // no Pod
    for (;;) {
      Ws();
      std::string_view key;
      if (!PlainString(&key)) return false;
      Ws();
      if (!Eat(':')) return false;
      Ws();
      const std::string folded = FoldKey(key);
      if (folded == "nodenames") {
        if (have_names_key) return false;
        have_names_key = true;
        if (Peek() == 'n') {
          if (!Literal("null")) return false;
        } else {
          if (!Names(&names)) return false;
          have_names = true;
        }
      } else {
        const char* start = p_;
        if (!SkipValue()) return false;
        const std::string_view text(start, static_cast<size_t>(p_ - start));
        if (folded == "pod" || folded == "nodes") {
          bool& seen = folded == "pod" ? have_pod : have_nodes;
          if (seen) return false;
          seen = true;
          json v = json::parse(text, nullptr, false);
          if (v.is_discarded()) return false;
          (folded == "pod" ? pod : nodes) = std::move(v);
        } else if (!json::accept(text)) {
          return false;
        }
      }
      Ws();
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return false;
    }
    Ws();
    if (p_ != end_ || !have_pod || !pod.is_object()) return false;
    ExtenderArgs out;
    out.pod = std::move(pod);
    if (have_names) out.node_names = std::move(names);
    if (!DecodeNodes(std::move(nodes), &out).ok()) return false;
    *a = std::move(out);
    return true;
  }

 private:
  char Peek() const { return p_ < end_ ? *p_ : '\0'; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++p_;
    return true;
  }
  void Ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }
  // "..." of printable ASCII without escapes.
  bool PlainString(std::string_view* out) {
    if (!Eat('"')) return false;
    const char* close = FindSpecial(p_, end_);
    if (close == end_ || *close != '"') return false;
    *out = std::string_view(p_, static_cast<size_t>(close - p_));
    p_ = close + 1;
    return true;
  }
  bool Names(std::vector<std::string_view>* names) {
    if (!Eat('[')) return false;
    if (2 > max_depth_) return false;
    Ws();
    if (Eat(']')) return true;
    for (;;) {
      Ws();
      std::string_view n;
      if (!PlainString(&n)) return false;
      names->push_back(n);  // a view into the body
      Ws();
      if (Eat(',')) continue;
      return Eat(']');
    }
  }
  // Moves past one value, counting nesting as the SAX path does (the body's object is level 1).
  // Only finds the value's end; its text is validated by nlohmann afterwards.
  bool SkipValue() {
    int depth = 1;
    if (p_ >= end_) return false;
    if (*p_ != '{' && *p_ != '[') {
      if (*p_ == '"') return SkipString();
      while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ' && *p_ != '\n' &&
             *p_ != '\r' && *p_ != '\t')
        ++p_;
      return true;
    }
    do {
      const char c = *p_;
      if (c == '"') {
        if (!SkipString()) return false;
        continue;
      }
      if (c == '{' || c == '[') {
        if (++depth > max_depth_) return false;
      } else if (c == '}' || c == ']') {
        --depth;
      }
      ++p_;
    } while (depth > 1 && p_ < end_);
    return depth == 1;
  }
  bool SkipString() {
    ++p_;  // the opening quote
    while (p_ < end_) {
      const char c = *p_++;
      if (c == '\\') {
        if (p_ >= end_) return false;
        ++p_;
      } else if (c == '"') {
        return true;
      }
    }
    return false;
  }

  const char* p_;
  const char* end_;
  int max_depth_;
};

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, int max_depth) {
  if (body.empty()) return Status::InvalidArgument("malformed JSON: empty body");
  if (Status nul = NulProblem(body); !nul.ok()) return nul;
  {
    ExtenderArgs fast;
    if (FastArgs(body, max_depth).Decode(&fast)) return fast;
  }
  return ParseExtenderArgsGeneral(body, max_depth);
}

Result<ExtenderArgs> ParseExtenderArgsGeneral(std::string_view body, int max_depth) {
  if (body.empty()) return Status::InvalidArgument("malformed JSON: empty body");
  if (Status nul = NulProblem(body); !nul.ok()) return nul;
  ArgsSax sax(max_depth);
  bool ok = false;
  try {
    ok = json::sax_parse(body.begin(), body.end(), &sax, json::input_format_t::json, true);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("malformed JSON: ") + e.what());
  }
  ExtenderArgs a;
  Status s = sax.Finish(&a);
  if (!s.ok()) return s;
  if (!ok) return Status::InvalidArgument("malformed JSON");
  return a;
}

// Go's encoding/json writes struct fields in declaration order; so do these encoders.
std::string EncodeFilterResult(const FilterResult& r) {
  if (!r.error.empty())
    return "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":null,\"FailedAndUnresolvableNodes\":"
           "null,\"Error\":" +
           Dump(json(r.error)) + "}";
  std::string out = "{\"Nodes\":";
  if (r.names_mode) {
    out.reserve(out.size() + r.node_names.size() * 24);
    out += "null,\"NodeNames\":[";
    for (size_t i = 0; i < r.node_names.size(); ++i) {
      if (i) out += ',';
      AppendString(&out, r.node_names[i]);
    }
    out += ']';
  } else {
    out += "{\"metadata\":{},\"items\":[";
    for (size_t i = 0; i < r.nodes.size(); ++i) out += (i ? "," : "") + Dump(r.nodes[i]);
    out += "]},\"NodeNames\":null";
  }
  out += ",\"FailedNodes\":" + Dump(NullableMap(r.failed));
  out += ",\"FailedAndUnresolvableNodes\":" + Dump(NullableMap(r.unresolvable));
  return out + ",\"Error\":\"\"}";
}

std::string EncodeHostPriorities(const std::vector<HostPriority>& list) {
  std::string out = "[";
  out.reserve(list.size() * 40 + 2);
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ',';
    out += "{\"Host\":";
    AppendString(&out, list[i].host);
    out += ",\"Score\":";
    out += std::to_string(list[i].score);
    out += '}';
  }
  return out + "]";
}

Result<BindingArgs> DecodeBindingArgs(const json& body) {
  BindingArgs b;
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "PodName", &b.pod_name));
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "PodNamespace", &b.pod_namespace));
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "PodUID", &b.pod_uid));
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "Node", &b.node));
  if (b.pod_name.empty()) return Status::InvalidArgument("PodName: missing or empty");
  if (b.pod_namespace.empty()) return Status::InvalidArgument("PodNamespace: missing or empty");
  if (b.node.empty()) return Status::InvalidArgument("Node: missing or empty");
  return b;
}

namespace {

// One node's Victims or MetaVictims: {"Pods": [...], "NumPDBViolations": n}; a pod is a MetaPod
// ({"UID": ...}) or a Pod ({"metadata": {"uid": ...}}).
Result<NodeVictims> DecodeVictims(const json& v, const std::string& path, bool meta) {
  NodeVictims out;
  if (v.is_null()) return out;
  if (!v.is_object()) return WrongType(path, "an object", v);
  GPUSHARE_ASSIGN_OR_RETURN(const json* pods, FindField(v, "Pods"));
  if (pods != nullptr && !pods->is_null()) {
    if (!pods->is_array()) return WrongType(path + ".Pods", "an array", *pods);
    for (size_t i = 0; i < pods->size(); ++i) {
      const json& p = (*pods)[i];
      const std::string pp = path + ".Pods[" + std::to_string(i) + "]";
      if (!p.is_object()) return WrongType(pp, "an object", p);
      std::string uid;
      if (meta) {
        GPUSHARE_RETURN_IF_ERROR(StringField(p, "UID", &uid).WithContext(pp));
      } else {
        const auto m = p.find("metadata");
        if (m != p.end() && m->is_object()) {
          const auto u = m->find("uid");
          if (u != m->end() && u->is_string()) uid = u->get<std::string>();
        }
      }
      if (uid.empty()) return Status::InvalidArgument(pp + ": no UID");
      out.uids.push_back(std::move(uid));
    }
  }
  GPUSHARE_ASSIGN_OR_RETURN(const json* n, FindField(v, "NumPDBViolations"));
  if (n != nullptr && !n->is_null()) {
    if (!n->is_number_integer()) return WrongType(path + ".NumPDBViolations", "an integer", *n);
    out.pdb_violations = n->get<int64_t>();
  }
  return out;
}

}  // namespace

Result<PreemptionArgs> DecodePreemptionArgs(const json& body) {
  PreemptionArgs a;
  GPUSHARE_ASSIGN_OR_RETURN(const json* pod, FindField(body, "Pod"));
  if (pod == nullptr || !pod->is_object())
    return Status::InvalidArgument("Pod: missing or not an object");
  a.pod = *pod;
  for (const auto& [key, meta] : {std::pair<const char*, bool>{"NodeNameToMetaVictims", true},
                                  std::pair<const char*, bool>{"NodeNameToVictims", false}}) {
    GPUSHARE_ASSIGN_OR_RETURN(const json* m, FindField(body, key));
    if (m == nullptr || m->is_null()) continue;
    if (!m->is_object()) return WrongType(key, "an object", *m);
    for (auto it = m->begin(); it != m->end(); ++it) {
      if (it.key().empty())
        return Status::InvalidArgument(std::string(key) + ": an empty node name");
      GPUSHARE_ASSIGN_OR_RETURN(NodeVictims v,
                                DecodeVictims(*it, std::string(key) + "[" + it.key() + "]", meta));
      NodeVictims& into = a.nodes[it.key()];
      into.uids.insert(into.uids.end(), v.uids.begin(), v.uids.end());
      into.pdb_violations = std::max(into.pdb_violations, v.pdb_violations);
    }
  }
  return a;
}

std::string EncodePreemptionResult(const std::map<std::string, NodeVictims>& nodes) {
  json m = json::object();
  for (const auto& [node, v] : nodes) {
    json pods = json::array();
    for (const std::string& uid : v.uids) pods.push_back(json{{"UID", uid}});
    m[node] = json{{"Pods", std::move(pods)}, {"NumPDBViolations", v.pdb_violations}};
  }
  return Dump(json{{"NodeNameToMetaVictims", std::move(m)}});
}

std::string EncodeBindingResult(std::string_view error) {
  return Dump(json{{"Error", error}});
}

std::string EncodeError(std::string_view error) {
  return net::http::ErrorJson(error);
}

}  // namespace gpushare::scheduler
