#!/usr/bin/python3
"""mixcheck golden-file generator: an independent float64 oracle for the recurrent sequence mixers.

The expected values come from a plain token-by-token recurrence (no chunks) written from the math spec
(docs/semantics.md §2.3, §2.7 Mamba2; §3.3 Mamba1; §4.3-§4.4 Gated DeltaNet; §5.2 ShortConv; §11;
§13 lightning attention, §14 KDA),
never from the C code under test. See golden/README.md for the file layout.

Commands (paths are relative to this script's directory, whatever the cwd):
  generate.py list                          names, families, file sizes
  generate.py regenerate NAME ... | --all    recompute, write <file>.tmp, rename; print per-tensor changes
  generate.py check [--selftest] [NAME ...] recompute in memory, compare with the files and verify each
                                            file's content_sha256 (exit 0 / 1);
                                            --selftest first cross-checks the oracle (chunked SSD / chunked
                                            gated delta rule / closed-form scan, split invariance, padding)
NAME is family/name (gdn/tiny), a family (gdn: all of it), or a bare mamba2 name (tiny = mamba2/tiny).
Model-level goldens (whole stacks) are named models/NAME or `models` and live in golden/stacks.py;
`generate.py from-checkpoint DIR` (a golden from a Hugging Face checkpoint folder) is golden/checkpoint.py;
`generate.py calibration-set MODEL_TYPE --count N --seed S --out DIR` (random checkpoints with released-model
weight statistics, as model goldens and cases, for measuring tolerances) is golden/calibration.py.
Nothing is written unless `regenerate` is given, with the names to rewrite or --all.

This file is the command line only: it parses the arguments and dispatches. The modules, each importing
only those before it:
  mixers.py      the float64 oracle of mamba2, mamba1, gdn and shortconv, quantization, GoldenSpec / Golden
  models.py      the attention family (the oracle of the model-level attention layers)
  linear.py      the lightning attention and Kimi Delta Attention families (their oracles, self-tests, goldens)
  goldens.py     the registry of the bundled mixer-level goldens (FAMILIES, SPECS), building, the HDF5
                 files and their content checksum, and the list / regenerate / check commands
  stacks.py      model-level goldens: whole ...ForCausalLM stacks, and their list / regenerate / check
  checkpoint.py  from-checkpoint: goldens from a Hugging Face checkpoint folder
  calibration.py calibration sets: random checkpoints with released-model statistics, as model goldens
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibration  # noqa: E402
import checkpoint  # noqa: E402
import goldens  # noqa: E402
import stacks  # noqa: E402


def calibration_set(argv):
    ap = argparse.ArgumentParser(prog="generate.py calibration-set",
                                 description="random checkpoints of one model type as model goldens and cases")
    ap.add_argument("model_type", nargs="?", choices=sorted(calibration.MODEL_SPECS))
    ap.add_argument("--layer", choices=sorted(calibration.LAYER_MODELS), metavar="FAMILY",
                    help="mixer-level goldens of one family's layers instead of model goldens")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="the first checkpoint's seed (sets never overlap in seeds)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tolerance", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cases",
                                                        "tolerances", "models.yaml"))
    a = ap.parse_args(argv)
    if a.count < 1 or a.seed < 0 or (a.model_type is None) == (a.layer is None):
        print("calibration-set: a MODEL_TYPE or --layer FAMILY, --count >= 1 and --seed >= 0", file=sys.stderr)
        return 2
    if a.layer:
        files = calibration.write_layer_set(a.layer, a.count, a.seed, a.out, a.tolerance)
    else:
        files = calibration.write_set(a.model_type, a.count, a.seed, a.out, a.tolerance)
    print(f"{a.out}: {len(files)} {a.layer or a.model_type} golden(s), seeds {a.seed}..{a.seed + a.count - 1}")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "from-checkpoint":
        return checkpoint.main(argv[1:])
    if argv and argv[0] == "calibration-set":
        return calibration_set(argv[1:])
    if stacks.wants_models(argv):   # list / regenerate / check naming models/... or `models`
        return stacks.main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="names, families, sizes")
    p.add_argument("names", nargs="*")
    p.set_defaults(func=goldens.cmd_list)
    p = sub.add_parser("regenerate", help="recompute and atomically rewrite the named golden files (or --all)")
    p.add_argument("--all", action="store_true", help="rewrite every golden")
    p.add_argument("names", nargs="*")
    p.set_defaults(func=goldens.cmd_regenerate)
    p = sub.add_parser("check", help="recompute in memory and compare with the files (exit 0/1)")
    p.add_argument("--selftest", action="store_true",
                   help="first cross-check the oracle (chunked SSD, split invariance, left padding)")
    p.add_argument("names", nargs="*")
    p.set_defaults(func=goldens.cmd_check)
    args = ap.parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
