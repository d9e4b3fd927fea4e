// JSON Schema -> GBNF grammar (docs/GRAMMAR.md's dialect, root rule `root`).
//
// The grammar accepts JSON texts valid against the schema: sound always (an
// output it accepts validates, format checks included), exact where that is
// cheap, and where exactness is out of reach an under-approximation that
// still has a valid completion for every prefix, so a model can always
// finish. Where it narrows the schema:
//   - whitespace: at most one run between tokens, " " or a newline and up to
//     40 spaces (and by default at most 4 per open container: json_layout.h;
//     LLM_WHITESPACE_FREE frees the `ws` rule), none before or after the
//     root value;
//   - strings: no \u escapes; numbers: at most 16 integer / 16 fraction
//     digits, exponents of at most 2 digits, bounded numbers never use them;
//   - multipleOf: integers that are multiples (a number's fractional
//     multiples left out); a range holding at most 256 of them listed, or
//     unbounded (or from 0) by a remainder automaton, step <= 1000;
//   - a number range keeps integers and decimals whose integer part lies in
//     it (minimum 0.5 starts at 1); a range containing no integer is refused
//     (one no number meets is no value);
//   - objects: properties in schema order, required ones always, optional
//     ones in any subset; other keys only when additionalProperties is true
//     or a schema (absent counts as false once `properties` is given), and
//     never a declared name; minProperties/maxProperties counted in the
//     members' rules when the required/declared counts do not decide them
//     (an absent additionalProperties is then true if min needs it);
//   - uniqueItems: over items from a small enum/const/boolean/null set (the
//     values not picked yet; <= 6), or when maxItems <= 1; over other items
//     (or more than 6 values) narrowed to at most one item where minItems
//     <= 1 (a one-item array is unique), else refused;
//   - arrays: a tuple (prefixItems; array-form items) may stop at any
//     position past minItems, items after it once it is whole; contains with
//     minContains <= 4 (items marked as hits); with maxContains (<= 256)
//     each item a hit or a miss (the negation of contains), hits counted;
//     not beside prefixItems or item counts;
//   - oneOf is compiled as anyOf when its branches are provably disjoint
//     (types, const/enum values, number ranges, or a required property the
//     other branch forbids or gives disjoint values: schema_oneof.cpp), so
//     an output matches exactly one; otherwise (<= 8 branches) as anyOf of
//     "branch k and the negation of every other"; where a negation is
//     missing it is refused (LLM_ERR_UNSUPPORTED naming the two branches);
//   - false (and an enum/const its type rejects) is "no value": an anyOf
//     or oneOf branch dropped, an optional property that must be absent,
//     no items past the tuple (or from a false prefixItems position on);
//     a whole schema with no value is refused (LLM_ERR_INVALID_ARGUMENT);
//   - counts (minLength, maxItems, ...) may be written as 2.0; maxLength
//     and maxItems above 4096 are narrowed to 4096, minLength/minItems
//     above it refused (LLM_ERR_INVALID_ARGUMENT naming the keyword);
//     strings of one length range share one rule; a schema whose grammar
//     passes the grammar limits (docs/GRAMMAR.md) is LLM_ERR_INVALID_ARGUMENT;
//   - allOf is merged keyword by keyword ($refs resolved, nested allOf
//     flattened): the tighter bound, the common types and enum values, a
//     property or items schema given twice as the allOf of both, multipleOf
//     as the least common multiple; additionalProperties (items past a
//     tuple) of one branch applies to the names (positions) its own branch
//     leaves, so another branch's property gets both schemas; what cannot
//     be merged exactly (two different formats, additionalProperties beside
//     another branch's patternProperties, a recursive $ref) is refused;
//   - keywords beside $ref hold too (allOf [$ref, siblings]), and so do
//     keywords beside anyOf/oneOf (merged into every branch; anyOf beside
//     oneOf: the oneOf in every anyOf branch); beside enum/const they drop
//     the values their grammar rejects;
//   - unknown keywords are annotations (ignored), as JSON Schema says;
//   - drafts: the root's "$schema" (draft-04, -06, -07, 2019-09, 2020-12)
//     says how the document reads (schema_drafts.h: keywords the draft
//     lacks are annotations, $ref alone before 2019-09, draft-04's id,
//     2019-09's $recursiveRef); none, or an unknown one, reads as 2020-12
//     with the earlier drafts' legacy forms as they meant them; draft-03
//     is refused;
//   - patternProperties / propertyNames: free keys as the product of the
//     patterns' automata with the declared names (schema_keys.cpp), the
//     key's closing quote leading into the matching patterns' schema;
//   - not / if-then-else: where the negation of the schema is a schema
//     again (types, integer's being the decimals with a non-zero last
//     digit; required, bounds, lengths, counts, scalar consts and enums,
//     properties of those, not/allOf/anyOf of those: schema_negate.cpp);
//     if S then T else E is anyOf [S and T, not-S and E], exact;
//   - unevaluatedProperties / unevaluatedItems once allOf/$ref/anyOf are
//     merged (the evaluated set is then the schema's own properties or
//     tuple): additionalProperties / items past the tuple; in an allOf or
//     $ref branch, over what that branch's subtree evaluates; a negation
//     (not, a failed if) evaluates nothing; beside contains, an item past
//     the tuple matches contains or unevaluatedItems; beside
//     dependentSchemas once split; in a branch whose subtree varies
//     (anyOf, not, if, contains), refused;
//   - dependentRequired / dependentSchemas / draft-07 dependencies: a case
//     split per trigger property (absent | present with what it needs),
//     at most 4 triggers per object;
//   - pattern: a deterministic automaton (schema_pattern.h), intersected
//     with minLength/maxLength; the free end of an unanchored pattern stops
//     128 characters on, and so does a cyclic pattern under a maxLength
//     longer than that past the length it needs, and a counted repetition
//     {m,n} with n above 1000 (at m + 128); \p{..} general categories
//     (unicode_classes.h) and a leading (?s) are read; every prefix it
//     admits can be completed, so EOS is allowed only once the string is
//     whole;
//   - format: date, time, date-time, uuid, email, ipv4, hostname, uri, each
//     of bounded length (email: local part <= 32 characters, 2-4 domain
//     labels of <= 24; unknown formats are annotations, ignored); beside
//     pattern or lengths, refused;
//   - $ref: JSON pointers, $anchor (draft-07: "$id": "#name") and
//     $id-relative URIs inside the document (schema_refs.cpp); a document
//     outside the schema is never fetched (LLM_ERR_UNSUPPORTED);
//   - $dynamicRef: resolved at compile time against the resources the
//     visit is inside (the outermost $dynamicAnchor of that name when the
//     static target bookends with one), then a $ref; inside a copy a merge
//     made (an allOf/anyOf/if branch) refused;
//   - recursion: a $ref that can reach itself is unrolled 5 levels deep
//     (kMaxRecursion, schema_compiler.h); at the last level it keeps only
//     the ways out that need no further level (a null or other anyOf
//     branch, an omitted optional property, an array without items), and
//     a schema with no such way out (a required property whose schema is
//     "$ref": "#") is refused with LLM_ERR_INVALID_ARGUMENT;
//   - "any JSON value" (true, {}, a free additionalProperties value):
//     containers nest at most 2 deep with at most 8 members/items each,
//     strings (keys included) at most 64 characters;
//   - additional (free) keys: at most 16 per object, each at most 64
//     characters past where it leaves every declared name; never a key
//     already written in the same object, nor a token after which every
//     key would be one (json_keys.h, beside the grammar);
// Keywords that change validity but are not handled (uniqueItems over
// other items with minItems >= 2, a not/if whose negation is no schema,
// lookaround and other non-regular pattern parts,
// propertyNames by format, ...; docs/GRAMMAR.md lists them)
// fail with LLM_ERR_UNSUPPORTED naming the keyword and its JSON pointer; a
// malformed schema fails with LLM_ERR_INVALID_ARGUMENT, likewise located.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace llm {

// free_keys (optional): set when some object of the grammar admits keys
// the schema does not name (additionalProperties, "any value"), whose
// uniqueness the grammar cannot express (Grammar::unique_keys).
StatusOr<std::string> JsonSchemaToGrammar(std::string_view schema_json, bool* free_keys = nullptr);

}  // namespace llm
