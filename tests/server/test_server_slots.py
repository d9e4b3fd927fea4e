#!/usr/bin/env python3
"""llama-server's slot files on llm-server (samples/server/slot_store.h).

  test_server_slots.py LLM_SERVER REPO_DIR

A /completion with id_slot 1 (greedy), saved with
POST /slots/1?action=save; the server stopped and a new one started; the
file restored with POST /slots/0?action=restore: the same request is then
served from the restored KV (timings.cache_n > 0) with the same text, where
a cold server computes it all. Bad requests: names with directories or
"..", an unknown action, a slot out of range, an empty slot, a missing or
corrupted file (400s, the server keeps serving), and no --slot-save-path
(501). Erase forgets the slot's conversation.
"""
import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request

import server_proc

server_bin, repo = sys.argv[1:3]
model = os.path.join(repo, "models/stories260K-f32.gguf")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def post(port, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
          "friends. One day, she saw a big red ball under a tree and wanted to play with it. ") * 2
REQUEST = {"prompt": PROMPT, "n_predict": 24, "temperature": 0, "cache_prompt": True}
work = tempfile.mkdtemp(prefix="llmrt-slots-")
args = ["-m", model, "-t", "1", "--max-seqs", "2", "-c", "512", "--slot-save-path", work]
try:
    proc, port, _ = server_proc.start(server_bin, args)
    try:
        st, first = post(port, "/completion", dict(REQUEST, id_slot=1))
        check(st == 200 and first["id_slot"] == 1 and first["timings"]["cache_n"] == 0,
              "the first request computes its prompt (%s %s)" % (st, first.get("timings")))
        st, r = post(port, "/slots/1?action=save", {"filename": "slot1.bin"})
        n_saved = r.get("n_saved", 0)
        check(st == 200 and n_saved > first["tokens_evaluated"] // 2 and r["n_written"] > 0 and
              os.path.isfile(os.path.join(work, "slot1.bin")), "save: %s %s" % (st, r))
        for path, body, want in [("/slots/1?action=save", {"filename": "../escape.bin"}, 400),
                                 ("/slots/1?action=save", {"filename": "a/b.bin"}, 400),
                                 ("/slots/1?action=save", {"filename": ""}, 400),
                                 ("/slots/1?action=save", {}, 400),
                                 ("/slots/1?action=fly", {"filename": "x.bin"}, 400),
                                 ("/slots/7?action=save", {"filename": "x.bin"}, 400),
                                 ("/slots/0?action=save", {"filename": "x.bin"}, 400),  # slot 0 ran nothing
                                 ("/slots/0?action=restore", {"filename": "missing.bin"}, 400)]:
            st, r = post(port, path, body)
            check(st == want and "error" in r, "%s %s: %d (%s %s)" % (path, body, want, st, r.get("error", {}).get("message")))
        check(not os.path.exists(os.path.join(os.path.dirname(work), "escape.bin")), "nothing written outside the directory")
    finally:
        server_proc.stop(proc)

    # A corrupted copy, and the good file, into a new server.
    data = bytearray(open(os.path.join(work, "slot1.bin"), "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(os.path.join(work, "flipped.bin"), "wb").write(bytes(data))
    proc, port, _ = server_proc.start(server_bin, args)
    try:
        st, r = post(port, "/slots/0?action=restore", {"filename": "flipped.bin"})
        check(st == 400 and "error" in r, "a corrupted file is refused (%s %s)" % (st, r.get("error", {}).get("message")))
        st, r = post(port, "/slots/0?action=restore", {"filename": "slot1.bin"})
        check(st == 200 and r["n_restored"] == n_saved and r["n_read"] > 0, "restore: %s %s" % (st, r))
        st, again = post(port, "/completion", dict(REQUEST, id_slot=0))
        check(st == 200 and again["timings"]["cache_n"] > 0 and again["content"] == first["content"],
              "the restored KV serves the same request: cache_n %s, same text %s" %
              (again.get("timings", {}).get("cache_n"), again.get("content") == first["content"]))
        st, r = post(port, "/slots/0?action=erase")
        check(st == 200 and r["n_erased"] > 0, "erase: %s %s" % (st, r))
        st, r = post(port, "/slots/0?action=save", {"filename": "after-erase.bin"})
        check(st == 400, "an erased slot has nothing to save (%s)" % st)
    finally:
        server_proc.stop(proc)

    # Without --slot-save-path: no files, and a cold server computes it all.
    proc, port, _ = server_proc.start(server_bin, args[:-2])
    try:
        st, r = post(port, "/slots/0?action=save", {"filename": "x.bin"})
        check(st == 501, "without --slot-save-path, save is 501 (%s)" % st)
        st, cold = post(port, "/completion", dict(REQUEST, id_slot=0))
        check(st == 200 and cold["timings"]["cache_n"] == 0 and cold["content"] == first["content"],
              "a cold server computes the prompt (cache_n %s)" % cold.get("timings", {}).get("cache_n"))
    finally:
        server_proc.stop(proc)
finally:
    shutil.rmtree(work, ignore_errors=True)
if failures:
    print("\n%d FAILED" % len(failures))
    sys.exit(1)
print("slot files checked")
