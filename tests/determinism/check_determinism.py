#!/usr/bin/python3
"""check_determinism.py MIXCHECK OUT_DIR [PATH...] — runs `mixcheck run PATH... --json` twice, once
with -j 1 --threads 1 and once with -j 2 --threads 2, and requires the two JSON reports to be
identical once every `started_unix` and `duration_s` key is removed (at any depth), and the keys of
the provenance that say how the run was made (its start time, command line, threads and -j). Both runs must
exit 0. On a difference, prints the first differing records and exits 1. PATH defaults to cases/."""
import json
import subprocess
import sys

VOLATILE = ("started_unix", "duration_s", "started_utc", "command_line", "threads", "jobs")


def normalise(o):
    if isinstance(o, dict):
        return {k: normalise(v) for k, v in o.items() if k not in VOLATILE}
    if isinstance(o, list):
        return [normalise(v) for v in o]
    return o


def run(mixcheck, out, paths, jobs, threads):
    report = f"{out}/determinism-j{jobs}-t{threads}.json"
    cmd = [mixcheck, "run", *paths, "-q", "--color", "never", "-j", str(jobs), "--threads", str(threads),
           "--json", report]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
        sys.exit(1)
    with open(report) as f:
        return normalise(json.load(f)), report


def main():
    mixcheck, out, paths = sys.argv[1], sys.argv[2], sys.argv[3:] or ["cases/"]
    a, ra = run(mixcheck, out, paths, 1, 1)
    b, rb = run(mixcheck, out, paths, 2, 2)
    if a == b:
        print(f"identical: {ra} and {rb} ({len(a.get('results', []))} records, apart from {', '.join(VOLATILE)})")
        return 0
    print(f"DIFFER: {ra} and {rb}")
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        x, y = a.get(key), b.get(key)
        if isinstance(x, list) and isinstance(y, list):
            print(f"  '{key}': {len(x)} vs {len(y)} entries")
            shown = 0
            for i, (u, v) in enumerate(zip(x, y)):
                if u != v and shown < 5:
                    shown += 1
                    print(f"  [{i}] -j1: {json.dumps(u, sort_keys=True)}\n  [{i}] -j2: {json.dumps(v, sort_keys=True)}")
        else:
            print(f"  '{key}': {json.dumps(x)} vs {json.dumps(y)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
