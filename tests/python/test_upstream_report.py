#!/usr/bin/python3
"""test_upstream_report.py — the report of scripts/upstream.py (the release matrix) on fixture runs.

Three releases, written as `upstream.py run` leaves them in OUT/runs (a mixcheck JSON report and a meta file
each) plus a fourth whose install failed: the check verdicts (worst tensor status, failing tensors, error
messages), the "changed between releases" list (broke / fixed / changed, grouped by backend and scenario),
the per-release summary, the diagnoses, and that the Markdown and HTML reports hold them. Needs only the
standard library (runs with /usr/bin/python3 in CI).
"""

import html.parser
import importlib.util
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("upstream", os.path.join(ROOT, "scripts", "upstream.py"))
up = importlib.util.module_from_spec(spec)
spec.loader.exec_module(up)


def result(case, scenario, status, tensor="output", backend="hf-mamba2", message=None):
    r = {"case": case, "scenario": scenario, "backend": backend, "dtype": "f32", "status": status, "tensor": tensor}
    if message:
        r["message"] = message
        r["tensor"] = None
    return r


def report(results, diagnoses=()):
    return {"format": "mixcheck-report", "results": results,
            "diagnoses": [{"case": c, "backend": b, "message": m} for c, b, m in diagnoses]}


OLD = report([result("mamba2-tiny", "prefill", "pass"),
              result("mamba2-tiny", "chunked", "pass", "output"), result("mamba2-tiny", "chunked", "fail", "recurrent_state"),
              result("mamba2-tiny", "chunked", "fail", "conv_state"),
              result("mamba2-dtlimit", "chunked", "fail"),
              result("mamba1-tiny", "chunked", "error", backend="hf-mamba", message="python forward: IndexError: x\nmore"),
              result("gdn-tiny", "prefill", "unsupported", backend="hf-gdn", message="transformers 4.57.6 has no X")],
             [("mamba2-tiny", "hf-mamba2", "likely: one dt for every token (8.3c) — evidence: chunked fails")])
MID = report([result("mamba2-tiny", "prefill", "pass"), result("mamba2-tiny", "chunked", "pass"),
              result("mamba2-dtlimit", "chunked", "pass"),
              result("mamba1-tiny", "chunked", "fail", backend="hf-mamba"),
              result("gdn-tiny", "prefill", "pass", backend="hf-gdn")],
             [("mamba1-tiny", "hf-mamba", "likely: zero state (8.2b) — evidence: y")])
NEW = report([result("mamba2-tiny", "prefill", "pass"), result("mamba2-tiny", "chunked", "pass"),
              result("mamba2-dtlimit", "chunked", "fail", "recurrent_state"),
              result("mamba1-tiny", "chunked", "fail", backend="hf-mamba"),
              result("gdn-tiny", "prefill", "pass", backend="hf-gdn"),
              result("gdn-odd", "prefill", "fail", backend="hf-gdn")],  # a case only this run has
             [("mamba1-tiny", "hf-mamba", "likely: zero state (8.2b) — evidence: z")])


def write(out):
    d = os.path.join(out, "runs")
    os.makedirs(d)
    for rel, rep in (("5.12.1", MID), ("4.57.6", OLD), ("5.24.0", NEW), ("5.0.0", None)):
        meta = {"release": rel, "version": rel, "exit": 1, "problem": None if rep else "pip install: no such version"}
        with open(os.path.join(d, rel + ".meta.json"), "w") as f:
            json.dump(meta, f)
        if rep:
            with open(os.path.join(d, rel + ".json"), "w") as f:
                json.dump(rep, f)


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.bad = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in ("meta", "br"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.bad.append(tag)


def main():
    fails, n = [], [0]

    def check(cond, what):
        n[0] += 1
        if not cond:
            fails.append(what)
        print("PASS" if cond else "FAIL", what)

    c = up.checks_of(OLD)
    k = ("hf-mamba2", "mamba2-tiny", "chunked", "f32")
    check(c[k]["verdict"] == "fail" and c[k]["detail"] == "recurrent_state, conv_state",
          "a check's verdict is its worst tensor's, with the failing tensors")
    e = c[("hf-mamba", "mamba1-tiny", "chunked", "f32")]
    check(e["verdict"] == "error" and e["detail"] == "python forward: IndexError: x", "an error keeps its first line")
    check(up.release_key("5.12.1") > up.release_key("5.5.4") > up.release_key("4.57.6"), "releases sort as numbers")

    with tempfile.TemporaryDirectory() as out:
        write(out)
        runs = up.write_report(out)
        check([r for r, _ in runs] == ["4.57.6", "5.0.0", "5.12.1", "5.24.0"], "runs in release order")
        check(runs[1][1]["problem"] == "pip install: no such version", "a failed install is a run with its reason")
        ch = {(r0, r1, kind, key[1], key[2]): (v0, v1) for r0, r1, kind, key, v0, v1 in up.changes(runs)}
        want = {("4.57.6", "5.12.1", "fixed", "mamba2-tiny", "chunked"): ("fail", "pass"),
                ("4.57.6", "5.12.1", "fixed", "mamba2-dtlimit", "chunked"): ("fail", "pass"),
                ("4.57.6", "5.12.1", "changed", "mamba1-tiny", "chunked"): ("error", "fail"),
                ("4.57.6", "5.12.1", "changed", "gdn-tiny", "prefill"): ("unsupported", "pass"),
                ("5.12.1", "5.24.0", "broke", "mamba2-dtlimit", "chunked"): ("pass", "fail")}
        check(ch == want, "changes between consecutive releases that ran (skipping the failed install and a check only "
                         "one ran): %s" % ch)
        with open(os.path.join(out, "upstream.md")) as f:
            md = f.read()
        with open(os.path.join(out, "upstream.html")) as f:
            page = f.read()
        check("- **4.57.6 → 5.12.1, fixed**: `hf-mamba2` `chunked` f32 (FAIL → pass): `mamba2-dtlimit`, `mamba2-tiny`"
              in md, "the Markdown groups a change's cases")
        check("- **5.12.1 → 5.24.0, broke**: `hf-mamba2` `chunked` f32 (pass → FAIL): `mamba2-dtlimit`" in md,
              "the Markdown lists what broke")
        check("| 5.0.0 | — | not run: pip install: no such version |" in md, "the summary says why a release did not run")
        check("| 4.57.6 | 4.57.6 | 5 | 1 | 2 | 1 | 1 | 0 |" in md, "the summary counts a release's verdicts")
        check("| hf-mamba2 | mamba2-dtlimit | chunked | f32 | FAIL | — | pass | FAIL |" in md and
              "| hf-gdn | gdn-odd | prefill | f32 | — | — | — | FAIL |" in md, "the matrix rows")
        check("  - 4.57.6: likely: one dt for every token (8.3c)" in md and "  - 5.24.0: same" in md,
              "the diagnoses by release, unchanged ones folded")
        check("**4.57.6** `hf-mamba` (1 checks, e.g. `mamba1-tiny/chunked`): python forward: IndexError: x" in md,
              "the errors by release")
        t = Tags()
        t.feed(page)
        check(not t.bad and not t.stack, "the HTML's tags nest")
        check("title='recurrent_state'" in page and "5.12.1 → 5.24.0, broke" in page, "the HTML holds details and changes")
    print("%d passed, %d failed" % (n[0] - len(fails), len(fails)))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
