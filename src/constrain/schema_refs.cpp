// References inside one schema document for the JSON Schema compiler
// (schema_compiler.h): every $ref becomes "#" + a JSON pointer from the
// root, whatever its spelling:
//   "#/$defs/a"               a pointer (percent-decoded later);
//   "#foo"                    an $anchor / $dynamicAnchor, or draft-07's
//                             "$id": "#foo", in the current resource;
//   "item.json", "urn:x#/a"   a resource named by an "$id" (draft-04: "id")
//                             in the document, resolved against the base
//                             URI in force where the $ref stands (RFC 3986,
//                             the common cases: absolute, "//host", "/path",
//                             relative paths with ./ and ../).
// Documents outside the schema are never fetched: UNSUPPORTED.
#include <algorithm>

#include "constrain/schema_compiler.h"
#include "constrain/schema_drafts.h"

namespace llm::schema {
namespace {

bool HasScheme(const std::string& u) {
  if (u.empty() || !std::isalpha(static_cast<unsigned char>(u[0]))) return false;
  for (char c : u) {
    if (c == ':') return true;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return false;
  }
  return false;
}

std::string RemoveDots(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 0;
  const bool absolute = !path.empty() && path[0] == '/';
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    std::string seg = path.substr(pos, end - pos);
    if (seg == "..") {
      if (!out.empty()) out.pop_back();
    } else if (seg != "." && !(seg.empty() && end < path.size())) {
      out.push_back(seg);
    }
    pos = end + 1;
  }
  std::string r = absolute ? "/" : "";
  for (size_t i = 0; i < out.size(); ++i) r += (i ? "/" : "") + out[i];
  return r;
}

// ref (no fragment) against base (no fragment).
std::string ResolveUri(const std::string& base, const std::string& ref) {
  if (ref.empty()) return base;
  if (HasScheme(ref)) return ref;
  const size_t colon = base.find(':');
  const std::string scheme = HasScheme(base) ? base.substr(0, colon + 1) : "";
  if (ref.rfind("//", 0) == 0) return scheme + ref;
  std::string authority;  // "scheme://host"
  std::string path = base.substr(scheme.size());
  if (path.rfind("//", 0) == 0) {
    const size_t slash = path.find('/', 2);
    authority = path.substr(0, slash == std::string::npos ? path.size() : slash);
    path = slash == std::string::npos ? "" : path.substr(slash);
  }
  if (ref[0] == '/') return scheme + authority + RemoveDots(ref);
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  return scheme + authority + RemoveDots(dir + ref);
}

std::string StripFragment(const std::string& u) { return u.substr(0, u.find('#')); }

// The $id of a schema object (draft-04's "id" when it is a string and
// there is no "$id").
const Json* IdOf(const Json& s) {
  if (!s.is_object()) return nullptr;
  const Json* id = s.Find("$id");
  if (!id) {
    id = s.Find("id");
    // "id" is also a common property name: only a string that is not a schema.
    if (id && !id->is_string()) id = nullptr;
  }
  return id && id->is_string() ? id : nullptr;
}

}  // namespace

void Compiler::IndexIds() {
  struct Item {
    const Json* s;
    std::string ptr, base;
    int depth;
  };
  std::vector<Item> todo = {{&root_, "", "", 0}};
  while (!todo.empty()) {
    Item it = std::move(todo.back());
    todo.pop_back();
    if (it.depth > 128 || ids_.size() + anchors_.size() > 100000) continue;
    if (it.s->is_object()) {
      if (const Json* id = IdOf(*it.s)) {
        const std::string& v = id->as_string();
        if (!v.empty() && v[0] == '#') {
          anchors_.emplace(it.base + v, it.ptr);  // draft-07 "$id": "#name"
        } else {
          it.base = ResolveUri(it.base, StripFragment(v));
          ids_.emplace(it.base, it.ptr);
          if (it.ptr.empty()) root_base_ = it.base;
        }
      }
      for (const char* k : {"$anchor", "$dynamicAnchor"})
        if (const Json* a = it.s->Find(k); a && a->is_string()) anchors_.emplace(it.base + "#" + a->as_string(), it.ptr);
      if (const Json* a = it.s->Find("$dynamicAnchor"); a && a->is_string())
        dynamic_anchors_.emplace(it.base + "#" + a->as_string(), it.ptr);
      if (it.s->Find("$dynamicRef")) dynamic_ = true;
      for (const auto& [k, v] : it.s->object()) {
        if (k == "enum" || k == "const" || k == "examples" || k == "default") continue;  // values, not schemas
        if (v.is_object() || v.is_array()) todo.push_back({&v, PointerJoin(it.ptr, k), it.base, it.depth + 1});
      }
    } else if (it.s->is_array()) {
      for (size_t i = 0; i < it.s->array().size(); ++i)
        todo.push_back({&it.s->array()[i], PointerJoin(it.ptr, i), it.base, it.depth + 1});
    }
  }
}

