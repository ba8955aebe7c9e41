"""The CPU backend's sliding attention window against Hugging Face transformers: random tiny
Mistral models whose window is shorter than the sequence (and one longer: full attention), Qwen2
and Qwen3 with use_sliding_window (the window only on layers >= max_window_layers, or as
layer_types lists them). transformers keeps key k for a query at p when p - window < k <= p
(masking_utils.sliding_window_overlay: kv_idx > q_idx - sliding_window, on top of causal)."""
import json

import numpy as np
import pytest

from hfref import hf_generate, hf_load, make_random_model, rel_l2, run_generate

TOL = 1e-3
STEPS = 8


def prompt_ids(n=40, seed=3):
    return [int(x) for x in np.random.default_rng(seed).integers(0, 256, n)]


def check_same(ours, ref, what):
    (g1, l1), (g2, l2) = ours, ref
    assert len(l1) == len(l2) == STEPS, what
    errs = [rel_l2(l1[i], l2[i]) for i in range(STEPS)]
    assert max(errs) < TOL, f"{what}: logits differ from HF, worst step {int(np.argmax(errs))}: {max(errs):.3g}"
    assert g1 == g2, f"{what}: tokens differ: ours {g1}, HF {g2}"


def gen(d, prompt, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    return run_generate(d, prompt, STEPS, out_dir, ignore_eos=True)


def hf_forward(model, prompt, gen_ids):
    """transformers' logits for the positions that predicted gen_ids, from one forward pass of
    prompt + gen_ids without a cache (the mask itself, no cache eviction); greedy tokens."""
    import torch

    ids = torch.tensor([list(prompt) + list(gen_ids)])
    with torch.no_grad():
        logits = model(ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[0].float().numpy()
    logits = logits[len(prompt) - 1:len(prompt) - 1 + len(gen_ids)]
    return [int(i) for i in logits.argmax(axis=1)], logits


def both(d, prompt, out_dir, window=None):
    """Ours against transformers' forward over the same tokens; and, for windows of 2 and more,
    against model.generate too (with window 1, transformers 5.17's sliding-window cache keeps
    window - 1 = 0 past keys and its generate disagrees with its own forward pass from the first
    decode step, so the forward pass is the reference there)."""
    ours = gen(d, prompt, out_dir)
    model = hf_load(d)
    ref = hf_forward(model, prompt, ours[0])
    if window is None or window > 1:
        check_same(ours, hf_generate(model, prompt, STEPS, ignore_eos=True), "(model.generate)")
    return ours, ref


def edit_config(d, **kv):
    """Rewrites keys of d/config.json (value None deletes the key)."""
    p = d / "config.json"
    cfg = json.loads(p.read_text())
    for k, v in kv.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    p.write_text(json.dumps(cfg))


@pytest.mark.parametrize("window", [1, 7, 16])
def test_mistral_window_matches_hf(window, tmp_path):
    d = make_random_model("mistral", tmp_path / "m", dtype="float32", seed=window, sliding_window=window)
    assert json.loads((d / "config.json").read_text())["sliding_window"] == window
    prompt = prompt_ids()
    # every step's query sees past the window (2 layers: the last row depends on 2*window - 1 keys)
    assert len(prompt) > 2 * window
    ours, ref = both(d, prompt, tmp_path / "w", window)
    check_same(ours, ref, f"mistral window {window}")
    # the same weights without the window: the window must change the result, else this test
    # could not see it ignored
    edit_config(d, sliding_window=0)  # parsed as "none" (transformers would divide by nothing)
    full = gen(d, prompt, tmp_path / "f")
    assert min(rel_l2(ours[1][i], full[1][i]) for i in range(STEPS)) > 10 * TOL


def test_mistral_window_past_the_sequence_is_full_attention(tmp_path):
    prompt = prompt_ids()
    window = len(prompt) + STEPS + 5  # longer than anything attended
    d = make_random_model("mistral", tmp_path / "m", dtype="float32", seed=5, sliding_window=window)
    ours, ref = both(d, prompt, tmp_path / "w")
    check_same(ours, ref, f"mistral window {window}")
    edit_config(d, sliding_window=None)  # absent: MistralConfig's default, 4096, still past the end
    _, l_absent = gen(d, prompt, tmp_path / "a")
    d2 = make_random_model("mistral", tmp_path / "n", dtype="float32", seed=5)  # sliding_window null
    assert json.loads((d2 / "config.json").read_text())["sliding_window"] is None
    full, ref_full = both(d2, prompt, tmp_path / "n")
    check_same(full, ref_full, "mistral without a window")
    assert np.array_equal(ours[1], full[1]), "a window past the sequence is not full attention"
    assert np.array_equal(l_absent, full[1])


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
@pytest.mark.parametrize("layer_types", [True, False])
def test_qwen_window_on_upper_layers_matches_hf(arch, layer_types, tmp_path):
    """max_window_layers=1 of 2: layer 0 full, layer 1 windowed. transformers 5 saves layer_types;
    without it the loader must derive the same from max_window_layers."""
    d = make_random_model(arch, tmp_path / "m", dtype="float32", seed=11, use_sliding_window=True,
                          sliding_window=6, max_window_layers=1)
    cfg = json.loads((d / "config.json").read_text())
    if layer_types:
        assert cfg["layer_types"] == ["full_attention", "sliding_attention"]
    else:
        edit_config(d, layer_types=None)
    prompt = prompt_ids(seed=4)
    ours, ref = both(d, prompt, tmp_path / "w")
    check_same(ours, ref, f"{arch} window 6 from layer 1 (layer_types {layer_types})")
    # the per-layer choice matters: the window on both layers, and on none, differ from it
    edit_config(d, layer_types=None, max_window_layers=0)
    _, l_all = gen(d, prompt, tmp_path / "all")
    edit_config(d, use_sliding_window=False)
    _, l_none = gen(d, prompt, tmp_path / "none")
    assert min(rel_l2(ours[1][i], l_all[i]) for i in range(STEPS)) > 10 * TOL
    assert min(rel_l2(ours[1][i], l_none[i]) for i in range(STEPS)) > 10 * TOL
