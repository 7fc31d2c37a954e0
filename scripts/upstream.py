#!/usr/bin/python3
"""upstream.py — mixcheck across transformers releases: which release broke or fixed what.

    scripts/upstream.py run --releases 4.57.6,5.0.0,5.24.0 --python /work/venv/bin/python \\
        --cache /work/upstream-cache --out upstream-report [--wheels DIR] [--dtype f32] [-j 2] [CASES...]
    scripts/upstream.py report --out upstream-report            # rebuild the report from the stored runs

`run` installs each release into its own target directory (``CACHE/site/<release>``) beside one shared
interpreter (``--python``: the torch and everything else comes from there): ``pip install --no-deps
--target`` of ``transformers==<release>`` plus those of the release's own requirements (its wheel's
``Requires-Dist``) that the shared interpreter's installed versions do not satisfy — for 4.57 an older
``huggingface-hub`` and ``tokenizers``. ``--wheels DIR`` installs from a local wheel directory only (pip
``--no-index --find-links DIR``: offline); without it pip downloads into ``CACHE/wheels``. A release
installed once is reused.

Then, with that directory first on ``PYTHONPATH``, it runs ``mixcheck run CASES -k '*/hf-*/<dtype>'``:
the mixer adapters (``hf-mamba2``, ``hf-mamba``, ``hf-gdn``, ``hf-shortconv``, ``hf-attention``) and the
whole models (``hf-model``) on the model cases, and keeps each release's JSON report in ``OUT/runs/``.
Default CASES: the mixer and model directories under cases/.

`report` (run at the end of `run` too) reads those JSON reports and writes ``OUT/upstream.md`` and
``OUT/upstream.html``: a summary per release, the list of what changed between consecutive releases (a
check that went from pass to fail is *broke*, from fail or error to pass *fixed*, anything else
*changed*), the diagnosis each release gives each (backend, case), and the whole matrix release x
(backend, case, scenario) -> pass / fail (with the failing tensors) / error (with its message) /
unsupported. A release whose install or run failed is a column of its own saying why.

Not part of CI (it downloads and runs every release); tests/python/test_upstream_report.py checks the
report building on fixture data.
"""

import argparse
import html
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CASES = ["cases/mamba2", "cases/mamba1", "cases/gdn", "cases/shortconv", "cases/attention", "cases/models"]
# the verdict of a check from its tensors' statuses: the worst one
ORDER = ["error", "fail", "nondeterministic", "drift", "unsupported", "skipped", "pass"]
SHORT = {"pass": "pass", "fail": "FAIL", "error": "ERROR", "unsupported": "unsup", "nondeterministic": "nondet",
         "drift": "drift", "skipped": "skip", None: "—"}


def release_key(v):
    """Sort key of a release number (4.57.6 < 5.0.0 < 5.12.1)."""
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+-]", v))


# ---- reading runs -------------------------------------------------------------------------------------------

def checks_of(report):
    """{(backend, case, scenario, dtype): {"verdict", "detail"}} from one mixcheck JSON report: the verdict
    is the worst status of the check's tensors; the detail names the failing tensors, or the message of an
    error / unsupported check."""
    out = {}
    for r in report.get("results", []):
        key = (r["backend"], r["case"], r["scenario"], r["dtype"])
        c = out.setdefault(key, {"verdict": "pass", "failing": [], "message": None})
        st = r["status"]
        if ORDER.index(st) < ORDER.index(c["verdict"]):
            c["verdict"] = st
        if st in ("fail", "nondeterministic", "drift") and r.get("tensor") and r["tensor"] not in c["failing"]:
            c["failing"].append(r["tensor"])
        if st in ("error", "unsupported") and r.get("message") and c["message"] is None:
            c["message"] = r["message"]
    for c in out.values():
        if c["verdict"] in ("error", "unsupported"):
            c["detail"] = (c["message"] or "").split("\n")[0]
        elif c["failing"]:
            c["detail"] = ", ".join(c["failing"])
        else:
            c["detail"] = ""
    return out


