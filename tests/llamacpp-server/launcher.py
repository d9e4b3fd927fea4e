#!/usr/bin/env python3
"""Stands where llama.cpp's server test suite expects `llama-server`
(LLAMA_SERVER_BIN_PATH): it runs `llm-server` with the same command line,
replacing only what this machine cannot do — download a model. The suite's
`--hf-repo`/`--hf-file`/`--model-url` name models on Hugging Face; those this
project has locally become `-m PATH` (stories260K is llm-server's built-in
model, no file needed); any other one ends the start with a message naming it
(the tests that need it cannot run here); only the suite's prefetch pass,
which starts every preset once to download its model, is answered by the
built-in model."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SERVER = os.environ.get("LLM_SERVER_BIN", os.path.join(REPO, "build", "bin", "llm-server"))

# Hugging Face name (repo, or repo + "/" + file) -> local path; "" = built-in.
LOCAL = {
    "ggml-org/test-model-stories260K": "",
    "ggml-org/models/tinyllamas/stories260K.gguf": "",
}


def log_start(argv):
    """Appends the suite's command line to LAUNCHER_LOG (default: a file in
    the temp dir), so that the servers that refused to start can be replayed
    for their message (replay.py)."""
    path = os.environ.get("LAUNCHER_LOG") or os.path.join(tempfile.gettempdir(), "llmrt-launcher-argv.jsonl")
    try:
        with open(path, "a") as f:
            f.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", ""), "argv": argv}) + "\n")
    except OSError:
        pass


def main(argv):
    log_start(argv)
    out, repo, hf_file, url = [], None, None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--hf-repo", "-hf", "-hfr") and i + 1 < len(argv):
            repo = argv[i + 1]
            i += 2
            continue
        if a in ("--hf-file", "-hff") and i + 1 < len(argv):
            hf_file = argv[i + 1]
            i += 2
            continue
        if a in ("--model-url", "-mu") and i + 1 < len(argv):
            url = argv[i + 1]
            i += 2
            continue
        out.append(a)
        i += 1
    name = None
    if repo:
        name = repo.split(":")[0] + ("/" + hf_file if hf_file else "")
    elif url:
        name = url
    if name is not None:
        if name not in LOCAL:
            if "--offline" not in out:
                # The suite's prefetch pass (ServerPreset.load_all starts each
                # preset once, without --offline, to download its model): there
                # is nothing to download here; the built-in model answers its
                # health check. The tests themselves pass --offline and get the
                # refusal below.
                os.execv(SERVER, [SERVER, "-m", ""] + [a for a in out if a not in ("--embedding", "--reranking")])
            sys.stderr.write(f"launcher: model {name} is not available offline on this machine\n")
            return 3
        if LOCAL[name]:
            out = ["-m", LOCAL[name]] + out
        elif "-m" not in out and "--model" not in out:
            out = ["-m", ""] + out  # llm-server: an empty path is the built-in model
    os.execv(SERVER, [SERVER] + out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
