#!/usr/bin/env python3
"""llm-chat driven through a pipe: two turns, /reset, the first turn again.

  check_llm_chat.py LLM_CHAT REPO_DIR smollm2|builtin

smollm2 (skips with exit code 77 when models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf
is absent; scripts/fetch-models.sh fetches it), greedy:
- both turns are answered (non-empty, no chat-template tokens leak out);
- the history is kept: the second turn's prompt holds the first turn and its
  reply (prompt tokens > first prompt + first reply), per llm-chat -v;
- /reset clears it: the third turn's prompt is the first one's again, and its
  reply is the first reply (the same text as a one-turn run);
- /quit ends the session with exit code 0.
builtin (stories260K has no chat template): llm-chat says so on stderr,
falls back to a plain transcript and still answers.
"""
import os
import re
import subprocess
import sys

chat_bin, repo, which = sys.argv[1:4]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, text):
    p = subprocess.run([chat_bin] + args, input=text, capture_output=True, text=True,
                       encoding="utf-8", timeout=300)
    return p.returncode, p.stdout, p.stderr


def turns(stderr):
    """(prompt, cached, generated, finish) per turn from llm-chat -v."""
    return [(int(a), int(b), int(c), d) for a, b, c, d in
            re.findall(r"\[prompt (\d+) tokens \((\d+) cached\), generated (\d+), (\w+),", stderr)]


if which == "smollm2":
    model = os.path.join(repo, "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(model):
        print("SKIP: %s is absent (scripts/fetch-models.sh fetches it)" % model)
        sys.exit(77)
    args = ["-m", model, "--temp", "0", "-n", "24", "-t", "2", "-c", "1024", "-v"]
    q1, q2 = "What is the capital of France?", "And what is the capital of Germany?"

    rc, solo, err = run(args, q1 + "\n")
    check(rc == 0, "one-turn run exits 0 (stderr: %s)" % err.strip()[-300:])
    r1 = solo.rstrip("\n")
    check(r1.strip() != "", "the first turn gets an answer: %r" % r1)

    rc, out, err = run(args, "\n".join([q1, q2, "/reset", q1, "/quit", "never read"]) + "\n")
    check(rc == 0, "the session exits 0 on /quit (stderr: %s)" % err.strip()[-300:])
    t = turns(err)
    check(len(t) == 3, "three turns answered before /quit: %s" % (t,))
    check("(conversation cleared)" in err, "/reset is acknowledged")
    check(out.startswith(r1 + "\n"), "turn 1 answers as a one-turn run does")
    check(out.endswith("\n" + r1 + "\n"), "after /reset the same question gets the same answer")
    middle = out[len(r1) + 1:len(out) - len(r1) - 1]
    check(middle.strip() != "", "turn 2 gets an answer: %r" % middle)
    check("<|im_" not in out, "no template tokens in the replies")
    if len(t) == 3:
        (p1, _, g1, _), (p2, _, _, _), (p3, _, _, _) = t
        check(p2 > p1 + g1, "turn 2's prompt holds turn 1 and its reply (%d > %d + %d)" % (p2, p1, g1))
        check(p3 == p1, "after /reset the prompt is turn 1's again (%d == %d)" % (p3, p1))
elif which == "builtin":
    model = os.path.join(repo, "models/stories260K-f32.gguf")
    rc, out, err = run(["-m", model, "--temp", "0", "-n", "16", "-t", "2", "-v"],
                       "Hello there\n/reset\nTell me a story\n")
    check(rc == 0, "exits 0 at end of input (stderr: %s)" % err.strip()[-300:])
    check("has no chat template" in err, "says the model has no chat template")
    check(len(turns(err)) == 2, "both turns answered")
    check(out.strip() != "", "prints replies: %r" % out)
else:
    sys.exit("unknown case " + which)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
