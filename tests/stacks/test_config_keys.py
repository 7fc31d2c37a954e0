#!/usr/bin/python3
"""Every config key of a checkpoint honoured or refused (golden/configkeys.py), without transformers.

1. Enumeration: every key transformers 5.24 writes for each supported model type (fixtures/hf_config_keys.json,
   the keys of each config class's defaults) is honoured or on the inert list; when the HF Python
   ($MIXCHECK_HF_PYTHON) can import transformers, its own config classes are enumerated too.
2. The details real checkpoints carry, each written as a checkpoint (config.json + safetensors) and read by
   generate.py from-checkpoint; the golden must follow the detail (it differs from the golden without it, and
   equals the golden of an equivalent spelling of it where one exists), and mixcheck must pass the golden on
   reference and cpu at f32 (so the C engine reads the detail the same way):
   - n_groups 2 (Mamba2) / mamba_n_groups 2 (Bamba): the gated norm per group from transformers 5.23.0 on,
     over the whole row before (transformers_version, or --semantics);
   - rope_theta inside rope_parameters (LFM2, Bamba, Qwen3.5) equal to the same rope_theta at the top level;
   - Bamba's time_step_limit (0, 0.05);
   - Mamba2's default time_step_limit as transformers writes it, [0.0, {"__float__": "Infinity"}], and as
     bare JSON Infinity: the golden's config_json is strict JSON either way;
   - a sharded checkpoint (model.safetensors.index.json) gives the golden of the single file; BF16- and
     F16-stored weights load; the text part of a multimodal Qwen3.5 checkpoint loads.
3. Refusals, exit 2 naming the file and the key or tensor, never a traceback: an unknown key, a rope_type
   that is not computed, a truncated safetensors header, a tensor of the wrong shape, a missing tensor, NaN
   in a weight, a shard the index names but the folder lacks.
Usage: test_config_keys.py MIXCHECK_BINARY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "golden"))
import checkpoint as C  # noqa: E402
import configkeys as K  # noqa: E402
import stacks as S  # noqa: E402

MIXCHECK = sys.argv[1]
# generate.py from-checkpoint runs in this process (checkpoint.main_captured: the main generate.py's subcommand
# calls): an interpreter and its imports for each of over a hundred calls were four fifths of this test's time
PROMPT = ["--prompt", "5 17 200 3 9 41 77", "--prompt", "250 1 33 4", "--greedy", "4"]
TOL = os.path.join(ROOT, "cases", "tolerances")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def base(name, **over):
    """The bundled spec's config with overrides, and weights drawn for it."""
    spec = S.SPECS["models/" + name]
    cfg = S.model_config(spec)
    cfg.update(over)
    return cfg, S.init_weights(K.normalise(cfg), np.random.default_rng(spec.seed))


