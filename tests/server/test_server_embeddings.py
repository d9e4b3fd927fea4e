#!/usr/bin/env python3
"""llm-server's /v1/embeddings and /v1/rerank (issue 31).

  test_server_embeddings.py LLM_SERVER LLM_SYNTH

On llm-synth's tiny-bert (mean pooling) and tiny-bert-rerank (a classifier
head, rank pooling): the official openai client's embeddings.create, single
and batched, with token-id inputs, in its default base64 encoding
and in float (the same vectors), `dimensions` (Matryoshka: the first values,
renormalised), `usage`; /v1/rerank's results sorted by relevance_score,
top_n, return_documents, scores equal to the batch's own; bad inputs are
400s naming the parameter; Qwen3-Reranker and Qwen3-Embedding against
llama.cpp's reference. Skips (77) without the openai package.
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import server_proc

try:
    import openai
except ImportError:
    print("openai package not installed: skipping")
    sys.exit(77)

server_bin, synth_bin = sys.argv[1:3]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def norm(v):
    return math.sqrt(sum(x * x for x in v))


tmp = tempfile.mkdtemp()
paths = {}
for shape in ("tiny-bert", "tiny-bert-rerank"):
    paths[shape] = os.path.join(tmp, shape + ".gguf")
    subprocess.run([synth_bin, "--shape", shape, "--out", paths[shape], "--type", "f32", "--seed", "7"], check=True,
                   stdout=subprocess.DEVNULL)

A = [2, 17, 40, 91, 3]
B = [2, 200, 3]
C = [2] + list(range(5, 105)) + [3]

proc, port, _ = server_proc.start(server_bin, ["-m", paths["tiny-bert"], "-t", "2", "-c", "512"])
base = "http://127.0.0.1:%d" % port
try:
    client = openai.OpenAI(base_url=base + "/v1", api_key="none")
    one = client.embeddings.create(model="tiny-bert", input=A)  # base64 by default in the client
    v = one.data[0].embedding
    check(len(one.data) == 1 and len(v) == 64 and abs(norm(v) - 1) < 1e-5, "single: 64 values, unit norm")
    check(one.usage.prompt_tokens == len(A) and one.usage.total_tokens == len(A), "single: usage %s" % one.usage)
    batch = client.embeddings.create(model="tiny-bert", input=[A, B, C], encoding_format="float")
    check([d.index for d in batch.data] == [0, 1, 2], "batch: indices in order")
    check(batch.usage.prompt_tokens == len(A) + len(B) + len(C), "batch: usage")
    check(batch.data[0].embedding == v, "batch (float) == single (base64), value for value")
    check(batch.data[1].embedding != v, "different inputs, different vectors")
    cut = client.embeddings.create(model="tiny-bert", input=[A], dimensions=16, encoding_format="float").data[0].embedding
    head = v[:16]
    check(len(cut) == 16 and max(abs(a - b / norm(head)) for a, b in zip(cut, head)) < 1e-5,
          "dimensions 16: the first 16 values renormalised")
    st, raw = post(base, "/v1/embeddings", {"input": A, "encoding_format": "base64"})
    dec = list(struct.unpack("<64f", base64.b64decode(raw["data"][0]["embedding"])))
    check(st == 200 and max(abs(a - b) for a, b in zip(dec, v)) == 0, "base64 over HTTP is little-endian float32")
    # bad input: 400s naming the parameter
    for body, param, what in [({"input": []}, "input", "empty input array"),
                              ({"input": ""}, "input", "empty string"),
                              ({"input": [[]]}, "input", "empty token array"),
                              ({}, "input", "no input"),
                              ({"input": A, "dimensions": 65}, "dimensions", "dimensions above the model's"),
                              ({"input": A, "dimensions": 0}, "dimensions", "dimensions 0"),
                              ({"input": A, "encoding_format": "hex"}, "encoding_format", "unknown encoding"),
                              ({"input": [2] * 600}, "input", "longer than the context"),
                              ({"input": [2, 100000]}, "input", "token id outside the vocabulary"),
                              ({"input": [1.5]}, "input", "not integers")]:
        st, r = post(base, "/v1/embeddings", body)
        check(st == 400 and r.get("error", {}).get("param") == param, "%s -> %d %s" % (what, st, r.get("error")))
    # text through the WordPiece tokenizer: "w57 w123" is [CLS] w57 w123 [SEP]
    texts = client.embeddings.create(model="tiny-bert", input=["w57 w123", "Hello, w99!"], encoding_format="float")
    ids = client.embeddings.create(model="tiny-bert", input=[2, 57, 123, 3], encoding_format="float")
    check(texts.data[0].embedding == ids.data[0].embedding, "text == its token ids")
    n_tok = sum(len(post(base, "/tokenize", {"content": t, "add_special": True})[1]["tokens"])
                for t in ["w57 w123", "Hello, w99!"])
    check(texts.usage.prompt_tokens == n_tok, "text usage is /tokenize's count with [CLS] and [SEP]: %s" % texts.usage)
    st, r = post(base, "/v1/embeddings", {"input": "w57 w123"})
    check(st == 200 and len(r["data"]) == 1, "a single string")
    st, r = post(base, "/v1/rerank", {"query": A, "documents": [B]})
    check(st == 501 and "classifier" in r["error"]["message"], "rerank on a model without a head: 501 %s" % r)
finally:
    server_proc.stop(proc)

proc, port, _ = server_proc.start(server_bin, ["-m", paths["tiny-bert-rerank"], "-t", "2", "-c", "512"])
base = "http://127.0.0.1:%d" % port
try:
    docs = [[17, 40], [200, 201, 202], list(range(30, 60)), [9]]
    st, r = post(base, "/v1/rerank", {"model": "x", "query": [91, 92], "documents": docs})
    scores = [x["relevance_score"] for x in r.get("results", [])]
    check(st == 200 and len(scores) == 4 and scores == sorted(scores, reverse=True), "rerank: sorted %s" % scores)
    check(sorted(x["index"] for x in r["results"]) == [0, 1, 2, 3], "rerank: every document once")
    check(r["usage"]["prompt_tokens"] == sum(len(d) + 2 + 4 for d in docs), "rerank: usage %s" % r["usage"])
    st2, top = post(base, "/rerank", {"query": [91, 92], "documents": docs, "top_n": 2, "return_documents": True})
    check(st2 == 200 and [x["index"] for x in top["results"]] == [x["index"] for x in r["results"][:2]]
          and top["results"][0]["document"] == docs[top["results"][0]["index"]], "rerank: top_n 2, documents")
    # one document alone scores what it scored in the batch
    i = r["results"][0]["index"]
    st3, alone = post(base, "/v1/rerank", {"query": [91, 92], "documents": [docs[i]]})
    check(st3 == 200 and alone["results"][0]["relevance_score"] == r["results"][0]["relevance_score"],
          "rerank: a document's score does not depend on the others")
    # text: the same pair layout through the WordPiece tokenizer ("w<i>" is
    # token i for i >= 57 in the synthetic vocabulary)
    words = [[60, 61], [200, 201, 202], list(range(100, 130)), [99]]
    st4, by_ids = post(base, "/v1/rerank", {"query": [91, 92], "documents": words})
    st5, by_text = post(base, "/v1/rerank", {"query": "w91 w92",
                                             "documents": [" ".join("w%d" % x for x in d) for d in words]})
    check(st4 == 200 and st5 == 200 and [(x["index"], x["relevance_score"]) for x in by_text["results"]] ==
          [(x["index"], x["relevance_score"]) for x in by_ids["results"]], "rerank: texts score as their token ids")
    for body, param, what in [({"query": [91], "documents": []}, "documents", "no documents"),
                              ({"documents": [[5]]}, "query", "no query"),
                              ({"query": [91], "documents": [[5]], "top_n": -1}, "top_n", "negative top_n"),
                              ({"query": [91], "documents": "abc"}, "documents", "documents not an array")]:
        st, e = post(base, "/v1/rerank", body)
        check(st == 400 and e.get("error", {}).get("param") == param, "rerank %s -> %d" % (what, st))
finally:
    server_proc.stop(proc)

# Decoder models against llama.cpp's reference (tests/data/embeddings, from
# tools/embed_reference.py): Qwen3-Reranker's text pairs through /v1/rerank
# (its rerank template, scores P(yes) within 1e-3 and in llama.cpp's order)
# and Qwen3-Embedding's texts through /v1/embeddings (last token, EOS
# appended, normalised: cosine to llama.cpp's >= 0.9999). Both ran there
# with an F32 KV cache, as the server's --cache-type-k/v f32 here.
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "embeddings")


def reference(name):
    ref = json.load(open(os.path.join(data, name + ".json")))
    raw = open(os.path.join(data, ref["vectors_file"]), "rb").read()
    for c in ref["cases"]:
        n = c["rows"] * c["dim"]
        c["ref"] = struct.unpack_from("<%df" % n, raw, 4 * c["offset"])
    return ref


for name, shape in (("qwen3_rerank", "tiny-qwen3-rerank"), ("qwen3_embed", "tiny-qwen3-embed")):
    if not os.path.exists(os.path.join(data, name + ".json")):
        check(False, "%s reference missing (unpacked at configure time)" % name)
        continue
    ref = reference(name)
    path = os.path.join(tmp, shape + ".gguf")
    subprocess.run([synth_bin, "--shape", shape, "--out", path, "--type", "f32", "--seed", "7"], check=True,
                   stdout=subprocess.DEVNULL)
    proc, port, _ = server_proc.start(server_bin, ["-m", path, "-t", "2", "-c", "512", "--cache-type-k", "f32",
                                                   "--cache-type-v", "f32"])
    base = "http://127.0.0.1:%d" % port
    try:
        if name == "qwen3_rerank":
            pairs = [c for c in ref["cases"] if "query" in c]
            st, r = post(base, "/v1/rerank", {"query": pairs[0]["query"], "documents": [c["document"] for c in pairs]})
            check(st == 200, "qwen3 rerank: %d" % st)
            got = {x["index"]: x["relevance_score"] for x in r.get("results", [])}
            want = [c["ref"][0] for c in pairs]
            check(len(got) == len(pairs) and all(abs(got[i] - w) <= 1e-3 for i, w in enumerate(want)),
                  "qwen3 rerank: scores %s within 1e-3 of llama.cpp's %s" % (got, want))
            order = [x["index"] for x in r.get("results", [])]
            check(order == sorted(range(len(want)), key=lambda i: -want[i]), "qwen3 rerank: llama.cpp's order %s" % order)
        else:
            texts = [c for c in ref["cases"] if "text" in c]
            client = openai.OpenAI(base_url=base + "/v1", api_key="none")
            got = client.embeddings.create(model="x", input=[c["text"] for c in texts], encoding_format="float")
            for c, e in zip(texts, got.data):
                w = c["ref"]
                cos = sum(a * b for a, b in zip(e.embedding, w)) / (norm(e.embedding) * norm(w))
                check(cos >= 0.9999, "qwen3 embed %r: cosine %.7f" % (c["text"][:24], cos))
            check(got.usage.prompt_tokens == sum(len(c["tokens"]) for c in texts), "qwen3 embed: usage")
    finally:
        server_proc.stop(proc)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
