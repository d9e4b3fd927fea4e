#!/usr/bin/env python3
"""Checks JSON-Schema-constrained samples (issue 20's acceptance suite).

Each sample line (written by `schema-suite run`, bench/schema_suite.cpp) must
parse as JSON without a repeated key in any object, validate against its schema with the PyPI `jsonschema`
package, format checking on (the draft's own format checker: date, time and
date-time through rfc3339-validator, email, ipv4, uuid, ...; formats whose
optional checker package is missing, e.g. uri without rfc3987, are not
checked by jsonschema), and have ended with EOS (finish "stop"), not the
length limit.

  validate_schema_samples.py --samples FILE [--schemas DIR]
  validate_schema_samples.py --run BUILD/bin/schema-suite [--n 20] [--only a,b] [--model M] ...

With --run the driver is run first (over every schema in --schemas, or those
whose names contain one of --only). Exit 0: every sample passed; 1: some did
not; 77: jsonschema is not installed (ctest reads it as a skip).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

try:
    import jsonschema
    from jsonschema.validators import validator_for
except ImportError:
    print("jsonschema is not installed: skipped")
    sys.exit(77)


def reject_constant(name):
    raise ValueError("non-JSON constant " + name)


def reject_duplicate_keys(pairs):
    # json.loads keeps the last of repeated keys: a validator would see
    # something other than what the model wrote (issue 29).
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("repeated key " + repr(next(k for k in keys if keys.count(k) > 1)))
    return dict(pairs)


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--schemas", default=os.path.join(root, "tests", "data", "json_schemas"))
    ap.add_argument("--samples", default="schema_samples.jsonl")
    ap.add_argument("--run", help="the schema-suite binary: draw the samples first")
    ap.add_argument("--model", default=os.path.join(root, "models", "pypi", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated name fragments")
    ap.add_argument("--show", type=int, default=1, help="samples to print per schema")
    args = ap.parse_args()

    paths = sorted(glob.glob(os.path.join(args.schemas, "*.json")))
    if args.only:
        frags = args.only.split(",")
        paths = [p for p in paths if any(f in os.path.basename(p) for f in frags)]
    schemas = {os.path.basename(p)[:-5]: json.load(open(p)) for p in paths}

    if args.run:
        if not os.path.exists(args.model):
            print(f"model {args.model} not found: skipped")
            sys.exit(77)
        cmd = [args.run, "run", "--model", args.model, "--n", str(args.n), "--max-tokens", str(args.max_tokens),
               "--threads", str(args.threads), "--seed", str(args.seed), "--out", args.samples] + paths
        t0 = time.time()
        r = subprocess.run(cmd)
        print(f"driver: exit {r.returncode}, {time.time() - t0:.1f} s")
        if r.returncode != 0:
            sys.exit(1)

    per = {}
    failures = []
    for line in open(args.samples):
        s = json.loads(line)
        name = s["schema"]
        if name not in schemas:
            continue
        st = per.setdefault(name, {"n": 0, "valid": 0, "stop": 0, "shown": 0})
        st["n"] += 1
        schema = schemas[name]
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            value = json.loads(s["text"], parse_constant=reject_constant, object_pairs_hook=reject_duplicate_keys)
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
            st["valid"] += 1
        except Exception as e:  # noqa: BLE001 -- any failure is reported
            failures.append(f"{name} #{s['index']}: {type(e).__name__}: {str(e).splitlines()[0][:200]} :: {s['text'][:300]!r}")
        if s["finish"] == "stop":
            st["stop"] += 1
        else:
            failures.append(f"{name} #{s['index']}: finish {s['finish']} :: {s['text'][-120:]!r}")
        if st["shown"] < args.show:
            st["shown"] += 1
            print(f"  {name} #{s['index']}: {s['text'][:160]!r}")

    missing = [n for n in schemas if n not in per]
    total = sum(v["n"] for v in per.values())
    valid = sum(v["valid"] for v in per.values())
    stop = sum(v["stop"] for v in per.values())
    print(f"{'schema':28} {'n':>3} {'valid':>5} {'stop':>5}")
    for name in sorted(per):
        v = per[name]
        print(f"{name:28} {v['n']:3} {v['valid']:5} {v['stop']:5}")
    print(f"schemas {len(per)}/{len(schemas)}, samples {total}, valid {valid}, finished by EOS {stop}")
    for f in failures[:50]:
        print("FAIL", f)
    for m in missing:
        print("MISSING", m)
    sys.exit(0 if not failures and not missing and total > 0 else 1)


if __name__ == "__main__":
    main()
