#!/usr/bin/env python3
"""llama.cpp's native /completion endpoint on llm-server, and the sampling
flags llama-server takes (--temp, --seed, -n) as request defaults.

  test_server_completion_native.py LLM_SERVER REPO_DIR

On the bundled stories260K (F32), checked against the server's own OpenAI
endpoint and the C API's tokenizer (/tokenize): greedy /completion equals
/v1/completions token for token; streamed pieces join to the whole; the
stop types (limit, eos, word with the stopping word); timings and counts;
n_probs (the sampled token's logprob equals /v1/completions' logprobs);
response_fields; return_tokens; the prompt forms (ids, several prompts, text
and ids mixed, {"prompt_string"}); logit_bias by id and by text; --seed and
--temp as defaults (two unseeded sampled requests agree) and -n; /slots and
--no-slots; aliases and tags in /v1/models; --chat-template as a format's
name or as Jinja text; bad inputs are 400s.
"""
import json
import os
import sys
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


def client(port):
    base = "http://127.0.0.1:%d" % port

    def call(method, path, body=None, stream=False):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                raw = r.read().decode()
                if stream:
                    return r.status, [json.loads(l[6:]) for l in raw.split("\n") if l.startswith("data: ")]
                return r.status, json.loads(raw)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
    return call


PROMPT = "Once upon a time"

proc, port, _ = server_proc.start(server_bin, ["-m", model, "-t", "2", "-np", "3", "-c", "512", "--seed", "42",
                                               "--temp", "0.8", "-n", "24", "--alias", "tiny,stories", "--tags", "a,b"])