def diagnoses_of(report):
    """{(backend, case): the diagnosis line's message} from one JSON report (as the harness gives it)."""
    return {(d["backend"], d["case"]): d.get("message", "") for d in report.get("diagnoses", [])}


def load_runs(out):
    """[(release, {"checks", "diagnoses", "problem", "version"})] from OUT/runs, in release order."""
    runs = []
    d = os.path.join(out, "runs")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith(".meta.json"):
            continue
        rel = name[:-len(".meta.json")]
        with open(os.path.join(d, name)) as f:
            meta = json.load(f)
        run = {"checks": {}, "diagnoses": {}, "problem": meta.get("problem"), "version": meta.get("version"),
               "exit": meta.get("exit")}
        path = os.path.join(d, rel + ".json")
        if os.path.exists(path):
            with open(path) as f:
                rep = json.load(f)
            run["checks"], run["diagnoses"] = checks_of(rep), diagnoses_of(rep)
        elif run["problem"] is None:
            run["problem"] = "no JSON report (mixcheck exit %s)" % meta.get("exit")
        runs.append((rel, run))
    runs.sort(key=lambda r: release_key(r[0]))
    return runs


# ---- what changed ---------------------------------------------------------------------------------------

def changes(runs):
    """What changed between consecutive releases that ran: [(from, to, kind, key, before, after)] with kind
    ``broke`` (pass -> fail / error / nondeterministic), ``fixed`` (fail / error / nondeterministic ->
    pass) or ``changed`` (anything else, e.g. fail -> error, unsupported -> pass)."""
    ran = [(r, run) for r, run in runs if run["problem"] is None]
    out = []
    for (r0, a), (r1, b) in zip(ran, ran[1:]):
        for key in sorted(set(a["checks"]) & set(b["checks"])):  # a check only one ran: not a release's change
            v0, v1 = a["checks"][key]["verdict"], b["checks"][key]["verdict"]
            if v0 == v1:
                continue
            bad = ("fail", "error", "nondeterministic")
            kind = "broke" if v0 == "pass" and v1 in bad else "fixed" if v0 in bad and v1 == "pass" else "changed"
            out.append((r0, r1, kind, key, v0, v1))
    return out


def grouped_changes(ch):
    """The changes grouped by (from, to, kind, backend, scenario, before, after) -> the cases."""
    g = {}
    for r0, r1, kind, (backend, case, scenario, dtype), v0, v1 in ch:
        g.setdefault((r0, r1, kind, backend, scenario, dtype, v0, v1), []).append(case)
    return g


def error_kind(msg):
    """An error message without what is particular to one check: the run it was in (the text before the
    worker's ``python <call>:``), the traceback, and numbers (shapes, rows, tokens)."""
    return re.sub(r"\d+", "N", error_text(msg))


def error_text(msg):
    """An error message from the worker's ``python <call>:`` on, without its traceback."""
    i = msg.find("python ")
    if i > 0:
        msg = msg[i:]
    return msg.split(" [traceback")[0][:300]


def summary(run):
    n = {}
    for c in run["checks"].values():
        n[c["verdict"]] = n.get(c["verdict"], 0) + 1
    return n


# ---- writing the report ------------------------------------------------------------------------------------

def _cell(c):
    if c is None:
        return "—"
    return SHORT[c["verdict"]]


