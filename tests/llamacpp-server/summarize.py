#!/usr/bin/env python3
"""Groups a JUnit XML report of llama.cpp's server suite (pytest
--junitxml) by file and outcome, and names the reason of every failure
(reasons.py: a model not here, a feature llmrt does not have, a difference
on purpose, a llama.cpp-only field, sampled text), so each is either fixed
or named; what no rule names is listed as unexplained. With replay.py's
output, a server that refused to start shows its message.

  summarize.py REPORT.xml [REFUSALS.json]
"""
import collections
import json
import sys
import xml.etree.ElementTree as ET

from reasons import classify

refusals = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else {}

per_file = collections.defaultdict(collections.Counter)
reasons = collections.Counter()
examples = {}
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    f = case.get("classname", "").split(".")[-1] + ".py"
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    if case.find("skipped") is not None:
        per_file[f]["skipped"] += 1
        continue
    if bad is None:
        per_file[f]["passed"] += 1
        continue
    per_file[f]["failed"] += 1
    msg = (bad.get("message") or "").strip().splitlines()[0] if bad.get("message") else ""
    test = "%s::%s" % (f, case.get("name"))
    if "return code 3" in (bad.text or "") or "return code 3" in msg:
        msg = "model not available on this machine (launcher)"
    kind, why = classify(f, case.get("name"), (bad.get("message") or "") + " " + msg)
    if test in refusals:
        why += " [server: %s]" % refusals[test][:120]
    reasons[(kind, why)] += 1
    examples.setdefault((kind, why), test)
total = collections.Counter()
for f in sorted(per_file):
    total.update(per_file[f])
    c = per_file[f]
    print("%-32s %s" % (f, "  ".join("%s %d" % (k, c[k]) for k in ("passed", "failed", "skipped") if c[k])))
print("%-32s %s" % ("total", "  ".join("%s %d" % (k, total[k]) for k in ("passed", "failed", "skipped"))))
kinds = collections.Counter()
for (kind, _), n in reasons.items():
    kinds[kind] += n
print("\nfailures by kind: " + ", ".join("%s %d" % kv for kv in kinds.most_common()))
print("\nfailures by reason (count, kind, reason, one test):")
for (kind, why), n in reasons.most_common():
    print("%5d  %-8s %s\n       e.g. %s" % (n, kind, why, examples[(kind, why)]))
