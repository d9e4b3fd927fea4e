#!/usr/bin/env python3
"""The official JSON Schema Test Suite (one draft's required tests: draft4,
draft6, draft7, draft2019-09 or draft2020-12) as compact test data for
llmrt's conformance test (issue 29, tests/test_json_schema.cpp,
JsonSchemaSuite.*).

Input: a checkout of https://github.com/json-schema-org/JSON-Schema-Test-Suite
(tests/<draft>/*.json, not optional/). The suite's draft4/6/7 schemas do not
say their draft: the script puts the draft's "$schema" first in each object
schema, as a real schema declares it (what llmrt reads the draft from).
Output: one line per schema,
  {"file": ..., "group": n, "schema": "<schema text>",
   "tests": [["<instance text>", valid], ...]}
with instances dumped compactly (separators (',', ':'), keys in the
suite's order) and `valid` from PyPI `jsonschema` (the draft's validator,
formats not asserted, as the specification's default): the reference, never
llmrt (where Python's re cannot read a pattern, \\p{...}, the suite's own
label; an instance where jsonschema and the suite's label disagree is left
out: neither reference is sure of it; the script reports both on stderr).
Groups whose schema needs a remote document (refRemote.json, the
suite's http://localhost:1234 schemas) are left out: llmrt never fetches.

    python3 tools/gen_schema_suite.py PATH/TO/JSON-Schema-Test-Suite draft7 \\
        | gzip -9n > tests/data/json_schema_suite/draft7.jsonl.gz
"""
import glob
import json
import os
import sys

import jsonschema


DRAFTS = {
    "draft4": (jsonschema.Draft4Validator, "http://json-schema.org/draft-04/schema#"),
    "draft6": (jsonschema.Draft6Validator, "http://json-schema.org/draft-06/schema#"),
    "draft7": (jsonschema.Draft7Validator, "http://json-schema.org/draft-07/schema#"),
    "draft2019-09": (jsonschema.Draft201909Validator, None),  # the suite's schemas say it
    "draft2020-12": (jsonschema.Draft202012Validator, None),
}


def main():
    root = sys.argv[1]
    draft = sys.argv[2] if len(sys.argv) > 2 else "draft2020-12"
    validator, uri = DRAFTS[draft]
    files = sorted(glob.glob(os.path.join(root, "tests", draft, "*.json")))
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
            if uri and isinstance(schema, dict) and "$schema" not in schema:
                schema = {"$schema": uri, **schema}
            text = json.dumps(schema, ensure_ascii=False)
            if "localhost:1234" in text:
                continue
            v = validator(schema)
            tests = []
            for t in group["tests"]:
                inst = json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
                try:
                    valid = bool(v.is_valid(t["data"]))
                except Exception:  # a pattern Python's re cannot read (\\p{...}): the suite's own label
                    valid = bool(t["valid"])
                    fallbacks.append(f"{name} {g}")
                if valid != t["valid"]:  # neither reference is sure: the instance is left out
                    disagree.append(f"{name} {g}: {t['description']}")
                    continue
                tests.append([inst, valid])
            out.append({"file": name[:-5], "group": g, "schema": json.dumps(schema, separators=(",", ":"), ensure_ascii=False),
                        "tests": tests})
    for c in out:
        sys.stdout.write(json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{len(out)} schemas; suite labels used where jsonschema could not decide: {sorted(set(fallbacks))}; "
          f"jsonschema disagrees with the suite on (instances left out): {disagree}", file=sys.stderr)


if __name__ == "__main__":
    main()
