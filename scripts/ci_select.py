#!/usr/bin/env python3
"""What CI's slow stages run for the paths changed since .ci/base.

  scripts/ci_select.py --build build [--base REV] [--changed FILE] [--fuzz-build DIR]

Reads the commit CI last passed on (.ci/base, or --base), lists the paths
changed from it to HEAD (git diff --name-only), and maps them onto the
sanitizer and fuzz stages through the compiler depfiles of the Release build
(BUILD/**/CMakeFiles/<target>.dir/**/*.o.d: every header each object
includes, transitively). Prints shell assignments on stdout (for eval) and,
on stderr, what was selected and why:

  ASAN_FULL      1: the whole ASan+UBSan stage, as before
  ASAN_TARGETS   (partial) the targets to build in build-asan
  ASAN_TESTS     (partial) a ctest -R regex of the CPU tests to run
  ASAN_CUDA      1: build with the emulator (-DLLM_CUDA=EMULATE) and run
  ASAN_CUDA_TESTS  (partial) a ctest -R regex of its CUDA tests
  TSAN           1: run tests/ci-tsan.sh
  FUZZ           1: run tests/fuzz/ci.sh

With --fuzz-long FUZZ_BUILD (after the fuzz build) it prints the fuzzers
whose own files, or files their objects include, changed: they run the full
time, the rest a short smoke.

Rules (conservative: when in doubt, run everything):
- No base, a base git cannot reach (a shallow clone, not a checkout, a bad
  hash) or CI_FULL=1: everything.
- Paths that build nothing (docs/, *.md, bench/results/, bench/*.py|sh, bindings/ which
  has its own stage, LICENSE, .ci/base itself, which every stop moves) select nothing;
  nor does the selection's own code (this script, tests/ci/), whose test runs
  first in every CI.
- A changed file that an object's depfile lists is "placed": a test program
  is selected when its own sources or any header it includes changed.
- A changed .cpp/.c/.cu stands for its header: the same stem in the same
  directory (.h/.cuh/.hpp), else the headers of its own directory that it
  includes directly (quant_generic.cpp -> quant.h), so the tests of the
  module it implements run. A header no test includes stands for the
  headers of the library files that include it (one step further, up to
  three), so a kernel's change reaches the tests of its callers.
- A path the rules cannot place (a CMakeLists.txt, cmake/, .ci/, scripts
  CI runs, test data, a .cpp with no header of its own directory, a file no
  depfile lists) selects the whole of every stage.
- The smoke set (test_capi test_abi test_api_misuse ctest_api) always runs
  under ASan.
"""
import argparse
import json
import os
import re
import subprocess
import sys

# The library and the helpers the tests link (their objects reach every test).
LIB_TARGETS = ["llmrt_objects", "llmrt_kernels", "llmrt_synth", "llmrt_test_support", "llmrt", "llmrt_static"]
SMOKE = ["test_capi", "test_abi", "test_api_misuse", "ctest_api"]
# tests/ci-tsan.sh's targets.
TSAN_TARGETS = ["test_capi", "ctest_api", "test_golden", "test_thread_pool", "test_api_misuse",
                "test_cpu_backend", "test_constrain_api", "test_kv_type", "test_kv_state", "test_kv_tiers"]
FUZZERS = ["gguf", "tokenizer", "wordpiece_unigram", "hf_json", "capi", "chat", "safetensors",
           "request_peek", "json_schema", "tool_calls", "reasoning", "grammar", "regex", "kv_reader",
           "kv_tier_file", "disagg_wire", "image", "remote_url", "server"]
# Tests that run programs their command does not name (a bin folder, a library).
BIN_DIR_TESTS = {"cli_golden": ["llm-run", "llm-chat"], "cli_families": ["llm-synth", "llm-chat", "llm-server"],
                 "dlopen_alongside": ["llm_dlopen_probe"]}
INERT = (re.compile(r"^docs/"), re.compile(r"(^|/)[^/]*\.md$"), re.compile(r"^bench/results/"), re.compile(r"^bench/[^/]*\.(py|sh)$"),
         re.compile(r"^bindings/"), re.compile(r"^LICENSE"), re.compile(r"^\.gitignore$"),
         re.compile(r"^\.ci/base$"))  # each stop moves it: the base is read, it builds nothing
# The selection's own code: its test (tests/ci/test_ci_select.py) runs first
# in every CI; it builds nothing the sanitizers or fuzzers run.
SELF = (re.compile(r"^scripts/ci_select\.py$"), re.compile(r"^tests/ci/"))
SOURCE_EXT = (".cpp", ".cc", ".c", ".cu")
HEADER_EXT = (".h", ".hpp", ".cuh", ".inc")
CUDA_PREFIXES = ("kernels/", "src/backend/cuda/", "tests/test_cuda")


