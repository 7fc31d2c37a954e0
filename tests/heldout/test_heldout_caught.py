#!/usr/bin/env python3
"""test_heldout_caught.py MIXCHECK PLUGIN MANIFEST SCRATCH [--all-dtypes] [--prefix=P] [--families=F,...] — the
held-out broken ports (tests/heldout/heldout_plugin.c, listed in manifest.json; or another set, e.g.
tests/heldout/set2 with --prefix=heldout2.) against the bundled cases of their family. P, the backends' name
prefix, is heldout. unless given; F, the families the set covers (each with a control and at least 4 bugs),
is mamba2, mamba1, gdn, shortconv and attention unless given.

For each family: `mixcheck run cases/<family> --plugin PLUGIN -k P --dtype f32 -q --json F`,
its output thrown away, then from the JSON report's `results` only (never its diagnoses):
  - every bug backend of the manifest is CAUGHT: some check of it failed, errored or was
    nondeterministic, and the run exits 1;
  - the family's control (P + control-<family>, the unbroken wrapper) passes every check it ran;
  - the plugin registers exactly the manifest's backends, each under its manifest family, and every
    manifest entry is well formed (name, family, style, description, class).
Prints one line per backend: the scenarios whose checks caught it. f32 only unless --all-dtypes
(then f64 too) or --f64-when-missed (then a second run at f64 of the controls and of the bugs f32 did not catch:
the f32 intermediates of an f64 call, which no f32 check can see, at a third of --all-dtypes' time). Exit 0 when
all hold, 1 otherwise.
"""
import collections
import json
import os
import re
import subprocess
import sys

FAMILIES = ("mamba2", "mamba1", "gdn", "shortconv", "attention")
STYLES = {"off-by-one", "wrong-constant", "wrong-precision", "wrong-path", "wrong-buffer", "error", "control"}
CAUGHT = {"fail", "error", "nondeterministic"}
CLASS = re.compile(r"^(none|8\.\d+[a-z]?|S2\.\d+)$")


