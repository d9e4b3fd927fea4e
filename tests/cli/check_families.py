#!/usr/bin/env python3
"""The model families through the command-line tools (issue 19).

  check_families.py BIN_DIR REPO_DIR [FAMILY ...]

For each family of tests/data/families/ (test_families.cpp checks their
logits in-process), llm-synth rebuilds the tiny model llama.cpp saw, this
time with the family's real chat template in tokenizer.chat_template
(tests/data/chat/templates/, rendered against jinja2 by test_chat_template;
metadata only, the weights and so the logits are the same), and then:

- llm-run --prompt-ids (the reference's token ids) --temp 0 --ignore-eos
  generates exactly llama.cpp's greedy continuation (the reference's ids);
- llm-server's /v1/completions, given the same token ids, temperature 0 and
  ignore_eos, returns the same text as llm-run;
- llm-chat (one turn through a pipe, a system prompt where the template
  takes one) replies with exactly what llm-run --chat --system replies, and
  llm-server's /v1/chat/completions with the same messages says the same:
  the three tools render the family's template the same way and generate
  the C API's greedy tokens from it.

Prints 'N passed, N failed' and exits non-zero on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request

bin_dir, repo = sys.argv[1:3]
only = sys.argv[3:]
FAMILY_DIR = os.path.join(repo, "tests", "data", "families")
TEMPLATE_DIR = os.path.join(repo, "tests", "data", "chat", "templates")
# The real instruct template of each family (chat_reference.py's names).
TEMPLATES = {
    "llama3_rope_freqs": "llama31", "qwen2": "qwen25", "qwen2_yarn": "qwen25", "qwen3": "qwen3",
    "mistral": "mistral_nemo", "mixtral": "mistral_nemo", "gemma2": "gemma2", "phi3": "phi35",
    "qwen3moe": "qwen3", "qwen2moe": "qwen25", "phi35": "phi35", "phi35_short": "phi35",
    "gpt_oss": "gpt_oss", "gpt_oss_plain": "gpt_oss",
}
NO_SYSTEM = {"gemma2"}  # Gemma 2's template raises on a system turn
SYSTEM, USER = "You are terse.", "Name a colour."
CHAT_TOKENS = 12
# llama.cpp's references ran with a context of 256 (family_reference.py's
# N_CTX); the templated prompts need more in the synthetic character-level
# vocabularies (Llama 3.1's system block: ~270 tokens). LongRoPE picks its
# factors by the context: 512 is on the same side of the phi35 shapes'
# original contexts (64, 1024) as 256, so every run uses the same factors.
REF_CTX, CHAT_CTX = "256", "512"
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what, flush=True)
    else:
        failed += 1
        print("FAIL " + what, flush=True)


def tool(name):
    return os.path.join(bin_dir, name)


def run(cmd, stdin=None):
    # bytes, not text mode: universal newlines would turn a generated '\r' into '\n'
    p = subprocess.run(cmd, input=stdin.encode() if stdin else None, capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


class Server:
    def __init__(self, model):
        self.proc = subprocess.Popen([tool("llm-server"), "-m", model, "--port", "0", "-t", "2", "-c", CHAT_CTX],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = [""]
        reader = threading.Thread(target=lambda: line.__setitem__(0, self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        if "listening on http://127.0.0.1:" not in line[0]:
            self.proc.kill()
            raise RuntimeError("llm-server did not start: %r" % line[0])
        self.base = "http://127.0.0.1:%d" % int(line[0].split("http://127.0.0.1:")[1].split()[0])

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def check_family(name, ref, tmp):
    model = os.path.join(tmp, name + ".gguf")
    template = os.path.join(TEMPLATE_DIR, TEMPLATES[name] + ".jinja")
    rc, _, err = run([tool("llm-synth"), "--shape", ref["shape"], "--out", model, "--chat-template", template]
                     + ref["synth_args"])
    check(rc == 0, "%s: llm-synth %s %s" % (name, ref["shape"], err.strip()))
    if rc != 0:
        return
    g = ref["greedy"]
    ids = ",".join(str(t) for t in g["prompt_ids"])
    base = ["-m", model, "-t", "2", "-c", CHAT_CTX, "--temp", "0"]
    # The references are llama.cpp's with an F32 KV cache: the same here.
    rc, out, err = run([tool("llm-run"), "-m", model, "-t", "2", "-c", REF_CTX, "-kv", "f32", "--temp", "0",
                        "--prompt-ids", ids, "-n", str(len(g["ids"])), "--ignore-eos", "--json"])
    run_text = None
    if rc != 0:
        check(False, "%s: llm-run --prompt-ids: exit %d %s" % (name, rc, err.strip()))
    else:
        j = json.loads(out)
        n_eq = next((k for k, (a, b) in enumerate(zip(j["tokens"], g["ids"])) if a != b), len(g["ids"]))
        check(j["tokens"] == g["ids"], "%s: llm-run's %d greedy tokens are llama.cpp's (first %d equal)"
              % (name, len(g["ids"]), n_eq))
        # The servers below run the context's default KV type (F16): their
        # text is compared with llm-run's on the same default.
        rc, out, err = run([tool("llm-run"), "-m", model, "-t", "2", "-c", REF_CTX, "--temp", "0",
                            "--prompt-ids", ids, "-n", str(len(g["ids"])), "--ignore-eos", "--json"])
        run_text = json.loads(out)["text"] if rc == 0 else None

    system = [] if name in NO_SYSTEM else ["--system", SYSTEM]
    rc, out, err = run([tool("llm-run")] + base + ["-n", str(CHAT_TOKENS), "--json", "--chat", "-p", USER] + system)
    chat_text = json.loads(out)["text"] if rc == 0 else None
    check(rc == 0, "%s: llm-run --chat with the %s template %s" % (name, TEMPLATES[name], err.strip()[-200:]))
    chat_args = base + ["-n", str(CHAT_TOKENS)] + (["-s", SYSTEM] if system else [])
    rc, out, err = run([tool("llm-chat")] + chat_args, USER + "\n/quit\n")
    check(rc == 0 and chat_text is not None and out == chat_text + "\n",
          "%s: llm-chat replies as llm-run --chat does: %r vs %r %s" % (name, out, chat_text, err.strip()[-200:]))

    try:
        server = Server(model)
    except RuntimeError as e:
        check(False, "%s: %s" % (name, e))
        return
    try:
        r = server.post("/v1/completions", {"prompt": g["prompt_ids"], "max_tokens": len(g["ids"]),
                                            "temperature": 0, "ignore_eos": True})
        text = r["choices"][0]["text"]
        check(run_text is not None and text == run_text,
              "%s: llm-server's completion of the token ids is llm-run's text" % name)
        messages = ([{"role": "system", "content": SYSTEM}] if system else []) + [{"role": "user", "content": USER}]
        r = server.post("/v1/chat/completions", {"messages": messages, "max_tokens": CHAT_TOKENS, "temperature": 0})
        text = r["choices"][0]["message"]["content"]
        check(chat_text is not None and text == chat_text,
              "%s: llm-server's chat reply is llm-run --chat's: %r vs %r" % (name, text, chat_text))
    except Exception as e:  # noqa: BLE001 - any failure of the request is a test failure
        check(False, "%s: llm-server request failed: %s" % (name, e))
    finally:
        server.close()


def main():
    names = sorted(n[:-5] for n in os.listdir(FAMILY_DIR) if n.endswith(".json"))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if only and name not in only:
                continue
            if name not in TEMPLATES:
                check(False, "%s: no chat template is named for this family (TEMPLATES)" % name)
                continue
            with open(os.path.join(FAMILY_DIR, name + ".json"), encoding="utf-8") as f:
                check_family(name, json.load(f), tmp)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
