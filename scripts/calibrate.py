#!/usr/bin/python3
"""calibrate.py — measures the model-level tolerance profile of a backend, or judges one, over random
checkpoints (golden/calibration.py), for the storage dtypes the backend declares.

  scripts/calibrate.py measure --backend cpu --out DIR [--model-type T ...] [--count 100] [--seed 0]
                               [--dtype bf16 --dtype f16 --dtype f32] [--safety 2] [--device cpu]
                               [--base cases/tolerances] [-- MIXCHECK_RUN_OPTIONS]
  scripts/calibrate.py validate --backend cpu --profiles DIR [--model-type T ...] [--count 100] [--seed 100000]
                               [-- MIXCHECK_RUN_OPTIONS]

measure: for each model type, a calibration set of --count checkpoints from --seed is written, every
model scenario of each runs on the backend at each dtype (mixcheck run --json), and for every tensor
the worst ratio r = max |err| / M over the set is read from the report (M the tensor's magnitude over the
golden, max_abs_expected in the report); for a --pool tensor (default consistency: the backend against
itself in another batch, an error of the kernels every model type shares) r is the worst over every model
type measured (for --layer sets: over every mixer family measured). The profile written
to DIR/models-<type>.yaml (the f64 entries and other devices carried over from --base) holds, per dtype
and tensor, the error model

    |a - b| <= atol_scale * max|expected| + rtol * |b|,   rtol = 2u,   atol_scale = safety * max(r, 2u)

u the unit roundoff of the dtype the tensor is stored in (2^-8 bf16, 2^-11 f16, 2^-24 f32; Mamba2's and
Mamba's SSM state stays float32 at a reduced model dtype): 2u for the element's own storage rounding, and the error carried from every rounded intermediate before it (norm outputs, mixer outputs,
the residual, the KV cache, the head) bounded in units of the largest value of the tensor, as measured,
times the safety factor. No entry is finer than 2u of its dtype. Each entry's why: says what was measured.

validate: a fresh set (default seeds from 100000, apart from any set a profile was measured on) runs
against the profiles of --profiles; every check that does not pass is a false alarm and is listed.
Exit 0: measured / no false alarm; 1: false alarms; 2: usage or a run that could not be made.
The mixcheck executable is build/mixcheck unless MIXCHECK names another.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = [sys.executable, os.path.join(ROOT, "golden", "generate.py"), "calibration-set"]
MODEL_TYPES = ["mamba2", "mamba", "lfm2", "bamba", "qwen3_5_text", "granitemoehybrid", "falcon_mamba", "jamba",
               "nemotron_h"]
MODEL_TYPES.append("qwen3_next")
MODEL_TYPES.append("qwen3_5_moe_text")
LAYER_FAMILIES = ["mamba2", "mamba1", "gdn", "shortconv", "attention"]
PROFILE_OF = {"mamba2": "models.yaml", "mamba": "models-mamba.yaml", "lfm2": "models-lfm2.yaml",
              "bamba": "models-bamba.yaml", "qwen3_5_text": "models-qwen3_5.yaml",
              "granitemoehybrid": "models-granitemoehybrid.yaml", "falcon_mamba": "models-falcon_mamba.yaml",
              "jamba": "models-jamba.yaml", "nemotron_h": "models-nemotron_h.yaml"}
PROFILE_OF["qwen3_next"] = "models-qwen3_next.yaml"
PROFILE_OF["qwen3_5_moe_text"] = "models-qwen3_5_moe.yaml"
MODEL_TYPES.append("falcon_h1")
PROFILE_OF["falcon_h1"] = "models-falcon_h1.yaml"
MODEL_TYPES.append("olmo_hybrid")
PROFILE_OF["olmo_hybrid"] = "models-olmo_hybrid.yaml"
MODEL_TYPES.append("kimi_linear")
PROFILE_OF["kimi_linear"] = "models-kimi_linear.yaml"
PROFILE_OF.update({"layer:" + f: f"checkpoint-{f}.yaml" for f in LAYER_FAMILIES})
UNIT = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11, "f32": 2.0 ** -24}
# The tensors stored in float32 when the model runs at a reduced dtype T, whose floor is 2u of float32: the
# SSM state of Mamba2 and Mamba. Everything else holds T-rounded values or carries them: the logits, the
# conv windows, the hybrids' KV caches and residual, and Mamba2's and Mamba's float32 residual stream, into
# which every layer adds a T-rounded mixer output (one rounding flip there moves it by u of its magnitude).
F32_STORED = {"mamba2": {"recurrent_state"}, "mamba": {"recurrent_state"}, "falcon_mamba": {"recurrent_state"}}
F32_STORED.update({"layer:" + f: {"recurrent_state", "ref_recurrent_state"} for f in ("mamba2", "mamba1", "gdn")})
MODEL_TYPES.append("zamba2")
PROFILE_OF["zamba2"] = "models-zamba2.yaml"
MODEL_TYPES.append("zamba")
PROFILE_OF["zamba"] = "models-zamba.yaml"
MODEL_TYPES.append("lfm2_moe")
PROFILE_OF["lfm2_moe"] = "models-lfm2_moe.yaml"
MODEL_TYPES.append("minimax")
PROFILE_OF["minimax"] = "models-minimax.yaml"
MODEL_TYPES.append("inkling_text")
PROFILE_OF["inkling_text"] = "models-inkling.yaml"
MOE_TYPES = {"granitemoehybrid", "jamba", "nemotron_h", "qwen3_5_moe_text", "qwen3_next", "lfm2_moe", "kimi_linear",
             "minimax", "inkling_text"}   # model types with a mixture-of-experts feed-forward (measure())
GOLDEN_TENSORS = ("logits", "hidden_states", "conv_state", "recurrent_state")
BITWISE = {"determinism", "snapshot", "untouched"}   # compared bit for bit whatever the profile says
TENSOR_ORDER = ["default", "logits", "hidden_states", "conv_state", "recurrent_state", "consistency",
                "ref_logits", "ref_hidden_states"]


def base_profile(base, mt):
    """The profile a target's cases use today: its own, else the shared models.yaml (a model type) or the
    bundled mixer profile of the family (layer:FAMILY)."""
    own = os.path.join(base, PROFILE_OF[mt])
    if os.path.exists(own):
        return own
    return os.path.join(base, mt[len("layer:"):] + ".yaml" if mt.startswith("layer:") else "models.yaml")


def mixcheck():
    return os.environ.get("MIXCHECK", os.path.join(ROOT, "build", "mixcheck"))


def make_set(model_type, count, seed, out, tolerance):
    what = ["--layer", model_type[len("layer:"):]] if model_type.startswith("layer:") else [model_type]
    p = subprocess.run(GEN + what + ["--count", str(count), "--seed", str(seed), "--out", out,
                                     "--tolerance", tolerance], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"calibrate: {' '.join(GEN)} {model_type}: exit {p.returncode}\n{p.stderr}")


def run_set(folder, backend, dtypes, extra, report, tolerance=None):
    cmd = [mixcheck(), "run", folder, "-q", "--backend", backend, "--json", report] + extra
    if len(dtypes) == 1:
        cmd += ["--dtype", dtypes[0]]   # else the case's dtypes (f32, bf16, f16), the records filtered below
    if tolerance:
        cmd += ["--tolerance", tolerance]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"calibrate: {' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    with open(report) as f:
        return json.load(f), p.stdout


def sig2(x):
    """x rounded up to two significant digits (a profile entry's number)."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return math.ceil(x / 10 ** e - 1e-9) * 10 ** e


def fmt(x):
    return "%.2g" % x if x != 0 else "0"


def measure(args):
    results = {}
    for mt in args.model_type:
        with tempfile.TemporaryDirectory() as tmp:
            make_set(mt, args.count, args.seed, tmp, base_profile(args.base, mt))
            rep, _ = run_set(tmp, args.backend, args.dtype, args.extra, os.path.join(tmp, "report.json"))
        worst = {}
        for r in rep["results"]:
            t, d = r.get("tensor"), r.get("dtype")
            if not t or t in BITWISE or d not in UNIT or r.get("max_abs_err") is None:
                continue
            M = r.get("max_abs_expected") or 0.0
            ratio = r["max_abs_err"] / M if M > 0 else (0.0 if r["max_abs_err"] == 0 else math.inf)
            key = (d, t)
            n, w, where = worst.get(key, (0, 0.0, ""))
            if ratio >= w:
                w, where = ratio, f"{r['case']} {r['scenario']}"
            worst[key] = (n + 1, w, where)
        results[mt] = worst
    # a tensor of --pool (default: consistency, the backend against itself in another batch, whose
    # error comes from the kernels every model type shares) takes the worst over every model type measured
    for t in args.pool:
        for d in args.dtype:
            for layers, what in ((False, "model types"), (True, "mixer families")):   # each level among its own
                rows = [(w[(d, t)], mt) for mt, w in results.items()
                        if (d, t) in w and mt.startswith("layer:") == layers]
                if len(rows) < 2:
                    continue
                (n, w, where), mt = max(rows, key=lambda x: x[0][1])
                for mt2, w2 in results.items():
                    if (d, t) in w2 and mt2.startswith("layer:") == layers:
                        w2[(d, t)] = (w2[(d, t)][0], w, f"{where} ({mt}; pooled over {len(rows)} {what})")
    # A mixture of experts routes each token to k experts by its router's logits: where two of them lie closer
    # than the dtype's rounding of the router input, the stack picks another expert than the float64 golden,
    # and the change reaches every tensor after it (later layers' caches included) by as much as it moves the
    # logits. So each tensor compared with the golden takes the worst over them at each dtype (the rule judged on
    # seeds 500000+; per tensor it gave 4 false alarms in 1500 checks on seeds 400000+: conv_state at bf16,
    # recurrent_state at f32).
    for mt in args.model_type:
        if mt not in MOE_TYPES:
            continue
        for d in args.dtype:
            rows = [(results[mt][(d, t)], t) for t in GOLDEN_TENSORS if (d, t) in results[mt]]
            if not rows:
                continue
            (_, w, where), t = max(rows, key=lambda x: x[0][1])
            for t2 in GOLDEN_TENSORS:
                if (d, t2) in results[mt]:
                    results[mt][(d, t2)] = (results[mt][(d, t2)][0], w,
                                            f"{where} ({t}: the worst of the golden-compared tensors, a routing "
                                            f"flip moves them alike)")
    for mt in args.model_type:
        write_profile(args, mt, results[mt])
    return 0


def read_base(path):
    """The lines of an existing profile's devices other than the measured one and its f64 block (kept)."""
    if not os.path.exists(path):
        return [], None
    with open(path) as f:
        return f.read().splitlines(), path


def carried_entries(base, device, dtype, measured):
    """The entries of the base profile at (device, dtype) for tensors no scenario of the set compares (a
    mixer profile's `growth`, for long_decode), carried over as they are."""
    if not base:
        return []
    try:
        import yaml
    except ImportError:
        return []
    with open(base) as f:
        doc = yaml.safe_load(f)
    block = ((doc or {}).get("devices") or {}).get(device, {}).get(dtype) or {}
    return [(t, e) for t, e in block.items() if t != "default" and t not in measured]


def write_profile(args, mt, worst):
    lines, base = read_base(base_profile(args.base, mt))
    f64 = []
    if lines:   # carry the f64 block of the measured device over as it is
        dev, dt = None, None
        for ln in lines:
            m = re.match(r"^  (\S+):\s*$", ln)
            if m:
                dev = m.group(1)
            m = re.match(r"^    (\S+):\s*$", ln)
            if m:
                dt = m.group(1)
            if dev == args.device and dt == "f64" and (ln.startswith("      ") or re.match(r"^    f64:", ln)):
                f64.append(ln)
    out = os.path.join(args.out, PROFILE_OF[mt])
    seeds = f"seeds {args.seed}..{args.seed + args.count - 1}"
    with open(out, "w") as f:
        what = (f"the tolerances of mixer-level goldens of {mt[len('layer:'):]} layers from checkpoints "
                f"(from-checkpoint --layer)" if mt.startswith("layer:") else f"the model-level tolerances of {mt}")
        f.write(f"# {PROFILE_OF[mt]}: {what}, measured by scripts/calibrate.py measure\n"
                f"# --backend {args.backend} --count {args.count} --seed {args.seed} --safety {args.safety} over the\n"
                f"# calibration set (golden/calibration.py: random checkpoints with released-model weight statistics,\n"
                f"# {seeds}). Error model, per dtype (u: 2^-8 bf16, 2^-11 f16, 2^-24 f32):\n"
                f"#   |a - b| <= atol_scale * max|expected| + rtol * |b|,  rtol = 2u (the element's own rounding),\n"
                f"#   atol_scale = {args.safety} x the worst max|err| / max|expected| measured (at least 2u): the error\n"
                f"#   carried from every rounded intermediate, in units of the tensor's largest value.\n"
                f"# The f64 entries are carried over from {os.path.relpath(base, ROOT) if base else 'nowhere'}.\n")
        f.write(f"profile: {PROFILE_OF[mt][:-5]}\n")
        f.write(f"why: \"measured on {args.count} {mt.replace('layer:', 'layer ')} calibration goldens ({seeds}), {args.backend}; "
                f"validated on a disjoint set (scripts/calibrate.py validate)\"\n")
        f.write(f"devices:\n  {args.device}:\n")
        for ln in f64:
            f.write(ln + "\n")
        for d in args.dtype:
            u = UNIT[d]
            tensors = sorted({t for (dd, t) in worst if dd == d}, key=lambda t: (TENSOR_ORDER.index(t)
                             if t in TENSOR_ORDER else 99, t))
            if not tensors:
                continue
            f.write(f"    {d}:\n")
            all_w = max(worst[(d, t)][1] for t in tensors)
            scale = sig2(args.safety * max(all_w, 2 * u))
            f.write(f"      default: {{atol: 0, rtol: {fmt(2 * u)}, atol_scale: {fmt(scale)}, why: \"fallback: the "
                    f"worst of this dtype's tensors\"}}\n")
            for t, e in carried_entries(base, args.device, d, set(tensors)):
                f.write(f"      {t}: {{atol: {e['atol']}, rtol: {e['rtol']}, why: {json.dumps(e['why'], ensure_ascii=False)}}}\n")
            for t in tensors:
                n, w, where = worst[(d, t)]
                us = UNIT["f32"] if t in F32_STORED.get(mt, ()) else u   # the floor: the dtype it is stored in
                scale = sig2(args.safety * max(w, 2 * us))
                stored = " (stored in f32)" if us != u else ""
                f.write(f"      {t}: {{atol: 0, rtol: {fmt(2 * us)}, atol_scale: {fmt(scale)}, why: \"measured max |err| "
                        f"/ max |expected| {w:.3g} ({w / u:.3g} u) over {n} checks, worst {where}; x{args.safety}"
                        f"{stored}\"}}\n")
    print(f"{out}: written")


def validate(args):
    alarms, total = [], 0
    for mt in args.model_type:
        prof = os.path.join(args.profiles, PROFILE_OF[mt])
        with tempfile.TemporaryDirectory() as tmp:
            make_set(mt, args.count, args.seed, tmp, prof)
            rep, out = run_set(tmp, args.backend, args.dtype, args.extra, os.path.join(tmp, "report.json"))
        checks = {}
        for r in rep["results"]:
            k = (r["case"], r["scenario"], r["backend"], r["dtype"])
            checks.setdefault(k, []).append(r)
        checks = {k: rs for k, rs in checks.items() if k[3] in args.dtype}
        bad = [k for k, rs in checks.items() if any(r["status"] not in ("pass",) for r in rs)]
        worst = max((r["headroom"] or 0) for rs in checks.values() for r in rs if r.get("headroom") is not None)
        total += len(checks)
        print(f"{mt}: {len(checks)} checks on {args.count} checkpoints (seeds {args.seed}..{args.seed + args.count - 1}),"
              f" {len(bad)} false alarm(s), worst headroom {worst:.3g}")
        for k in bad:
            tens = [f"{r['tensor']} {r['status']} headroom {r['headroom']}" for r in checks[k] if r["status"] != "pass"]
            print(f"  false alarm: {' '.join(k)}: {', '.join(tens)}")
        alarms += bad
    print(f"{total} checks, {len(alarms)} false alarm(s)")
    return 1 if alarms else 0


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("measure", "validate"):
        p = sub.add_parser(name)
        p.add_argument("--backend", required=True)
        p.add_argument("--model-type", action="append", choices=MODEL_TYPES)
        p.add_argument("--layer", action="append", choices=LAYER_FAMILIES,
                       help="mixer-level goldens of this family's layers (from-checkpoint --layer): the profile "
                            "checkpoint-FAMILY.yaml")
        p.add_argument("--count", type=int, default=100)
        p.add_argument("--dtype", action="append", choices=sorted(UNIT))
        if name == "measure":
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--out", required=True)
            p.add_argument("--safety", type=float, default=2.0)
            p.add_argument("--device", default="cpu")
            p.add_argument("--base", default=os.path.join(ROOT, "cases", "tolerances"))
            p.add_argument("--pool", action="append", help="a tensor whose entry is the worst over every model "
                           "type measured (default: consistency)")
        else:
            p.add_argument("--seed", type=int, default=100000)
            p.add_argument("--profiles", default=os.path.join(ROOT, "cases", "tolerances"))
    args = ap.parse_args(argv)
    args.extra = extra
    args.model_type = (args.model_type or ([] if args.layer else MODEL_TYPES)) + ["layer:" + f for f in args.layer or []]
    args.dtype = args.dtype or ["bf16", "f16", "f32"]
    if args.cmd == "measure" and args.pool is None:
        args.pool = ["consistency"]
    if args.count < 1:
        ap.error("--count must be >= 1")
    if args.cmd == "measure":
        os.makedirs(args.out, exist_ok=True)
        return measure(args)
    return validate(args)


if __name__ == "__main__":
    sys.exit(main())
