#!/usr/bin/env python3
"""Groups a JUnit XML report of llama.cpp's server suite (pytest
--junitxml) by file and outcome, and the failures by reason, so each can be
fixed or named. A server that did not start because its model is not on this
machine (launcher.py's exit status 3) is its own reason.

  summarize.py REPORT.xml
"""
import collections
import sys
import xml.etree.ElementTree as ET

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
    if "return code 3" in (bad.text or "") or "return code 3" in msg:
        why = "model not available on this machine (launcher)"
    else:
        why = msg[:110]
    reasons[why] += 1
    examples.setdefault(why, "%s::%s" % (f, case.get("name")))
total = collections.Counter()
for f in sorted(per_file):
    total.update(per_file[f])
    c = per_file[f]
    print("%-32s %s" % (f, "  ".join("%s %d" % (k, c[k]) for k in ("passed", "failed", "skipped") if c[k])))
print("%-32s %s" % ("total", "  ".join("%s %d" % (k, total[k]) for k in ("passed", "failed", "skipped"))))
print("\nfailures by reason (count, reason, one test):")
for why, n in reasons.most_common():
    print("%5d  %s\n       e.g. %s" % (n, why, examples[why]))
