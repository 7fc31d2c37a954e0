#!/usr/bin/python3
"""test_reports.py MODE MIXCHECK DRIFTY_BASE DRIFTY_SCALED MUTANTS SCRATCH [CHROMIUM]

The summary reports of a run with failures and drift: a baseline run of the "drifty" plugin (the
reference Mamba2 at f32), then the same plugin with its D term scaled by 1 + 1e-5 (drift within
tolerance) next to mutant 8.1c (no chaining: fails from the first continued token) against it.

MODE "files": by_position in the JSON, the Markdown summary, the JUnit structure (Jenkins' junit-10.xsd
rules plus testcase properties and testsuites/@skipped), problems named by case and scenario, and the
HTML page's self-containment. MODE "browser": the HTML page rendered by headless Chromium: the page's
own script counts the drawn lines into the DOM (--dump-dom), and a screenshot holds the plot colours;
exit 77 (skipped) without Chromium.
"""
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
    print("files: %d records, %d failing checks, %d lines in the HTML plots" % (len(recs), len(items), n_series))


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
    dom = subprocess.run(flags + ["--dump-dom", url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=120).stdout
    m = re.search(r'data-polylines="([0-9]+)"', dom)
    assert m, dom[:500]
    assert int(m.group(1)) == n_series > 0, (m.group(1), n_series)
    assert "%d line(s) drawn." % n_series in dom
    shot = path("r.png")
    subprocess.run(flags + ["--window-size=1200,1800", "--screenshot=" + shot, url], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    w, h, ch, rows = png_pixels(open(shot, "rb").read())
    def count(rgb):
        # exact pixels of a colour (the lines' centres, the cells' fill), counted in the raw rows
        px = bytes(rgb) + (b"\xff" if ch == 4 else b"")
        return sum(r.count(px) for r in rows)
    blue = count((0x1f, 0x77, 0xb4))  # the first series (output)
    red_cells = count((0xf4, 0xa6, 0xa6))  # failing cells of the matrix
    assert blue > 200 and red_cells > 200, (blue, red_cells)
    print("browser: %d lines drawn; screenshot %dx%d with %d line pixels, %d failing-cell pixels" %
          (n_series, w, h, blue, red_cells))


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
