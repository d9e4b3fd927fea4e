#!/usr/bin/env python3
"""Reference data for the JSON Schema compiler's exactness tests (issue 29,
tests/test_json_schema.cpp, JsonSchemaVectors.*).

Each case is a schema, what the compiler must do with it ("compile", or
"refuse" with a message naming a keyword), and instances written compactly
(json.dumps with separators (',', ':'), keys in the order given). Whether an
instance is valid comes from PyPI `jsonschema` (the validator for the
schema's declared $schema, draft 2020-12 when none), never from llmrt. The
test checks, through the constraint matcher:
  - every instance the grammar accepts is valid (soundness: no exceptions);
  - every valid instance is accepted, unless the case marks it "narrowed"
    (a documented narrowing of json_schema.h: property order, whitespace,
    number spelling, bounded "any value").

    python3 tools/gen_schema_vectors.py > tests/data/constrain/schema_vectors.json
"""
import json
import sys

import jsonschema

# (name, schema, expect, instances, narrowed) -- expect: "compile" or
# ("refuse", "keyword in the message"); narrowed: indices of valid
# instances the grammar may leave out.
CASES = [
    # ---- oneOf: exactly one branch
    # (every value matches all three: none matches exactly one)
    ("oneof_true_branches", {"oneOf": [True, True, True]}, ("refuse", "no value"), [], []),
    ("oneof_integer_number", {"oneOf": [{"type": "integer"}, {"type": "number"}]}, ("refuse", "branches 0 and 1"), [], []),
    ("oneof_untyped_minimum", {"oneOf": [{"type": "integer"}, {"minimum": 2}]}, ("refuse", "oneOf"), [], []),
    # overlapping branches made disjoint: branch k and the negations of the others
    ("oneof_enum_overlap", {"oneOf": [{"const": 1}, {"enum": [1.0, 2]}]}, "compile", [1, 1.0, 2, 3, "x"], []),
    ("oneof_overlap_types_bounds", {"oneOf": [{"type": "number", "maximum": 10}, {"minimum": 5}]}, "compile",
     [1, 5, 7, 10, 11, 4.5, 10.5, "s", None], [5, 6]),
    ("oneof_overlap_required", {"oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}, "compile",
     [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}, 3], []),
    ("oneof_overlap_refused", {"oneOf": [{"pattern": "a"}, {"maxLength": 3}]}, ("refuse", "oneOf"), [], []),
    ("oneof_types", {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, "compile",
     ["a", 3, None, 2.5, True, [], {}], []),
    ("oneof_enums", {"oneOf": [{"const": 1}, {"enum": [3, 2]}, {"enum": ["1"]}]}, "compile",
     [1, 2, 3, "1", 4, "2"], []),
    ("oneof_ranges", {"oneOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "exclusiveMinimum": 0}]},
     "compile", [-3, 0, 1, 7], []),
    ("oneof_ranges_touch", {"oneOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 0}]},
     ("refuse", "oneOf"), [], []),
    ("oneof_discriminator",
     {"oneOf": [
         {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
         {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}, "y": {"type": "string"}}, "required": ["kind", "y"]},
     ]}, "compile",
     [{"kind": "a"}, {"kind": "a", "x": 1}, {"kind": "b", "y": ""}, {"kind": "c", "y": "z"}, {"kind": "d"},
      {"kind": "b"}, {"x": 1}], []),
    ("oneof_required_forbidden",
     {"oneOf": [
         {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
         {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": False},
     ]}, "compile",
     [{"a": 1}, {"b": 2}, {}, {"a": 1, "b": 2}], [3]),
    ("oneof_untyped_required",
     {"oneOf": [{"required": ["a"]}, {"properties": {"a": False}}]}, "compile", [{}, {"a": 1}, {"b": 1}, 1, "s"], []),
    ("oneof_refs",
     {"$defs": {"A": {"type": "object", "properties": {"t": {"const": 1}}, "required": ["t"], "additionalProperties": False},
                "B": {"type": "object", "properties": {"t": {"const": 2}}, "required": ["t"], "additionalProperties": False}},
      "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}, {"type": "array", "maxItems": 0}]}, "compile",
     [{"t": 1}, {"t": 2}, {"t": 3}, [], [1]], []),
    ("oneof_nullable_object",
     {"oneOf": [{"type": "null"}, {"type": "object", "properties": {"a": {"type": "boolean"}}}]}, "compile",
     [None, {}, {"a": True}, {"a": None}, 0], []),
    # ---- false subschemas mean what they mean
    ("false_property", {"properties": {"foo": {"type": "integer"}, "bar": False}}, "compile",
     [{}, {"foo": 1}, {"bar": 1}, {"foo": 1, "bar": 2}, {"foo": "x"}], []),
    ("false_property_with_extras",
     {"type": "object", "properties": {"bar": False}, "additionalProperties": {"type": "integer"}}, "compile",
     [{}, {"a": 1}, {"bar": 1}, {"a": 1, "bar": 1}, {"a": "x"}], []),
    ("anyof_true_false", {"anyOf": [True, False]}, "compile", [1, "a", None, {}, []], [3, 4]),
    ("anyof_false_branch", {"anyOf": [{"type": "integer"}, False]}, "compile", [1, "a"], []),
    ("oneof_false_branch", {"oneOf": [False, {"type": "string"}, False]}, "compile", ["a", 1], []),
    ("items_false", {"type": "array", "items": False}, "compile", [[], [1], [None]], []),
    ("prefix_then_items_false", {"prefixItems": [{"type": "integer"}], "items": False, "type": "array"}, "compile",
     [[1], [1, 2], ["a"]], []),
    ("prefix_false_position", {"type": "array", "prefixItems": [{"type": "integer"}, False]}, "compile",
     [[], [1], [1, 2], ["a"]], [0]),
    ("allof_false_in_anyof", {"anyOf": [{"allOf": [{"type": "integer"}, False]}, {"type": "string"}]}, "compile",
     ["a", 1], []),
    ("const_type_mismatch_branch", {"anyOf": [{"type": "string", "const": 1}, {"type": "boolean"}]}, "compile",
     [1, True, "1"], []),
    ("root_false", False, ("refuse", "no value satisfies"), [], []),
    ("required_false_property", {"properties": {"a": False}, "required": ["a"]}, ("refuse", "no value"), [], []),
    # ---- integers written as 2.0 are integers (2020-12)
    ("min_length_float", {"type": "string", "minLength": 2.0, "maxLength": 3.0}, "compile",
     ["", "a", "ab", "abc", "abcd"], []),
    ("max_items_float", {"type": "array", "items": {"type": "integer"}, "maxItems": 2.0}, "compile",
     [[], [1], [1, 2], [1, 2, 3]], []),
    ("min_properties_float", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                              "minProperties": 1.0}, "compile", [{"a": 1}, {}], []),
    # ---- rule names cannot collide (URL-ish names, names like a grammar helper's)
    ("rule_names_urlish",
     {"type": "object",
      "properties": {"x": {"$ref": "#/definitions/http:~1~1a.b~1c"}, "y": {"$ref": "#/definitions/http:~1~1a-b~1c"},
                     "z": {"$ref": "#/definitions/c-1"}},
      "definitions": {"http://a.b/c": {"type": "array", "items": {"type": "integer"}},
                      "http://a-b/c": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                      "c-1": {"type": "string", "maxLength": 2}},
      "required": ["x", "y", "z"]}, "compile",
     [{"x": [1, 2], "y": ["a"], "z": "ab"}, {"x": ["a"], "y": [], "z": ""}, {"x": [], "y": [1], "z": ""},
      {"x": [], "y": [], "z": "abc"}], []),
    # ---- pattern with minLength/maxLength: both hold
    ("pattern_and_lengths", {"type": "string", "pattern": "^[a-c]+$", "minLength": 2, "maxLength": 4}, "compile",
     ["", "a", "ab", "abc", "abca", "abcab", "ad", "cc"], []),
    ("pattern_unanchored_and_max", {"type": "string", "pattern": "b", "maxLength": 3}, "compile",
     ["b", "ab", "abc", "xbx", "abcd", "aaa", "bbbb", ""], []),
    ("pattern_min_only", {"type": "string", "pattern": "^x*$", "minLength": 3}, "compile",
     ["", "xx", "xxx", "xxxxxxx", "xxy"], []),
    ("pattern_lengths_redundant", {"type": "string", "pattern": "^[0-9]{5}$", "minLength": 5, "maxLength": 5}, "compile",
     ["12345", "1234", "123456", "abcde"], []),
    ("pattern_lengths_escapes", {"type": "string", "pattern": "^[\"\\\\a]*$", "maxLength": 2}, "compile",
     ["", "\"", "\\", "a\"", "\"\"\"", "b"], []),
    ("pattern_lengths_impossible_branch",
     {"anyOf": [{"type": "string", "pattern": "^a{5}$", "maxLength": 3}, {"type": "integer"}]}, "compile",
     ["aaaaa", 1, "aaa"], []),
    ("pattern_nested_quantifiers",
     {"type": "string", "pattern": "^(https?:\\/\\/)?([\\da-z\\.-]+)\\.([a-z\\.]{2,6})([\\/\\w \\.-]*)*\\/?$"},
     "compile", ["http://example.com/a/b", "example.co", "https://x.io/", "ftp://x", "a.b", "x.abcdefgh1"], []),
    # ---- unknown keywords are annotations; siblings of enum/const, $ref, anyOf, oneOf hold too
    ("unknown_beside_enum", {"enum": ["a", "b"], "readonly": True, "x-vendor": {"k": 1}, "typo_maxLenght": 0}, "compile",
     ["a", "b", "c"], []),
    ("unknown_beside_ref", {"$defs": {"s": {"type": "integer"}}, "$ref": "#/$defs/s", "x-order": 3}, "compile",
     [1, "a"], []),
    ("enum_beside_min_length", {"enum": ["a", "abc", 7], "minLength": 2}, "compile", ["a", "abc", 7, "ab"], []),
    ("enum_beside_minimum", {"enum": [1, 5, 10, "x"], "minimum": 4, "exclusiveMaximum": 10}, "compile",
     [1, 5, 10, "x"], []),
    ("const_beside_pattern", {"const": "ab-12", "pattern": "^[a-z]+-[0-9]+$"}, "compile", ["ab-12", "ab"], []),
    ("const_rejected_by_sibling", {"anyOf": [{"const": "abc", "maxLength": 2}, {"type": "null"}]}, "compile",
     ["abc", None], []),
    ("ref_beside_max_length", {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 3}, "compile",
     ["", "abc", "abcd", 1], []),
    ("ref_beside_properties",
     {"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
      "$ref": "#/$defs/base", "properties": {"name": {"type": "string"}}, "required": ["name"]}, "compile",
     [{"name": "x", "id": 1}, {"id": 1, "name": "x"}, {"id": 1}, {"name": "x"}, {"id": "1", "name": "x"}], [1]),
    ("anyof_beside_type", {"type": "integer", "anyOf": [{"maximum": 0}, {"minimum": 10}]}, "compile",
     [-1, 0, 5, 10, 11, "a", 2.5], []),
    ("oneof_beside_type", {"type": "integer", "oneOf": [{"maximum": 0}, {"minimum": 1}]}, "compile",
     [-1, 0, 1, 5, "a"], []),
    ("oneof_beside_required_discriminator",
     {"type": "object", "required": ["kind"],
      "oneOf": [{"properties": {"kind": {"const": "a"}}}, {"properties": {"kind": {"const": "b"}}}]}, "compile",
     [{"kind": "a"}, {"kind": "b"}, {"kind": "c"}, {}], []),
    ("allof_property_twice",
     {"allOf": [{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
                {"properties": {"n": {"maximum": 5}}}]}, "compile",
     [{"n": 0}, {"n": 5}, {"n": 6}, {"n": -1}, {}], []),
    ("allof_bounds_and_types",
     {"allOf": [{"type": ["integer", "string"], "maxLength": 3}, {"type": ["number", "string"], "minLength": 1}]},
     "compile", [1, 2.5, "", "a", "abcd", None], []),
    ("allof_ref_and_siblings_in_branch",
     {"$defs": {"p": {"type": "object", "properties": {"a": {"type": "integer"}}}},
      "allOf": [{"$ref": "#/$defs/p", "required": ["a"]}, {"properties": {"b": {"type": "boolean"}}}]}, "compile",
     [{"a": 1}, {"a": 1, "b": True}, {"b": True}, {"a": "x"}], []),
    # ---- $ref by $anchor and by $id inside the document
    ("ref_anchor", {"$defs": {"a": {"$anchor": "foo", "type": "integer"}}, "$ref": "#foo"}, "compile", [1, "x"], []),
    ("ref_anchor_draft7", {"$schema": "http://json-schema.org/draft-07/schema#",
                           "definitions": {"a": {"$id": "#foo", "type": "integer"}},
                           "properties": {"x": {"$ref": "#foo"}}, "type": "object"}, "compile",
     [{"x": 1}, {"x": "a"}, {}], []),
    ("ref_id_relative", {"$id": "http://example.com/root.json", "type": "object",
                         "properties": {"i": {"$ref": "item.json"}, "j": {"$ref": "http://example.com/item.json#/properties/n"}},
                         "$defs": {"item": {"$id": "item.json", "type": "object",
                                            "properties": {"n": {"type": "integer"}}, "required": ["n"]}}},
     "compile", [{"i": {"n": 1}, "j": 2}, {"i": {}}, {"j": "x"}, {}], []),
    ("ref_urn", {"$id": "urn:example:root", "$defs": {"s": {"$id": "urn:example:s", "type": "string", "maxLength": 2}},
                 "$ref": "urn:example:s"}, "compile", ["ab", "abc", 1], []),
    ("ref_recursive_by_anchor",
     {"$defs": {"node": {"$anchor": "node", "type": "object",
                         "properties": {"next": {"anyOf": [{"$ref": "#node"}, {"type": "null"}]}}, "required": ["next"]}},
      "$ref": "#node"}, "compile", [{"next": None}, {"next": {"next": None}}, {"next": 1}], []),
    ("ref_external", {"$ref": "http://example.com/other.json"}, ("refuse", "$ref"), [], []),
    # ---- dependentRequired / dependentSchemas / draft-07 dependencies
    ("dependent_required",
     {"type": "object", "properties": {"card": {"type": "string"}, "billing": {"type": "string"}, "name": {"type": "string"}},
      "dependentRequired": {"card": ["billing"]}}, "compile",
     [{}, {"name": "x"}, {"card": "1", "billing": "a"}, {"card": "1"}, {"billing": "a"}, {"card": "1", "billing": "a", "name": "n"}],
     []),
    ("dependencies_draft7_array",
     {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "dependencies": {"b": ["a"]},
      "additionalProperties": False}, "compile",
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}], []),
    ("dependencies_draft7_schema",
     {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "dependencies": {"a": {"properties": {"b": {"minimum": 10}}, "required": ["b"]}}}, "compile",
     [{}, {"b": 1}, {"a": 1, "b": 10}, {"a": 1, "b": 9}, {"a": 1}], []),
    ("dependent_schemas_false", {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                                 "dependentSchemas": {"x": False}}, "compile",
     [{}, {"y": 1}, {"x": 1}, {"x": 1, "y": 2}], []),
    ("dependent_required_free_keys", {"type": "object", "dependentRequired": {"a": ["b"]}}, "compile",
     [{}, {"a": 1, "b": 2}, {"a": 1}, {"c": 1}, {"c": 1, "a": 1, "b": 2}], [4]),
    ("dependencies_too_many", {"type": "object", "dependentRequired": {"a": [], "b": [], "c": [], "d": [], "e": []}},
     ("refuse", "more than 4 trigger"), [], []),
    # ---- not and if/then/else where the negation is a schema
    ("not_type", {"not": {"type": ["string", "null"]}}, "compile", [1, "a", None, True, [], {}], [4, 5]),
    ("not_integer_refused", {"not": {"type": "integer"}}, ("refuse", "type"), [], []),
    ("not_false_property", {"type": "object", "properties": {"foo": {"not": {}}, "bar": {"type": "integer"}}}, "compile",
     [{}, {"bar": 1}, {"foo": 1}, {"foo": 1, "bar": 1}], []),
    ("not_required", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                      "not": {"required": ["a", "b"]}}, "compile",
     [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}], []),
    ("not_minimum", {"type": "integer", "not": {"minimum": 3}}, "compile", [2, 3, -5, 100], []),
    ("not_untyped_bounds", {"not": {"minimum": 3}}, "compile", ["a", 2, 5, None], []),
    ("not_untyped_required", {"not": {"required": ["a"]}}, "compile", [1, {}, {"a": 1}, {"b": 1}], []),
    ("not_untyped_min_length", {"not": {"minLength": 2}}, "compile", ["", "a", "ab", 7], []),
    ("not_const_bool", {"type": "boolean", "not": {"const": True}}, "compile", [True, False], []),
    ("not_pattern_refused", {"not": {"pattern": "a"}}, ("refuse", "pattern"), [], []),
    ("not_not", {"not": {"not": {"type": "string", "maxLength": 2}}}, "compile", ["", "ab", "abc", 1, None], []),
    ("not_any_of", {"not": {"anyOf": [{"type": "boolean"}, {"type": "null"}, {"minimum": 0}]}}, "compile",
     [True, None, 0, 3, -1, -0.5, "s", [], {}], [5]),
    ("not_all_of", {"type": "integer", "not": {"allOf": [{"minimum": 2}, {"maximum": 4}]}}, "compile",
     [1, 2, 3, 4, 5], []),
    ("not_const_number", {"not": {"const": 1}}, "compile", [1, 1.0, 0, 2, 0.5, 1.5, "1", None, True], [4, 5]),
    ("not_enum_numbers", {"type": "integer", "not": {"enum": [1, 3, 2.5]}}, "compile", [0, 1, 2, 3, 4, 10], []),
    ("if_const_number", {"if": {"const": 1}, "then": False}, "compile", [1, 1.0, 2, "a", None], []),
    ("not_const_string_refused", {"not": {"const": "a"}}, ("refuse", "const"), [], []),
    ("if_then_else_required",
     {"type": "object", "properties": {"kind": {"type": "string", "maxLength": 3}, "n": {"type": "integer"}},
      "if": {"required": ["kind"]}, "then": {"required": ["n"]}, "else": {"properties": {"n": {"maximum": 0}}}},
     "compile", [{}, {"n": -1}, {"n": 5}, {"kind": "a"}, {"kind": "a", "n": 5}], []),
    ("if_then_number", {"type": "integer", "if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}, "else": {"maximum": 5}},
     "compile", [-11, -10, -1, 0, 5, 6], []),
    ("then_without_if", {"type": "integer", "then": {"minimum": 5}}, "compile", [1, 7], []),
    ("if_without_then_else", {"type": "integer", "if": {"minimum": 5}}, "compile", [1, 7], []),
    # ---- unevaluatedProperties / unevaluatedItems over allOf / $ref composition
    ("unevaluated_props_allof",
     {"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": {"type": "boolean"}},
      "unevaluatedProperties": False}, "compile",
     [{"b": True, "a": 1}, {"b": True}, {"a": 1}, {"b": True, "a": 1, "c": 2}, {"c": 2}], []),
    ("unevaluated_props_ref",
     {"$defs": {"base": {"properties": {"id": {"type": "integer"}}, "required": ["id"]}},
      "$ref": "#/$defs/base", "type": "object", "properties": {"name": {"type": "string"}}, "unevaluatedProperties": False},
     "compile", [{"name": "x", "id": 1}, {"id": 1}, {"id": 1, "other": 2}], []),
    ("unevaluated_props_schema", {"type": "object", "properties": {"a": {"type": "integer"}},
                                  "unevaluatedProperties": {"type": "string", "maxLength": 2}}, "compile",
     [{"a": 1}, {"a": 1, "x": "ab"}, {"a": 1, "x": "abc"}, {"x": 1}], []),
    # a branch's unevaluatedProperties sees only what its own subtree
    # evaluates (not the siblings of the allOf/$ref that holds it)
    ("unevaluated_props_in_branch",
     {"allOf": [{"properties": {"a": {}}, "unevaluatedProperties": False}], "properties": {"b": {}}},
     "compile", [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 1}, {"c": 1}], []),
    ("unevaluated_props_in_ref",
     {"$defs": {"A": {"properties": {"id": {"type": "integer"}}, "unevaluatedProperties": False}},
      "properties": {"name": {"type": "string"}}, "$ref": "#/$defs/A"},
     "compile", [{}, {"id": 1}, {"name": "x"}, {"id": 1, "name": "x"}, {"id": "x"}], []),
    ("unevaluated_props_nested_branch",
     {"allOf": [{"allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": {"type": "boolean"}},
                 "unevaluatedProperties": {"type": "string"}}],
      "properties": {"c": {"type": "null"}}},
     "compile", [{}, {"a": 1, "b": True}, {"b": True, "a": 1}, {"x": "s"}, {"x": 1}, {"c": None}, {"c": "s"},
                 {"a": 1, "c": "t"}], [1]),
    ("unevaluated_props_branch_true_outer_false",
     {"properties": {"foo": {"type": "string"}}, "allOf": [{"unevaluatedProperties": True}],
      "unevaluatedProperties": False}, "compile", [{}, {"foo": "a"}, {"foo": "a", "bar": 1}, {"bar": 2}], []),
    ("unevaluated_props_branch_varies",
     {"allOf": [{"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}], "unevaluatedProperties": False}]},
     ("refuse", "unevaluatedProperties"), [], []),
    ("additional_props_from_two_branches",
     {"allOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
                {"properties": {"b": {}}, "additionalProperties": {"maxLength": 2}}]},
     "compile", [{}, {"a": 1}, {"b": "x"}, {"b": "xyz"}, {"b": 1}, {"a": 1, "b": "xy"}, {"c": "ab"}, {"c": "abc"},
                 {"a": "s"}], []),
    ("additional_props_beside_other_patterns",
     {"allOf": [{"patternProperties": {"^x": {"type": "integer"}}}, {"additionalProperties": False}]},
     ("refuse", "patternProperties"), [], []),
    ("unevaluated_items_in_branch",
     {"allOf": [{"prefixItems": [{"type": "string"}]}, {"unevaluatedItems": {"type": "integer"}}],
      "prefixItems": [True, True]},
     "compile", [[], ["a"], [1], ["a", 1], ["a", "b"], ["a", 1, 2], ["a", 1, "c"]], []),
    ("prefix_items_from_two_branches",
     {"prefixItems": [{"type": "string"}], "allOf": [{"prefixItems": [True, {"type": "number"}]}],
      "unevaluatedItems": False},
     "compile", [[], ["a"], ["a", 1], ["a", "b"], [1], ["a", 1, None]], [0, 1]),
    ("items_beside_other_prefix_items",
     {"items": {"type": "integer"}, "allOf": [{"prefixItems": [{"minimum": 3}]}]},
     "compile", [[], [3], [2], [3, 1], [3, "a"], ["a"]], [0]),
    ("unevaluated_props_beside_if",
     {"type": "object", "if": {"properties": {"a": {"const": True}}}, "then": {"required": ["b"]},
      "unevaluatedProperties": False}, ("refuse", "unevaluatedProperties"), [], []),
    ("unevaluated_items_prefix", {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
     "compile", [[], [1], [1, 2], ["a"]], [0]),
    ("unevaluated_items_allof", {"type": "array", "allOf": [{"prefixItems": [{"type": "integer"}, {"type": "string"}]}],
                                 "unevaluatedItems": {"type": "boolean"}}, "compile",
     [[1, "a"], [1, "a", True], [1, "a", 2], [1]], [3]),
    # ---- contains / minContains
    ("contains_basic", {"type": "array", "contains": {"type": "integer", "minimum": 5}}, "compile",
     [[], [1], [5], [1, 7, 2], ["a", 9], [4, 4]], []),
    ("contains_with_items", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}, "compile",
     [[3], [1, 3], [1, 2], [3, "a"], []], []),
    ("contains_min_two", {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}, "minContains": 2},
     "compile", [[10], [10, 11], [1, 10, 2, 12], [10, 1]], []),
    ("contains_min_zero", {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}, "minContains": 0},
     "compile", [[], [1], [10]], []),
    ("contains_max_refused", {"type": "array", "contains": {"type": "integer"}, "maxContains": 1},
     ("refuse", "maxContains"), [], []),
    ("contains_untyped", {"contains": {"const": "x"}}, "compile", [["x"], [], "x", 1], [2, 3]),
    # ---- multipleOf on integers
    ("multiple_of_int", {"type": "integer", "multipleOf": 7}, "compile", [0, 7, 14, -21, 8, 700, 701, 1.5], []),
    ("multiple_of_untyped", {"multipleOf": 2}, "compile", [0, 4, 7, 4.5, "a", None], [4, 5]),
    ("multiple_of_fraction_on_number", {"type": "number", "multipleOf": 1.5}, "compile", [0, 3, 4.5, 35, 1.5, 2],
     [2, 4]),
    ("multiple_of_tiny_on_integer", {"type": "integer", "multipleOf": 1e-8}, "compile", [1, 12345, 0.5], []),
    ("multiple_of_range", {"type": "integer", "multipleOf": 5, "minimum": 3, "maximum": 21}, "compile",
     [0, 5, 10, 20, 21, 25, 7], []),
    ("multiple_of_non_negative", {"type": "integer", "multipleOf": 3, "minimum": 0}, "compile", [0, 3, 99, -3, 100], []),
    # ---- uniqueItems over small finite item sets
    ("unique_enum", {"type": "array", "items": {"enum": ["r", "w", "x"]}, "uniqueItems": True}, "compile",
     [[], ["r"], ["r", "w"], ["w", "r", "x"], ["r", "r"], ["r", "w", "r"], ["y"]], []),
    ("unique_bool_min", {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2}, "compile",
     [[True, False], [False, True], [True], [True, True], []], []),
    ("unique_numbers_by_value", {"type": "array", "items": {"enum": [1, 1.0, 2]}, "uniqueItems": True}, "compile",
     [[1, 2], [1, 1], [2, 1], [1.0, 1]], []),
    ("unique_max_one", {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 1}, "compile",
     [[], ["a"], ["a", "b"]], []),
    ("unique_strings_refused", {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
     ("refuse", "uniqueItems"), [], []),
    ("unique_untyped", {"items": {"enum": [1, 2]}, "uniqueItems": True}, "compile", [[1, 2], [1, 1], "a"], [2]),
    ("unique_untyped_any_items", {"uniqueItems": True}, ("refuse", "uniqueItems"), [], []),
    ("unique_false", {"type": "array", "items": {"type": "integer"}, "uniqueItems": False}, "compile", [[1, 1]], []),
    # ---- minProperties / maxProperties with optional properties
    ("min_properties_optional", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                                 "minProperties": 1, "additionalProperties": False}, "compile",
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}], []),
    ("max_properties_optional", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                                  "c": {"type": "integer"}}, "maxProperties": 2}, "compile",
     [{}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"c": 3}], []),
    ("min_max_with_extras", {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                             "additionalProperties": {"type": "string"}, "minProperties": 2, "maxProperties": 3}, "compile",
     [{"id": 1}, {"id": 1, "x": "a"}, {"id": 1, "x": "a", "y": "b"}, {"id": 1, "x": "a", "y": "b", "z": "c"}], []),
    ("min_properties_beyond_declared", {"type": "object", "properties": {"a": {}}, "minProperties": 2}, "compile",
     [{"a": 1}, {"a": 1, "b": 2}, {"b": 1, "c": 2}], []),
    ("max_properties_free", {"type": "object", "maxProperties": 1}, "compile", [{}, {"a": 1}, {"a": 1, "b": 2}], []),
    # ---- patternProperties / propertyNames
    ("pattern_properties", {"type": "object", "patternProperties": {"^x-": {"type": "integer"}, "^s_": {"type": "string"}}},
     "compile", [{}, {"x-a": 1}, {"x-a": "no"}, {"s_b": "ok"}, {"s_b": 2}, {"other": True}, {"x-a": 1, "s_b": "c"}], []),
    ("pattern_properties_closed",
     {"type": "object", "properties": {"x-fixed": {"minimum": 5}}, "patternProperties": {"^x-": {"type": "integer"}},
      "additionalProperties": False}, "compile",
     [{"x-fixed": 5}, {"x-fixed": 4}, {"x-fixed": 5.5}, {"x-a": 2}, {"y": 1}, {"x-fixed": 6, "x-b": 1}], []),
    ("pattern_properties_overlap", {"type": "object", "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 3}},
                                    "additionalProperties": {"type": "string"}}, "compile",
     [{"ab": 3}, {"ab": 2}, {"a": 1}, {"b": 1}, {"b": 4.5}, {"c": "s"}, {"c": 1}], []),
    ("property_names_pattern", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, "compile",
     [{}, {"abc": 1}, {"aB": 1}, {"a1": 1}, {"": 1}], []),
    ("property_names_max_length", {"type": "object", "properties": {"long_name": {}}, "propertyNames": {"maxLength": 3},
                                   "additionalProperties": True}, "compile",
     [{}, {"abc": 1}, {"abcd": 1}, {"long_name": 1}], []),
    ("property_names_enum", {"type": "object", "propertyNames": {"enum": ["a", "b"]}}, "compile",
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"c": 1}], []),
    ("property_names_false", {"type": "object", "propertyNames": False}, "compile", [{}, {"a": 1}], []),
    ("enum_and_const", {"enum": ["US", "CA", 1], "const": "CA"}, "compile", ["CA", "US", 1], []),
    ("enum_and_const_none", {"anyOf": [{"enum": ["US"], "const": "CA"}, {"type": "null"}]}, "compile", ["CA", None], []),
    ("pattern_props_min_zero", {"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "minProperties": 0},
     "compile", [{}, {"ab": 1}, {"ab": "x"}], []),
]


def validator_for(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def main():
    out = []
    names = set()
    for name, schema, expect, instances, narrowed in CASES:
        assert name not in names, name
        names.add(name)
        v = validator_for(schema)
        # The schema as text too: numbers keep their spelling (2.0 stays 2.0).
        case = {"name": name, "schema": json.dumps(schema, ensure_ascii=False)}
        if expect == "compile":
            case["expect"] = "compile"
        else:
            case["expect"], case["refuse_has"] = expect
        case["instances"] = [
            {"json": json.dumps(i, separators=(",", ":"), ensure_ascii=False), "valid": v.is_valid(i),
             "narrowed": k in narrowed}
            for k, i in enumerate(instances)
        ]
        for k in narrowed:
            assert case["instances"][k]["valid"], f"{name}: narrowed instance {k} is not valid anyway"
        out.append(case)
    sys.stdout.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in out) + "\n]\n")


if __name__ == "__main__":
    main()