# A file that uses threads itself: TSan's concern when it changes.
THREADED = re.compile(r'^\s*#\s*include\s*[<"](thread|mutex|atomic|condition_variable|shared_mutex|future|'
                      r'stop_token|semaphore|latch|barrier|util/thread_pool\.h)[>"]', re.M)


def threaded(path, root):
    try:
        return bool(THREADED.search(open(os.path.join(root, path), errors="replace").read()))
    except OSError:
        return False


def fuzz_deps(root):
    """{fuzzer: project files its source includes} (the preprocessor's -MM), or None without a compiler."""
    deps = {}
    for f in FUZZERS:
        src = f"tests/fuzz/fuzz_{f}.cpp"
        if not os.path.exists(os.path.join(root, src)):
            continue
        try:
            r = subprocess.run([os.environ.get("CXX", "c++"), "-std=c++20", "-MM", "-MG", "-Isrc", "-Iinclude", "-Itests",
                                "-Isamples/server", src], cwd=root, capture_output=True, text=True)
        except OSError:
            return None
        if r.returncode != 0:
            return None
        parts = r.stdout.replace("\\\n", " ").split(":", 1)[1].split()
        deps[f] = {os.path.normpath(p) for p in parts}
    return deps


def log(msg):
    print(msg, file=sys.stderr)