def registered(mixcheck, plugin, root, prefix):
    """name -> family of the plugin's backends named prefix*, from `mixcheck list`."""
    out = subprocess.run([mixcheck, "list", "--plugin", plugin], cwd=root, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("mixcheck list failed (%d): %s" % (out.returncode, out.stderr.strip()[-500:]))
    found = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(prefix):
            found[parts[0]] = parts[1]
    return found


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    mixcheck, plugin, manifest_path, scratch = args
    dtypes = ["f32", "f64"] if "--all-dtypes" in argv else ["f32"]
    prefix = "heldout."
    families = FAMILIES
    for a in argv[1:]:
        if a.startswith("--prefix="):
            prefix = a[len("--prefix="):]
        elif a.startswith("--families="):
            families = tuple(f for f in a[len("--families="):].split(",") if f)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(scratch, exist_ok=True)
    problems = []

    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)["backends"]
    by_name = {}
    for e in manifest:
        for key in ("name", "family", "style", "description", "class"):
            if not isinstance(e.get(key), str) or not e[key]:
                problems.append("manifest: %r lacks %s" % (e.get("name"), key))
        if e.get("family") not in families:
            problems.append("manifest: %s: family %r" % (e.get("name"), e.get("family")))
        if e.get("style") not in STYLES:
            problems.append("manifest: %s: style %r" % (e.get("name"), e.get("style")))
        if not CLASS.match(str(e.get("class"))):
            problems.append("manifest: %s: class %r is neither none nor an 8.x / S2.x id" % (e.get("name"), e.get("class")))
        if e.get("name") in by_name:
            problems.append("manifest: %s given twice" % e.get("name"))
        by_name[e.get("name")] = e
    for fam in families:
        ctl = prefix + "control-" + fam
        if by_name.get(ctl, {}).get("style") != "control":
            problems.append("manifest: no control %s" % ctl)
        bugs = [e for e in manifest if e["family"] == fam and e["style"] != "control"]
        if len(bugs) < 4:
            problems.append("manifest: %s has %d bugs, at least 4 wanted" % (fam, len(bugs)))

    reg = registered(mixcheck, plugin, root, prefix)
    for name in sorted(set(reg) | set(by_name)):
        if name not in reg:
            problems.append("%s: in the manifest, not registered by the plugin" % name)
        elif name not in by_name:
            problems.append("%s: registered by the plugin, not in the manifest" % name)
        elif reg[name] != by_name[name]["family"]:
            problems.append("%s: registered as %s, the manifest says %s" % (name, reg[name], by_name[name]["family"]))

    second = "--f64-when-missed" in argv and "--all-dtypes" not in argv

    def run(fam, dts, patterns, tag):
        """The verdicts (status, scenario, case) per backend of one run of the family's cases, and its exit."""
        report = os.path.join(scratch, fam + tag + ".json")
        if os.path.exists(report):
            os.remove(report)
        cmd = [mixcheck, "run", "cases/" + fam, "--plugin", plugin, "-q", "--no-experiments", "--json", report]
        for pat in patterns:
            cmd += ["-k", pat]
        if len(dts) == 1:
            cmd += ["--dtype", dts[0]]
        # the console output (which names diagnoses) is not read: only the verdicts of the report
        rc = subprocess.run(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="1")).returncode
        if not os.path.exists(report):
            problems.append("%s: mixcheck exited %d without a report" % (fam, rc))
            return None, rc
        with open(report, encoding="utf-8") as f:
            results = json.load(f)["results"]
        verdicts = collections.defaultdict(list)
        for r in results:
            if r.get("dtype") in dts:
                verdicts[r["backend"]].append((r["status"], r["scenario"], r["case"]))
        return verdicts, rc

    for fam in families:
        verdicts, rc = run(fam, dtypes, [prefix], "")
        if verdicts is None:
            continue
        fam_bugs = [e for e in manifest if e["family"] == fam]
        if second:
            again = [e["name"] for e in fam_bugs
                     if e["style"] == "control" or not any(x[0] in CAUGHT for x in verdicts.get(e["name"], []))]
            more, rc64 = run(fam, ["f64"], ["/%s/" % n for n in again], "-f64")
            if more is None:
                continue
            for name, v in more.items():
                verdicts[name].extend(v)
            if any(any(x[0] in CAUGHT for x in v) for v in more.values()):
                rc = rc64 if rc != 1 else rc
        any_bug = False
        for e in fam_bugs:
            name = e["name"]
            v = verdicts.get(name, [])
            if not v:
                problems.append("%s: no check ran" % name)
                continue
            bad = [x for x in v if x[0] in CAUGHT]
            if e["style"] == "control":
                others = collections.Counter(s for s, _, _ in v if s != "pass")
                if others:
                    problems.append("%s: the control did not pass: %s" % (name, dict(others)))
                print("%-34s control: %d checks passed" % (name, len(v)))
                continue
            any_bug = True
            scen = collections.Counter(s for _, s, _ in bad)
            cases = sorted({c for _, _, c in bad})
            statuses = collections.Counter(s for s, _, _ in bad)
            if not bad:
                problems.append("%s (%s): NOT CAUGHT: every one of its %d checks passed" % (name, e["style"], len(v)))
                print("%-34s NOT CAUGHT" % name)
            else:
                print("%-34s caught by %d/%d checks %s; scenarios %s; cases %s" % (
                    name, len(bad), len(v), dict(statuses), ", ".join("%s %d" % kv for kv in sorted(scen.items())),
                    ", ".join(cases)))
        if any_bug and rc != 1:
            problems.append("%s: mixcheck exited %d, expected 1 (a check failed)" % (fam, rc))

    for p in problems:
        print("PROBLEM: " + p)
    print("%d backends, %d problems" % (len(manifest), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
