#!/usr/bin/env python3
"""Checks the complete values that bench/schema_realworld.cpp's random token
walks produced (issue 29): each must parse as JSON without a repeated key and
validate with PyPI jsonschema against its schema from
tests/data/json_schema_realworld (the validator its "$schema" names, the
default, 2020-12, without one; formats not asserted, the specification's
default).

    build/bin/schema-realworld MODEL tests/data/json_schema_realworld/schemas.jsonl.gz 4 48 walks.jsonl
    python3 tools/validate_realworld_walks.py walks.jsonl
"""
import gzip
import json
import os
import sys

import jsonschema
from jsonschema.validators import validator_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def no_repeats(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"repeated key in {keys}")
    return dict(pairs)


def main():
    schemas = {}
    with gzip.open(os.path.join(ROOT, "tests/data/json_schema_realworld/schemas.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            schemas[r["name"]] = json.loads(r["schema"])
    n = bad = 0
    for line in open(sys.argv[1], encoding="utf-8"):
        w = json.loads(line)
        n += 1
        schema = schemas[w["name"]]
        try:
            value = json.loads(w["text"], object_pairs_hook=no_repeats)
            cls = validator_for(schema, default=jsonschema.Draft202012Validator)
            errors = list(cls(schema).iter_errors(value))
        except Exception as e:  # parse error or a repeated key
            errors = [e]
        if errors:
            bad += 1
            print(f"INVALID {w['name']}: {w['text'][:200]!r}: {str(errors[0])[:300]}")
    print(f"{n} complete walks, {n - bad} valid, {bad} invalid")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