def changed_paths(base, root):
    """The paths changed from base to HEAD, or None when that cannot be known."""
    if not base:
        return None, "no base commit (.ci/base)"
    git = ["git", "-C", root]
    try:
        subprocess.run(git + ["rev-parse", "--git-dir"], check=True, capture_output=True)
        r = subprocess.run(git + ["rev-parse", "--verify", "--quiet", base + "^{commit}"], capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"base {base} is not a commit of this clone (shallow clone or bad hash)"
        r = subprocess.run(git + ["merge-base", "--is-ancestor", base, "HEAD"], capture_output=True)
        if r.returncode != 0:
            return None, f"base {base} is not an ancestor of HEAD"
        out = subprocess.run(git + ["diff", "--name-only", base, "HEAD"], check=True, capture_output=True, text=True).stdout
        # Uncommitted edits count too (a local run before committing).
        out += subprocess.run(git + ["diff", "--name-only", "HEAD"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return None, f"git cannot list the changes ({e})"
    return sorted({p for p in out.splitlines() if p}), None


def read_depfiles(build, root):
    """{target: {source-relative paths its objects depend on}}, {object source: deps} for library objects."""
    root = os.path.realpath(root) + "/"
    targets, objects = {}, {}
    for dirpath, dirnames, filenames in os.walk(build):
        for f in filenames:
            if not f.endswith(".o.d"):
                continue
            m = re.search(r"CMakeFiles/([^/]+)\.dir(/|$)", dirpath)
            if not m:
                continue
            text = open(os.path.join(dirpath, f), errors="replace").read().replace("\\\n", " ")
            parts = text.split(":", 1)[1].split() if ":" in text else []
            deps = set()
            for p in parts:
                p = os.path.realpath(p) if not os.path.isabs(p) else os.path.normpath(p)
                if p.startswith(root):
                    deps.add(p[len(root):])
            targets.setdefault(m.group(1), set()).update(deps)
            if parts:
                src = os.path.normpath(parts[0])
                if src.startswith(root):
                    objects.setdefault(m.group(1), {})[src[len(root):]] = deps
    return targets, objects


def stands_for(path, root):
    """A changed source file's headers (same stem, else its own directory's direct includes)."""
    d, base = os.path.split(path)
    stem = os.path.splitext(base)[0]
    same = [os.path.join(d, stem + e) for e in HEADER_EXT if os.path.exists(os.path.join(root, d, stem + e))]
    if same:
        return same
    try:
        text = open(os.path.join(root, path), errors="replace").read()
    except OSError:
        return []  # deleted: cannot place it
    found = []
    for h in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        for inc_dir in (d, "src", "include", "kernels", "tests", ""):
            c = os.path.normpath(os.path.join(inc_dir, h))
            if os.path.dirname(c) == d and os.path.exists(os.path.join(root, c)):
                found.append(c)
                break
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", help="the Release build folder (its depfiles)")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--base", help="the commit to diff from (default: .ci/base)")
    ap.add_argument("--changed", help="a file listing the changed paths (tests): no git")
    ap.add_argument("--ctest-json", help="ctest --show-only=json-v1 of the build (default: run ctest)")
    ap.add_argument("--write-changed", help="write the changed paths there (a line '*': everything)")
    ap.add_argument("--fuzz-long", metavar="FUZZ_BUILD",
                    help="instead: print the fuzzers whose code changed (--changed, as --write-changed wrote it)")
    args = ap.parse_args()
    root = os.path.realpath(args.root)
    if args.fuzz_long:
        print(" ".join(fuzz_long(root, args.fuzz_long, args.changed)))
        return 0
    if not args.build:
        ap.error("--build is needed")
    global WRITE_CHANGED
    WRITE_CHANGED = args.write_changed

    full = lambda why: emit(root, None, why)
    if os.environ.get("CI_FULL") == "1":
        return full("CI_FULL=1")
    if args.changed:
        changed = [l.strip() for l in open(args.changed) if l.strip() and not l.startswith("#")]
    else:
        base = args.base
        if base is None:
            try:
                lines = [l.strip() for l in open(os.path.join(root, ".ci/base")) if l.strip() and not l.startswith("#")]
                base = lines[0] if lines else None
            except OSError:
                base = None
        changed, why = changed_paths(base, root)
        if changed is None:
            return full(why)
        log(f"changed since {base}: {len(changed)} path(s)")
    if not os.path.isdir(args.build):
        return full(f"no build folder {args.build} (no depfiles)")
    targets, objects = read_depfiles(args.build, root)
    if not targets:
        return full(f"no depfiles under {args.build}")
    if args.ctest_json:
        tests = json.load(open(args.ctest_json))["tests"]
    else:
        out = subprocess.run(["ctest", "--test-dir", args.build, "--show-only=json-v1"], capture_output=True, text=True)
        if out.returncode != 0:
            return full("ctest cannot list the tests")
        tests = json.loads(out.stdout)["tests"]
    sel = select(root, changed, targets, objects, tests)
    if sel is not None and not args.ctest_json:
        bad = check_regexes(args.build, sel, tests)
        if bad:
            return full(bad)
    return emit(root, sel, "a path the rules cannot place")


def select(root, changed, targets, objects, tests):
    """The selection for a list of changed paths; None for everything (reasons logged)."""
    lib_targets = set(LIB_TARGETS) & set(objects)
    deps_of = lambda t: targets.get(t, set())
    test_targets = {t for t in targets if re.match(r"^(test_|ctest_)", t)}
    # Programs a ctest entry runs: the test programs and those the script tests start.
    runnable = set(test_targets)
    for t in tests:
        runnable.update(os.path.basename(a) for a in t.get("command", []) if os.path.basename(a) in targets)
        runnable.update(BIN_DIR_TESTS.get(t["name"], []))
    runnable &= set(targets)
    why = {}  # target -> reason
    cuda = []
    tsan_hit, fuzz_hit = [], []  # changed files that reach the TSan tests, the fuzzers
    fdeps = fuzz_deps(root)
    if fdeps is None:
        log("  (the preprocessor cannot list the fuzzers' includes: the fuzzers run)")
    script_hits = []
    code = [p for p in changed if not any(r.search(p) for r in INERT)]
    for p in changed:
        if p not in code:
            log(f"  {p}: builds nothing")
    unplaced = []
    for p in code:
        if any(r.search(p) for r in SELF):
            log(f"  {p}: the selection's own code (its test ran first)")
            continue
        if p.startswith("tests/") and re.match(r"^tests/(server|cli|chat)/", p) or p == "tools/validate_schema_samples.py":
            script_hits.append(p)
            log(f"  {p}: a script test's own file")
            continue
        if p.startswith("tests/fuzz/"):
            log(f"  {p}: the fuzz stage")
            fuzz_hit.append(p)
            continue
        keys = [p]
        ext = os.path.splitext(p)[1]
        if ext in SOURCE_EXT:
            keys += stands_for(p, root)
        elif ext not in HEADER_EXT:
            unplaced.append(p)
            continue
        # Headers no test includes: the headers of the library files that include them.
        frontier, seen = list(keys), set(keys)
        for _ in range(3):
            if any(k in deps_of(t) for k in frontier for t in test_targets):
                break
            nxt = []
            for t in lib_targets:
                for src, deps in objects[t].items():
                    if any(k in deps for k in frontier):
                        for h in stands_for(src, root):
                            if h not in seen:
                                seen.add(h)
                                nxt.append(h)
            if not nxt:
                break
            frontier = nxt
        keys = sorted(seen)
        hit = False
        for t in sorted(runnable):
            ks = [k for k in keys if k in deps_of(t)]
            if ks:
                hit = True
                if t not in why:
                    why[t] = p + ("" if p in ks else " (via " + ", ".join(ks[:3]) + ")")
        if not hit:
            if any(k in deps_of(t) for k in keys for t in lib_targets):
                unplaced.append(p)  # in the library, but no test includes it or its callers' headers
            elif any(k in d for k in keys for d in targets.values()):
                log(f"  {p}: only in programs no sanitizer test runs (benchmarks, samples; the Release build compiled them)")
            else:
                unplaced.append(p)
            continue
        if p.startswith(CUDA_PREFIXES) or any(k in deps_of(t) for k in keys
                                              for t in ("llmrt_kernels",) + tuple(x for x in test_targets if x.startswith("test_cuda"))):
            cuda.append(p)
        # TSan (its build is -DLLM_CUDA=OFF): a file its tests include, or
        # one that uses threads itself (the engine, the API, the thread pool,
        # the lanes, the KV tiers...), outside the CUDA side.
        tsan_keys = [k for k in keys if any(k in deps_of(t) for t in TSAN_TARGETS)
                     or (threaded(k, root) and not k.startswith(("kernels/", "src/backend/cuda/")))]
        if tsan_keys:
            tsan_hit.append(p if p in tsan_keys else f"{p} (via {tsan_keys[0]})")
        # Fuzz: a file a fuzzer's source includes.
        if fdeps is None or any(k in d for k in keys for d in fdeps.values()):
            fuzz_hit.append(p)
    if unplaced:
        for p in unplaced:
            log(f"  {p}: cannot be placed (no depfile lists it or its header): every stage runs in full")
        return None

    sel = {t: r for t, r in why.items() if t in test_targets}
    for s in SMOKE:
        if s in targets:
            sel.setdefault(s, "the smoke set")
    if cuda and not any(t.startswith("test_cuda") for t in sel):
        for t in test_targets:
            if t.startswith("test_cuda"):
                sel[t] = "the CUDA side changed, no CUDA test includes it: all of them"
    # ctest entries: gtest programs by name, script tests by the programs they run.
    cpu_re, cuda_re, extra_targets = [], [], set()
    for t in tests:
        name = t["name"]
        labels = [v for pr in t.get("properties", []) if pr["name"] == "LABELS" for v in pr["value"]]
        cmd = t.get("command", [])
        if re.match(r"^(test_|ctest_)", name):
            continue
        progs = [os.path.basename(a) for a in cmd if "/bin/" in a and not a.endswith("python3")]
        progs = [x for x in progs if x in targets] + BIN_DIR_TESTS.get(name, [])
        scripts = [a for a in cmd if a.endswith(".py")]
        reason = next((f"{x}: {why[x]}" for x in progs if x in why), None)
        if not reason:
            reason = next((f"{h}" for h in script_hits for s in scripts
                           if os.path.dirname(os.path.relpath(s, root)) == os.path.dirname(h)
                           or os.path.relpath(s, root) == h), None)
        if reason:
            cpu_re.append(re.escape(name) + "$")
            extra_targets.update(x for x in progs if x in targets or x in BIN_DIR_TESTS.get(name, []))
            log(f"  ASan test {name}: {reason}")
    for t, r in sorted(sel.items()):
        if t not in test_targets:
            continue
        # its GoogleTest entries (program.Suite.Test), or the one entry named
        # as the program (a C test); no group: see ctest_regex
        (cuda_re if t.startswith("test_cuda") else cpu_re).extend([re.escape(t) + r"\.", re.escape(t) + "$"])
        log(f"  ASan program {t}: {r}")
    asan_targets = sorted(set(sel) | extra_targets)
    return {
        "ASAN_TARGETS": " ".join(asan_targets),
        "ASAN_TESTS": ctest_regex(cpu_re),
        "ASAN_CUDA": "1" if cuda else "0",
        "ASAN_CUDA_TESTS": ctest_regex(cuda_re) if cuda else "",
        "TSAN": "1" if tsan_hit else "0",
        "FUZZ": "1" if fuzz_hit else "0",
        "_CHANGED": changed,
        "_CUDA": cuda,
        "_TSAN": tsan_hit,
        "_FUZZ": fuzz_hit,
    }


def ctest_regex(alternatives):
    """One ctest -R regex for a list of alternatives, or "" for none.

    ctest's regular expressions (CMake's) allow at most nine groups: a regex
    with a group per program fails to compile with more, and ctest then runs
    no test and still exits 0. So the alternatives carry no group of their own
    and the whole has one; main() also checks the regex with ctest itself.
    """
    if not alternatives:
        return ""
    assert all("(" not in a and ")" not in a for a in alternatives), alternatives
    return "^(" + "|".join(alternatives) + ")"


def ctest_count(build, regex, label_args):
    """How many tests `ctest -N -R regex` lists in build, or None when ctest cannot say."""
    try:
        r = subprocess.run(["ctest", "--test-dir", build, "-N", "-R", regex] + label_args,
                           capture_output=True, text=True)
    except OSError:
        return None
    m = re.search(r"Total Tests: (\d+)", r.stdout)
    if r.returncode != 0 or not m or "RegularExpression" in r.stdout + r.stderr:
        return None
    return int(m.group(1))


def check_regexes(build, sel, tests):
    """None when ctest selects, with each regex, exactly the tests Python's re finds in the
    test list (with -LE cuda / -L cuda, as .ci/run runs them); else why not."""
    def labels(t):
        return [v for pr in t.get("properties", []) if pr["name"] == "LABELS" for v in pr["value"]]
    for key, cuda in (("ASAN_TESTS", False), ("ASAN_CUDA_TESTS", True)):
        regex = sel.get(key, "")
        if not regex:
            continue
        want = sum(1 for t in tests if re.search(regex, t["name"]) and (("cuda" in labels(t)) == cuda))
        got = ctest_count(build, regex, ["-L", "cuda"] if cuda else ["-LE", "cuda"])
        if got != want:
            return f"ctest selects {got} test(s) with {key}, the test list {want}"
    return None


WRITE_CHANGED = None


def fuzz_long(root, fuzz_build, changed_file):
    """The fuzzers that run the full time: their own files, or a file their objects include, changed."""
    changed = [l.strip() for l in open(changed_file) if l.strip()] if changed_file else ["*"]
    targets, objects = read_depfiles(fuzz_build, root)
    if "*" in changed or not targets:
        log("fuzz: every fuzzer the full time" + ("" if targets else f" (no depfiles under {fuzz_build})"))
        return FUZZERS
    whole = [p for p in changed if p.startswith("tests/fuzz/") and not re.match(r"tests/fuzz/(fuzz_|corpus/|\w+\.dict$)", p)]
    if whole:
        log(f"fuzz: every fuzzer the full time ({whole[0]})")
        return FUZZERS
    long = []
    for f in FUZZERS:
        deps = targets.get("fuzz_" + f, set())
        own = (f"tests/fuzz/fuzz_{f}.cpp", f"tests/fuzz/corpus/{f}/", f"tests/fuzz/{f}.dict")
        for p in changed:
            keys = [p] + (stands_for(p, root) if os.path.splitext(p)[1] in SOURCE_EXT else [])
            if p.startswith(own) or any(k in deps for k in keys):
                long.append(f)
                log(f"fuzz: fuzz_{f} the full time ({p})")
                break
    return long


def emit(root, sel, why):
    def out(k, v):
        print(f"{k}='{v}'")
    if WRITE_CHANGED:
        with open(WRITE_CHANGED, "w") as fh:
            fh.write("*\n" if sel is None else "".join(p + "\n" for p in sel["_CHANGED"]))
    if sel is None:
        log(f"CI selection: everything ({why})")
        out("ASAN_FULL", 1)
        for k in ("ASAN_TARGETS", "ASAN_TESTS", "ASAN_CUDA_TESTS"):
            out(k, "")
        out("ASAN_CUDA", 1)
        out("TSAN", 1)
        out("FUZZ", 1)
        return 0
    out("ASAN_FULL", 0)
    for k in ("ASAN_TARGETS", "ASAN_TESTS", "ASAN_CUDA", "ASAN_CUDA_TESTS", "TSAN", "FUZZ"):
        out(k, sel[k])
    log("CI selection: ASan+UBSan on " + (sel["ASAN_TARGETS"] or "nothing")
        + ("; the CUDA emulator's tests too (" + ", ".join(sel["_CUDA"]) + ")" if sel["ASAN_CUDA"] == "1" else "; no CUDA emulator")
        + ("; TSan (" + ", ".join(sel["_TSAN"][:4]) + ")" if sel["TSAN"] == "1"
           else "; no TSan (nothing its tests include, no threaded code changed)")
        + ("; fuzzers (" + ", ".join(sel["_FUZZ"][:4]) + ")" if sel["FUZZ"] == "1"
           else "; no fuzzers (nothing they include changed)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
