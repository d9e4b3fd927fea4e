#!/usr/bin/env python3
"""llm-server fetching http(s) image URLs (--allow-remote-images, issue 36).

  test_server_remote_images.py LLM_SERVER LLM_SYNTH REPO

A local HTTP server (Python's http.server on 127.0.0.1, in a thread) serves
a PNG, redirects, a redirect loop, a 404, a page that is not a picture, an
endless body, a body that declares itself too large, a silent server and one
that trickles its body a byte at a time. llm-server runs llm-synth's
tiny-gemma3 with its projector, --allowed-image-domains 127.0.0.1 (loopback
is refused unless listed), a 64 KiB cap and a 1 s timeout. Checked: the
fetched PNG answers through the official openai client, streaming and not,
with usage counting the image's positions as the same picture sent as a
data: URL does; a picture fetched twice is encoded once (/v1/stats); each
refusal is a 400 naming the problem (endless body cut at the cap, slow and
trickling servers cut at the timeout, redirect loop, more than 3 redirects,
404, not an image, a host not on the list, a name that does not resolve,
user@host, https:// to a server that speaks no TLS); a slow fetch does not
hold up another request; the server still answers afterwards. (Flag off and
loopback without the list: test_server_images.py.) Skips (77) without the
openai package or in a build without the image codecs.
"""
import base64
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
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
with open(os.path.join(images, "rgb.png"), "rb") as f:
    PNG = f.read()
CAP = 64 * 1024
stop_serving = threading.Event()


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


class Pictures(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", ctype="image/png", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, to):
        self.answer(302, b"", "text/plain", [("Location", to)])

    def do_GET(self):
        p = self.path
        try:
            if p == "/rgb.png" or p == "/again.png":
                self.answer(200, PNG)
            elif p == "/redirect":
                self.redirect("rgb.png")  # relative to /
            elif p.startswith("/hops/"):
                n = int(p[len("/hops/"):])
                self.redirect("/hops/%d" % (n - 1)) if n > 0 else self.answer(200, PNG)
            elif p == "/loop":
                self.redirect("/loop")
            elif p == "/missing":
                self.answer(404, b"not here", "text/plain")
            elif p == "/page":
                self.answer(200, b"<html><body>no picture here</body></html>", "text/html")
            elif p == "/declared-huge":
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(1 << 40))
                self.end_headers()
                self.wfile.write(PNG)
            elif p == "/endless":  # no length: read until close, which never comes
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.end_headers()
                chunk = PNG + b"\0" * 8192
                while not stop_serving.is_set():
                    self.wfile.write(chunk)
            elif p == "/silent":
                stop_serving.wait(30)
            elif p == "/trickle":  # headers at once, then a byte every 0.1 s
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                for b in PNG:
                    if stop_serving.wait(0.1):
                        break
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
            else:
                self.answer(404, b"", "text/plain")
        except (BrokenPipeError, ConnectionResetError):
            pass  # llm-server hung up, as it should


pics = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pictures)
pics.daemon_threads = True
threading.Thread(target=pics.serve_forever, daemon=True).start()
pic_base = "http://127.0.0.1:%d" % pics.server_address[1]


def post(base, body, timeout=120):
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stats(base):
    with urllib.request.urlopen(base + "/v1/stats", timeout=10) as r:
        return json.loads(r.read())


def delta(after, before, key):
    return after.get(key, 0) - before.get(key, 0)


def chat(url, text="What is in this picture?"):
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": text},
                                                      {"type": "image_url", "image_url": {"url": url}}]}],
            "max_tokens": 4}


tmp = tempfile.mkdtemp()
model, mmproj = os.path.join(tmp, "g3.gguf"), os.path.join(tmp, "mmproj.gguf")
subprocess.run([synth_bin, "--shape", "tiny-gemma3", "--out", model, "--type", "f32", "--seed", "7", "--mmproj", mmproj],
               check=True, stdout=subprocess.DEVNULL)

proc, port, log = server_proc.start(server_bin, ["-m", model, "--mmproj", mmproj, "-t", "2", "-c", "512",
                                                 "--allowed-image-domains", "127.0.0.1,no-such-host.invalid",
                                                 "--remote-image-max-bytes", "64k", "--remote-image-timeout", "1"])