def write(folder, cfg, weights, text=None, dtype="F32"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(text if text is not None else K.dumps(cfg))
    saved = dict(weights)
    if cfg.get("tie_word_embeddings"):
        saved.pop("lm_head.weight", None)
    C.write_safetensors(os.path.join(folder, "model.safetensors"), saved, dtype)


def golden(folder, out, extra=(), want=0):
    rc, stderr = C.main_captured([folder, "--out", out] + PROMPT + list(extra))
    if "Traceback" in stderr:
        fail(f"{folder}: a traceback:\n{stderr}")
    if rc != want:
        fail(f"{folder}: from-checkpoint exit {rc} (want {want}): {stderr.strip()}")
    return stderr.strip()


def logits(path):
    with h5py.File(path, "r") as f:
        cj = f["config"].attrs["config_json"]
        try:
            json.loads(cj, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as e:
            fail(f"{path}: config_json is not strict JSON ({e}): the C reader refuses it")
        return f["expected/logits"][()], K.loads(cj)


def passes(path, tmp, model_type, backends="reference, cpu", profile=None):
    """mixcheck passes the golden on reference and cpu at f32 (prefill, decode, greedy); `profile` the model type's
    profile where its name is not the model type's."""
    profile = profile or model_type
    tol = os.path.join(TOL, "models-%s.yaml" % profile) if os.path.exists(
        os.path.join(TOL, "models-%s.yaml" % profile)) else os.path.join(TOL, "models.yaml")
    yml = path[:-3] + ".yaml"
    with open(yml, "w") as f:
        f.write(f"id: keys-{os.path.basename(path)[:-3]}\nwhy: \"config key honoured\"\nmodel: {model_type}\n"
                f"golden: {path}\ntolerance: {tol}\nbackends: [{backends}]\ndtypes: [f32]\nscenarios:\n"
                "  prefill: {}\n  decode: {prefill: 5}\n  greedy: {steps: 4, top_k: 3}\n")
    p = subprocess.run([MIXCHECK, "run", yml, "-q"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{path}: mixcheck exit {p.returncode}:\n{p.stdout[-3000:]}{p.stderr[-2000:]}")


def differ(a, b, what):
    la, lb = logits(a)[0], logits(b)[0]
    d = float(np.max(np.abs(la - lb)))
    if not d > 1e-6:
        fail(f"{what}: the goldens do not differ (max |d logits| {d:.2e}): the detail is not honoured")
    return d


def same(a, b, what):
    la, lb = logits(a)[0], logits(b)[0]
    d = float(np.max(np.abs(la - lb)))
    if d != 0.0:
        fail(f"{what}: the goldens differ by {d:.2e}: two spellings of one config read differently")


def enumeration():
    with open(os.path.join(ROOT, "tests", "stacks", "fixtures", "hf_config_keys.json")) as f:
        fx = json.load(f)
    sets = {("fixture " + fx["transformers_version"]): fx["keys"]}
    py = os.environ.get("MIXCHECK_HF_PYTHON", "")
    if py and os.path.exists(py):
        code = ("import json, transformers as T; print(json.dumps({m: sorted(c().to_dict()) for m, c in ["
                "('mamba2', T.Mamba2Config), ('mamba', T.MambaConfig), ('lfm2', T.Lfm2Config), "
                "('bamba', T.BambaConfig), ('qwen3_5_text', T.Qwen3_5TextConfig), "
                "('granitemoehybrid', T.GraniteMoeHybridConfig), ('falcon_mamba', T.FalconMambaConfig), "
                "('jamba', T.JambaConfig), ('nemotron_h', T.NemotronHConfig), "
                "('qwen3_next', T.Qwen3NextConfig), ('qwen3_5_moe_text', T.Qwen3_5MoeTextConfig), "
                "('falcon_h1', T.FalconH1Config), ('zamba2', T.Zamba2Config), ('zamba', T.ZambaConfig), "
                "('lfm2_moe', T.Lfm2MoeConfig), ('olmo_hybrid', T.OlmoHybridConfig), "
                "('kimi_linear', T.KimiLinearConfig), ('minimax', T.MiniMaxConfig), "
                "('inkling_text', T.InklingTextConfig)]}))")
        p = subprocess.run([py, "-c", code], capture_output=True, text=True)
        if p.returncode == 0:
            sets["installed transformers"] = json.loads(p.stdout.strip().splitlines()[-1])
    for label, keys in sets.items():
        for mt, names in keys.items():
            unknown = [k for k in names if k not in K.HONOURED[mt] and k not in K.INERT[mt]]
            if unknown:
                fail(f"{label}: {mt}: keys neither honoured nor inert: {unknown}")
            print(f"{label}: {mt}: {len(names)} keys, every one honoured or inert")


def main():
    enumeration()
    with tempfile.TemporaryDirectory() as tmp:
        def path(n):
            return os.path.join(tmp, n)

        # n_groups 2: per group (5.23.0 on) or over the whole row (up to 5.22.x)
        for name, key in (("mamba2", "n_groups"), ("bamba", "mamba_n_groups")):
            cfg, w = base(name, **{key: 2})
            outs = {}
            for ver in ("5.24.0", "5.22.2"):
                c = dict(cfg, transformers_version=ver)
                write(path(f"{name}-g2-{ver}"), c, w)
                outs[ver] = path(f"{name}-g2-{ver}.h5")
                golden(path(f"{name}-g2-{ver}"), outs[ver])
                sem = logits(outs[ver])[1].get("mixcheck_semantics", {}).get("mamba2_gated_norm")
                want = "per_group" if ver == "5.24.0" else "full_row"
                if sem != want:
                    fail(f"{name} n_groups 2, transformers {ver}: the golden records {sem!r}, want {want!r}")
                passes(outs[ver], tmp, cfg["model_type"])
            d = differ(outs["5.24.0"], outs["5.22.2"], f"{name} n_groups 2 per group vs full row")
            print(f"{name}: n_groups 2, per group (5.24.0) vs full row (5.22.2): max |d logits| {d:.3g}")
            golden(path(f"{name}-g2-5.24.0"), path(f"{name}-g2-forced.h5"), ["--semantics", "mamba2_gated_norm=full_row"])
            same(path(f"{name}-g2-forced.h5"), outs["5.22.2"], f"{name}: --semantics mamba2_gated_norm=full_row")

        # rope_theta inside rope_parameters
        for name in ("lfm2", "bamba", "qwen3_5"):
            cfg, w = base(name)
            mt = cfg["model_type"]
            inside = {k: v for k, v in cfg.items() if k not in ("rope_theta", "rope_parameters")}
            inside["rope_parameters"] = {"rope_type": "default", "rope_theta": 500.0}
            if mt == "qwen3_5_text":
                inside["rope_parameters"]["partial_rotary_factor"] = 0.25
            top = dict(inside)
            del top["rope_parameters"]
            top["rope_theta"] = 500.0
            write(path(f"{name}-rp"), inside, w)
            write(path(f"{name}-top"), top, w)
            write(path(f"{name}-default"), cfg, w)
            for n in ("rp", "top", "default"):
                golden(path(f"{name}-{n}"), path(f"{name}-{n}.h5"))
            same(path(f"{name}-rp.h5"), path(f"{name}-top.h5"), f"{name}: rope_parameters.rope_theta vs rope_theta")
            d = differ(path(f"{name}-rp.h5"), path(f"{name}-default.h5"), f"{name}: rope_theta 500")
            print(f"{name}: rope_parameters.rope_theta 500 = top-level rope_theta 500; vs default: {d:.3g}")
            passes(path(f"{name}-rp.h5"), tmp, mt)

        # Bamba's time_step_limit; Mamba2's infinite limit as transformers writes it, and as bare Infinity
        cfg, w = base("bamba", time_step_limit=[0.0, 0.05])
        write(path("bamba-tsl"), cfg, w)
        golden(path("bamba-tsl"), path("bamba-tsl.h5"))
        d = differ(path("bamba-tsl.h5"), path("bamba-default.h5"), "bamba time_step_limit (0, 0.05)")
        print(f"bamba: time_step_limit (0, 0.05) vs none: {d:.3g}")
        passes(path("bamba-tsl.h5"), tmp, "bamba")
        cfg, w = base("mamba2", time_step_limit=[0.0, float("inf")])
        write(path("m2-inf"), cfg, w)
        write(path("m2-bare"), cfg, w, text=json.dumps(cfg))   # Python's json: bare Infinity
        write(path("m2-none"), {k: v for k, v in cfg.items() if k != "time_step_limit"}, w)
        with open(os.path.join(path("m2-inf"), "config.json")) as f:
            if '{"__float__": "Infinity"}' not in f.read():
                fail("the test's Mamba2 config does not carry transformers' {\"__float__\": \"Infinity\"}")
        for n in ("m2-inf", "m2-bare", "m2-none"):
            golden(path(n), path(n + ".h5"))
        same(path("m2-inf.h5"), path("m2-none.h5"), "mamba2 time_step_limit [0, Infinity] vs absent")
        same(path("m2-bare.h5"), path("m2-none.h5"), "mamba2 time_step_limit [0, bare Infinity] vs absent")
        cj = logits(path("m2-inf.h5"))[1]
        if cj.get("time_step_limit") != [0.0, float("inf")]:
            fail(f"the golden's config_json time_step_limit reads back as {cj.get('time_step_limit')}")
        passes(path("m2-inf.h5"), tmp, "mamba2")

        # a sharded checkpoint; BF16 / F16 storage
        cfg, w = base("qwen3_5")
        write(path("q-single"), cfg, w)
        golden(path("q-single"), path("q-single.h5"))
        sh = path("q-sharded")
        os.makedirs(sh)
        shutil.copy(os.path.join(path("q-single"), "config.json"), sh)
        names = sorted(w)
        half = len(names) // 2
        wm = {}
        for i, part in enumerate((names[:half], names[half:])):
            fn = f"model-{i + 1:05d}-of-00002.safetensors"
            C.write_safetensors(os.path.join(sh, fn), {k: w[k] for k in part})
            wm.update({k: fn for k in part})
        with open(os.path.join(sh, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f)
        golden(sh, path("q-sharded.h5"))
        same(path("q-sharded.h5"), path("q-single.h5"), "a sharded checkpoint vs the single file")
        for dt in ("BF16", "F16"):
            write(path(f"q-{dt}"), cfg, w, dtype=dt)
            golden(path(f"q-{dt}"), path(f"q-{dt}.h5"))
            if dt == "BF16":   # the weights are on the bf16 grid: the same golden
                same(path("q-BF16.h5"), path("q-single.h5"), "BF16-stored bf16-exact weights vs F32")
        print("qwen3_5: sharded = single file; BF16- and F16-stored weights load")

        # the text part of a multimodal Qwen3.5 checkpoint
        mm = path("q-multimodal")
        os.makedirs(mm)
        text = {k: v for k, v in cfg.items() if k != "architectures"}
        with open(os.path.join(mm, "config.json"), "w") as f:
            f.write(K.dumps({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                             "text_config": text, "vision_config": {"depth": 2}, "transformers_version": "5.24.0",
                             "tie_word_embeddings": False}))
        mw = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v for k, v in w.items()}
        mw["model.visual.patch_embed.proj.weight"] = np.zeros((4, 3), np.float32)
        mw["mtp.fc.weight"] = np.zeros((2, 2), np.float32)
        C.write_safetensors(os.path.join(mm, "model.safetensors"), mw)
        golden(mm, path("q-multimodal.h5"))
        same(path("q-multimodal.h5"), path("q-single.h5"), "the text part of a multimodal checkpoint")
        print("qwen3_5: the text part of a multimodal checkpoint = the text checkpoint")

        # refusals: exit 2, the file and the key / tensor named, no traceback
        def refused(folder, needle, what):
            err = golden(folder, os.path.join(tmp, "refused.h5"), want=2)
            if needle not in err:
                fail(f"{what}: the message does not name {needle!r}: {err}")
            else:
                print(f"refused ({what}): {err}")

        # Nemotron-H: the block pattern as layers_block_type, as the older hybrid_override_pattern and with the
        # older mamba_* names read alike; a released checkpoint's layout (backbone., one module per expert, mtp.*)
        # reads as the state_dict; time_step_min is the dt clamp (raised until it clamps: the golden moves)
        ncfg, nw = base("nemotron_h")
        pattern = {k: v for k, v in ncfg.items() if k not in ("layers_block_type", "num_hidden_layers")}
        pattern["hybrid_override_pattern"] = "".join({"linear_attention": "M", "full_attention": "*", "mlp": "-",
                                                      "moe": "E"}[t] for t in ncfg["layers_block_type"])
        aliases = {k: v for k, v in ncfg.items() if k not in ("n_groups", "chunk_size", "conv_kernel")}
        aliases.update(mamba_n_groups=ncfg["n_groups"], mamba_chunk_size=ncfg["chunk_size"],
                       mamba_d_conv=ncfg["conv_kernel"])
        released = {("backbone." + k[len("model."):] if k.startswith("model.") else k): v for k, v in nw.items()}
        for k in [k for k in released if k.endswith(("mixer.experts.up_proj", "mixer.experts.down_proj"))]:
            stacked = released.pop(k)
            for e in range(stacked.shape[0]):
                released[f"{k}".replace("experts.", f"experts.{e}.") + ".weight"] = stacked[e]
        released["mtp.layers.0.norm.weight"] = np.ones(ncfg["hidden_size"], np.float32)
        for tag, c, wts in (("list", ncfg, nw), ("pattern", pattern, nw), ("aliases", aliases, nw),
                            ("released", ncfg, released)):
            write(path("nh-" + tag), c, wts)
            golden(path("nh-" + tag), path(f"nh-{tag}.h5"))
        for tag in ("pattern", "aliases", "released"):
            same(path("nh-list.h5"), path(f"nh-{tag}.h5"), f"nemotron_h: {tag} read as layers_block_type")
        passes(path("nh-list.h5"), tmp, "nemotron_h")
        write(path("nh-dtmin"), dict(ncfg, time_step_min=0.05), nw)
        golden(path("nh-dtmin"), path("nh-dtmin.h5"))
        d = differ(path("nh-list.h5"), path("nh-dtmin.h5"), "nemotron_h time_step_min 0.05")
        passes(path("nh-dtmin.h5"), tmp, "nemotron_h")
        print(f"nemotron_h: pattern, mamba_* aliases and the released layout read alike; time_step_min 0.05 clamps "
              f"dt (max |d logits| {d:.3g})")
        for key, value, needle in (("moe_latent_size", 16, "'moe_latent_size' = 16"),
                                   ("num_nextn_predict_layers", 1, "'num_nextn_predict_layers' = 1"),
                                   ("mlp_hidden_act", "silu", "'mlp_hidden_act' = \"silu\""),
                                   ("tie_word_embeddings", True, "'tie_word_embeddings' = true"),
                                   ("mlp_bias", True, "'mlp_bias' = true")):
            write(path("bad-nh-" + key), dict(ncfg, **{key: value}), nw)
            refused(path("bad-nh-" + key), needle, f"nemotron_h key {key}")
        # Qwen3-Next: a released checkpoint's layout (one module per expert, mtp.*) reads as the state_dict; no
        # layer_types reads as full_attention_interval's; decoder_sparse_step, mlp_only_layers and norm_topk_prob are
        # honoured (the golden moves); hidden_act gelu refused
        qcfg, qw = base("qwen3_next")
        released = dict(qw)
        for k in [k for k in released if k.endswith(".mlp.experts.gate_up_proj")]:
            gu, dn = released.pop(k), released.pop(k.replace("gate_up_proj", "down_proj"))
            F = gu.shape[1] // 2
            for e in range(gu.shape[0]):
                pre = k[:-len("gate_up_proj")] + f"{e}."
                released[pre + "gate_proj.weight"] = gu[e, :F]
                released[pre + "up_proj.weight"] = gu[e, F:]
                released[pre + "down_proj.weight"] = dn[e]
        released["mtp.fc.weight"] = np.ones((qcfg["hidden_size"], 2 * qcfg["hidden_size"]), np.float32)
        interval = {k: v for k, v in qcfg.items() if k != "layer_types"}
        interval["full_attention_interval"] = 2   # linear, full, linear, full, linear: not the spec's own pattern
        spec_types = ["linear_attention" if (i + 1) % 2 else "full_attention" for i in range(qcfg["num_hidden_layers"])]
        for tag, c, wts in (("list", qcfg, qw), ("released", qcfg, released),
                            ("interval", interval, S.init_weights(K.normalise(interval), np.random.default_rng(110))),
                            ("interval-list", dict(qcfg, layer_types=spec_types),
                             S.init_weights(K.normalise(interval), np.random.default_rng(110)))):
            write(path("qn-" + tag), c, wts)
            golden(path("qn-" + tag), path(f"qn-{tag}.h5"))
        same(path("qn-list.h5"), path("qn-released.h5"), "qwen3_next: the released layout read as the state_dict")
        same(path("qn-interval.h5"), path("qn-interval-list.h5"), "qwen3_next: full_attention_interval as layer_types")
        passes(path("qn-list.h5"), tmp, "qwen3_next")
        write(path("qn-norm"), dict(qcfg, norm_topk_prob=False), qw)
        golden(path("qn-norm"), path("qn-norm.h5"))
        d = differ(path("qn-list.h5"), path("qn-norm.h5"), "qwen3_next norm_topk_prob false")
        passes(path("qn-norm.h5"), tmp, "qwen3_next")
        print(f"qwen3_next: the released layout and full_attention_interval read alike; norm_topk_prob false moves the "
              f"logits (max |d logits| {d:.3g})")
        for key, value, needle in (("hidden_act", "gelu", "'hidden_act' = \"gelu\""),
                                   ("mlp_only_layers", [1], "the weights do not match the config")):
            write(path("bad-qn-" + key), dict(qcfg, **{key: value}), qw)
            refused(path("bad-qn-" + key), needle, f"qwen3_next key {key}")
        # Kimi-Linear: the names 5.24 writes (KimiLinearConfig.attribute_map) and the field names read alike; a released
        # checkpoint's linear_attn_config (1-indexed full_attn_layers / kda_layers, head_dim, num_heads,
        # short_conv_kernel_size) reads as layer_types and linear_*; first_k_dense_replace as mlp_layer_types;
        # norm_topk_prob and routed_scaling_factor are honoured (the golden moves); hidden_act gelu and
        # num_key_value_heads other than the heads refused
        kcfg, kw = base("kimi_linear")
        attr = {k: v for k, v in kcfg.items()}
        for old_k, new_k in (("max_position_embeddings", "model_max_length"), ("norm_topk_prob", "moe_renormalize"),
                             ("n_group", "num_expert_group"), ("num_local_experts", "num_experts"),
                             ("num_experts_per_tok", "num_experts_per_token"), ("n_shared_experts", "num_shared_experts")):
            attr[new_k] = attr.pop(old_k, K.normalise(kcfg).get(old_k, S.MODEL_DEFAULTS["kimi_linear"].get(old_k)))
        released = {k: v for k, v in kcfg.items() if k not in ("layer_types", "linear_num_heads", "linear_head_dim",
                                                               "linear_conv_kernel_dim", "mlp_layer_types")}
        lt = kcfg["layer_types"]
        released["linear_attn_config"] = {
            "full_attn_layers": [i + 1 for i, t in enumerate(lt) if t == "full_attention"],
            "kda_layers": [i + 1 for i, t in enumerate(lt) if t == "linear_attention"],
            "head_dim": kcfg["linear_head_dim"], "num_heads": kcfg["linear_num_heads"],
            "short_conv_kernel_size": kcfg["linear_conv_kernel_dim"]}
        released["first_k_dense_replace"] = kcfg["mlp_layer_types"].count("dense")
        for tag, c in (("fields", kcfg), ("attr", attr), ("released", released)):
            write(path("kl-" + tag), c, kw)
            golden(path("kl-" + tag), path(f"kl-{tag}.h5"))
        same(path("kl-fields.h5"), path("kl-attr.h5"), "kimi_linear: the attribute_map names 5.24 writes")
        same(path("kl-fields.h5"), path("kl-released.h5"), "kimi_linear: linear_attn_config and first_k_dense_replace")
        passes(path("kl-fields.h5"), tmp, "kimi_linear")
        passes(path("kl-released.h5"), tmp, "kimi_linear")
        for tag, over in (("norm", dict(norm_topk_prob=False)), ("scale", dict(routed_scaling_factor=1.0))):
            write(path("kl-" + tag), dict(kcfg, **over), kw)
            golden(path("kl-" + tag), path(f"kl-{tag}.h5"))
            d = differ(path("kl-fields.h5"), path(f"kl-{tag}.h5"), f"kimi_linear {tag}")
            passes(path(f"kl-{tag}.h5"), tmp, "kimi_linear")
            print(f"kimi_linear: {over} moves the logits (max |d logits| {d:.3g})")
        print("kimi_linear: the attribute_map names, linear_attn_config and first_k_dense_replace read alike")
        for key, value, needle in (("hidden_act", "gelu", "'hidden_act' = \"gelu\""),
                                   ("num_key_value_heads", 2, "'num_key_value_heads' = 2")):
            write(path("bad-kl-" + key), dict(kcfg, **{key: value}), kw)
            refused(path("bad-kl-" + key), needle, f"kimi_linear key {key}")
        # Qwen3.5-MoE: the text part of a multimodal checkpoint (model.language_model., visual and mtp weights) with its
        # experts one module each reads as the text model's state_dict; a dense MLP key refused
        mcfg, mw0 = base("qwen3_5_moe")
        write(path("q35m-text"), mcfg, mw0)
        golden(path("q35m-text"), path("q35m-text.h5"))
        passes(path("q35m-text.h5"), tmp, "qwen3_5_moe_text", profile="qwen3_5_moe")
        split = dict(mw0)
        for k in [k for k in split if k.endswith(".mlp.experts.gate_up_proj")]:
            gu, dn = split.pop(k), split.pop(k.replace("gate_up_proj", "down_proj"))
            F = gu.shape[1] // 2
            for e in range(gu.shape[0]):
                pre = k[:-len("gate_up_proj")] + f"{e}."
                split[pre + "gate_proj.weight"], split[pre + "up_proj.weight"] = gu[e, :F], gu[e, F:]
                split[pre + "down_proj.weight"] = dn[e]
        mm = path("q35m-multimodal")
        os.makedirs(mm)
        with open(os.path.join(mm, "config.json"), "w") as f:
            f.write(K.dumps({"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                             "text_config": {k: v for k, v in mcfg.items() if k != "architectures"},
                             "vision_config": {"depth": 2}, "transformers_version": "5.24.0",
                             "tie_word_embeddings": False}))
        mmw = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v for k, v in split.items()}
        mmw["model.visual.patch_embed.proj.weight"] = np.zeros((4, 3), np.float32)
        mmw["mtp.fc.weight"] = np.zeros((2, 2), np.float32)
        C.write_safetensors(os.path.join(mm, "model.safetensors"), mmw)
        golden(mm, path("q35m-multimodal.h5"))
        same(path("q35m-multimodal.h5"), path("q35m-text.h5"), "qwen3_5_moe: the text part of a multimodal checkpoint")
        print("qwen3_5_moe: the text part of a multimodal checkpoint, its experts one module each, = the text checkpoint")
        for key, value, needle in (("intermediate_size", 48, "'intermediate_size' = 48"),
                                   ("norm_topk_prob", False, "'norm_topk_prob' = false")):
            write(path("bad-q35m-" + key), dict(mcfg, **{key: value}), mw0)
            refused(path("bad-q35m-" + key), needle, f"qwen3_5_moe key {key}")

        # FalconH1: the bundled spec as a checkpoint; each multiplier the oracle and the C engine apply (in the glue
        # or folded into in_proj / k_proj rows) moved alone, the golden moves and mixcheck passes it; mamba_d_ssm
        # null is mamba_expand x hidden_size and mamba_d_head "auto" the intermediate size / heads, as
        # FalconH1Config derives them
        fcfg, fw = base("falcon_h1")
        write(path("fh-base"), fcfg, fw)
        golden(path("fh-base"), path("fh-base.h5"))
        passes(path("fh-base.h5"), tmp, "falcon_h1")
        moved = (("embedding_multiplier", 2.3), ("lm_head_multiplier", 0.5), ("mlp_multipliers", [0.8, 0.6]),
                 ("key_multiplier", 1.3), ("attention_in_multiplier", 0.7), ("attention_out_multiplier", 1.4),
                 ("ssm_multipliers", [0.7, 1.1, 0.9, 1.2, 0.3]), ("ssm_multipliers", [0.3, 1.1, 0.9, 1.2, 0.8]),
                 ("ssm_in_multiplier", 0.6), ("ssm_out_multiplier", 1.3))
        for k, (key, value) in enumerate(moved):
            write(path(f"fh-{k}"), dict(fcfg, **{key: value}), fw)
            golden(path(f"fh-{k}"), path(f"fh-{k}.h5"))
            d = differ(path("fh-base.h5"), path(f"fh-{k}.h5"), f"falcon_h1 {key} = {value}")
            passes(path(f"fh-{k}.h5"), tmp, "falcon_h1")
            print(f"falcon_h1: {key} = {value} honoured (max |d logits| {d:.3g}), mixcheck passes it")
        # FalconH1Mixer's two norm switches (the Mamba2 family's norm_before_gate and no_gated_norm): the gate after
        # the norm; no norm at all (no mamba.norm.weight in the checkpoint); both, FalconH1Config's defaults: each
        # moves the golden and mixcheck passes it
        nonorm_w = {k: v for k, v in fw.items() if not k.endswith(".mamba.norm.weight")}
        for tag, change, weights in (("nbg", dict(mamba_norm_before_gate=True), fw),
                                     ("nonorm", dict(mamba_rms_norm=False), nonorm_w),
                                     ("defaults", dict(mamba_rms_norm=False, mamba_norm_before_gate=True), nonorm_w)):
            write(path("fh-" + tag), dict(fcfg, **change), weights)
            golden(path("fh-" + tag), path(f"fh-{tag}.h5"))
            d = differ(path("fh-base.h5"), path(f"fh-{tag}.h5"), f"falcon_h1 {change}")
            passes(path(f"fh-{tag}.h5"), tmp, "falcon_h1")
            print(f"falcon_h1: {change} honoured (max |d logits| {d:.3g}), mixcheck passes it")
            # the Mamba2 branch of decoder layer 0 as a mixer golden (from-checkpoint --layer 0): the option stored
            # with it, and mixcheck passes it
            layer_h5 = path(f"fh-{tag}-layer0.h5")
            golden(path("fh-" + tag), layer_h5, extra=["--layer", "0", "--family", "mamba2"])
            with h5py.File(layer_h5, "r") as f:
                attrs = {k: int(f["config"].attrs.get(k, 0)) for k in ("no_gated_norm", "norm_before_gate")}
                has_norm = "norm.weight" in f["weights"]
            want = {"no_gated_norm": int(not change.get("mamba_rms_norm", True)),
                    "norm_before_gate": int(change.get("mamba_rms_norm", True) and
                                            change.get("mamba_norm_before_gate", False))}
            if attrs != want or has_norm != (not want["no_gated_norm"]):
                fail(f"falcon_h1 {change}: the layer golden has {attrs}, norm.weight {has_norm}; want {want}")
            yml = layer_h5[:-3] + ".yaml"
            with open(yml, "w") as f:
                f.write(f"id: keys-fh-{tag}-layer0\nwhy: \"a FalconH1 Mamba2 branch\"\nfamily: mamba2\n"
                        f"golden: {layer_h5}\ntolerance: {os.path.join(TOL, 'checkpoint-mamba2.yaml')}\n"
                        "backends: [reference, cpu]\ndtypes: [f32]\nscenarios:\n  prefill: {}\n  decode: {prefill: 3}\n")
            p = subprocess.run([MIXCHECK, "run", yml, "-q"], capture_output=True, text=True)
            if p.returncode != 0:
                fail(f"falcon_h1 {change}: mixcheck exit {p.returncode} on the layer golden:\n{p.stdout[-2000:]}")
            print(f"falcon_h1: {change}: the Mamba2 layer golden carries {attrs}, mixcheck passes it")
        auto = {k: v for k, v in fcfg.items() if k not in ("mamba_d_head",)}
        auto.update(mamba_d_ssm=None, mamba_expand=2, mamba_n_heads=4)
        aw = S.init_weights(K.normalise(auto), np.random.default_rng(1))
        write(path("fh-auto"), auto, aw)
        golden(path("fh-auto"), path("fh-auto.h5"))
        passes(path("fh-auto.h5"), tmp, "falcon_h1")
        for key, value, needle in (("mlp_bias", True, "'mlp_bias' = true"),
                                   ("hidden_act", "gelu", "'hidden_act' = \"gelu\""),
                                   ("projectors_bias", True, "'projectors_bias' and 'mamba_proj_bias' differ"),
                                   ("layers_block_type", ["hybrid", "attention", "hybrid"], "'layers_block_type'"),
                                   ("ssm_multipliers", [1.0, 1.0], "'ssm_multipliers'")):
            write(path("bad-fh-" + key), dict(fcfg, **{key: value}), fw)
            refused(path("bad-fh-" + key), needle, f"falcon_h1 key {key}")
        # LFM2-MoE: a released checkpoint's layout (one Lfm2MoeMLP per expert: experts.<e>.w1 / w3 / w2) reads as the
        # state_dict; tie_embedding as tie_word_embeddings; num_dense_layers, use_expert_bias, norm_topk_prob and
        # routed_scaling_factor honoured (the golden moves, mixcheck passes it); head_dim, a partial rotary factor and
        # another layer kind refused
        mcfg, mw = base("lfm2_moe")
        released = dict(mw)
        for k in [k for k in released if k.endswith(".feed_forward.experts.gate_up_proj")]:
            gu, dn = released.pop(k), released.pop(k.replace("gate_up_proj", "down_proj"))
            F = gu.shape[1] // 2
            for e in range(gu.shape[0]):
                pre = k[:-len("gate_up_proj")] + f"{e}."
                released[pre + "w1.weight"] = gu[e, :F]
                released[pre + "w3.weight"] = gu[e, F:]
                released[pre + "w2.weight"] = dn[e]
        alias = {k: v for k, v in mcfg.items() if k != "tie_word_embeddings"}
        alias["tie_embedding"] = True
        for tag, c, wts in (("list", mcfg, mw), ("released", mcfg, released), ("alias", alias, mw)):
            write(path("lm-" + tag), c, wts)
            golden(path("lm-" + tag), path(f"lm-{tag}.h5"))
        same(path("lm-list.h5"), path("lm-released.h5"), "lfm2_moe: the released layout read as the state_dict")
        same(path("lm-list.h5"), path("lm-alias.h5"), "lfm2_moe: tie_embedding read as tie_word_embeddings")
        passes(path("lm-list.h5"), tmp, "lfm2_moe")
        for tag, over in (("dense1", {"num_dense_layers": 1}), ("nobias", {"use_expert_bias": False}),
                          ("norm", {"norm_topk_prob": False}), ("scale", {"routed_scaling_factor": 2.5})):
            c = dict(mcfg, **over)
            cw = S.init_weights(K.normalise(c), np.random.default_rng(114))
            if tag in ("norm", "scale"):
                cw = mw   # the same weights: the config alone moves the golden
            write(path("lm-" + tag), c, cw)
            golden(path("lm-" + tag), path(f"lm-{tag}.h5"))
            d = differ(path("lm-list.h5"), path(f"lm-{tag}.h5"), f"lfm2_moe {over}")
            passes(path(f"lm-{tag}.h5"), tmp, "lfm2_moe")
            print(f"lfm2_moe: {over} honoured (max |d logits| {d:.3g}), mixcheck passes it")
        for key, value, needle in (("head_dim", 16, "'head_dim' = 16"),
                                   ("partial_rotary_factor", 0.5, "'partial_rotary_factor' = 0.5"),
                                   ("layer_types", ["conv", "sliding_attention", "conv", "full_attention"],
                                    "'layer_types'"),
                                   ("num_dense_layers", 3, "the weights do not match the config")):
            write(path("bad-lm-" + key), dict(mcfg, **{key: value}), mw)
            refused(path("bad-lm-" + key), needle, f"lfm2_moe key {key}")
        # MiniMax: the layout save_pretrained writes and MiniMax-Text-01's (Mixtral's block_sparse_moe.gate and one
        # module per expert, experts.<e>.w1 / w3 / w2, beside the lightning layers' buffers) reads as the state_dict;
        # num_experts as num_local_experts; block_size only upstream's blocking (the golden is the same); the six
        # residual factors honoured (the golden moves, mixcheck passes it); stored slopes that are not the config's,
        # an attn_type_list without layer_types, a sliding window refused
        import linear
        import minimax
        xcfg, xw = base("minimax")
        released = {k: v for k, v in xw.items() if ".mlp." not in k}
        for i in range(xcfg["num_hidden_layers"]):
            pre = f"model.layers.{i}."
            gu, dn = xw[pre + "mlp.experts.gate_up_proj"], xw[pre + "mlp.experts.down_proj"]
            F = gu.shape[1] // 2
            released[pre + "block_sparse_moe.gate.weight"] = xw[pre + "mlp.gate.weight"]
            for e in range(gu.shape[0]):
                q = pre + f"block_sparse_moe.experts.{e}."
                released[q + "w1.weight"], released[q + "w3.weight"], released[q + "w2.weight"] = gu[e, :F], gu[e, F:], dn[e]
            if minimax.kind(xcfg, i) == "lightning":   # the buffers save_pretrained writes
                H = xcfg["num_attention_heads"]
                released[pre + "self_attn.slope_rate"] = linear.lightning_slopes(
                    minimax.lightning_config(xcfg, i)).reshape(H, 1, 1).astype(np.float32)
                for b, shape in (("query_decay", (H, xcfg["block_size"], 1)), ("key_decay", (H, xcfg["block_size"], 1)),
                                 ("diagonal_decay", (1, H, xcfg["block_size"], xcfg["block_size"]))):
                    released[pre + "self_attn." + b] = np.zeros(shape, np.float32)   # dropped: derived upstream
        alias = {k: v for k, v in xcfg.items() if k != "num_local_experts"}
        alias["num_experts"] = xcfg["num_local_experts"]
        for tag, c, wts in (("list", xcfg, xw), ("released", xcfg, released), ("alias", alias, xw),
                            ("block", dict(xcfg, block_size=256), xw),
                            ("mpe", dict(xcfg, max_position_embeddings=10240000), xw)):   # MiniMax-Text-01's
            write(path("mm-" + tag), c, wts)
            golden(path("mm-" + tag), path(f"mm-{tag}.h5"))
        same(path("mm-list.h5"), path("mm-released.h5"), "minimax: the released layout read as the state_dict")
        same(path("mm-list.h5"), path("mm-alias.h5"), "minimax: num_experts read as num_local_experts")
        same(path("mm-list.h5"), path("mm-block.h5"), "minimax: block_size (upstream's blocking) leaves the math")
        # a released max_position_embeddings, far past the attention family's cache limit (65536): the golden's
        # KV cache holds the prompt and its continuation, the logits are the same
        same(path("mm-list.h5"), path("mm-mpe.h5"), "minimax: max_position_embeddings 10240000 (the KV cache length)")
        passes(path("mm-mpe.h5"), tmp, "minimax")
        passes(path("mm-list.h5"), tmp, "minimax")
        for key in ("linear_attn_alpha_factor", "linear_attn_beta_factor", "full_attn_alpha_factor",
                    "full_attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor"):
            over = {key: 2.25}
            write(path("mm-" + key), dict(xcfg, **over), xw)   # the same weights: the config alone moves the golden
            golden(path("mm-" + key), path(f"mm-{key}.h5"))
            d = differ(path("mm-list.h5"), path(f"mm-{key}.h5"), f"minimax {over}")
            passes(path(f"mm-{key}.h5"), tmp, "minimax")
            print(f"minimax: {over} honoured (max |d logits| {d:.3g}), mixcheck passes it")
        wrong = dict(released)
        wrong["model.layers.2.self_attn.slope_rate"] = wrong["model.layers.0.self_attn.slope_rate"]
        write(path("bad-mm-slopes"), xcfg, wrong)
        refused(path("bad-mm-slopes"), "model.layers.2.self_attn.slope_rate", "minimax stored slopes")
        for key, value, needle in (("sliding_window", 4, "'sliding_window' = 4"),
                                   ("layer_types", ["linear_attention", "mamba", "linear_attention", "full_attention"],
                                    "'layer_types'")):
            write(path("bad-mm-" + key), dict(xcfg, **{key: value}), xw)
            refused(path("bad-mm-" + key), needle, f"minimax key {key}")
        write(path("bad-mm-attn_type_list"), dict({k: v for k, v in xcfg.items() if k != "layer_types"},
                                                  attn_type_list=[0, 1, 0, 1]), xw)
        refused(path("bad-mm-attn_type_list"), "'attn_type_list' without 'layer_types'", "minimax attn_type_list")
        # Inkling: layer_types / mlp_layer_types as save_pretrained writes them, and the patterns InklingTextConfig
        # derives (local_layer_ids, dense_mlp_idx) and the attribute_map aliases read alike; the scalar keys honoured
        # (the golden moves, mixcheck passes it); log_scaling_n_floor, shared_expert_sink false, unpadded_vocab_size
        # below vocab_size, another activation, a bad layer kind refused; the multi-token prediction weights dropped
        icfg, iw = base("inkling", vocab_size=256)
        derived = {k: v for k, v in icfg.items() if k not in ("layer_types", "mlp_layer_types")}
        derived.update(local_layer_ids=[0, 2])
        dense_first = dict(icfg, mlp_layer_types=None, dense_mlp_idx=0)   # every layer sparse: other weights
        aliases = {k: v for k, v in icfg.items() if k not in ("sliding_window_size", "conv_kernel_size",
                                                                "n_routed_experts", "logits_mup_width_multiplier",
                                                                "max_position_embeddings")}
        aliases.update(sliding_window=icfg["sliding_window_size"], sconv_kernel_size=icfg["conv_kernel_size"],
                       num_local_experts=icfg["n_routed_experts"],
                       embedding_multiplier=icfg["logits_mup_width_multiplier"],
                       model_max_length=icfg["max_position_embeddings"])
        mtp = dict(iw, **{"model.mtp.0.norm.weight": np.ones(icfg["hidden_size"], np.float32)})
        derived["mlp_layer_types"] = icfg["mlp_layer_types"]
        for tag, c, wts in (("list", icfg, iw), ("derived", derived, iw), ("alias", aliases, iw), ("mtp", icfg, mtp),
                            ("mpe", dict(icfg, max_position_embeddings=131072), iw)):   # the Config's default
            write(path("ik-" + tag), c, wts)
            golden(path("ik-" + tag), path(f"ik-{tag}.h5"))
        same(path("ik-list.h5"), path("ik-derived.h5"), "inkling: local_layer_ids read as layer_types")
        same(path("ik-list.h5"), path("ik-alias.h5"), "inkling: the attribute_map aliases read as their fields")
        same(path("ik-list.h5"), path("ik-mtp.h5"), "inkling: model.mtp.* dropped as upstream ignores it")
        same(path("ik-list.h5"), path("ik-mpe.h5"), "inkling: max_position_embeddings 131072 (the KV cache length)")
        passes(path("ik-mpe.h5"), tmp, "inkling_text", profile="inkling")
        passes(path("ik-list.h5"), tmp, "inkling_text", profile="inkling")
        passes(path("ik-derived.h5"), tmp, "inkling_text", profile="inkling")
        passes(path("ik-alias.h5"), tmp, "inkling_text", profile="inkling")
        write(path("ik-dense-first"), dense_first, S.init_weights(K.normalise(dense_first), np.random.default_rng(3)))
        golden(path("ik-dense-first"), path("ik-dense-first.h5"))
        passes(path("ik-dense-first.h5"), tmp, "inkling_text", profile="inkling")
        for key, value in (("route_scale", 5.0), ("logits_mup_width_multiplier", 1.5), ("rel_extent", 4),
                           ("sliding_window_size", 2), ("rms_norm_eps", 1e-2)):
            over, ow = {key: value}, dict(iw)
            # the relative-logits profiles [d_rel][extent] follow the extent (the full layers' rel_extent, the sliding
            # layers' window): their first columns kept
            for i in {"rel_extent": (1, 3), "sliding_window_size": (0, 2)}.get(key, ()):
                k = f"model.layers.{i}.self_attn.rel_logits_proj.proj"
                ow[k] = np.ascontiguousarray(iw[k][:, :value])
            write(path("ik-" + key), dict(icfg, **over), ow)
            golden(path("ik-" + key), path(f"ik-{key}.h5"))
            d = differ(path("ik-list.h5"), path(f"ik-{key}.h5"), f"inkling {over}")
            passes(path(f"ik-{key}.h5"), tmp, "inkling_text", profile="inkling")
            print(f"inkling: {over} honoured (max |d logits| {d:.3g}), mixcheck passes it")
        # unpadded_vocab_size below vocab_size: InklingForCausalLM's logits are the first 251 columns of the
        # model's; the golden is that model's (embedding and head cut to 251 rows), mixcheck passes it
        write(path("ik-unpadded"), dict(icfg, unpadded_vocab_size=251), iw)
        golden(path("ik-unpadded"), path("ik-unpadded.h5"))
        lu, cu = logits(path("ik-unpadded.h5"))
        lf = logits(path("ik-list.h5"))[0]
        if lu.shape[-1] != 251 or cu["vocab_size"] != 251:
            fail(f"inkling unpadded_vocab_size 251: logits of {lu.shape[-1]} columns, config vocab_size {cu['vocab_size']}")
        elif float(np.max(np.abs(lu - lf[..., :251]))) > 1e-12 * float(np.max(np.abs(lf))):
            fail("inkling unpadded_vocab_size 251: not the first 251 logits of the padded model")
        passes(path("ik-unpadded.h5"), tmp, "inkling_text", profile="inkling")
        for key, value, needle in (("log_scaling_n_floor", 4, "'log_scaling_n_floor' = 4"),
                                   ("shared_expert_sink", False, "'shared_expert_sink' = false"),
                                   # the prompt's ids 200 and 250 are in the padding of a vocabulary cut at 200
                                   ("unpadded_vocab_size", 200, "token id 200 outside [0, vocab_size 200)"),
                                   ("hidden_act", "gelu", "'hidden_act' = \"gelu\""),
                                   ("layer_types", ["hybrid_sliding", "full_attention", "hybrid_sliding", "hybrid"],
                                    "'layer_types'"),
                                   ("mlp_layer_types", ["dense", "moe", "dense", "sparse"], "'mlp_layer_types'")):
            write(path("bad-ik-" + key), dict(icfg, **{key: value}), iw)
            refused(path("bad-ik-" + key), needle, f"inkling key {key}")
        cfg, w = base("mamba2")
        for key, value, needle in (("attn_softcapping", 30.0, "'attn_softcapping' = 30.0"),
                                   ("hidden_act", "gelu", "'hidden_act' = \"gelu\""),
                                   ("quantization_config", {"quant_method": "gptq"}, "'quantization_config'")):
            write(path("bad-" + key), dict(cfg, **{key: value}), w)
            refused(path("bad-" + key), needle, f"key {key}")
        lcfg, lw = base("lfm2")
        for rt in ("yarn", "linear", "dynamic"):
            c = {k: v for k, v in lcfg.items() if k != "rope_theta"}
            c["rope_parameters"] = {"rope_type": rt, "rope_theta": 10000.0, "factor": 2.0}
            write(path("bad-rope-" + rt), c, lw)
            refused(path("bad-rope-" + rt), "'rope_parameters'", f"rope_type {rt}")
        write(path("bad-trunc"), cfg, w)
        st = os.path.join(path("bad-trunc"), "model.safetensors")
        with open(st, "rb") as f:
            raw = f.read()
        with open(st, "wb") as f:
            f.write(raw[:40])
        refused(path("bad-trunc"), "model.safetensors", "a truncated header")
        wrong = dict(w)
        wrong["backbone.layers.0.mixer.D"] = np.zeros(3, np.float32)
        write(path("bad-shape"), cfg, wrong)
        refused(path("bad-shape"), "backbone.layers.0.mixer.D", "a tensor of the wrong shape")
        missing = {k: v for k, v in w.items() if k != "backbone.layers.1.mixer.dt_bias"}
        write(path("bad-missing"), cfg, missing)
        refused(path("bad-missing"), "backbone.layers.1.mixer.dt_bias", "a missing tensor")
        nan = dict(w)
        nan["backbone.layers.2.mixer.A_log"] = w["backbone.layers.2.mixer.A_log"].copy()
        nan["backbone.layers.2.mixer.A_log"][1] = np.nan
        write(path("bad-nan"), cfg, nan)
        refused(path("bad-nan"), "backbone.layers.2.mixer.A_log", "NaN in a weight")
        gone = path("bad-shard")
        shutil.copytree(sh, gone)
        os.remove(os.path.join(gone, "model-00002-of-00002.safetensors"))
        refused(gone, "model-00002-of-00002.safetensors", "a shard the index names")
        with open(os.path.join(path("bad-nan"), "config.json"), "w") as f:
            f.write('{"model_type": "mamba2", ')
        refused(path("bad-nan"), "config.json", "a config.json that is not JSON")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("every detail honoured, every defect refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