def markdown(runs, title="mixcheck across transformers releases"):
    lines = ["# " + title, ""]
    lines += ["## Releases", "", "| release | transformers | checks | pass | fail | error | unsupported | other |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rel, run in runs:
        if run["problem"] is not None:
            lines.append("| %s | — | not run: %s | | | | | |" % (rel, run["problem"].replace("|", "\\|")))
            continue
        n = summary(run)
        other = sum(v for k, v in n.items() if k not in ("pass", "fail", "error", "unsupported"))
        lines.append("| %s | %s | %d | %d | %d | %d | %d | %d |" % (
            rel, run.get("version") or rel, sum(n.values()), n.get("pass", 0), n.get("fail", 0), n.get("error", 0),
            n.get("unsupported", 0), other))
    lines += ["", "## Changed between releases", ""]
    g = grouped_changes(changes(runs))
    if not g:
        lines.append("Nothing changed between the releases that ran.")
    for (r0, r1, kind, backend, scenario, dtype, v0, v1), cases in sorted(
            g.items(), key=lambda kv: (release_key(kv[0][1]), kv[0][2], kv[0][3], kv[0][4])):
        lines.append("- **%s → %s, %s**: `%s` `%s` %s (%s → %s): %s" % (
            r0, r1, kind, backend, scenario, dtype, SHORT[v0], SHORT[v1], ", ".join("`%s`" % c for c in sorted(cases))))
    lines += ["", "## Errors by release", ""]
    any_err = False
    for rel, run in runs:
        msgs = {}
        for (backend, case, scenario, dtype), c in sorted(run["checks"].items()):
            if c["verdict"] == "error":
                first = msgs.setdefault((backend, error_kind(c["detail"])), [error_text(c["detail"])])
                first.append("%s/%s" % (case, scenario))
        for (backend, _), (msg, *where) in sorted(msgs.items()):
            any_err = True
            lines.append("- **%s** `%s` (%d checks, e.g. `%s`): %s" % (rel, backend, len(where), where[0],
                                                                       msg.replace("\n", " ")))
    if not any_err:
        lines.append("No check errored.")
    lines += ["", "## Diagnoses", "", "The DIAG line each release gives each failing (backend, case), as the harness"
              " words it.", ""]
    keys = sorted({k for _, run in runs for k in run["diagnoses"]})
    for k in keys:
        lines.append("- `%s` `%s`:" % k)
        prev = None
        for rel, run in runs:
            msg = run["diagnoses"].get(k)
            if msg is None:
                continue
            msg = msg.split(" — evidence")[0]
            lines.append("  - %s: %s" % (rel, "same" if msg == prev else msg))
            prev = msg
    lines += ["", "## Matrix", ""]
    rels = [r for r, _ in runs]
    lines.append("| backend | case | scenario | dtype | " + " | ".join(rels) + " |")
    lines.append("| --- | --- | --- | --- |" + " --- |" * len(rels))
    keys = sorted({k for _, run in runs for k in run["checks"]})
    for k in keys:
        cells = [_cell(run["checks"].get(k)) for _, run in runs]
        lines.append("| %s | %s | %s | %s | " % k + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


COLOURS = {"pass": "#d9f2d9", "fail": "#f7c6c6", "error": "#f2b56b", "unsupported": "#e6e6e6",
           "nondeterministic": "#f7e0a3", "drift": "#f7e0a3", "skipped": "#ffffff"}


def html_report(runs, title="mixcheck across transformers releases"):
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>%s</title><style>" % e(title),
           "body{font-family:sans-serif;font-size:13px} table{border-collapse:collapse}"
           " td,th{border:1px solid #bbb;padding:2px 6px} th{background:#eee;position:sticky;top:0}",
           "</style></head><body><h1>%s</h1>" % e(title), "<h2>Releases</h2><table><tr><th>release</th>"
           "<th>checks</th><th>pass</th><th>fail</th><th>error</th><th>unsupported</th></tr>"]
    for rel, run in runs:
        if run["problem"] is not None:
            out.append("<tr><td>%s</td><td colspan=5>not run: %s</td></tr>" % (e(rel), e(run["problem"])))
            continue
        n = summary(run)
        out.append("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>" % (
            e(rel), sum(n.values()), n.get("pass", 0), n.get("fail", 0), n.get("error", 0), n.get("unsupported", 0)))
    out.append("</table><h2>Changed between releases</h2><ul>")
    g = grouped_changes(changes(runs))
    for (r0, r1, kind, backend, scenario, dtype, v0, v1), cases in sorted(
            g.items(), key=lambda kv: (release_key(kv[0][1]), kv[0][2], kv[0][3], kv[0][4])):
        out.append("<li><b>%s → %s, %s</b>: %s %s %s (%s → %s): %s</li>" % tuple(
            e(str(x)) for x in (r0, r1, kind, backend, scenario, dtype, SHORT[v0], SHORT[v1], ", ".join(sorted(cases)))))
    if not g:
        out.append("<li>Nothing changed between the releases that ran.</li>")
    out.append("</ul><h2>Matrix</h2><table><tr><th>backend</th><th>case</th><th>scenario</th><th>dtype</th>")
    out += ["<th>%s</th>" % e(r) for r, _ in runs]
    out.append("</tr>")
    for k in sorted({k for _, run in runs for k in run["checks"]}):
        out.append("<tr>" + "".join("<td>%s</td>" % e(x) for x in k))
        for _, run in runs:
            c = run["checks"].get(k)
            if c is None:
                out.append("<td>—</td>")
            else:
                out.append("<td style='background:%s' title='%s'>%s</td>" % (
                    COLOURS.get(c["verdict"], "#fff"), e(c["detail"]), e(SHORT[c["verdict"]])))
        out.append("</tr>")
    out.append("</table></body></html>")
    return "\n".join(out)


def write_report(out):
    runs = load_runs(out)
    with open(os.path.join(out, "upstream.md"), "w") as f:
        f.write(markdown(runs))
    with open(os.path.join(out, "upstream.html"), "w") as f:
        f.write(html_report(runs))
    return runs


# ---- installing and running -----------------------------------------------------------------------------

PROBE = r"""
import json, sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
need = []
for line in json.load(sys.stdin):
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        have = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        need.append(str(req)); continue
    if req.specifier and not req.specifier.contains(have, prereleases=True):
        need.append(str(req))
print(json.dumps(need))
"""


def requires_text(text):
    """The Requires-Dist lines of a METADATA text, those of extras left out."""
    reqs = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            r = line.split(":", 1)[1].strip()
            if "extra ==" not in r and "extra==" not in r:
                reqs.append(r)
    return reqs


def pip_source(args, cache):
    return ["--no-index", "--find-links", args.wheels] if args.wheels else ["--find-links", os.path.join(cache, "wheels")]


def install(args, rel):
    """CACHE/site/<rel>, installed (once): transformers==rel and its requirements the shared interpreter
    lacks. Returns (path, problem)."""
    cache = os.path.abspath(args.cache)
    target = os.path.join(cache, "site", rel)
    if os.path.exists(os.path.join(target, ".mixcheck-installed")):
        return target, None
    wheels = args.wheels or os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    name = "transformers-%s-py3-none-any.whl" % rel
    wheel = os.path.join(wheels, name)
    if not os.path.exists(wheel):
        if args.wheels:
            return None, "%s not in %s" % (name, args.wheels)
        p = subprocess.run([args.python, "-m", "pip", "download", "-q", "--no-deps", "transformers==" + rel, "-d",
                            wheels], capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(wheel):
            return None, "pip download transformers==%s: %s" % (rel, (p.stderr.strip().splitlines() or ["?"])[-1])
    # the release and then, round by round, whatever the installed requirements need that neither the
    # shared interpreter nor the target has (pip --target with dependencies would reinstall torch)
    env = dict(os.environ, PYTHONPATH=target)
    todo, extra = [wheel], []
    for _ in range(8):
        cmd = [args.python, "-m", "pip", "install", "-q", "--no-deps", "--target", target] + pip_source(args, cache) + todo
        print("install %s: %s" % (rel, " ".join(todo)), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return None, "pip install: " + (p.stderr.strip().splitlines() or ["?"])[-1]
        reqs = []
        for d in sorted(os.listdir(target)):
            if d.endswith(".dist-info") and os.path.exists(os.path.join(target, d, "METADATA")):
                reqs += requires_text(open(os.path.join(target, d, "METADATA")).read())
        p = subprocess.run([args.python, "-c", PROBE], input=json.dumps(sorted(set(reqs))), capture_output=True,
                           text=True, env=env)
        if p.returncode != 0:
            return None, "probing the requirements: " + (p.stderr.strip().splitlines() or ["?"])[-1]
        todo = json.loads(p.stdout)
        if not todo:
            break
        extra += todo
    else:
        return None, "requirements still missing after 8 rounds: %s" % todo
    with open(os.path.join(target, ".mixcheck-installed"), "w") as f:
        f.write("\n".join([rel] + extra) + "\n")
    return target, None


def run_release(args, rel):
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    base = os.path.join(args.out, "runs", rel)
    meta = {"release": rel, "problem": None}
    target, problem = install(args, rel)
    if problem is None:
        env = dict(os.environ, PYTHONPATH=target + (os.pathsep + os.environ["PYTHONPATH"]
                                                    if os.environ.get("PYTHONPATH") else ""))
        v = subprocess.run([args.python, "-c", "import transformers; print(transformers.__version__)"], env=env,
                           capture_output=True, text=True)
        if v.returncode != 0:
            problem = "import transformers: " + (v.stderr.strip().splitlines() or ["?"])[-1]
        else:
            meta["version"] = v.stdout.strip()
    if problem is None:
        cmd = [args.mixcheck, "run"] + args.cases + ["--python", args.python, "--python-backend", "mixcheck_backend.hf",
                                                     "-k", "*/hf-*/" + args.dtype, "-q", "-j", str(args.jobs),
                                                     "--json", base + ".json"]
        print("run %s: %s" % (rel, " ".join(cmd)), flush=True)
        with open(base + ".log", "w") as log:
            p = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        meta["exit"] = p.returncode
        meta["command"] = "PYTHONPATH=%s %s" % (target, " ".join(cmd))
        if not os.path.exists(base + ".json"):
            problem = "mixcheck exit %d, no report (log: %s.log)" % (p.returncode, base)
    elif os.path.exists(base + ".json"):
        os.remove(base + ".json")
    meta["problem"] = problem
    with open(base + ".meta.json", "w") as f:
        json.dump(meta, f, indent=1)
    print("%s: %s" % (rel, problem or "exit %d" % meta["exit"]), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="install each release, run the HF adapters, write the report")
    r.add_argument("--releases", required=True, help="comma-separated transformers releases")
    r.add_argument("--python", default=os.environ.get("MIXCHECK_HF_PYTHON", "/work/venv/bin/python"),
                   help="the shared interpreter (torch; its pip installs the releases)")
    r.add_argument("--cache", default="upstream-cache", help="where releases are downloaded and installed")
    r.add_argument("--wheels", help="a local wheel directory: install from it only (offline)")
    r.add_argument("--out", default="upstream-report")
    r.add_argument("--mixcheck", default=os.path.join(ROOT, "build", "mixcheck"))
    r.add_argument("--dtype", default="f32")
    r.add_argument("-j", "--jobs", type=int, default=2)
    r.add_argument("cases", nargs="*")
    p = sub.add_parser("report", help="rebuild the report from OUT/runs")
    p.add_argument("--out", default="upstream-report")
    args = ap.parse_args()
    if args.cmd == "report":
        runs = write_report(args.out)
        if not runs:
            sys.exit("%s/runs holds no run" % args.out)
        print("wrote %s/upstream.md and upstream.html (%d releases)" % (args.out, len(runs)))
        return
    args.cases = args.cases or DEFAULT_CASES
    args.out = os.path.abspath(args.out)
    if args.wheels:
        args.wheels = os.path.abspath(args.wheels)
    for rel in [x.strip() for x in args.releases.split(",") if x.strip()]:
        run_release(args, rel)
    write_report(args.out)
    print("wrote %s/upstream.md and upstream.html" % args.out)


if __name__ == "__main__":
    main()
