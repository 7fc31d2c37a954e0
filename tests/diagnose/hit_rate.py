#!/usr/bin/python3
"""The diagnosis against the mutant suite: every mutant of tests/mutants (on every bundled case of its family)
and of tests/packed (on the tiny case of every family it is registered for), discovered from the plugins,
runs through `mixcheck run --json`; the class the run's
diagnosis names first for it (`diagnosis_summary`) must be the mutant's own class, which its name carries
(`mutant.8.2a-...` -> 8.2a, `mutant.S2.4-...` -> S2.4, `mutant.future-leak` -> future-leak). A signature
`8.3` names both `8.3a` and `8.3b` (one class of docs/semantics.md §8, two slicings the facts do not tell
apart). The correct controls and the non-bug must get no diagnosis at all. Prints the per-mutant table and
the hit rate; exits 1 below 90 % or when a control is diagnosed. Mutants of PENDING_FAMILIES (no signatures
yet) must still be caught (exit 1) but are shown as "pending" and left out of the rate.

With --keep DIR, each run of the mutant library leaves its JSON report and exit status in DIR
(keep_name()), for test_mutants, whose kill matrix makes the same runs (CTest runs it after this one).

usage: hit_rate.py MIXCHECK MUTANTS_PLUGIN PACKED_PLUGIN [--markdown] [--keep DIR]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MIN_RATE = 0.90
# calibration (docs/diagnosis.md §6.1): of the per-case lines that say "likely", at least this share must
# name the mutant's own class
MIN_LIKELY_RIGHT = 0.90

# The mutants and controls are discovered from the plugins (`mixcheck list --plugin P`), so a mutant added
# to either library is measured without editing this file. A backend of the mutant library runs on every
# bundled case of its family; one of the packed library (the same name registered for several families)
# on the tiny case of each family it is registered for. PATHS overrides that ("{family}" = the family) for a
# backend whose class is shown only by other cases.
PATHS = {
    # the long runs (long_decode, length_sweep) live in cases/long/<family>.yaml
    "mutant.S2.9-bf16-state": "cases/long/{family}.yaml",
    "mutant.S2.10-tail-skipped": "cases/long/{family}.yaml",
}
# Families the signatures (harness/src/diagnosis/signatures.c) do not cover yet: their mutants run and are
# shown in the table (hit "pending"), but are not counted in the rate until the diagnosis has signatures for
# them. Empty: lightning attention and KDA have theirs (lightning-block-boundary-decay, lightning-slope-order,
# kda-gate-per-head, and the continued-forward classes through the stateful and conv masks).
PENDING_FAMILIES = set()
# Classes without a signature yet: the attention family's MLA option (docs/semantics.md §12.8). Its faults show as
# an output failing from the first token with the cache right (rope on the nope part, the key / value split, the
# scale) or as both failing (the latent norm) on the MLA goldens only, which the facts of one case cannot tell from
# 8.13 or rotary-all-dims without a fact about the golden's configuration; shown in the table, not counted.
PENDING_CLASSES = {"mla-rope-on-nope", "mla-latent-norm-skipped", "mla-kv-split-swapped", "mla-scale-nope-dim"}
# controls (must get no diagnosis) and the dtype they run at
CONTROL_DTYPE = {"nonbug.unfused-conv-act": "bf16"}


def discover(mixcheck, plugin):
    """[(backend, family)] of the plugin's own backends, in listing order."""
    p = subprocess.run([mixcheck, "list", "--plugin", plugin], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        sys.exit("mixcheck list --plugin %s: exit %d\n%s" % (plugin, p.returncode, p.stdout[-2000:]))
    out = []
    for line in p.stdout.splitlines():
        m = re.match(r"\s+(\S+)\s+(\w+)\s+device\s.*\((.*)\)\s*$", line)
        if m and m.group(3) == plugin and (m.group(1), m.group(2)) not in out:
            out.append((m.group(1), m.group(2)))
    return out


def plan(mixcheck, plugins):
    """[(plugin key, backend, label, paths, dtype, is_mutant)] over both libraries."""
    runs = []
    for backend, family in discover(mixcheck, plugins["m"]):
        kind = backend.split(".")[0]
        if kind not in ("mutant", "control", "nonbug"):
            continue
        runs.append(("m", backend, family, [PATHS.get(backend, "cases/{family}/").format(family=family)],
                     CONTROL_DTYPE.get(backend, "f32"), kind == "mutant"))
    packed = {}
    for backend, family in discover(mixcheck, plugins["p"]):
        packed.setdefault(backend, []).append(family)
    for backend, families in packed.items():
        kind = backend.split(".")[0]
        if kind not in ("mutant", "control") or backend == "control.no-packed":
            continue  # control.no-packed: every serving check unsupported (test_packed_mutants)
        runs.append(("p", backend, "tiny of %d families" % len(families),
                     [PATHS.get(backend, "cases/{family}/tiny.yaml").format(family=f) for f in families
                      if os.path.exists(PATHS.get(backend, "cases/{family}/tiny.yaml").format(family=f))],
                     "f32", kind == "mutant"))
    return runs


def own_class(backend):
    m = re.match(r"mutant\.(S2\.\d+|\d+\.\d+[a-z]?)(-|$)", backend)
    return m.group(1) if m else backend[len("mutant."):]


def names(sig, cls):
    return sig == cls or (re.fullmatch(r"\d+\.\d+", sig) is not None and re.fullmatch(re.escape(sig) + "[a-z]", cls) is not None)


def keep_name(backend, path, dtype):
    """The file name (without .json / .rc) of a kept run; test_mutants.c (kept_report) builds the same."""
    return ("%s@%s@%s" % (backend, path, dtype)).replace("/", "_")


def run(mixcheck, plugin, backend, paths, dtype, out):
    cmd = [mixcheck, "run", *paths, "--plugin", plugin, "--backend", backend, "--dtype", dtype, "-j", "2", "-q",
           "--color", "never", "--json", out]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if p.returncode not in (0, 1):
        sys.exit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stdout[-4000:]))
    with open(out) as f:
        return p.returncode, json.load(f)


