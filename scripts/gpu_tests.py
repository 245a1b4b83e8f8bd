#!/usr/bin/env python3
"""The gpu label's test list for the GPU-session kit (scripts/gpu_bundle.sh packs it here,
scripts/gpu_run.sh runs it on a lent GPU machine; docs/guides/gpu_session.md). The list is what
`ctest --show-only=json-v1 -L gpu` prints in the build folder.

  gpu_tests.py programs BUILD < list        the programs the tests run, relative to BUILD; "?NAME"
                                            for a Catch2 program whose tests are discovered once
                                            it is built (listed as NAME_NOT_BUILT-<hash> till then)
  gpu_tests.py pack BUILD REPO MPIEXEC < list > gpu_tests.json
                                            the list with BUILD, REPO and MPIEXEC rewritten to
                                            @BUNDLE@/build, @REPO@ and the bundle's mpirun
  gpu_tests.py unpack BUNDLE REPO           writes BUNDLE/CTestTestfile.cmake (for ctest) and
                                            BUNDLE/gpu_tests_here.json from BUNDLE/gpu_tests.json
  gpu_tests.py run BUNDLE                   runs BUNDLE/gpu_tests_here.json where no ctest exists:
                                            each test's command, environment (modifications too),
                                            working folder, timeout and skip code, the output of
                                            a failed one printed, ctest's summary line; exit 1
                                            when one failed
"""
import json
import os
import re
import subprocess
import sys
import time

NOT_BUILT = re.compile(r"(.+)_NOT_BUILT(-[0-9a-f]+)?$")


def programs(build):
    seen = []
    for test in json.load(sys.stdin)["tests"]:
        for arg in test.get("command", []):
            m = NOT_BUILT.match(arg)
            if m:
                seen.append("?" + m.group(1))
            elif arg.startswith(build + "/"):
                seen.append(os.path.relpath(arg, build))
    print("\n".join(dict.fromkeys(seen)))


def pack(build, repo, mpiexec):
    def walk(v):
        if isinstance(v, str):
            if v == mpiexec:
                return "@BUNDLE@/mpi/bin/mpirun"
            return v.replace(build, "@BUNDLE@/build").replace(repo, "@REPO@")
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items() if not k.startswith("backtrace")}
        return v

    json.dump({"tests": [walk(t) for t in json.load(sys.stdin)["tests"]]}, sys.stdout, indent=1)


def unpack(bundle, repo):
    with open(os.path.join(bundle, "gpu_tests.json")) as fh:
        text = fh.read().replace("@BUNDLE@", bundle).replace("@REPO@", repo)
    tests = json.loads(text)["tests"]
    if not tests:  # a suite of no test would report a pass
        print("gpu_tests.py: the bundle holds no gpu test", file=sys.stderr)
        return 2
    for t in tests:  # a build folder that holds no carried program is not in the bundle
        for p in t.get("properties", []):
            if p["name"] == "WORKING_DIRECTORY" and p["value"].startswith(bundle + "/"):
                os.makedirs(p["value"], exist_ok=True)
    with open(os.path.join(bundle, "gpu_tests_here.json"), "w") as fh:
        json.dump(tests, fh, indent=1)

    def arg(v):  # a bracket argument: no escapes, no variable references
        return "[==[" + (";".join(map(str, v)) if isinstance(v, list) else str(v)) + "]==]"

    with open(os.path.join(bundle, "CTestTestfile.cmake"), "w") as fh:
        for t in tests:
            fh.write("add_test(%s %s)\n" % (arg(t["name"]), " ".join(map(arg, t["command"]))))
            props = " ".join(p["name"] + " " + arg(p["value"]) for p in t.get("properties", []))
            if props:
                fh.write("set_tests_properties(%s PROPERTIES %s)\n" % (arg(t["name"]), props))
    print("%d gpu tests" % len(tests))


def run(bundle):
    with open(os.path.join(bundle, "gpu_tests_here.json")) as fh:
        tests = json.load(fh)
    if not tests:
        print("gpu_tests.py: no gpu test to run", file=sys.stderr)
        return 2
    failed, skipped = [], []
    for i, t in enumerate(tests, 1):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        env = dict(os.environ)
        env.update(kv.split("=", 1) for kv in props.get("ENVIRONMENT", []))
        for mod in props.get("ENVIRONMENT_MODIFICATION", []):
            name, _, op_value = mod.partition("=")
            op, _, value = op_value.partition(":")
            if op == "set":
                env[name] = value
            elif op == "unset":
                env.pop(name, None)
            else:
                sys.exit("gpu_tests.py: ENVIRONMENT_MODIFICATION %s: only set / unset" % mod)
        start = time.time()
        try:
            r = subprocess.run(t["command"], cwd=props.get("WORKING_DIRECTORY"), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=props.get("TIMEOUT", 1500))
            rc, out = r.returncode, r.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", (e.stdout or b"").decode(errors="replace")
        if rc == props.get("SKIP_RETURN_CODE"):
            status = "Skipped"
            skipped.append(t["name"])
        elif rc == 0:
            status = "Passed"
        else:
            status = "***Failed (%s)" % rc
            failed.append(t["name"])
        print("%2d/%d Test #%d: %s ... %s %.2f sec" % (i, len(tests), i, t["name"], status,
                                                       time.time() - start), flush=True)
        if rc not in (0, props.get("SKIP_RETURN_CODE")):
            print(out, flush=True)
    print("\n%d%% tests passed, %d tests failed out of %d" %  # ctest's line: skipped count
          (100 * (len(tests) - len(failed)) // max(len(tests), 1), len(failed), len(tests)))
    for name in skipped:
        print("  skipped: " + name)
    for name in failed:
        print("  failed: " + name)
    return 1 if failed else 0


if __name__ == "__main__":
    verbs = {"programs": programs, "pack": pack, "unpack": unpack, "run": run}
    if len(sys.argv) < 2 or sys.argv[1] not in verbs:
        sys.exit(__doc__)
    sys.exit(verbs[sys.argv[1]](*sys.argv[2:]))
