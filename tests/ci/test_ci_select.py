#!/usr/bin/env python3
"""scripts/ci_select.py on a fixture tree: a handful of sources, the depfiles a
build would write for them, and change lists. .ci/run runs it first (about a
second): a selection that silently dropped tests would fail here.

  python3 tests/ci/test_ci_select.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SELECT = os.path.join(HERE, "..", "..", "scripts", "ci_select.py")
SMOKE = {"test_capi", "test_abi", "test_api_misuse", "ctest_api"}

# path -> text. Includes are relative to src/ or kernels/, as in the tree.
FILES = {
    "CMakeLists.txt": "",
    "README.md": "",
    "docs/GUIDE.md": "",
    "src/a/foo.h": "",
    "src/a/foo.cpp": '#include "a/foo.h"\n#include "b/bar.h"\n',
    "src/a/foo_avx2.cpp": '#include "a/foo.h"\n',            # no header of its own
    "src/a/lonely.cpp": '#include "b/bar.h"\n',              # nothing of its own directory
    "src/b/bar.h": "",                                       # only the library includes it
    "src/c/util.h": "",
    "src/c/api.h": "",                                       # a TSan test includes it
    "src/eng/engine.h": "#include <mutex>\n",                # threaded code
    "src/eng/engine.cpp": '#include "eng/engine.h"\n',
    "kernels/k.cuh": "",
    "kernels/k.cu": '#include "k.cuh"\n',
    "src/backend/cuda/cuda_backend.cpp": '#include "k.cuh"\n',
    "samples/server/peek.h": "",
    "bench/bench_foo.cpp": '#include "a/foo.h"\n',
    "tests/test_foo.cpp": "", "tests/test_eng.cpp": "", "tests/test_other.cpp": "", "tests/test_cuda_k.cpp": "",
    "tests/test_capi.cpp": "", "tests/test_abi.cpp": "", "tests/test_api_misuse.cpp": "",
    "tests/ctest_api.c": "", "tests/server/test_server.py": "",
    "tests/fuzz/fuzz_gguf.cpp": "", "tests/fuzz/fuzz_chat.cpp": '#include "a/foo.h"\n', "tests/fuzz/run.sh": "",
    "tests/data/x/ref.json": "",
}
# build folder -> target -> object source -> the files its depfile lists (after the source)
DEPS = {
    "build": {
        "llmrt_objects": {"src/a/foo.cpp": ["src/a/foo.h", "src/b/bar.h"], "src/a/foo_avx2.cpp": ["src/a/foo.h"],
                          "src/a/lonely.cpp": ["src/b/bar.h"], "src/eng/engine.cpp": ["src/eng/engine.h"], "src/backend/cuda/cuda_backend.cpp": ["kernels/k.cuh"]},
        "llmrt_kernels": {"kernels/k.cu": ["kernels/k.cuh"]},
        "test_foo": {"tests/test_foo.cpp": ["src/a/foo.h", "src/c/util.h"]},
        "test_other": {"tests/test_other.cpp": ["src/c/util.h"]},
        "test_cuda_k": {"tests/test_cuda_k.cpp": ["kernels/k.cuh", "src/c/util.h"]},
        "test_eng": {"tests/test_eng.cpp": ["src/eng/engine.h"]},
        "test_capi": {"tests/test_capi.cpp": ["src/c/api.h"]}, "test_abi": {"tests/test_abi.cpp": []},
        "test_api_misuse": {"tests/test_api_misuse.cpp": []}, "ctest_api": {"tests/ctest_api.c": []},
        "llm-server": {"samples/server/server.cpp": ["samples/server/peek.h"]},
        "bench_foo": {"bench/bench_foo.cpp": ["src/a/foo.h"]},
    },
    "build-fuzz": {
        "fuzz_gguf": {"tests/fuzz/fuzz_gguf.cpp": ["src/c/util.h"]},
        "fuzz_chat": {"tests/fuzz/fuzz_chat.cpp": ["src/a/foo.h"]},
    },
}
TESTS = ["test_foo.Foo.A", "test_eng.E.A", "test_other.Other.A", "test_cuda_k.K.A", "test_capi.C.A", "test_abi.A.A",
         "test_api_misuse.M.A", "ctest_api"]

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def make_fixture(tmp):
    root = os.path.join(tmp, "root")
    for p, text in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(root, p)), exist_ok=True)
        with open(os.path.join(root, p), "w") as f:
            f.write(text)
    for build, targets in DEPS.items():
        for t, objs in targets.items():
            d = os.path.join(root, build, "CMakeFiles", t + ".dir")
            os.makedirs(d, exist_ok=True)
            for src, deps in objs.items():
                with open(os.path.join(d, os.path.basename(src) + ".o.d"), "w") as f:
                    f.write(f"{t}.dir/{src}.o: \\\n " + " \\\n ".join(os.path.join(root, x) for x in [src] + deps) + "\n")
    tests = [{"name": n, "command": [os.path.join(root, "build/bin", n.split(".")[0])], "properties": []} for n in TESTS]
    tests.append({"name": "llm_server", "command": ["/usr/bin/python3", os.path.join(root, "tests/server/test_server.py"),
                                                    os.path.join(root, "build/bin/llm-server"), root],
                  "properties": [{"name": "LABELS", "value": ["server"]}]})
    with open(os.path.join(root, "ctest.json"), "w") as f:
        json.dump({"tests": tests}, f)
    return root


def select(root, changed=None, base=None, env=None):
    args = [sys.executable, SELECT, "--root", root, "--build", os.path.join(root, "build"),
            "--ctest-json", os.path.join(root, "ctest.json"), "--write-changed", os.path.join(root, "changed.txt")]
    if changed is not None:
        with open(os.path.join(root, "list.txt"), "w") as f:
            f.write("".join(p + "\n" for p in changed))
        args += ["--changed", os.path.join(root, "list.txt")]
    if base is not None:
        args += ["--base", base]
    e = dict(os.environ)
    e.pop("CI_FULL", None)
    e.update(env or {})
    r = subprocess.run(args, capture_output=True, text=True, env=e)
    if r.returncode != 0:
        raise SystemExit(f"ci_select.py failed: {r.stderr}")
    out = {}
    for line in r.stdout.splitlines():
        k, v = line.split("=", 1)
        out[k] = v.strip("'")
    out["targets"] = set(out["ASAN_TARGETS"].split())
    return out


def fuzz_long(root, changed):
    with open(os.path.join(root, "list.txt"), "w") as f:
        f.write("".join(p + "\n" for p in changed))
    r = subprocess.run([sys.executable, SELECT, "--root", root, "--fuzz-long", os.path.join(root, "build-fuzz"),
                        "--changed", os.path.join(root, "list.txt")], capture_output=True, text=True, check=True)
    return set(r.stdout.split())


def ctest_cases(tmp):
    """The ctest regexes against ctest itself: CMake's regular expressions take
    at most nine groups, and a regex it cannot compile makes ctest run no test
    and exit 0 (the ASan stage of one CI ran nothing that way)."""
    if shutil.which("ctest") is None:
        print("skip ctest cases (no ctest)")
        return
    import importlib.util
    spec = importlib.util.spec_from_file_location("ci_select", SELECT)
    cs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cs)
    d = os.path.join(tmp, "ctest-build")
    os.makedirs(d)
    progs = [f"test_p{i}" for i in range(30)]
    names = [f"{p}.Suite.Case{j}" for p in progs for j in range(2)] + ["ctest_api", "ctest_api_more", "test_p1x.Suite.Case"]
    names += ["test_cuda_k.Suite.Case", "llm_server", "llm_server_hostile"]
    with open(os.path.join(d, "CTestTestfile.cmake"), "w") as f:
        for n in names:
            f.write(f"add_test([=[{n}]=] true)\n")
            if n.startswith("test_cuda"):
                f.write(f"set_tests_properties([=[{n}]=] PROPERTIES LABELS cuda)\n")
    tests = [{"name": n, "properties": [{"name": "LABELS", "value": ["cuda"]}] if n.startswith("test_cuda") else []}
             for n in names]
    alts = [a for p in progs[:25] + ["ctest_api"] for a in (cs.re.escape(p) + r"\.", cs.re.escape(p) + "$")]
    alts.append(cs.re.escape("llm_server") + "$")
    sel = {"ASAN_TESTS": cs.ctest_regex(alts),
           "ASAN_CUDA_TESTS": cs.ctest_regex([cs.re.escape("test_cuda_k") + r"\.", cs.re.escape("test_cuda_k") + "$"])}
    check(cs.ctest_count(d, sel["ASAN_TESTS"], ["-LE", "cuda"]) == 25 * 2 + 2,
          "ctest: 26 programs' regex compiles and selects their 50 GoogleTest entries, ctest_api and llm_server, "
          "not test_p1x, ctest_api_more, llm_server_hostile")
    check(cs.check_regexes(d, sel, tests) is None, "ctest: the regexes select what the test list says")
    grouped = {"ASAN_TESTS": "^(" + "|".join(cs.re.escape(p) + r"(\.|$)" for p in progs[:12]) + ")"}
    check(cs.ctest_count(d, grouped["ASAN_TESTS"], ["-LE", "cuda"]) is None
          and cs.check_regexes(d, grouped, tests) is not None,
          "ctest: a regex with a group per program (twelve) is refused by ctest, and the check says so")


def main():
    tmp = tempfile.mkdtemp(prefix="ci-select-")
    try:
        root = make_fixture(tmp)
        full = lambda s: s["ASAN_FULL"] == "1" and s["TSAN"] == "1" and s["FUZZ"] == "1" and s["ASAN_CUDA"] == "1"

        s = select(root, ["src/a/foo.h"])
        check(s["ASAN_FULL"] == "0" and s["targets"] == SMOKE | {"test_foo"},
              "a header change selects its includers and the smoke set, nothing else")
        check(s["ASAN_CUDA"] == "0" and s["TSAN"] == "0" and s["FUZZ"] == "1",
              "a header a fuzzer includes, no thread in it: fuzz, no TSan, no CUDA emulator")
        s = select(root, ["src/eng/engine.cpp"])
        check(s["targets"] == SMOKE | {"test_eng"} and s["TSAN"] == "1" and s["FUZZ"] == "0",
              "threaded code (its header includes <mutex>): TSan")
        s = select(root, ["src/c/api.h"])
        check(s["TSAN"] == "1", "a header a TSan test includes: TSan")
        s = select(root, ["src/c/util.h"])
        check(s["TSAN"] == "0" and s["FUZZ"] == "0", "a header neither TSan's tests nor the fuzzers include: neither")
        s = select(root, ["src/a/foo.h"])
        check("test_foo" in s["ASAN_TESTS"] and "test_other" not in s["ASAN_TESTS"], "its tests' ctest regex")
        s = select(root, ["src/c/util.h"])
        check(s["targets"] == SMOKE | {"test_foo", "test_other", "test_cuda_k"} and s["ASAN_CUDA"] == "1",
              "a header a CUDA test includes: the emulator part too")
        s = select(root, ["src/a/foo_avx2.cpp"])
        check(s["targets"] == SMOKE | {"test_foo"}, "a .cpp without a header of its own: its directory's headers")
        s = select(root, ["src/b/bar.h"])
        check(s["targets"] == SMOKE | {"test_foo"}, "a header no test includes: the tests of its callers")
        s = select(root, ["kernels/k.cu"])
        check(s["ASAN_FULL"] == "0" and s["ASAN_CUDA"] == "1" and s["targets"] == SMOKE | {"test_cuda_k"}
              and s["TSAN"] == "0" and s["FUZZ"] == "0" and "test_cuda_k" in s["ASAN_CUDA_TESTS"],
              "a kernel: its CUDA test under the emulator, no TSan, no fuzz")
        s = select(root, ["tests/test_other.cpp"])
        check(s["targets"] == SMOKE | {"test_other"}, "a test's own source selects it")
        s = select(root, ["samples/server/peek.h"])
        check("llm-server" in s["targets"] and "llm_server" in s["ASAN_TESTS"], "a server header: the server's script test")
        s = select(root, ["tests/server/test_server.py"])
        check("llm_server" in s["ASAN_TESTS"], "a script test's own file selects it")
        s = select(root, ["README.md", "docs/GUIDE.md"])
        check(s["ASAN_FULL"] == "0" and s["targets"] == SMOKE and s["ASAN_CUDA"] == "0"
              and s["TSAN"] == "0" and s["FUZZ"] == "0", "docs only: the smoke set, no TSan, no fuzz")
        s = select(root, [".ci/base", "README.md"])
        check(s["ASAN_FULL"] == "0" and s["targets"] == SMOKE and s["TSAN"] == "0" and s["FUZZ"] == "0",
              ".ci/base moved (every stop): the smoke set, no TSan, no fuzz")
        check(full(select(root, [".ci/run"])), ".ci/run selects everything")
        s = select(root, ["scripts/ci_select.py", "tests/ci/test_ci_select.py"])
        check(s["ASAN_FULL"] == "0" and s["targets"] == SMOKE and s["TSAN"] == "0" and s["FUZZ"] == "0",
              "the selection's own code: the smoke set (its test runs first)")
        s = select(root, ["bench/bench_foo.cpp"])
        check(s["targets"] == SMOKE and s["TSAN"] == "0", "a benchmark's source: nothing beyond the smoke set")
        for p in ("CMakeLists.txt", "src/a/lonely.cpp", "tests/data/x/ref.json", "src/new_file.cpp", "src/a/gone.h"):
            check(full(select(root, ["README.md", p])), f"{p} selects everything")
        with open(os.path.join(root, "changed.txt")) as f:
            check(f.read() == "*\n", "everything: the fuzz stage's list says '*'")
        check(full(select(root, ["README.md"], env={"CI_FULL": "1"})), "CI_FULL=1 selects everything")

        # Through git: a base this clone has, one it lacks, none at all.
        check(full(select(root, base="0123456789abcdef0123456789abcdef01234567")), "not a git checkout: everything")
        if shutil.which("git"):
            g = ["git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run(g + ["init", "-q"], check=True)
            subprocess.run(g + ["add", "-A"], check=True)
            subprocess.run(g + ["commit", "-qm", "one"], check=True)
            base = subprocess.run(g + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
            with open(os.path.join(root, "docs/GUIDE.md"), "a") as f:
                f.write("more\n")
            subprocess.run(g + ["commit", "-qam", "two"], check=True)
            s = select(root, base=base)
            check(s["ASAN_FULL"] == "0" and s["targets"] == SMOKE, "git: a docs change since the base: the smoke set")
            check(full(select(root, base="0123456789abcdef0123456789abcdef01234567")), "git: an unreachable base: everything")
            check(full(select(root, base="")), "git: no base: everything")
            os.makedirs(os.path.join(root, ".ci"), exist_ok=True)
            with open(os.path.join(root, ".ci/base"), "w") as f:
                f.write("# comment\n" + base + "\n")
            s = select(root)
            check(s["ASAN_FULL"] == "0" and s["targets"] == SMOKE, "git: .ci/base read past its comment")
        else:
            print("skip git cases (no git)")

        check(fuzz_long(root, ["tests/fuzz/fuzz_gguf.cpp"]) == {"gguf"}, "fuzz: a fuzzer's own source runs it long")
        check(fuzz_long(root, ["src/a/foo_avx2.cpp"]) == {"chat"}, "fuzz: a fuzzer including a changed module runs long")
        check(fuzz_long(root, ["README.md"]) == set(), "fuzz: docs: no long runs")
        check(len(fuzz_long(root, ["tests/fuzz/run.sh"])) == 19, "fuzz: the fuzz scripts: every fuzzer long")
        check(len(fuzz_long(root, ["*"])) == 19, "fuzz: '*': every fuzzer long")
        s = select(root, ["src/c/util.h", "samples/server/peek.h"])
        check(s["ASAN_TESTS"].count("(") == 1 and s["ASAN_CUDA_TESTS"].count("(") == 1,
              "the ctest regexes have one group whatever the number of programs (ctest takes nine)")
        ctest_cases(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ci_select: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
