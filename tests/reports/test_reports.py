#!/usr/bin/python3
"""test_reports.py MODE MIXCHECK DRIFTY_BASE DRIFTY_SCALED MUTANTS SCRATCH [CHROMIUM]

The summary reports of a run with failures and drift: a baseline run of the "drifty" plugin (the
reference Mamba2 at f32), then the same plugin with its D term scaled by 1 + 1e-5 (drift within
tolerance) next to mutant 8.1c (no chaining: fails from the first continued token) against it.

MODE "files": by_position in the JSON, the Markdown summary, the JUnit structure (Jenkins' junit-10.xsd
rules plus testcase properties and testsuites/@skipped), pooled numbers labelled "(all runs)" and the
first failing run's own numbers and the bug classes in Markdown, JUnit and HTML, the baseline's curves in
the HTML plots, problems named by case and scenario, and the HTML page's self-containment. MODE
"browser": the HTML page rendered by headless Chromium in a 1400-px window: the page's own script counts
the drawn lines and measures the matrix into the DOM (--dump-dom; the matrix fits, the bundled suite's
too), and a screenshot holds the plot colours; exit 77 (skipped) without Chromium.
"""
import html as htmllib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

mode, mixcheck, base_lib, scaled_lib, mutants_lib, scratch = sys.argv[1:7]
chromium = sys.argv[7] if len(sys.argv) > 7 else ""
src = os.getcwd()
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)


