#!/usr/bin/env python3
"""The official JSON Schema Test Suite (draft 2020-12, required tests) as
compact test data for llmrt's conformance test (issue 29,
tests/test_json_schema.cpp, JsonSchemaSuite.*).

Input: a checkout of https://github.com/json-schema-org/JSON-Schema-Test-Suite
(tests/draft2020-12/*.json, not optional/). Output: one line per schema,
  {"file": ..., "group": n, "schema": "<schema text>",
   "tests": [["<instance text>", valid], ...]}
with instances dumped compactly (separators (',', ':'), keys in the
suite's order) and `valid` from PyPI `jsonschema` (Draft202012Validator,
formats not asserted, as the specification's default): the reference, never
llmrt (where Python's re cannot read a pattern, \\p{...}, the suite's own
label; the script reports those and any disagreement on stderr). Groups whose schema needs a remote document (refRemote.json, the
suite's http://localhost:1234 schemas) are left out: llmrt never fetches.

    python3 tools/gen_schema_suite.py PATH/TO/JSON-Schema-Test-Suite \\
        > tests/data/json_schema_suite/draft2020-12.jsonl
"""
import glob
import json
import os
import sys

import jsonschema


def main():
    root = sys.argv[1]
    files = sorted(glob.glob(os.path.join(root, "tests", "draft2020-12", "*.json")))
    out = []
    fallbacks, disagree = [], []
    for path in files:
        name = os.path.basename(path)
        if name in ("refRemote.json",):
            continue
        with open(path, encoding="utf-8") as f:
            groups = json.load(f)
        for g, group in enumerate(groups):
            schema = group["schema"]
            text = json.dumps(schema, ensure_ascii=False)
            if "localhost:1234" in text:
                continue
            v = jsonschema.Draft202012Validator(schema)
            tests = []
            for t in group["tests"]:
                inst = json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
                try:
                    valid = bool(v.is_valid(t["data"]))
                except Exception:  # a pattern Python's re cannot read (\\p{...}): the suite's own label
                    valid = bool(t["valid"])
                    fallbacks.append(f"{name} {g}")
                if valid != t["valid"]:
                    disagree.append(f"{name} {g}: {t['description']}")
                tests.append([inst, valid])
            out.append({"file": name[:-5], "group": g, "schema": json.dumps(schema, separators=(",", ":"), ensure_ascii=False),
                        "tests": tests})
    for c in out:
        sys.stdout.write(json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{len(out)} schemas; suite labels used where jsonschema could not decide: {sorted(set(fallbacks))}; "
          f"jsonschema disagrees with the suite on: {disagree}", file=sys.stderr)


if __name__ == "__main__":
    main()
