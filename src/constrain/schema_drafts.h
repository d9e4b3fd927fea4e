// JSON Schema drafts (issue 29): a schema is read as the draft its root
// "$schema" names. The compiler (schema_compiler.h) reads 2020-12 and the
// earlier drafts' forms that 2020-12 has no meaning for (array-form
// "items" with "additionalItems", "dependencies", draft-04's "id" and
// boolean exclusiveMinimum/exclusiveMaximum); ReadAsDraft rewrites a
// document of another draft so that it means there what its draft says:
//   - keywords the draft does not have are annotations (draft-07's
//     "dependentRequired", "prefixItems", "unevaluatedProperties";
//     draft-04's "const", "contains", "propertyNames", "if"; 2019-09's
//     "$dynamicRef"; 2019-09/2020-12's "dependencies"; 2020-12's
//     "additionalItems" beside a schema-form "items", "$recursiveRef");
//   - draft-04, -06, -07: "$ref" stands alone, its validating siblings
//     (and "$id") ignored;
//   - draft-04: "id" is the identifier ("$id" an annotation); later
//     drafts: "$id" only;
//   - 2019-09: "$recursiveRef": "#" is the $dynamicRef of a reserved
//     anchor that every "$recursiveAnchor": true resource carries (or a
//     plain "$ref": "#" in a resource without one), resolved through the
//     dynamic scope as 2019-09 says (schema_refs.cpp, DynamicTarget).
// An ignored keyword is renamed, not dropped (kIgnoredPrefix + its name):
// a JSON pointer into it still resolves (ResolvePointer falls back to the
// renamed key), and the compiler takes it for an annotation.
// No "$schema" (or one naming no draft: a custom metaschema) reads as
// 2020-12, its legacy forms as their drafts meant them. Draft-03 and
// older differ in ways nothing here reads ("required": true, "disallow",
// "extends", "divisibleBy"): refused, naming "$schema". A "$schema" in an
// embedded resource is not read (the root's draft holds throughout).
#pragma once

#include "util/json.h"
#include "util/status.h"

namespace llm::schema {

enum class Draft { k04, k06, k07, k2019, k2020, kUnspecified };

// Renamed keywords that the document's draft ignores.
inline constexpr const char* kIgnoredPrefix = "\x01ignored:";
// The anchor name "$recursiveAnchor": true stands for (2019-09).
inline constexpr const char* kRecursiveAnchor = "\x01recursive";

// The draft the root's "$schema" names (kUnspecified without one).
StatusOr<Draft> DraftOf(const Json& root);

// The document read as `draft` says (above); unchanged for 2020-12 and
// kUnspecified.
Json ReadAsDraft(const Json& root, Draft draft);

}  // namespace llm::schema
