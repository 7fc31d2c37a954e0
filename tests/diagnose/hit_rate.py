#!/usr/bin/python3
"""The diagnosis against the mutant suite: every mutant of tests/mutants (on every bundled case of its family)
and of tests/packed (on every family's tiny case) runs through `mixcheck run --json`; the class the run's
diagnosis names first for it (`diagnosis_summary`) must be the mutant's own class, which its name carries
(`mutant.8.2a-...` -> 8.2a, `mutant.S2.4-...` -> S2.4, `mutant.future-leak` -> future-leak). A signature
`8.3` names both `8.3a` and `8.3b` (one class of docs/semantics.md §8, two slicings the facts do not tell
apart). The correct controls and the non-bug must get no diagnosis at all. Prints the per-mutant table and
the hit rate; exits 1 below 90 % or when a control is diagnosed.

usage: hit_rate.py MIXCHECK MUTANTS_PLUGIN PACKED_PLUGIN [--markdown]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

MIN_RATE = 0.90

# (plugin key, backend, family or None for the packed set, dtype)
MUTANTS = [
    ("m", "mutant.8.1a-dt-first-token", "mamba2"),
    ("m", "mutant.8.1b-cache-advance-one", "mamba2"),
    ("m", "mutant.8.1c-no-chaining", "mamba2"),
    ("m", "mutant.8.2a-zero-conv-context", "mamba2"),
    ("m", "mutant.8.2a-zero-conv-context", "gdn"),
    ("m", "mutant.8.2b-state-reset", "mamba2"),
    ("m", "mutant.8.2b-state-reset", "gdn"),
    ("m", "mutant.8.3a-conv-first-l", "mamba2"),
    ("m", "mutant.8.3b-conv-off-by-one", "mamba2"),
    ("m", "mutant.8.3c-cache-post-act", "mamba2"),
    ("m", "mutant.8.4-pad-unmasked-continued", "mamba2"),
    ("m", "mutant.8.5-rightpad-leak", "mamba2"),
    ("m", "mutant.8.6-mask-skipped-batch1", "mamba2"),
    ("m", "mutant.8.9-short-prefill-roll", "shortconv"),
    ("m", "mutant.8.10-no-dt-clamp-decode", "mamba2"),
    ("m", "mutant.8.11-norm-group-swap", "mamba2"),
    ("m", "mutant.8.12-chunk-pad-decay", "mamba2"),
    ("m", "mutant.8.12-chunk-pad-write", "gdn"),
    ("m", "mutant.8.13-group-mod", "mamba2"),
    ("m", "mutant.8.13-key-head-mod", "gdn"),
    ("m", "mutant.future-leak", "mamba2"),
    ("p", "mutant.S2.3-state-leak", None),
    ("p", "mutant.S2.4-initial-state-ignored", None),
    ("p", "mutant.S2.5-wrong-slot", None),
    ("p", "mutant.S2.6-one-token-prefill-decode", None),
]
CONTROLS = [
    ("m", "control.correct", "mamba2", "f32"),
    ("m", "control.correct", "gdn", "f32"),
    ("m", "control.correct", "shortconv", "f32"),
    ("m", "nonbug.unfused-conv-act", "mamba2", "bf16"),
    ("p", "control.packed", None, "f32"),
]
PACKED_CASES = ["cases/%s/tiny.yaml" % f for f in ("mamba2", "mamba1", "gdn", "shortconv")]


def own_class(backend):
    m = re.match(r"mutant\.(S2\.\d+|\d+\.\d+[a-z]?)(-|$)", backend)
    return m.group(1) if m else backend[len("mutant."):]


def names(sig, cls):
    return sig == cls or (re.fullmatch(r"\d+\.\d+", sig) is not None and re.fullmatch(re.escape(sig) + "[a-z]", cls) is not None)


def run(mixcheck, plugin, backend, paths, dtype, out):
    cmd = [mixcheck, "run", *paths, "--plugin", plugin, "--backend", backend, "--dtype", dtype, "-j", "2", "-q",
           "--color", "never", "--json", out]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode not in (0, 1):
        sys.exit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stdout[-4000:]))
    with open(out) as f:
        return p.returncode, json.load(f)


def main():
    mixcheck, plugins = sys.argv[1], {"m": sys.argv[2], "p": sys.argv[3]}
    markdown = "--markdown" in sys.argv
    tmp = tempfile.mkdtemp(prefix="mixcheck-diag-")
    rows, hits, bad_controls = [], 0, []
    for key, backend, family in MUTANTS:
        paths = ["cases/%s/" % family] if family else PACKED_CASES
        rc, rep = run(mixcheck, plugins[key], backend, paths, "f32", os.path.join(tmp, "r.json"))
        summ = [s for s in rep.get("diagnosis_summary", []) if s["backend"] == backend]
        cls = own_class(backend)
        first = summ[0]["likely"][0]["class"] if summ and summ[0]["likely"] else "-"
        others = ", ".join(x["class"] for x in summ[0]["likely"][1:]) if summ else ""
        diags = [d for d in rep.get("diagnoses", []) if d["backend"] == backend]
        per_case = sum(1 for d in diags if d["likely"] and names(d["likely"][0]["class"], cls))
        hit = rc == 1 and names(first, cls)
        hits += hit
        rows.append((backend, family or "all (tiny)", cls, first, others, "%d/%d" % (per_case, len(diags)),
                     "yes" if hit else "NO"))
    for key, backend, family, dtype in CONTROLS:
        paths = ["cases/%s/" % family] if family else PACKED_CASES
        rc, rep = run(mixcheck, plugins[key], backend, paths, dtype, os.path.join(tmp, "r.json"))
        diags = [d for d in rep.get("diagnoses", []) if d["backend"] == backend]
        rows.append((backend, family or "all (tiny)", "none", "-" if not diags else diags[0]["likely"][0]["class"]
                     if diags[0]["likely"] else "?", "", "%d diagnosed" % len(diags), "yes" if not diags and rc == 0 else "NO"))
        if diags or rc != 0:
            bad_controls.append(backend)
    head = ("backend", "cases", "class", "named first", "also named", "cases naming it first", "hit")
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join("`%s`" % r[0] if i == 0 else r[i] for i in range(len(r))) + " |")
    else:
        print("%-38s %-12s %-12s %-12s %-22s %-10s %s" % head)
        for r in rows:
            print("%-38s %-12s %-12s %-12s %-22s %-10s %s" % r)
    rate = hits / len(MUTANTS)
    print("\nhit rate: %d of %d mutants named first by their own class (%.0f %%); controls diagnosed: %s"
          % (hits, len(MUTANTS), 100 * rate, ", ".join(bad_controls) or "none"))
    subprocess.run(["rm", "-rf", tmp])
    if rate < MIN_RATE or bad_controls:
        sys.exit(1)


if __name__ == "__main__":
    main()