def run(args, want):
    p = subprocess.run([mixcheck] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if want is not None and p.returncode != want:
        sys.exit("%s: exit %d, expected %d\n%s" % (" ".join(args), p.returncode, want, p.stdout[-4000:]))
    return p.stdout


def path(name):
    return os.path.join(scratch, name)


rep, html, n_series = None, "", 0


def prepare():
    global rep, html, n_series
    run(["run", "cases/mamba2", "--plugin", base_lib, "--backend", "drifty", "-q", "--json", path("base.json")], 0)
    run(["run", "cases/mamba2", "--plugin", scaled_lib, "--plugin", mutants_lib, "-k", "/drifty/", "-k",
         "/mutant.8.1c-no-chaining/", "-q", "--baseline", path("base.json"), "--json", path("r.json"), "--junit",
         path("r.xml"), "--markdown", path("r.md"), "--html", path("r.html")], 1)
    rep = json.load(open(path("r.json")))
    html = open(path("r.html"), encoding="utf-8").read()
    n_series = html.count('<polyline class="series"')


def md_escape(t):
    return "".join("\\" + c if c in "|*_`<>[]\\" else c for c in t)


def check_id(r):
    return "%s/%s/%s/%s" % (r["case"], r["scenario"], r["backend"], r["dtype"])


def md_items(md):
    """The failing-check items of the Markdown summary: id -> the item's lines."""
    items, cur = {}, None
    for line in md.splitlines():
        m = re.match(r"^- \*\*[A-Z]+\*\* `([^`]+)`$", line)
        if m:
            cur = items.setdefault(m.group(1), [])
        elif cur is not None and line.startswith("  - "):
            cur.append(line[4:])
        else:
            cur = None
    return items


def html_plots(page):
    """The plots of the HTML page: check id -> the plot's text (tags stripped, entities decoded)."""
    plots = {}
    for part in page.split('<div class="plot" id="check-')[1:]:
        body = part.split("</div>", 1)[0]
        m = re.search(r"<h3>(.*?) — ", body)
        text = re.sub(r"<svg.*?</svg>", "", body, flags=re.S)
        plots[htmllib.unescape(m.group(1))] = htmllib.unescape(re.sub(r"<[^>]+>", "\n", text))
    return plots


def check_labels(md, root):
    """Numbers pooled over a check's runs say "(all runs)", and the first failing run's own numbers follow
    its label, in the Markdown, the JUnit failure text and the HTML plots, as on the console; the
    bug-class line of every diagnosed case and backend is in all three."""
    items = md_items(md)
    failures = {c.get("classname")[len("mixcheck."):] + "/" + c.get("name"): c.find("failure").text
                for x in root for c in x.findall("testcase") if c.find("failure") is not None}
    plots = html_plots(html)
    firsts = [r for r in rep["results"] if "first_failing_run" in r and r["status"] == "fail"]
    # the first run's numbers are not the pooled ones (else the labels would not matter)
    assert any(r["first_failing_run"]["first_fail_token"] != r["first_fail_token"] for r in firsts), firsts[:1]
    checked = 0
    for r in firsts:
        cid, f = check_id(r), r["first_failing_run"]
        pooled = [t for t in rep["results"] if check_id(t) == cid and t["tensor"] and t["failing"]]
        # Markdown (the first 50 failing checks are listed)
        if cid in items:
            lines = items[cid]
            for t in pooled:
                label = "`%s`%s: " % (t["tensor"], " (all runs)" if t["comparisons"] > 1 else "")
                assert any(l.startswith(label + "%d of %d elements" % (t["failing"], t["elements"])) for l in lines), \
                    (cid, label, lines)
            want = "first failing run: %s — `%s`: %d of " % (md_escape(f["run"]), r["tensor"], f["failing"])
            line = next((l for l in lines if l.startswith(want)), None)
            assert line, (cid, want, lines)
            if f["first_fail_token"] is not None:
                assert "first failing token %d (batch" % f["first_fail_token"] in line, line
            checked += 1
        # JUnit
        text = failures[cid]
        for t in pooled:
            label = "%s%s: %d/%d elements fail" % (t["tensor"], " (all runs)" if t["comparisons"] > 1 else "",
                                                  t["failing"], t["elements"])
            assert ("\n" + text).count("\n" + label) == 1, (cid, label, text)
        want = "first failing run: %s\n  %s: %d/" % (f["run"], r["tensor"], f["failing"])
        assert want in text, (cid, want, text)
        if f["first_fail_token"] is not None:
            after = text.split(want, 1)[1].split("\n", 1)[0]
            assert "first failing token %d," % f["first_fail_token"] in after, after
        # HTML (a plot per failing check, up to 40)
        if cid in plots:
            page = plots[cid]
            for t in pooled:
                assert "\n%s%s: headroom" % (t["tensor"], " (all runs)" if t["comparisons"] > 1 else "") in page, \
                    (cid, t["tensor"], page[:800])
            want = "first failing run: %s — %s: headroom" % (f["run"], r["tensor"])
            assert want in page, (cid, want, page[:1500])
            if f["first_fail_token"] is not None:
                line = page.split(want, 1)[1].split("\n", 1)[0]
                assert "first failing position %d (batch" % f["first_fail_token"] in line, line
    assert checked > 0
    # ---- the bug classes of the JSON's diagnoses
    diags = rep["diagnoses"]
    assert diags and all(d["message"] for d in diags)
    page = htmllib.unescape(re.sub(r"<[^>]+>", "\n", html))
    for d in diags:
        md_line = "- `%s` on `%s`: %s" % (d["case"], d["backend"], md_escape(d["message"]))
        assert md_line in md.splitlines(), md_line
        words = "bug class of %s on %s: %s" % (d["case"], d["backend"], d["message"])
        assert words in page, words
        mine = [k for k, t in failures.items() if k.startswith(d["case"] + "/") and k.split("/")[2] == d["backend"]]
        assert mine, d
        for k in mine:
            assert words + "\n" in failures[k], (k, failures[k])
            if k in plots:
                assert words in plots[k], (k, plots[k][:1500])
    # a failing check whose case and backend have no diagnosis names none (the drifted drifty checks)
    for k, t in failures.items():
        if not any(k.startswith(d["case"] + "/") and k.split("/")[2] == d["backend"] for d in diags):
            assert "bug class of" not in t, (k, t)
    # the run's line per backend, as on the console
    for s_ in rep["diagnosis_summary"]:
        want = "over %d diagnosed case(s) (first in %d): %s" % (s_["cases"], s_["cases_naming_first"], s_["message"])
        assert md_escape(want) in md, want
        assert want in page, want
    return checked


def plot_lines(page):
    """The lines of each plot: check id -> [(class, label, [(x, y) pixels])] in drawing order."""
    out = {}
    for part in page.split('<div class="plot" id="check-')[1:]:
        body = part.split("</div>", 1)[0]
        cid = htmllib.unescape(re.search(r"<h3>(.*?) — ", body).group(1))
        out[cid] = [(k, htmllib.unescape(label), [tuple(map(float, p.split(","))) for p in pts.split()])
                    for k, pts, label in re.findall(r'<polyline class="(series|baseline)"[^>]*points="([^"]*)"/>.*?'
                                                    r'<text x="[0-9.]+" y="[0-9.]+" font-size="11">([^<]*)</text>',
                                                    body, re.S)]
    return out


def check_baseline_curves():
    """A plotted check with a baseline record draws that record's by_position next to the run's curve:
    one dashed line per tensor, as many points as the baseline's profile, and for the drifted output
    lower than the run's (the baseline's headroom was smaller)."""
    base = {"%s/%s" % (check_id(r), r["tensor"]): r for r in json.load(open(path("base.json")))["results"]
            if r["tensor"]}
    lines = plot_lines(html)
    drawn = lower = 0
    for cid, ls in lines.items():
        run_lines = {label: pts for k, label, pts in ls if k == "series"}
        base_lines = {label: pts for k, label, pts in ls if k == "baseline"}
        want = {t for t in run_lines if cid + "/" + t in base and base[cid + "/" + t]["by_position"]["positions"]}
        assert set(base_lines) == {t + " (baseline)" for t in want}, (cid, sorted(base_lines), sorted(want))
        for t in want:
            b, pts = base[cid + "/" + t]["by_position"], base_lines[t + " (baseline)"]
            assert len(pts) == len(b["positions"]), (cid, t, len(pts), len(b["positions"]))
            drawn += 1
            if t == "output" and cid.split("/")[2] == "drifty" and base[cid + "/" + t]["headroom"] > 0:
                r = next(x for x in rep["results"] if check_id(x) == cid and x["tensor"] == t)
                if r["headroom"] > 2 * base[cid + "/" + t]["headroom"]:
                    # pixels grow downwards: the baseline's smaller headroom sits lower
                    mean = lambda p: sum(y for _, y in p) / len(p)
                    assert mean(pts) > mean(run_lines[t]) + 1, (cid, mean(pts), mean(run_lines[t]))
                    lower += 1
    assert drawn > 0 and lower > 0, (drawn, lower)
    assert html.count('<polyline class="baseline"') == drawn
    return drawn


def check_files():
    prepare()
    # ---- by_position: every tensor record, bounded, sorted, its max the record's headroom
    recs = [r for r in rep["results"] if r["tensor"]]
    assert recs
    for r in recs:
        bp = r["by_position"]
        w, pos = bp["bucket_width"], bp["positions"]
        assert w >= 1 and (w & (w - 1)) == 0, bp
        assert len(pos) == len(bp["max_abs_err"]) == len(bp["headroom"]) <= 256, r["tensor"]
        assert pos == sorted(pos) and all(p % w == 0 for p in pos), pos
        if r["headroom"] is not None and pos:
            top = max(h for h in bp["headroom"] if h is not None)
            assert abs(top - r["headroom"]) <= 1e-3 * r["headroom"] + 1e-30, (top, r["headroom"])
    # the mutant's chunked output: the profile crosses the tolerance where the first failing token is
    out = [r for r in recs if r["backend"] == "mutant.8.1c-no-chaining" and r["scenario"] == "chunked" and
           r["tensor"] == "output" and r["status"] == "fail"]
    assert out
    for r in out:
        bp = r["by_position"]
        first = next(p for p, h in zip(bp["positions"], bp["headroom"]) if h is None or h > 1)
        assert first <= r["first_fail_token"] < first + bp["bucket_width"], (first, r["first_fail_token"])
    # ---- Markdown
    md = open(path("r.md"), encoding="utf-8").read()
    s = rep["summary"]
    assert md.startswith("## mixcheck: failed (exit 1)"), md[:200]
    assert s["fail"] > 0 and s["drift"] > 0, s
    assert ("| %d | %d | %d | %d | %d |" % (s["pass"], s["fail"], s["error"], s["nondeterministic"], s["drift"])) in md
    items = re.findall(r"^- \*\*(FAIL|DRIFT|ERROR|NONDETERMINISTIC)\*\* `([^`]+)`", md, re.M)
    assert len(items) == min(50, s["fail"] + s["drift"]), len(items)
    assert "### Most drifted against the baseline" in md and "**drift**" in md
    assert "### Slowest checks" in md and "rerun: `mixcheck run " in md
    assert "first failing token" in md
    # ---- JUnit: junit-10.xsd structure, with testcase properties
    root = ET.parse(path("r.xml")).getroot()
    assert root.tag == "testsuites"
    for a in ("tests", "failures", "errors", "skipped"):
        assert root.get(a).isdigit(), a
    assert re.fullmatch(r"[0-9]+(\.[0-9]*)?", root.get("time"))
    suites = list(root)
    assert all(x.tag == "testsuite" for x in suites)
    cases = [c for x in suites for c in x.findall("testcase")]
    assert int(root.get("tests")) == len(cases)
    assert int(root.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
    assert int(root.get("errors")) == sum(1 for c in cases if c.find("error") is not None)
    assert int(root.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None)
    assert int(root.get("failures")) == s["fail"] + s["drift"] + s["nondeterministic"]
    for x in suites:
        for a in ("name", "tests", "failures", "errors"):
            assert x.get(a) is not None, (x.get("name"), a)
        assert re.fullmatch(r"[0-9]+(\.[0-9]*)?", x.get("time"))
        assert set(c.tag for c in x) <= {"properties", "testcase", "system-out", "system-err"}
        for c in x.findall("testcase"):
            assert c.get("name") and c.get("classname")
            assert set(k.tag for k in c) <= {"properties", "skipped", "error", "failure", "system-out", "system-err"}
            for p in c.iter("property"):
                assert p.get("name") is not None and p.get("value") is not None
    labelled = check_labels(md, root)
    curves = check_baseline_curves()
    passing = [c for c in cases if len([k for k in c if k.tag != "properties"]) == 0]
    assert passing
    for c in passing:
        props = {p.get("name"): p.get("value") for p in c.find("properties")}
        assert float(props["headroom"]) < 1 and props["worst_tensor"], props
    # ---- problems named by case and scenario (a missing backend; a scenario that does not fit its golden)
    os.makedirs(path("cases"))
    tiny = open("cases/mamba2/tiny.yaml").read()
    tiny = tiny.replace("../../golden/", src + "/golden/").replace("../tolerances/", src + "/cases/tolerances/")
    open(path("cases/a.yaml"), "w").write(tiny.replace("backends: [reference, cpu]", "backends: [reference, nosuch]"))
    open(path("cases/b.yaml"), "w").write(tiny.replace("id: mamba2-tiny", "id: mamba2-tiny-b")
                                          .replace("decode: {prefill: 5}", "decode: {prefill: 500}"))
    run(["run", path("cases"), "--dtype", "f64", "-q", "--junit", path("p.xml"), "--json", path("p.json")], 2)
    probs = [c for x in ET.parse(path("p.xml")).getroot() if x.get("name") == "problems" for c in x]
    names = sorted(c.get("name") for c in probs)
    assert names == ["mamba2-tiny-b/decode", "mamba2-tiny/case"], names
    jp = sorted((p["case"], p["scenario"]) for p in json.load(open(path("p.json")))["problems"])
    assert jp == [("mamba2-tiny", None), ("mamba2-tiny-b", "decode")], jp
    # ---- HTML: self-contained, a plot per failing or most-drifted check
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert 'class="fail"' in html and 'class="drift"' in html
    assert html.count('<div class="plot"') >= min(40, s["fail"])
    assert n_series > 0
    print("files: %d records, %d failing checks (%d with a first failing run), %d lines in the HTML plots and %d "
          "baseline curves" % (len(recs), len(items), labelled, n_series, curves))


def png_pixels(data):
    """RGB(A) 8-bit non-interlaced PNG -> (width, height, channels, rows of bytes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, hdr
    ch = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytearray(w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def check_browser():
    prepare()
    exe = chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe or not os.access(exe, os.X_OK):
        print("no chromium: skipped")
        sys.exit(77)
    flags = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + path("profile")]
    url = "file://" + path("r.html")

    def dump(u):
        return subprocess.run(flags + ["--window-size=1400,1000", "--dump-dom", u], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=120).stdout

    def matrix_fits(dom, what):
        # the page's script measured its matrix tables in a 1400-px window: they fit, with every column
        right = re.search(r'data-matrix-right="([0-9]+)"', dom)
        width = re.search(r'data-page-width="([0-9]+)"', dom)
        assert right and width, (what, dom[:300])
        assert 0 < int(right.group(1)) <= 1400 and int(width.group(1)) <= 1400, (what, right.group(1), width.group(1))
        return int(right.group(1))

    dom = dump(url)
    m = re.search(r'data-polylines="([0-9]+)"', dom)
    assert m, dom[:500]
    assert int(m.group(1)) == n_series > 0, (m.group(1), n_series)
    assert "%d line(s) drawn." % n_series in dom
    m = re.search(r'data-baselines="([0-9]+)"', dom)
    assert m and int(m.group(1)) == html.count('<polyline class="baseline"') > 0, m and m.group(1)
    right = matrix_fits(dom, "r.html")
    # the bundled suite's matrix (every family, every scenario) at one backend and dtype
    run(["run", "cases/", "--backend", "cpu", "--dtype", "f32", "-q", "--json", path("c.json"), "--html",
         path("c.html")], 0)
    cj = json.load(open(path("c.json")))
    page = open(path("c.html"), encoding="utf-8").read()
    cols = {}
    for r in cj["results"]:
        cols.setdefault(r["family"], set()).add(r["scenario"])
    assert max(len(c) for c in cols.values()) >= 17, cols
    for fam, scen in cols.items():
        table = re.search(r'<table class="matrix" data-family="%s">.*?</table>' % fam, page, re.S)
        assert table, fam
        heads = re.findall(r'<th class="s"><div>([a-z_0-9]+)</div></th>', table.group(0))
        assert sorted(heads) == sorted(scen), (fam, heads, scen)
    suite_right = matrix_fits(dump("file://" + path("c.html")), "c.html")
    shot = path("r.png")
    subprocess.run(flags + ["--window-size=1400,3000", "--screenshot=" + shot, url], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    w, h, ch, rows = png_pixels(open(shot, "rb").read())
    def count(rgb):
        # exact pixels of a colour (the lines' centres, the cells' fill), counted in the raw rows
        px = bytes(rgb) + (b"\xff" if ch == 4 else b"")
        return sum(r.count(px) for r in rows)
    blue = count((0x1f, 0x77, 0xb4))  # the first series (output)
    red_cells = count((0xf4, 0xa6, 0xa6))  # failing cells of the matrix
    assert blue > 200 and red_cells > 200, (blue, red_cells)
    print("browser: %d lines drawn; matrix right edge %d px (bundled suite %d px); screenshot %dx%d with %d line "
          "pixels, %d failing-cell pixels" % (n_series, right, suite_right, w, h, blue, red_cells))


def check_history():
    """--record: one file per run, concurrent runs safe; history finds the step and its build (the
    commit and the plugin files), not within the spread of one build; diff reads the store's files."""
    store = path("store")
    sel = ["run", "cases/mamba2", "--backend", "drifty", "-q", "--record", store]
    procs = [subprocess.Popen([mixcheck] + sel + ["--plugin", base_lib], stdout=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait() for p in procs] == [0, 0]
    import time
    time.sleep(1.1)  # runs are ordered by their start second, then by name
    run(sel + ["--plugin", scaled_lib], 0)
    time.sleep(1.1)
    run(sel + ["--plugin", scaled_lib], 0)
    files = sorted(os.listdir(store))
    assert len(files) == 4 and all(f.endswith(".json") for f in files), files
    docs = [json.load(open(os.path.join(store, f))) for f in files]
    assert all("by_position" not in r for d in docs for r in d["results"])
    # one mixcheck commit made them all, but the plugin file changed after two runs: two builds, and the
    # D scale is a step from the first run of the scaled plugin, naming the file that changed
    out = run(["history", store], 1)
    assert re.search(r"of 1 commit\(s\) and 2 build\(s\)", out), out[:500]
    assert re.search(r"from run 3: .*; tested files changed: plugin \S*drifty_base\S* sha256 [0-9a-f]{12} -> "
                     r"plugin \S*drifty_scaled\S* sha256 [0-9a-f]{12}", out), out[-1500:]
    # runs with neither a record nor a match are not an empty pass
    os.makedirs(path("empty"))
    run(["history", path("empty")], 2)
    run(["history", store, "-k", "no-such-record"], 2)
    # give the runs commits: base, base = commit a; scaled, scaled = commit b
    for f, d, c in zip(files, docs, "aabb"):
        d["provenance"]["git_commit"] = c * 40
        d["provenance"]["git_describe"] = "v-" + c
        json.dump(d, open(os.path.join(store, f), "w"))
    key = "mamba2-decay/prefill/drifty/f32/output"
    out = run(["history", store, "-k", key], 1)
    assert re.search(r"STEP x5\.4[0-9]: headroom 0\.075 -> 0\.41.* from run 3: commit bbbbbbbbbbbb \(v-b\)", out), out
    # every record that moved beyond x1.1 between the commits is a step, as diff counts them
    out = run(["history", store], 1)
    steps = int(re.search(r"([0-9]+) step\(s\) in ([0-9]+) of", out).group(1))
    d = run(["diff", os.path.join(store, files[0]), os.path.join(store, files[2]), "--threshold", "1.1",
             "--json", path("d.json")], 1)
    moved = [r for r in json.load(open(path("d.json")))["moved"]]
    assert steps == len(moved) > 0, (steps, len(moved))
    # a record whose runs of commit a already differ by x10 has a spread that covers the x5.5 change
    d1 = docs[1]
    for r in d1["results"]:
        if "%s/%s/%s/%s/%s" % (r["case"], r["scenario"], r["backend"], r["dtype"], r["tensor"]) == key:
            r["headroom"] *= 10
            r["max_abs_err"] *= 10
    json.dump(d1, open(os.path.join(store, files[1]), "w"))
    out = run(["history", store, "-k", key], 0)
    assert "spread between runs of one build x10" in out and "STEP" not in out, out
    print("history: %d steps over 4 runs, as many as diff moved" % steps)


def check_shards():
    """--shard K/N: disjoint shards, deterministic, even; merge gives the unsharded totals; Bazel's env."""
    sel = ["run", "cases/mamba2", "cases/shortconv", "--plugin", mutants_lib, "-k", "/cpu/", "-k",
           "/mutant.8.1c-no-chaining/", "-k", "/mutant.8.9-short-prefill-roll/", "--dtype", "f32", "-q"]
    run(sel + ["--json", path("all.json"), "--junit", path("all.xml")], 1)
    ins = []
    for k in (1, 2, 3):
        run(sel + ["--shard", "%d/3" % k, "--json", path("s%d.json" % k), "--junit", path("s%d.xml" % k)], None)
        ins += [path("s%d.json" % k), path("s%d.xml" % k)]
    # the shards hold failing checks: merge exits the merged run's code, the unsharded run's
    run(["merge", "--json", path("m.json"), "--junit", path("m.xml")] + ins, 1)
    a, m = json.load(open(path("all.json"))), json.load(open(path("m.json")))
    for k, v in a["summary"].items():
        assert m["summary"][k] == v, (k, m["summary"][k], v)
    key = lambda r: (r["case"], r["scenario"], r["backend"], r["dtype"], r["tensor"], r["status"], r.get("headroom"))
    assert sorted(map(key, a["results"]), key=str) == sorted(map(key, m["results"]), key=str)
    shards = [json.load(open(path("s%d.json" % k))) for k in (1, 2, 3)]
    ids = [set((r["case"], r["scenario"], r["backend"], r["dtype"]) for r in s["results"]) for s in shards]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    n = [s["summary"]["checks"] for s in shards]
    assert sum(n) == a["summary"]["checks"] and min(n) > 0, n
    assert all(s["shard"]["checks_all_shards"] == a["summary"]["checks"] for s in shards)
    ra, rm = ET.parse(path("all.xml")).getroot(), ET.parse(path("m.xml")).getroot()
    for at in ("tests", "failures", "errors", "skipped"):
        assert ra.get(at) == rm.get(at), (at, ra.get(at), rm.get(at))
    names = lambda root: sorted(c.get("classname") + "/" + c.get("name") for c in root.iter("testcase"))
    assert names(ra) == names(rm)
    # the same plan every time, and Bazel's variables (0-based index) select the same shard
    env = dict(os.environ, TEST_TOTAL_SHARDS="3", TEST_SHARD_INDEX="1",
               TEST_SHARD_STATUS_FILE=path("status"), XML_OUTPUT_FILE=path("bazel.xml"))
    p = subprocess.run([mixcheck] + sel + ["--json", path("b.json")], env=env, stdout=subprocess.DEVNULL)
    assert p.returncode == shards[1]["summary"]["exit_code"]
    assert os.path.exists(path("status")) and os.path.exists(path("bazel.xml"))
    b = json.load(open(path("b.json")))
    assert set((r["case"], r["scenario"], r["backend"], r["dtype"]) for r in b["results"]) == ids[1]
    assert names(ET.parse(path("bazel.xml")).getroot()) == names(ET.parse(path("s2.xml")).getroot())
    # more shards than groups: the empty ones pass
    run(["run", "cases/shortconv/tiny.yaml", "--backend", "cpu", "--dtype", "f32", "--shard", "7/7", "-q"], 0)
    print("shards: %s checks, merged totals equal the unsharded run's" % n)


{"files": check_files, "browser": check_browser, "history": check_history, "shards": check_shards}[mode]()
