#!/usr/bin/python3
"""test_cli_matrix.py MIXCHECK UNTESTED_PLUGIN MUTANTS_PLUGIN SCRATCH CMAKE CASES_CMAKE

"No silent pass": every invocation of run / merge / diff / history that checks nothing meaningful
exits with its own code and says why. Each row runs one command on a small selection and asserts its
exit code and the first line of its message (the first line starting with "mixcheck", "NOTEST",
"note:", "STEP" or "history", as the row names it). UNTESTED_PLUGIN (untested_plugin.c) is a port
mixcheck cannot test; MUTANTS_PLUGIN gives failing checks; CASES_CMAKE (cmake/MixcheckCases.cmake) is
exercised through a small CMake project of one CTest per case. Run from the source root.
"""
import json
import os
import re
import shutil
import subprocess
import sys

mixcheck, untested, mutants, scratch, cmake, cases_cmake = map(os.path.abspath, sys.argv[1:7])
src = os.getcwd()
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
failures = []
n_rows = 0
SC = "cases/shortconv/tiny.yaml"


def path(name):
    return os.path.join(scratch, name)


def sh(args, env=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return p.returncode, p.stdout


def first_line(out, prefix):
    for line in out.splitlines():
        if line.startswith(prefix):
            return line
    return None


def row(name, args, code, prefix, pattern):
    """Runs mixcheck ARGS: exit `code`, and the first output line starting with `prefix` matches the
    regular expression `pattern` (from its start)."""
    global n_rows
    n_rows += 1
    rc, out = sh([mixcheck] + args)
    line = first_line(out, prefix)
    ok = rc == code and line is not None and re.match(pattern, line)
    print("%-4s %-58s exit %3d  %s" % ("ok" if ok else "FAIL", name, rc, (line or "")[:110]))
    if not ok:
        failures.append("%s: mixcheck %s\n  exit %d (expected %d); first '%s' line: %r (expected /%s/)\n%s" %
                        (name, " ".join(args), rc, code, prefix, line, pattern, out[-3000:]))
    return out


def check(name, cond, detail=""):
    global n_rows
    n_rows += 1
    print("%-4s %s" % ("ok" if cond else "FAIL", name))
    if not cond:
        failures.append("%s\n%s" % (name, detail))


# ---- shards of an empty plan: every shard knows the whole plan is empty, and so does merge ----------
for k in (1, 2):
    row("run -k TYPO --shard %d/2" % k, ["run", "cases/", "-k", "TYPO", "--shard", "%d/2" % k, "-q", "--json",
                                          path("typo%d.json" % k)],
        2, "mixcheck", r"mixcheck: no check matches the filters \(-k 'TYPO'\), in any shard of the plan")
row("merge of the -k TYPO shards", ["merge", "--json", path("typo.json"), path("typo1.json"), path("typo2.json")],
    2, "merged", r"merged 2 shard\(s\) of 2: 0 check\(s\).*exit 2$")
row("run -k TYPO (unsharded, for comparison)", ["run", "cases/", "-k", "TYPO", "-q"],
    2, "mixcheck", r"mixcheck: no check matches the filters \(-k 'TYPO'\)")

# ---- merge: a shard missing, unrelated reports, failing shards ---------------------------------------
sel = ["run", SC, "--backend", "cpu", "--dtype", "f32", "-q"]
for k in (1, 2, 3):
    row("shard %d/3 of a passing plan" % k, sel + ["--shard", "%d/3" % k, "--json", path("s%d.json" % k)],
        0, "(shard", r"\(shard %d of 3: [0-9]+ of the [0-9]+ selected checks\)" % k)
row("merge with shard 2 of 3 missing", ["merge", "--json", path("m.json"), path("s1.json"), path("s3.json")],
    2, "mixcheck", r"mixcheck: merge: shard 2 of 3 missing: the 2 report\(s\) given hold [0-9]+ of the plan's [0-9]+")
check("merge with a shard missing writes no report", not os.path.exists(path("m.json")))
row("merge of every shard", ["merge", "--json", path("m.json"), path("s1.json"), path("s2.json"), path("s3.json")],
    0, "merged", r"merged 3 shard\(s\) of 3: [0-9]+ check\(s\): [0-9]+ passed, 0 failed.*exit 0$")
row("merge with a shard given twice", ["merge", "--json", path("m2.json"), path("s1.json"), path("s1.json"),
                                       path("s3.json")],
    2, "mixcheck", r"mixcheck: merge: shard 1 of 3 given twice")
row("shard 2/3 of another plan (reference)", ["run", SC, "--backend", "reference", "--dtype", "f32", "-q", "--shard", "2/3",
                                        "--json", path("o2.json")], 0, "(shard", r"\(shard 2 of 3")
row("merge of shards of two plans", ["merge", "--json", path("m2.json"), path("s1.json"), path("o2.json"),
                                     path("s3.json")],
    2, "mixcheck", r"mixcheck: merge: \S*o2.json is a shard of another plan than \S*s1.json")
row("an unsharded report", sel + ["--json", path("u1.json")], 0, "1 case", r"1 case\(s\)")
row("another unsharded report", ["run", "cases/mamba2/tiny.yaml", "--backend", "cpu", "--dtype", "f32", "-q",
                                 "--json", path("u2.json")], 0, "1 case", r"1 case\(s\)")
row("merge of two unrelated reports", ["merge", "--json", path("m2.json"), path("u1.json"), path("u2.json")],
    2, "mixcheck", r"mixcheck: merge: \S*u1.json: not a shard report")
fsel = ["run", "cases/mamba2/tiny.yaml", "--plugin", mutants, "--dtype", "f32", "-k", "/mutant.8.1c-no-chaining/",
        "-k", "tiny/prefill/cpu/", "-q"]
codes = []
for k in (1, 2):
    rc, _ = sh([mixcheck] + fsel + ["--shard", "%d/2" % k, "--json", path("f%d.json" % k)])
    codes.append(rc)
check("failing shards: one exits 1", 1 in codes, str(codes))
row("merge of failing shards exits 1", ["merge", "--json", path("fm.json"), path("f1.json"), path("f2.json")],
    1, "merged", r"merged 2 shard\(s\) of 2: .* [1-9][0-9]* failed.*exit 1$")
check("the merged report says 1 too", json.load(open(path("fm.json")))["summary"]["exit_code"] == 1)

# ---- a port none of whose checks ran ----------------------------------------------------------------
usel = ["run", SC, "--plugin", untested, "--dtype", "f32", "-k", "tiny/prefill/", "-k", "tiny/decode/", "-q"]
out = row("--plugin: every check of the port unsupported", usel + ["--json", path("untested.json")],
          125, "NOTEST", r"NOTEST backend 'nodo' \(\S+\) was not tested: none of its checks ran \(2 unsupported, 0 not "
                         r"scheduled, over 2 scenario/dtype combination\(s\)\)")
check("... one line per scenario/dtype, with the port's reason",
      re.search(r"NOTEST backend 'nodo' not tested at prefill/f32: unsupported: model_create: this test port "
                r"implements no ShortConv layer \(1 case\(s\)\)", out) and
      re.search(r"NOTEST backend 'f64only' not tested at decode/f32: not scheduled: the backend does not declare "
                r"dtype f32", out), out)
check("... the built-in backends' checks still passed", re.search(r" [1-9][0-9]* passed, 0 failed", out), out)
kinds = [p["kind"] for p in json.load(open(path("untested.json")))["problems"]]
check("... the JSON report's problems are 'untestable'", kinds and set(kinds) == {"untestable"}, str(kinds))
row("--allow-unsupported accepts it", usel + ["--allow-unsupported"], 0, "1 case",
    r"1 case\(s\), 6 check\(s\): 4 passed, 0 failed, 0 errored, 2 unsupported; 0 problem")
row("--backend nodo explicitly", ["run", SC, "--plugin", untested, "--backend", "nodo", "--dtype", "f32", "-k",
                                  "tiny/prefill/", "-q"],
    125, "NOTEST", r"NOTEST backend 'nodo' \(\S+\) was not tested")
row("a port whose checks are none scheduled", ["run", SC, "--plugin", untested, "--dtype", "f32", "-k", "/f64only/",
                                               "-q"],
    125, "NOTEST", r"NOTEST backend 'f64only' \(\S+\) was not tested: none of its checks ran \(0 unsupported, "
                   r"[0-9]+ not scheduled")
row("a port whose family is not selected is exit 2", ["run", "cases/mamba2/tiny.yaml", "--plugin", untested,
                                                      "--dtype", "f32", "-k", "tiny/prefill/", "-q"],
    2, "ERROR", r"ERROR plugin \S+: none of its backends ran a check")
for k in (1, 2):
    sh([mixcheck] + usel + ["--shard", "%d/2" % k, "--json", path("us%d.json" % k)])
must = [json.load(open(path("us%d.json" % k)))["shard"]["must_test"] for k in (1, 2)]
check("shards of the port name it for merge (must_test)", must == [["nodo"], ["nodo"]], str(must))
row("merge of shards where the port ran no check", ["merge", "--json", path("um.json"), path("us1.json"),
                                                    path("us2.json")],
    125, "mixcheck", r"mixcheck: merge: backend 'nodo' was not tested: no shard gave any of its checks a verdict")

# ---- report options naming one file ------------------------------------------------------------------
same = path("same.json")
rel = os.path.relpath(same)
row("--json F --junit F", sel + ["--json", same, "--junit", same], 2, "mixcheck",
    r"mixcheck: --json \S+ and --junit \S+ name the same file: give each report its own")
row("--json F --html ./F (another spelling)", sel + ["--json", same, "--html", "./" + rel], 2, "mixcheck",
    r"mixcheck: --json \S+ and --html \./\S+ name the same file")
row("--markdown F --junit DIR/../F", sel + ["--markdown", same, "--junit",
                                           os.path.join(scratch, "..", os.path.basename(scratch), "same.json")],
    2, "mixcheck", r"mixcheck: --junit \S+ and --markdown \S+ name the same file")
check("... and nothing ran or was written", not os.path.exists(same))

# ---- baselines and diffs with nothing in common ------------------------------------------------------
row("--baseline with no record in common", ["run", "cases/mamba2/tiny.yaml", "--backend", "cpu", "--dtype", "f32",
                                            "-k", "tiny/prefill/", "-q", "--baseline", path("u1.json")],
    2, "mixcheck", r"mixcheck: --baseline \S+u1.json: the baseline does not cover this run: no tensor record")
row("--baseline that covers the run", sel + ["--baseline", path("u1.json")], 0, "1 case", r"1 case\(s\)")
row("diff with no record in common", ["diff", path("u1.json"), path("u2.json")], 2, "mixcheck",
    r"mixcheck: diff: \S+u1.json and \S+u2.json have no record \(case/scenario/backend/dtype/tensor\) in common")
row("diff of a report with itself", ["diff", path("u1.json"), path("u1.json")], 0, "mixcheck diff",
    r"mixcheck diff \S+ -> \S+: [1-9][0-9]* record\(s\) compared, 0 moved")

# ---- history -----------------------------------------------------------------------------------------
os.makedirs(path("empty-store"))
row("history EMPTY/", ["history", path("empty-store")], 2, "mixcheck",
    r"mixcheck: history: \S+empty-store holds no run \(\*\.json\)")
store = path("store")
hsel = ["run", SC, "--plugin", untested, "--allow-unsupported", "--dtype", "f32", "-k", "tiny/prefill/cpu/", "-q",
        "--record", store]
for _ in range(2):
    sh([mixcheck] + hsel)
files = sorted(os.listdir(store))
check("two runs recorded", len(files) == 2, str(files))
row("history -k NOMATCH", ["history", store, "-k", "NOMATCH"], 2, "mixcheck",
    r"mixcheck: history: -k 'NOMATCH' matched no record of the 2 run\(s\)")
row("history of two runs of one build", ["history", store], 0, "history", r"history \S+: 2 run\(s\) of 1 commit\(s\) "
    r"and 1 build\(s\)")
# the port rebuilt under the same mixcheck commit, its numbers x5: a build of its own, and a step
docs = [json.load(open(os.path.join(store, f))) for f in files]
for i, (f, d) in enumerate(zip(files, docs)):
    d["started_unix"] = 1700000000 + 100 * i
    if i == 1:
        d["provenance"]["plugins"][0]["sha256"] = "f" * 64
        for r in d["results"]:
            if r.get("tensor"):
                r["headroom"] *= 5
                r["max_abs_err"] *= 5
    json.dump(d, open(os.path.join(store, f), "w"))
out = row("history of a plugin that drifted x5 under one commit", ["history", store], 1, "  STEP",
          r"  STEP x5: headroom \S+ -> \S+, max abs err \S+ -> \S+, from run 2: commit \S+ .*; tested files changed: "
          r"plugin \S+untested_plugin\S* sha256 [0-9a-f]{12} -> plugin \S+ sha256 ffffffffffff")
check("... the groups are builds", re.search(r"2 run\(s\) of 1 commit\(s\) and 2 build\(s\)", out), out)

# ---- which case files run ----------------------------------------------------------------------------
# the shard plan counts only what runs: long/ only with --long
lsel = ["run", "cases/", "--backend", "cpu", "--dtype", "f32", "-k", "shortconv-tiny", "-q"]
sh([mixcheck] + lsel + ["--json", path("l.json")])
sh([mixcheck] + lsel + ["--shard", "1/2", "--json", path("l1.json")])
whole, shard = json.load(open(path("l.json"))), json.load(open(path("l1.json")))
check("--shard counts what runs, not long/ (%d checks unsharded, plan of %d)" %
      (whole["summary"]["checks"], shard["shard"]["checks_all_shards"]),
      whole["summary"]["checks"] == shard["shard"]["checks_all_shards"] > 0 and
      not any(r["case"].endswith("-long") for r in whole["results"]))
row("a long/ file named on the command line runs, and says so",
    ["run", "cases/long/shortconv.yaml", "--backend", "cpu", "--dtype", "f32", "-k", "long_decode"], 0, "note:",
    r"note: cases/long/shortconv.yaml is in a long/ directory: its cases run because it is named")
# .yml as well as .yaml
ydir = path("yml")
os.makedirs(ydir)
text = open(SC).read()
text = text.replace("../../golden/shortconv/tiny.h5", os.path.join(src, "golden/shortconv/tiny.h5"))
text = text.replace("../tolerances/shortconv.yaml", os.path.join(src, "cases/tolerances/shortconv.yaml"))
open(os.path.join(ydir, "tiny.yml"), "w").write(text)
row("a folder of .yml cases", ["run", ydir, "--backend", "cpu", "--dtype", "f32", "-k", "tiny/prefill/"], 0,
    "1 case", r"1 case\(s\), 1 check\(s\): 1 passed")

# ---- one CTest per case (mixcheck_add_case_tests) ----------------------------------------------------
proj, build = path("cases_project"), path("cases_build")
os.makedirs(proj)
open(os.path.join(proj, "CMakeLists.txt"), "w").write("""cmake_minimum_required(VERSION 3.20)
project(mixcheck_cli_matrix_cases NONE)
enable_testing()
include(%(cmake_file)s)
mixcheck_add_case_tests(CASES %(case)s MIXCHECK %(mixcheck)s PREFIX port. WORKING_DIRECTORY %(src)s
                        ARGS --plugin %(plugin)s --backend nodo --dtype f32 -k tiny/prefill/ -q)
mixcheck_add_case_tests(CASES %(case)s MIXCHECK %(mixcheck)s PREFIX typo. WORKING_DIRECTORY %(src)s
                        ARGS --backend nodoo --dtype f32 -q)
mixcheck_add_case_tests(CASES %(case)s MIXCHECK %(mixcheck)s PREFIX cpu. WORKING_DIRECTORY %(src)s
                        ARGS --backend cpu --dtype f32 -k tiny/prefill/ -q)
""" % {"cmake_file": cases_cmake, "case": os.path.join(src, SC), "mixcheck": mixcheck, "src": src,
       "plugin": untested})
rc, out = sh([cmake, "-S", proj, "-B", build])
check("the case-test project configures", rc == 0, out)
ctest = os.path.join(os.path.dirname(cmake), "ctest")
rc, out = sh([ctest, "--test-dir", build, "-R", "^port[.]", "--output-on-failure"])
check("ctest on a port that ran no check: not '100% tests passed'", rc != 0 and "100% tests passed" not in out, out)
check("... the case is skipped, its summary test fails",
      re.search(r"port\.shortconv-tiny \.+\*+Skipped", out) and re.search(r"port\.not-tested \.+\*+Failed", out), out)
check("... and says how many cases were not tested, and why",
      re.search(r"mixcheck cases: 1 of the 1 case\(s\) run were not tested \(exit 125, shown as skipped\):\s+"
                r"shortconv-tiny: backend 'nodo' \(\S+\) was not tested", out), out)
rc, out = sh([ctest, "--test-dir", build, "-R", "^typo[.]", "--output-on-failure"])
check("ctest with a mistyped backend: the case test fails (exit 2 is no skip)",
      rc != 0 and re.search(r"typo\.shortconv-tiny \.+\*+Failed", out) and "unknown backend 'nodoo'" in out, out)
rc, out = sh([ctest, "--test-dir", build, "-R", "^cpu[.]", "-V"])
check("ctest on a tested case passes, and its summary says so",
      rc == 0 and "all 1 case(s) run were tested" in out and "100% tests passed" in out, out)

print("\n%d row(s), %d failed" % (n_rows, len(failures)))
if failures:
    sys.exit("\n\n".join(failures))
