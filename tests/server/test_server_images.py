#!/usr/bin/env python3
"""llm-server's image_url content parts (issue 36).

  test_server_images.py LLM_SERVER LLM_SYNTH REPO

On llm-synth's tiny-gemma3 with its projector (--mmproj): chat requests with
OpenAI image_url parts (data: URLs, base64) through the official openai
client and raw HTTP. Bad pictures are 400s naming the problem: corrupt or
truncated PNG bytes, a 100000 x 100000 header, a decompression bomb, WebP,
base64 that does not decode, a data: URL that is not base64, a remote URL
(refused without --allow-remote-images; with it and no
--allowed-image-domains, a loopback host is refused),
an image part without a projector (a second server). Valid PNG and JPEG
pictures are answered, through raw HTTP and the openai client, with the
image's positions in usage.prompt_tokens, streaming and not; the same
picture sent twice is encoded once (/v1/stats' images_encoded and
image_cache_hits, and /metrics); text-only chats still answer. Skips (77)
without the openai package or in a build without the image codecs.
"""
import base64
import json
import os
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

server_bin, synth_bin, repo = sys.argv[1:4]
images = os.path.join(repo, "tests", "data", "images")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def post(base, body):
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stats(base):
    with urllib.request.urlopen(base + "/v1/stats", timeout=10) as r:
        return json.loads(r.read())


def delta(after, before, key):
    return after.get(key, 0) - before.get(key, 0)


def data_url(name, mime="image/png"):
    with open(os.path.join(images, name), "rb") as f:
        return "data:%s;base64,%s" % (mime, base64.b64encode(f.read()).decode())


def chat(url, text="What is in this picture?"):
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": text},
                                                      {"type": "image_url", "image_url": {"url": url}}]}],
            "max_tokens": 4}


tmp = tempfile.mkdtemp()
model, mmproj = os.path.join(tmp, "g3.gguf"), os.path.join(tmp, "mmproj.gguf")
subprocess.run([synth_bin, "--shape", "tiny-gemma3", "--out", model, "--type", "f32", "--seed", "7", "--mmproj", mmproj],
               check=True, stdout=subprocess.DEVNULL)

with open(os.path.join(images, "rgb.png"), "rb") as f:
    png = f.read()