base = "http://127.0.0.1:%d" % port
try:
    st, r = post(base, chat("data:image/png;base64," + base64.b64encode(PNG).decode()))
    if "this build has no PNG decoder" in r.get("error", {}).get("message", ""):
        print("built without libpng/libjpeg-turbo (LLM_IMAGE_CODECS): skipping")
        server_proc.stop(proc)
        sys.exit(77)
    check(st == 200, "the PNG as a data: URL -> %d" % st)
    n_img = r.get("usage", {}).get("prompt_tokens", 0)

    # the fetched picture answers, through the openai client, streaming and
    # not; usage counts it as the data: URL's; fetched twice, encoded once
    client = openai.OpenAI(base_url=base + "/v1", api_key="none")
    s0 = stats(base)
    out = client.chat.completions.create(model="g3", max_tokens=4, messages=chat(pic_base + "/again.png")["messages"])
    check(out.choices[0].finish_reason in ("length", "stop") and out.usage.prompt_tokens == n_img,
          "openai client: a fetched PNG answers (%r, %d prompt tokens, %d as a data: URL)"
          % (out.choices[0].finish_reason, out.usage.prompt_tokens, n_img))
    pieces, finish, usage = [], None, None
    for chunk in client.chat.completions.create(model="g3", max_tokens=4, messages=chat(pic_base + "/rgb.png")["messages"],
                                                stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            finish = c.finish_reason or finish
    check(finish in ("length", "stop") and usage is not None and usage.prompt_tokens == n_img
          and usage.completion_tokens >= 1,
          "openai client, streaming: a fetched PNG answers (%r after %d chunks, %s prompt tokens)"
          % (finish, len(pieces), usage.prompt_tokens if usage else None))
    s1 = stats(base)
    # the same bytes as the data: URL above: cache hits, no new encoding
    check(delta(s1, s0, "images_encoded") == 0 and delta(s1, s0, "image_cache_hits") == 2
          and delta(s1, s0, "image_tokens") == 2 * 16,
          "the picture fetched twice (and sent once as a data: URL) is encoded once (%d encoded, %d cache hits)"
          % (delta(s1, s0, "images_encoded"), delta(s1, s0, "image_cache_hits")))
    st, r = post(base, chat(pic_base + "/redirect"))
    check(st == 200 and r["usage"]["prompt_tokens"] == n_img, "a relative redirect is followed -> %d" % st)
    st, r = post(base, chat(pic_base + "/hops/3"))
    check(st == 200, "three redirects are followed -> %d %r" % (st, r.get("error")))

    # refusals: each a 400 naming the problem, none slower than the timeout
    cases = [
        (pic_base + "/hops/4", "redirects more than 3", "four redirects"),
        (pic_base + "/loop", "redirects more than 3", "a redirect loop"),
        (pic_base + "/missing", "HTTP 404", "a 404"),
        (pic_base + "/page", "not a PNG, JPEG or WebP", "a web page, not a picture"),
        (pic_base + "/endless", "larger than --remote-image-max-bytes (65536 bytes)", "an endless body"),
        (pic_base + "/declared-huge", "larger than --remote-image-max-bytes", "Content-Length: 2^40"),
        (pic_base + "/silent", "did not answer within --remote-image-timeout (1 s)", "a silent server"),
        (pic_base + "/trickle", "did not answer within --remote-image-timeout (1 s)", "a byte every 0.1 s"),
        (pic_base.replace("127.0.0.1", "localhost") + "/rgb.png", "not one of --allowed-image-domains",
         "a host not on the list"),
        ("http://no-such-host.invalid/cat.png", "no-such-host.invalid", "a name that does not resolve"),
        ("http://user:secret@127.0.0.1:%d/rgb.png" % pics.server_address[1], "user@host", "user@host"),
        ("ftp://127.0.0.1/rgb.png", "or an http(s) URL", "an ftp: URL"),
        (pic_base.replace("http:", "https:") + "/rgb.png", "TLS", "https:// to a server without TLS"),
    ]
    for url, needle, what in cases:
        t0 = time.monotonic()
        st, r = post(base, chat(url))
        took = time.monotonic() - t0
        msg = r.get("error", {}).get("message", "")
        check(st == 400 and needle in msg and took < 4,
              "%s -> %d in %.1f s %r" % (what, st, took, msg[:200]))

    # a slow fetch holds only its own request: a text chat answers meanwhile
    slow = {}

    def slow_request():
        slow["r"] = post(base, chat(pic_base + "/silent"))
        slow["done"] = time.monotonic()

    th = threading.Thread(target=slow_request)
    t0 = time.monotonic()
    th.start()
    time.sleep(0.2)
    st, r = post(base, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    text_done = time.monotonic()
    th.join()
    check(st == 200 and slow["r"][0] == 400 and text_done < slow["done"],
          "a text chat answers while another request's fetch waits (%.2f s, the fetch's 400 at %.2f s)"
          % (text_done - t0, slow["done"] - t0))
    st, r = post(base, chat(pic_base + "/rgb.png"))
    check(st == 200, "the server still answers a fetched picture after the refusals -> %d" % st)
finally:
    stop_serving.set()
    server_proc.stop(proc)
    pics.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