call = client(port)
try:
    # greedy: /completion equals /v1/completions token for token
    st, oa = call("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 32, "temperature": 0, "logprobs": 1})
    st2, nat = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 32, "temperature": 0, "return_tokens": True,
                                            "n_probs": 2})
    check(st == 200 and st2 == 200 and nat["content"] == oa["choices"][0]["text"], "greedy /completion equals /v1/completions")
    check(nat["stop"] is True and nat["stop_type"] == "limit" and nat["tokens_predicted"] == 32 and
          len(nat["tokens"]) == 32 and nat["timings"]["predicted_n"] == 32, "stop_type limit, counts and return_tokens")
    st, ids = call("POST", "/tokenize", {"content": PROMPT, "add_special": True})
    check(nat["tokens_evaluated"] == len(ids["tokens"]) and nat["prompt"] == "<s> " + PROMPT,
          "tokens_evaluated and the prompt as its tokens spell it: %r" % nat.get("prompt"))
    probs = nat.get("completion_probabilities", [])
    lp_oa = oa["choices"][0]["logprobs"]["token_logprobs"]
    check(len(probs) == 32 and all(abs(p["logprob"] - q) < 1e-4 for p, q in zip(probs, lp_oa)) and
          all(p["id"] == t for p, t in zip(probs, nat["tokens"])) and all(len(p["top_logprobs"]) == 2 for p in probs) and
          all(p["top_logprobs"][0]["id"] == p["id"] for p in probs), "n_probs: logprobs, ids and greedy top alternatives")
    gs = nat["generation_settings"]
    check(gs["n_predict"] == 32 and gs["temperature"] == 0 and gs["seed"] == 42 and gs["top_k"] == 40,
          "generation_settings echo the request and the server's --seed")

    # streaming joins to the whole, the last chunk has stop true
    st, chunks = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 32, "temperature": 0, "stream": True}, stream=True)
    text = "".join(c.get("content", "") for c in chunks)
    check(st == 200 and text == nat["content"] and chunks[-1]["stop"] is True and
          all(c["stop"] is False for c in chunks[:-1]) and chunks[-1]["stop_type"] == "limit", "stream joins to the whole")

    # stop string: stop_type word, the word not in the content
    word = nat["content"].split()[3]
    st, r = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 32, "temperature": 0, "stop": [word]})
    check(st == 200 and r["stop_type"] == "word" and r["stopping_word"] == word and word not in r["content"],
          "stop_type word with the stopping word (%s)" % word)
    # (stories260K rarely ends a story by itself: EOS, id 2, is made certain)
    st, r = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 32, "temperature": 0, "logit_bias": [[2, 100]],
                                         "stop": ["zzz"]})
    check(st == 200 and r["stop_type"] == "eos" and r["tokens_predicted"] <= 1 and r["stopping_word"] == "",
          "stop_type eos: %s" % {k: r.get(k) for k in ("stop_type", "tokens_predicted", "content")})

    # response_fields
    st, r = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0,
                                         "response_fields": ["content", "generation_settings/n_predict"]})
    check(st == 200 and set(r) == {"content", "generation_settings/n_predict"} and r["generation_settings/n_predict"] == 8,
          "response_fields selects and flattens")

    # prompt forms
    st, a = call("POST", "/completion", {"prompt": ids["tokens"], "n_predict": 8, "temperature": 0})
    st2, b = call("POST", "/completion", {"prompt": [PROMPT, ids["tokens"]], "n_predict": 8, "temperature": 0})
    check(st == 200 and st2 == 200 and isinstance(b, list) and len(b) == 2 and
          b[0]["content"] == b[1]["content"] == a["content"], "token ids, and a list of prompts: a list of results")
    half = ids["tokens"][:3]
    rest = call("POST", "/detokenize", {"tokens": ids["tokens"][3:]})[1]["content"]
    st, m = call("POST", "/completion", {"prompt": half + [rest], "n_predict": 8, "temperature": 0})
    check(st == 200 and isinstance(m, dict) and m["tokens_evaluated"] >= len(half) + 1, "text and ids mixed in one prompt")
    st, o = call("POST", "/completion", {"prompt": {"prompt_string": PROMPT}, "n_predict": 8, "temperature": 0})
    check(st == 200 and o["content"] == a["content"], "{prompt_string} prompt")
    st, e = call("POST", "/completion", {"prompt": {"prompt_string": PROMPT, "multimodal_data": ["AAAA"]}})
    check(st == 400 and "multimodal" in e["error"]["message"], "multimodal data refused: %s" % e)

    # logit_bias by id and by text: the greedy first token never appears
    first = nat["tokens"][0]
    st, r = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "return_tokens": True,
                                         "logit_bias": [[first, False]]})
    check(st == 200 and first not in r["tokens"], "logit_bias [[id, false]]")
    piece = call("POST", "/detokenize", {"tokens": [first]})[1]["content"]
    st, r = call("POST", "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "return_tokens": True,
                                         "logit_bias": {piece: -100}})
    check(st == 200 and first not in r["tokens"], "logit_bias keyed by text (%r)" % piece)

    # --seed / --temp are defaults: two sampled requests without a seed agree; -n 24 is max_tokens' default
    st, x = call("POST", "/completion", {"prompt": PROMPT})
    st2, y = call("POST", "/completion", {"prompt": PROMPT})
    check(st == 200 and x["content"] == y["content"] and x["tokens_predicted"] <= 24 and
          x["generation_settings"]["n_predict"] == 24, "--seed makes unseeded requests repeat; -n is the default")
    st, z = call("POST", "/completion", {"prompt": PROMPT, "seed": 7, "n_predict": 24})
    check(st == 200 and z["generation_settings"]["seed"] == 7, "a request's seed wins over --seed")
    st, c1 = call("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 24})
    st2, c2 = call("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 24})
    check(c1["choices"][0]["text"] == c2["choices"][0]["text"], "--seed also applies to /v1/completions")

    # /slots, /models, aliases and tags
    st, slots = call("GET", "/slots")
    check(st == 200 and len(slots) == 3 and all(s["is_processing"] is False for s in slots), "/slots: idle")
    st, models = call("GET", "/models")
    mm = models["data"][0] if st == 200 else {}
    check(mm.get("id") == "stories" and mm.get("aliases") == ["stories", "tiny"] and mm.get("tags") == ["a", "b"],
          "/models: id, aliases, tags: %s" % mm)
    st, props = call("GET", "/props")
    check(st == 200 and props["default_generation_settings"]["params"]["seed"] == 42 and
          props["model_path"].endswith("stories260K-f32.gguf"), "/props: params and model_path")

    # bad input
    for body, what in [({"prompt": PROMPT, "n_predict": 0}, "n_predict 0"), ({"prompt": PROMPT, "n_probs": 99}, "n_probs 99"),
                       ({"prompt": PROMPT, "typical_p": 0.5}, "typical_p on"), ({"prompt": PROMPT, "logit_bias": 3}, "logit_bias 3"),
                       ({"prompt": [1, {"x": 1}]}, "a prompt with an object inside"), ({}, "no prompt")]:
        st, e = call("POST", "/completion", body)
        check(st == 400 and e["error"]["message"], "400 for %s: %s" % (what, e.get("error", {}).get("message")))
finally:
    server_proc.stop(proc)

proc, port, _ = server_proc.start(server_bin, ["-m", model, "-t", "2", "--no-slots"])
try:
    st, r = client(port)("GET", "/slots")
    check(st == 501 and "error" in r, "--no-slots: /slots answers 501")
finally:
    server_proc.stop(proc)

# --chat-template: a format's name, or the Jinja text itself (llama-server's meaning)
for value, expected in [("chatml", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
                        ("{% for m in messages %}[{{ m.content }}]{% endfor %}", "[hi]")]:
    proc, port, _ = server_proc.start(server_bin, ["-m", model, "-t", "2", "--chat-template", value])
    try:
        st, r = client(port)("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
        check(st == 200 and r.get("prompt") == expected, "--chat-template %r renders %r" % (value[:20], r.get("prompt")))
    finally:
        server_proc.stop(proc)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
