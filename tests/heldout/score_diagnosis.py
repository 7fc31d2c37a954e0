#!/usr/bin/python3
"""score_diagnosis.py MIXCHECK PLUGIN MANIFEST [--markdown] [--dtype D] — the diagnosis on the held-out set.

Each held-out backend (manifest.json `backends`, the bugs of heldout_plugin.c) runs over every bundled case of
its family (`mixcheck run cases/<family>`, every dtype the cases declare unless --dtype, as a user runs it),
and the run's line for that backend (`diagnosis_summary`) is scored against the manifest's `truth`:

  right      the line names the true class first ("likely" or "possibly"); for truth "errors" the line is the
             error verdict, for "precision" the precision verdict
  abstained  the line says "possibly" with another class first, or "no class fits" (for truth "none": any line
             that is not "likely" is right)
  wrong      the line says "likely" with another class (or the error / precision verdict where they are not
             the truth)

A signature 8.3 names 8.3a/8.3b, truth 8.1 accepts 8.1a/b/c, truth 8.22 accepts S2.4 (its serving analogue).
Prints one row per bug and the totals; exits 1 when a control gets a diagnosis. The figures go into the README
and docs/diagnosis.md; the thresholds of the issue (>= 80 % right, <= 5 % of lines wrong) are not asserted here:
this is a measurement of a set the matcher was not built from, not a test to tune against.
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def accepts(truth, cls):
    if cls is None:
        return False
    if truth == cls:
        return True
    if truth == "8.22" and cls == "S2.4":
        return True
    if re.fullmatch(r"\d+\.\d+", truth) and re.fullmatch(re.escape(truth) + "[a-z]", cls):
        return True
    return re.fullmatch(r"\d+\.\d+", cls) is not None and re.fullmatch(re.escape(cls) + "[a-z]", truth) is not None


def score(truth, verdict, first):
    if truth == "errors":
        return "right" if verdict == "errors" else ("wrong" if verdict in ("likely", "precision") else "abstained")
    if truth == "precision":
        return "right" if verdict == "precision" else ("wrong" if verdict in ("likely", "errors") else "abstained")
    if truth == "none":
        return "wrong" if verdict in ("likely", "errors", "precision") else "right"
    if verdict in ("likely", "possibly") and accepts(truth, first):
        return "right"
    if verdict in ("likely", "errors", "precision"):
        return "wrong"
    return "abstained"


def main():
    argv = sys.argv[1:]
    mixcheck, plugin, manifest = argv[:3]
    markdown = "--markdown" in argv
    dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else None
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    m = json.load(open(manifest))
    tmp = tempfile.mkdtemp(prefix="mixcheck-heldout-")
    rows, totals, bad_controls = [], {"right": 0, "abstained": 0, "wrong": 0}, []
    likely = [0, 0]
    for b in m["backends"]:
        out = os.path.join(tmp, "r.json")
        cmd = [mixcheck, "run", "cases/%s" % b["family"], "--plugin", plugin, "--backend", b["name"], "-q", "-j", "2",
               "--color", "never", "--json", out]
        if dtype:
            cmd += ["--dtype", dtype]
        p = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode not in (0, 1):
            sys.exit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:]))
        rep = json.load(open(out))
        summ = [x for x in rep.get("diagnosis_summary", []) if x["backend"] == b["name"]]
        if b["style"] == "control":
            if summ or p.returncode != 0:
                bad_controls.append(b["name"])
            continue
        verdict = summ[0].get("verdict", "?") if summ else "none diagnosed"
        first = summ[0]["likely"][0]["class"] if summ and summ[0]["likely"] else None
        s = score(b["truth"], verdict, first)
        totals[s] += 1
        if verdict == "likely":
            likely[1] += 1
            likely[0] += s == "right"
        rows.append((b["name"], b["truth"], verdict, first or "-", s, summ[0]["message"][:160] if summ else ""))
    n = sum(totals.values())
    if markdown:
        print("| backend | truth | verdict | first class | score |")
        print("|---|---|---|---|---|")
        for r in rows:
            print("| `%s` | %s | %s | %s | %s |" % r[:5])
    else:
        for r in rows:
            print("%-32s %-18s %-10s %-18s %-9s %s" % r)
    print("\nheld-out: %d bugs: %d right (%.0f %%), %d abstained (%.0f %%), %d wrong (%.0f %%); likely lines: %d of %d "
          "right; controls diagnosed: %s"
          % (n, totals["right"], 100.0 * totals["right"] / n, totals["abstained"], 100.0 * totals["abstained"] / n,
             totals["wrong"], 100.0 * totals["wrong"] / n, likely[0], likely[1], ", ".join(bad_controls) or "none"))
    subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if bad_controls else 0)


if __name__ == "__main__":
    main()
