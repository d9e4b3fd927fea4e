#!/usr/bin/env python3
"""Issue 29's model acceptance over the official JSON Schema Test Suite's
draft 2020-12 schemas (tests/data/json_schema_suite), through the C API
(bench/schema_suite.cpp) with SmolLM2 at temperature 1.0:

  free:   5 samples per compiled schema (max_tokens 768): every output must
          parse (no repeated key) and validate with PyPI jsonschema as the
          draft says (2020-12: `format` an annotation); also counted with
          format assertion on (the draft's FORMAT_CHECKER), reported apart;
  budget: 5 samples per compiled schema with max_tokens = the tokens of the
          schema's shortest completion through SmolLM2's vocabulary + 16:
          every output must also have ended with EOS (finish "stop").

  schema_suite_acceptance.py --driver BUILD/bin/schema-suite --mode free|budget
      [--out DIR] [--n 5] [--slack 16] [--threads 2] [--first K]

Writes DIR/<mode>.jsonl (the driver's lines, appended schema by schema, so a
run cut short still says how far it got) and prints the summary. Exit 0:
every sample of every schema run passed; 1: some did not; 77: jsonschema
or the model is missing.
"""
import argparse
import gzip
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def no_repeats(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("repeated key")
    return dict(pairs)


def reject_constant(name):
    raise ValueError("non-JSON constant " + name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--mode", choices=["free", "budget"], required=True)
    ap.add_argument("--out", default="schema-acceptance")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "pypi", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--slack", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="only the first K schemas (0: all)")
    ap.add_argument("--check-only", action="store_true", help="validate DIR/<mode>.jsonl as it stands")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"model {args.model} not found (scripts/fetch-models.sh): skipped")
        sys.exit(77)
    os.makedirs(os.path.join(args.out, "schemas"), exist_ok=True)
    schemas = {}
    with gzip.open(os.path.join(ROOT, "tests", "data", "json_schema_suite", "draft2020-12.jsonl.gz"), "rt") as f:
        for line in f:
            e = json.loads(line)
            name = f"{e['file']}-{e['group']}"
            schemas[name] = e["schema"]
    names = sorted(schemas)[: args.first or None]
    paths = []
    for name in names:
        p = os.path.join(args.out, "schemas", name + ".json")
        with open(p, "w") as f:
            f.write(schemas[name])
        paths.append(p)
    samples = os.path.join(args.out, args.mode + ".jsonl")
    if not args.check_only:
        cmd = [args.driver, "run", "--model", args.model, "--n", str(args.n), "--temperature", "1.0",
               "--max-tokens", str(args.max_tokens), "--threads", str(args.threads), "--out", samples]
        if args.mode == "budget":
            cmd += ["--budget-slack", str(args.slack)]
        t0 = time.time()
        r = subprocess.run(cmd + paths)
        print(f"driver: exit {r.returncode}, {time.time() - t0:.1f} s")
    refused, ran, total, valid, stop, failures = set(), set(), 0, 0, 0, []
    valid_formats, format_failures = 0, []
    over = 0
    for line in open(samples):
        s = json.loads(line)
        name = s["schema"]
        if "refused" in s:
            refused.add(name)
            continue
        ran.add(name)
        total += 1
        schema = json.loads(schemas[name])
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            value = json.loads(s["text"], parse_constant=reject_constant, object_pairs_hook=no_repeats)
            cls(schema).validate(value)
            valid += 1
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
            valid_formats += 1
        except jsonschema.ValidationError as e:
            if valid > valid_formats + len(format_failures):  # valid as the draft says, not with formats asserted
                format_failures.append(f"{name} #{s['index']}: {str(e).splitlines()[0][:160]}")
            else:
                failures.append(f"{name} #{s['index']}: {str(e).splitlines()[0][:160]} :: {s['text'][:200]!r}")
        except Exception as e:  # noqa: BLE001 -- any failure is reported
            failures.append(f"{name} #{s['index']}: {type(e).__name__}: {str(e).splitlines()[0][:160]} :: {s['text'][:200]!r}")
        if s["finish"] == "stop":
            stop += 1
        elif args.mode == "budget":
            over += 1
            failures.append(f"{name} #{s['index']}: finish {s['finish']} (shortest {s['shortest']}, max_tokens "
                            f"{s['max_tokens']}) :: {s['text'][-120:]!r}")
    print(f"mode {args.mode}: schemas run {len(ran)} (+{len(refused)} refused) of {len(names)} asked; samples {total}, "
          f"valid {valid}, finished by EOS {stop}; valid with format assertion on as well {valid_formats}")
    for f in format_failures:
        print("FORMAT (an annotation in this draft)", f)
    for f in failures[:60]:
        print("FAIL", f)
    sys.exit(0 if not failures and total > 0 else 1)


if __name__ == "__main__":
    main()
