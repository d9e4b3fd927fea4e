#!/usr/bin/env python3
"""Replays the command lines the suite started llm-server with (launcher.py
logs them) and records, for each test whose server refused to start, the
message it gave: the flag it does not know or cannot honour.

  replay.py LAUNCHES.jsonl REPORT.xml OUT.json

Only the tests the report has failing with "Server process died" are
replayed; a server that starts after all is stopped after a moment. OUT maps "file::test" (pytest's id, parameters
included) to the refusal's last line.
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def refusal(argv):
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "launcher.py")] + argv, capture_output=True,
                           text=True, timeout=4)
    except subprocess.TimeoutExpired:
        return None  # it started
    if p.returncode in (0, 3):  # 3: the model is not here (its own reason)
        return None
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    return lines[-1][:200] if lines else "exit status %d" % p.returncode


def died(report):
    """pytest ids ("file.py::name[params]") whose server died at its start."""
    out = set()
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None and re.search(r"died with return code [12]\b", (bad.get("message") or "") + (bad.text or "")):
            out.add("%s.py::%s" % (case.get("classname", "").split(".")[-1], case.get("name")))
    return out


def main(log, report, out):
    wanted = died(report)
    seen, result = {}, {}
    with open(log) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            test = e.get("test", "").rsplit(" (", 1)[0].split("/")[-1]
            if test not in wanted:
                continue
            argv = e["argv"]
            # the port is the only part that changes between runs
            key = json.dumps([a for i, a in enumerate(argv) if i == 0 or argv[i - 1] != "--port"])
            if key not in seen:
                seen[key] = refusal(argv)
            if seen[key]:
                result[test] = seen[key]
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print("%d distinct command lines, %d tests with a refusal" % (len(seen), len(result)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