bad = bytearray(png)
bad[28] ^= 0x40  # IHDR's interlace byte: a CRC mismatch
cases = [
    (data_url("huge.png"), "header declares", "a 100000 x 100000 header"),
    (data_url("bomb.png"), "budget", "a decompression bomb (16384 x 8192, 16 KB)"),
    ("data:image/png;base64," + base64.b64encode(bytes(bad)).decode(), "corrupt PNG", "a broken checksum"),
    ("data:image/png;base64," + base64.b64encode(png[:len(png) // 2]).decode(), "truncated", "half a PNG"),
    ("data:image/webp;base64," + base64.b64encode(b"RIFF\x10\0\0\0WEBPVP8 \0\0\0\0").decode(), "WebP", "WebP"),
    ("data:image/png;base64,not*base64", "does not decode", "bad base64"),
    ("data:image/png,rawbytes", "must be base64", "a data: URL without base64"),
    ("https://example.com/cat.png", "--allow-remote-images", "a remote URL without --allow-remote-images"),
    ("file:///etc/passwd", "data: URL", "a file: URL"),
]

proc, port, log = server_proc.start(server_bin, ["-m", model, "--mmproj", mmproj, "-t", "2", "-c", "512"])
base = "http://127.0.0.1:%d" % port
try:
    # the codec probe uses another picture than rgb.png, whose first sending
    # is counted below as the first encoding
    st, r = post(base, chat(data_url("gray.png")))
    if "this build has no PNG decoder" in r.get("error", {}).get("message", ""):
        print("built without libpng/libjpeg-turbo (LLM_IMAGE_CODECS): skipping")
        server_proc.stop(proc)
        sys.exit(77)
    for url, needle, what in cases:
        st, r = post(base, chat(url))
        msg = r.get("error", {}).get("message", "")
        check(st == 400 and needle in msg, "%s -> %d %r" % (what, st, msg[:160]))
    # valid pictures are answered; their 16 soft tokens (tiny-gemma3's
    # projector) and markers count in usage.prompt_tokens; /v1/stats and
    # /metrics count encodings, image-cache hits and image positions
    text_only = {"model": "g3", "max_tokens": 4,
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}]}]}
    st, r0 = post(base, text_only)
    check(st == 200, "a text-only chat -> %d" % st)
    n_text = r0.get("usage", {}).get("prompt_tokens", 0)
    s0 = stats(base)
    st, r = post(base, chat(data_url("rgb.png")))
    check(st == 200 and r.get("choices"), "a valid PNG -> %d %r" % (st, r.get("error")))
    n_img = r.get("usage", {}).get("prompt_tokens", 0)
    check(n_img >= n_text + 16, "usage counts the image's positions (%d with the picture, %d without)" % (n_img, n_text))
    s1 = stats(base)
    check(delta(s1, s0, "images_encoded") == 1 and delta(s1, s0, "image_cache_hits") == 0
          and delta(s1, s0, "image_tokens") == 16 and s1.get("image_encode_seconds", 0) > 0,
          "/v1/stats: one encoding, 16 image positions (%r)" % {k: v for k, v in s1.items() if "image" in k})
    client = openai.OpenAI(base_url=base + "/v1", api_key="none")
    msgs = chat(data_url("rgb.png"))["messages"]
    out = client.chat.completions.create(model="g3", max_tokens=4, messages=msgs)
    check(out.choices[0].finish_reason in ("length", "stop") and out.usage.prompt_tokens == n_img,
          "openai client: an image chat answers (%r, %d prompt tokens)" % (out.choices[0].finish_reason,
                                                                           out.usage.prompt_tokens))
    s2 = stats(base)
    check(delta(s2, s1, "images_encoded") == 0 and delta(s2, s1, "image_cache_hits") == 1
          and delta(s2, s1, "image_tokens") == 16 and s2["image_encode_seconds"] == s1["image_encode_seconds"],
          "the same PNG sent again is not encoded again (%d encoded, %d cache hits)"
          % (s2.get("images_encoded", -1), s2.get("image_cache_hits", -1)))
    # streaming, through the openai client: a new picture (JPEG) is encoded
    # once, then found in the cache; the final chunk's usage counts it
    jpg = chat(data_url("rgb.jpg", "image/jpeg"))["messages"]
    for round_no in range(2):
        pieces, finish, usage = [], None, None
        for chunk in client.chat.completions.create(model="g3", max_tokens=4, messages=jpg, stream=True,
                                                    stream_options={"include_usage": True}):
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                pieces.append(c.delta.content or "")
                finish = c.finish_reason or finish
        check(finish in ("length", "stop") and usage is not None and usage.prompt_tokens == n_img
              and usage.completion_tokens >= 1,
              "openai client, streaming, JPEG (round %d): %r after %d chunks, %s prompt tokens"
              % (round_no, finish, len(pieces), usage.prompt_tokens if usage else None))
    s3 = stats(base)
    check(delta(s3, s2, "images_encoded") == 1 and delta(s3, s2, "image_cache_hits") == 1
          and delta(s3, s2, "image_tokens") == 32,
          "streaming the same JPEG twice: one encoding, one cache hit (%d, %d)"
          % (delta(s3, s2, "images_encoded"), delta(s3, s2, "image_cache_hits")))
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        metrics = dict(l.rsplit(" ", 1) for l in resp.read().decode().splitlines() if l and not l.startswith("#"))
    check(int(float(metrics.get("llmrt_images_encoded_total", -1))) == s3["images_encoded"]
          and int(float(metrics.get("llmrt_image_cache_hits_total", -1))) == s3["image_cache_hits"]
          and int(float(metrics.get("llmrt_image_tokens_total", -1))) == s3["image_tokens"]
          and "llmrt_image_encode_seconds_total" in metrics,
          "/metrics shows the image counters of /v1/stats")
    text = client.chat.completions.create(model="g3", max_tokens=4,
                                          messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    check(text.choices[0].finish_reason in ("length", "stop"), "a text-only chat still answers")
    check(delta(stats(base), s3, "image_tokens") == 0, "a text-only chat counts no image positions")
finally:
    server_proc.stop(proc)

# --allow-remote-images without --allowed-image-domains: loopback hosts are
# refused before any connection (fetching: test_server_remote_images.py); no
# projector: refused
proc, port, log = server_proc.start(server_bin, ["-m", model, "--allow-remote-images", "-t", "2", "-c", "512"])
base = "http://127.0.0.1:%d" % port
try:
    for url in ("http://127.0.0.1:%d/cat.png" % port, "http://localhost:%d/cat.png" % port, "http://[::1]:1/cat.png"):
        st, r = post(base, chat(url))
        msg = r.get("error", {}).get("message", "")
        check(st == 400 and "loopback address: refused" in msg and "--allowed-image-domains" in msg,
              "--allow-remote-images, no list: %s -> %d %r" % (url, st, msg[:160]))
    st, r = post(base, chat(data_url("rgb.png")))
    check(st == 400 and "mmproj" in r.get("error", {}).get("message", ""), "no --mmproj: 400 naming it (%r)" % r)
finally:
    server_proc.stop(proc)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