std::string Compiler::BaseAt(const std::string& ptr) const {
  std::string base;
  const Json* cur = &root_;
  size_t pos = 0;
  while (cur) {
    if (const Json* id = IdOf(*cur); id && !id->as_string().empty() && id->as_string()[0] != '#')
      base = ResolveUri(base, StripFragment(id->as_string()));
    if (pos >= ptr.size()) break;
    size_t end = ptr.find('/', pos + 1);
    if (end == std::string::npos) end = ptr.size();
    std::string token;
    for (size_t i = pos + 1; i < end; ++i) {
      if (ptr[i] == '~' && i + 1 < end) {
        token += ptr[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += ptr[i];
      }
    }
    if (cur->is_object()) {
      const Json* next = cur->Find(token);
      cur = next ? next : cur->Find(kIgnoredPrefix + token);  // (schema_drafts.h)
    } else if (cur->is_array() && !token.empty() && token.size() < 10 &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const size_t i = std::stoul(token);
      cur = i < cur->array().size() ? &cur->array()[i] : nullptr;
    } else {
      cur = nullptr;
    }
    pos = end;
  }
  return base;
}

StatusOr<std::string> Compiler::Canonical(const std::string& ref, const std::string& ptr) const {
  // A target the compiler resolved itself ($dynamicRef): a pointer from the root.
  if (ref.rfind(kResolvedRef, 0) == 0) return ref.substr(1);
  // The common case, in documents without $id: a pointer already.
  if ((ref.empty() || ref[0] == '#') && (ref.size() < 2 || ref[1] == '/') && ids_.empty()) return ref.empty() ? "#" : ref;
  const size_t hash = ref.find('#');
  const std::string uri = ref.substr(0, hash);
  const std::string frag = hash == std::string::npos ? "" : ref.substr(hash + 1);
  const std::string base = BaseAt(ptr);
  const std::string target = ResolveUri(base, uri);
  std::string resource;
  if (target == root_base_) {
    resource = "";
  } else if (auto it = ids_.find(target); it != ids_.end()) {
    resource = it->second;
  } else if (uri.empty()) {
    resource = "";  // (a base with no $id of its own: the root)
  } else {
    return Unsupported("$ref \"" + ref + "\" at " + Where(ptr) +
                       ": no schema in the document has that $id (only references inside the schema are followed)");
  }
  if (frag.empty() || frag[0] == '/') return "#" + resource + frag;
  auto a = anchors_.find(target + "#" + frag);
  if (a == anchors_.end()) return InvalidArgument("$ref \"" + ref + "\" at " + Where(ptr) + ": no $anchor \"" + frag + "\" in that schema");
  return "#" + a->second;
}

StatusOr<std::string> Compiler::DynamicTarget(const std::string& ref, const std::string& ptr) const {
  LLM_ASSIGN_OR_RETURN(const std::string target, Canonical(ref, ptr));
  const size_t hash = ref.find('#');
  const std::string frag = hash == std::string::npos ? "" : ref.substr(hash + 1);
  if (frag.empty() || frag[0] == '/') return target;  // a pointer: as $ref
  LLM_ASSIGN_OR_RETURN(const Json* t, ResolvePointer(target, ptr));
  const Json* anchor = t->is_object() ? t->Find("$dynamicAnchor") : nullptr;
  if (!anchor || !anchor->is_string() || anchor->as_string() != frag) return target;  // no bookend: as $ref
  if (frag == kRecursiveAnchor) {
    // 2019-09's $recursiveRef (schema_drafts.h): outward from the innermost
    // resource, as long as each has "$recursiveAnchor": true.
    std::string found = target;
    for (auto r = scope_.rbegin(); r != scope_.rend(); ++r) {
      auto it = dynamic_anchors_.find(*r + "#" + frag);
      if (it == dynamic_anchors_.end()) break;
      found = "#" + it->second;
    }
    return found;
  }
  for (const std::string& resource : scope_)
    if (auto it = dynamic_anchors_.find(resource + "#" + frag); it != dynamic_anchors_.end()) return "#" + it->second;
  return target;
}

}  // namespace llm::schema