def main():
    mixcheck, plugins = sys.argv[1], {"m": sys.argv[2], "p": sys.argv[3]}
    markdown = "--markdown" in sys.argv
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        os.makedirs(keep)
    tmp = tempfile.mkdtemp(prefix="mixcheck-diag-")
    rows, hits, n_mutants, bad_controls = [], 0, 0, []
    verdicts = {}  # per-case verdict -> [right, total]
    for key, backend, label, paths, dtype, is_mutant in plan(mixcheck, plugins):
        rc, rep = run(mixcheck, plugins[key], backend, paths, dtype, os.path.join(tmp, "r.json"))
        if keep and key == "m" and len(paths) == 1:
            name = os.path.join(keep, keep_name(backend, paths[0], dtype))
            shutil.copyfile(os.path.join(tmp, "r.json"), name + ".json")
            with open(name + ".rc", "w") as f:
                f.write("%d\n" % rc)
        diags = [d for d in rep.get("diagnoses", []) if d["backend"] == backend]
        if not is_mutant:
            named = diags[0]["likely"][0]["class"] if diags and diags[0]["likely"] else "-"
            ok = not diags and rc == 0
            rows.append((backend, label, "none", named, "", "%d diagnosed" % len(diags), "yes" if ok else "NO"))
            if not ok:
                bad_controls.append(backend)
            continue
        cls = own_class(backend)
        pending = label in PENDING_FAMILIES or cls in PENDING_CLASSES
        n_mutants += not pending
        summ = [x for x in rep.get("diagnosis_summary", []) if x["backend"] == backend]
        first = summ[0]["likely"][0]["class"] if summ and summ[0]["likely"] else "-"
        others = ", ".join(x["class"] for x in summ[0]["likely"][1:]) if summ else ""
        per_case = sum(1 for d in diags if d["likely"] and names(d["likely"][0]["class"], cls))
        wrong_likely = []
        for d in diags:
            v = verdicts.setdefault(d.get("verdict", "?"), [0, 0])
            right = bool(d["likely"]) and names(d["likely"][0]["class"], cls)
            v[0] += right
            v[1] += 1
            if d.get("verdict") == "likely" and not right:
                wrong_likely.append("%s:%s" % (d["case"], d["likely"][0]["class"] if d["likely"] else "-"))
        if wrong_likely:
            print("likely and wrong: %s on %s" % (backend, ", ".join(wrong_likely)), file=sys.stderr)
        hit = rc == 1 and names(first, cls)
        if pending and rc != 1:
            sys.exit("%s (%s) was not caught at all (exit %d)" % (backend, label, rc))
        hits += hit and not pending
        rows.append((backend, label, cls, first, others, "%d/%d" % (per_case, len(diags)),
                     "pending" if pending else "yes" if hit else "NO"))
    head = ("backend", "cases", "class", "named first", "also named", "cases naming it first", "hit")
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join("`%s`" % r[0] if i == 0 else r[i] for i in range(len(r))) + " |")
    else:
        print("%-38s %-26s %-12s %-12s %-18s %-10s %s" % head)
        for r in rows:
            print("%-38s %-26s %-12s %-12s %-18s %-10s %s" % r)
    rate = hits / n_mutants if n_mutants else 0.0
    n_pending = sum(1 for r in rows if r[6] == "pending")
    print("\nhit rate: %d of %d mutants named first by their own class (%.0f %%); controls diagnosed: %s%s"
          % (hits, n_mutants, 100 * rate, ", ".join(bad_controls) or "none",
             "; %d mutant(s) of families or classes without signatures yet (%s) not counted" %
             (n_pending, ", ".join(sorted(PENDING_FAMILIES | PENDING_CLASSES))) if n_pending else ""))
    print("per-case lines by verdict (right = the first class named is the mutant's own): " +
          "; ".join("%s %d of %d right" % (k, v[0], v[1]) for k, v in sorted(verdicts.items())))
    lk = verdicts.get("likely", [0, 0])
    likely_right = lk[0] / lk[1] if lk[1] else 1.0
    print("likely lines right: %.0f %% (at least %.0f %% required)" % (100 * likely_right, 100 * MIN_LIKELY_RIGHT))
    subprocess.run(["rm", "-rf", tmp])
    if n_mutants == 0 or rate < MIN_RATE or bad_controls or likely_right < MIN_LIKELY_RIGHT:
        sys.exit(1)


if __name__ == "__main__":
    main()
