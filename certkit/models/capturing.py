"""Q and K (and V, W_O) of a transformer's layers, captured during one forward pass exactly as the
model's eager code puts them into the scores (certkit.models): after rotary embeddings, the shared
key head of grouped-query attention, in row blocks at long contexts; each layer's scale, additive
mask and position bias checked against what the family's code states, and each head's float64
rebuild (certkit.models.rebuild) checked against the model's own probabilities as they are computed
(the reconstruction check).  Routes: the module-level eager_attention_forward wrapped ("interface"),
or forward hooks (MPNet, BLOOM)."""
import contextlib
import inspect
import sys

import numpy as np

from ..head import RowMask
from . import families as fam
from .files import ModelError
from .rebuild import head

@contextlib.contextmanager
def _softmax_at_input_precision(on):
    """With on: torch's softmax keeps a float64 input in float64 even when the caller asks for
    float32 (the eager code of GPT-NeoX, Llama, Mistral, Qwen2 and BLOOM does, which would put a
    float32 floor under the float64 check).  Only the float64 check turns it on."""
    if not on:
        yield
        return
    import torch
    import torch.nn.functional as F
    orig = F.softmax

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        if dtype is not None and input.dtype == torch.float64:
            dtype = None
        return orig(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
    F.softmax = softmax
    try:
        yield
    finally:
        F.softmax = orig


def _bound(module, args, kwargs):
    """The arguments of a module's forward call by name."""
    b = inspect.signature(module.forward).bind_partial(*args, **kwargs)
    return b.arguments


ROW_BLOCK = 1 << 24    # entries (heads x rows x keys) of the attention one eager call may materialise


@contextlib.contextmanager
def recording(model, info, want, on_layer, on_probs):
    """During the forward pass, for each layer in `want`: on_layer(layer, {q [H, n, d], k [Hkv, n, d],
    scale, mask (additive or None), bias (None or [H, n, n])}) with the tensors the model's eager
    code uses (torch, batch element 0), then on_probs(layer, rows, P) with the model's own
    attention probabilities P [H, len(rows), n] of the query rows `rows`, block after block.

    In the eight families with a module-level eager_attention_forward, every layer's attention runs
    in row blocks of at most ROW_BLOCK entries: the model's own function on a slice of the query
    rows (and of the additive mask), the outputs concatenated.  Softmax is row-wise, so each row is
    computed by the same code as without blocks, and no layer ever materialises H x n x n scores at
    long contexts.  Nothing is kept here: what the callbacks do not keep is freed block by block."""
    f = fam.FAMILIES[info["family"]]
    mods = f.attention_modules(model.base_model)
    layer_of = {id(m): i for i, m in enumerate(mods)}
    undo, hooks = [], []
    try:
        if f.route == "interface":
            _wrap_eager_functions(mods, layer_of, want, on_layer, on_probs, undo)
        else:
            _hook_layers(f, info, mods, layer_of, want, on_layer, on_probs, hooks)
        yield
    finally:
        for h in hooks:
            h.remove()
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)


def _wrap_eager_functions(mods, layer_of, want, on_layer, on_probs, undo):
    """The "interface" route: each module-level eager_attention_forward of the attention modules mods
    replaced by one that reports the layer's tensors and calls the original on blocks of query rows
    (undo: appended the (object, attribute, value) that restore them)."""
    import torch
    for mod in {sys.modules[type(m).__module__] for m in mods}:
        orig = mod.eager_attention_forward

        def wrapped(module, query, key, value, attention_mask, *args, orig=orig, **kwargs):
            l = layer_of.get(id(module))
            if l in want:
                s = kwargs.get("scaling", args[0] if args else None)
                on_layer(l, {"q": query[0], "k": key[0], "v": value[0], "mask": attention_mask, "bias": None,
                             "scale": float(query.size(-1) ** -0.5 if s is None else s)})
            n = query.shape[2]
            step = max(1, ROW_BLOCK // (query.shape[1] * key.shape[2]))
            outs = []
            for r in range(0, n, step):
                rows = slice(r, min(r + step, n))
                m = attention_mask
                if m is not None and m.dim() == 4 and m.shape[2] > 1:
                    m = m[:, :, rows]
                o, P = orig(module, query[:, :, rows], key, value, m, *args, **kwargs)
                if l in want:
                    on_probs(l, rows, P[0])
                outs.append(o)
                del P
            return (outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)), None
        mod.eager_attention_forward = wrapped
        undo.append((mod, "eager_attention_forward", orig))
    for m in mods:                       # GPT-2's reordered path: the same scores, through eager
        if getattr(m, "reorder_and_upcast_attn", False):
            m.reorder_and_upcast_attn = False
            undo.append((m, "reorder_and_upcast_attn", True))


def _hook_layers(f, info, mods, layer_of, want, on_layer, on_probs, hooks):
    """The "mpnet" and "bloom" routes (inline attention): forward hooks on the projections and on each
    wanted layer's attention module, reporting the whole layer as one block (hooks: appended each
    hook as it is registered)."""
    H, d = info["heads"], info["d_head"]

    def whole_layer(mod_, rec, probs):        # inline attention: one block, all the layer's rows
        l = layer_of[id(mod_)]
        on_layer(l, rec)
        rec.clear()
        on_probs(l, slice(0, probs.shape[2]), probs[0])
    for l, m in enumerate(mods):
        if l not in want:
            continue
        rec = {}
        if f.route == "mpnet":
            def proj(name, rec=rec):
                return lambda mod_, a, o: rec.__setitem__(name, o[0].reshape(o.shape[1], H, d).transpose(0, 1))
            hooks += [m.q.register_forward_hook(proj("q")), m.k.register_forward_hook(proj("k")),
                      m.v.register_forward_hook(proj("v"))]

            def after(mod_, args, kwargs, out, rec=rec):
                a = _bound(mod_, args, kwargs)
                pb = a.get("position_bias")
                rec.update(mask=a.get("attention_mask"), bias=None if pb is None else pb[0],
                           scale=1.0 / float(np.sqrt(d)))
                whole_layer(mod_, rec, out[1])
        else:                             # bloom: fused projections, ALiBi handed in as `alibi`
            def fused(mod_, a, o, rec=rec):
                x = o[0].view(o.shape[1], H, 3, d)
                rec.update(q=x[:, :, 0].transpose(0, 1), k=x[:, :, 1].transpose(0, 1), v=x[:, :, 2].transpose(0, 1))
            hooks.append(m.query_key_value.register_forward_hook(fused))

            def after(mod_, args, kwargs, out, rec=rec):
                a = _bound(mod_, args, kwargs)
                alibi = a["alibi"].view(-1, H, *a["alibi"].shape[1:])[0]          # [H, 1, N]
                rec.update(mask=a.get("attention_mask"), scale=float(mod_.inv_norm_factor),
                           bias=alibi * float(mod_.beta))
                whole_layer(mod_, rec, out[1])
        hooks.append(m.register_forward_hook(after, with_kwargs=True))


@contextlib.contextmanager
def _eager_eval(model):
    """The model in eval mode and eager attention for the duration (both restored afterwards)."""
    config = model.config
    before = getattr(config, "_attn_implementation", "eager")
    training = model.training
    if before != "eager":
        model.set_attn_implementation("eager")
    model.eval()
    try:
        yield
    finally:
        model.train(training)
        if before != "eager":
            model.set_attn_implementation(before)


def _np(t):
    import torch
    return t.detach().to(torch.float64).cpu().numpy()


def capture(model, info, ids, pad=0, layers=None, progress=None):
    """Run the model on one sequence (plus `pad` padding tokens) and capture the requested layers
    (None: all).  Returns a dict: layers (the captured layer indices), Q [layers, H, L, d], V [layers, Hkv,
    L+pad, d_v], WO (per layer the output projection, H d_v x d_model), key_layout (llama.cpp-rope or hf), K
    [layers, Hkv, L+pad, d] (float64, exactly the model's floats), errors [layers, H] (the
    reconstruction check: max |A - P| of each head, see reconstruction()), bias [H, L, L+pad] or None
    (the same for every layer), keep [L+pad] bool (False on padding), masks (a RowMask or None per
    layer), betas (the model's exact scale per layer), scales (the float scale it used), kv_map
    (query head -> key head), d_head, model, family, length L, dtype.  ModelError when the model's
    additive mask, bias or scale is not what the family's code says (certkit then refuses rather
    than certify another matrix).  progress(layer), if given, is called as each layer is done.

    Each layer is checked while the forward pass runs, block of query rows after block (see
    recording), and no probabilities are kept: the memory is Q and K plus one block of at most
    ROW_BLOCK probabilities, not layers x H x L^2 floats."""
    import torch
    f = fam.FAMILIES[info["family"]]
    want = list(range(info["layers"])) if layers is None else sorted(set(int(l) for l in layers))
    L, H, Hkv, d = len(ids), info["heads"], info["kv_heads"], info["d_head"]
    n = L + pad
    pad_id = getattr(model.config, "pad_token_id", None)
    pad_id = 0 if pad_id is None else int(pad_id)
    x = torch.tensor([list(ids) + [pad_id] * pad])
    attn = torch.tensor([[1] * L + [0] * pad])
    keep = np.array([True] * L + [False] * pad)
    out = _empty_capture(f, model, info, want, L, keep)
    heads_of = {}                               # layer -> its Heads, from on_layer until all its rows are checked
    checked = dict.fromkeys(want, 0)            # layer -> query rows checked

    def on_layer(l, r):
        q, k, v = _np(r["q"]), _np(r["k"]), _np(r["v"])
        if q.shape != (H, n, d) or k.shape != (Hkv, n, d) or v.shape[:2] != (Hkv, n):
            raise ModelError(f"{info['name']}: layer {l}: captured shapes Q {q.shape}, K {k.shape}, V {v.shape}; "
                             f"expected ({H}, {n}, {d}), ({Hkv}, {n}, {d}), ({Hkv}, {n}, d_v)")
        mask, beta = _mask_and_scale(f, model, info, l, r, keep, L)
        if r.get("bias") is not None:
            b = np.broadcast_to(_np(r["bias"]), (H, n, n))[:, :L].copy()
            if out["bias"] is None:
                out["bias"] = b
            elif not np.array_equal(b, out["bias"]):
                raise ModelError(f"{info['name']}: layer {l}: a position bias that differs between layers")
        i = want.index(l)
        out["Q"][i], out["K"][i], out["masks"][i], out["betas"][i], out["scales"][i] = q[:, :L], k, mask, beta, r["scale"]
        out["V"][i] = v
        out["errors"][i] = np.zeros(H)
        heads_of[l] = [head(out, l, h) for h in range(H)]

    def on_probs(l, rows, P):
        i = want.index(l)
        if l not in heads_of or tuple(P.shape) != (H, rows.stop - rows.start, n):
            raise ModelError(f"{info['name']}: layer {l}: captured probabilities of shape {tuple(P.shape)} for "
                             f"rows {rows.start}..{rows.stop - 1}; expected ({H}, {rows.stop - rows.start}, {n})")
        real = slice(rows.start, min(rows.stop, L))            # rows beyond L are padded queries
        if real.start < real.stop:
            P = P[:, :real.stop - real.start]
            e = out["errors"][i]
            for h, hd in enumerate(heads_of[l]):
                e[h] = max(e[h], reconstruction_diff(hd, P[h], real))
            checked[l] += real.stop - real.start
        if checked[l] == L:
            del heads_of[l]
            if progress is not None:
                progress(l)

    is64 = next(model.parameters()).dtype == torch.float64
    with _eager_eval(model), recording(model, info, set(want), on_layer, on_probs), \
            _softmax_at_input_precision(is64), \
            torch.no_grad():
        model(input_ids=x, attention_mask=attn, output_attentions=f.route == "mpnet",
              **({"use_cache": False} if f.decoder else {}))
    missing = [l for l in want if checked[l] != L]
    if missing:
        raise ModelError(f"{info['name']}: layer {missing[0]}: the attention was not captured (an attention path "
                         f"certkit does not know; family {f.name})")
    for key in ("Q", "K", "V", "errors"):
        out[key] = np.stack(out[key])
    return out


def _empty_capture(f, model, info, want, L, keep):
    """The dict capture() returns, before the forward pass: what the model and the input say (layers,
    keep, kv_map, d_head, model, family, length, dtype, WO, key_layout; bias None), and a slot per
    wanted layer for what each layer's pass fills (Q, K, V, masks, betas, scales, errors)."""
    H, Hkv, d = info["heads"], info["kv_heads"], info["d_head"]
    out = {"layers": want, "bias": None, "keep": keep, "kv_map": [h // (H // Hkv) for h in range(H)], "d_head": d,
           "model": info["name"], "family": f.name, "length": L, "dtype": info.get("dtype")}
    out["WO"] = fam.output_projection(f, model.base_model, want)   # float64 copies (H d_v x d_model each)
    out["key_layout"] = "llama.cpp-rope" if f.interleaved_keys else "hf"
    for key in ("Q", "K", "V", "masks", "betas", "scales", "errors"):
        out[key] = [None] * len(want)           # filled per layer as the model computes it
    return out


def _mask_and_scale(f, model, info, l, r, keep, L):
    """(RowMask or None, exact beta) of layer l as the family's code states them, checked against what
    the model used: its additive mask r["mask"] (_check_mask) and its float scale r["scale"]."""
    mask = _row_mask(f, model.config, l, L)
    _check_mask(info, l, r["mask"], mask, keep, L)
    beta = fam.scale(f, model.config, l, info["d_head"])
    if abs(float(beta) - r["scale"]) > 1e-12 * abs(r["scale"]):
        raise ModelError(f"{info['name']}: layer {l}: the model scales its scores by {r['scale']!r}, not by "
                         f"{beta} as the {f.name} family's code does (a config option certkit does not know)")
    return mask, beta


def reconstruction_diff(h, P, rows=None):
    """max |A_rows - P| for the float64 attention A of Head h (as head.attention() computes it, in row
    blocks) on the query rows `rows` (a slice; None: all) and the model's probabilities P of those
    rows (a torch tensor [len(rows), N])."""
    from ..head import BLOCKED, softmax_rows
    rows = slice(0, h.n) if rows is None else rows
    step = max(1, BLOCKED // (4 * h.N))
    worst = 0.0
    for s in range(rows.start, rows.stop, step):
        r = slice(s, min(s + step, rows.stop))
        got = _np(P[r.start - rows.start:r.stop - rows.start])
        worst = max(worst, float(np.max(np.abs(softmax_rows(h.logits(rows=r)) - got))))
    return worst


def _row_mask(f, config, layer, L):
    if not f.decoder:
        return None
    w = fam.window(f, config, layer)
    return RowMask(0, int(w)) if w is not None and w < L else RowMask(0)


def _check_mask(info, layer, additive, mask, keep, L):
    """The keys the model lets each real query see (additive mask > min/2) must be exactly those of
    the RowMask and the kept columns."""
    N = keep.size
    expected = np.broadcast_to(keep, (L, N)) if mask is None else mask.visible(np.arange(L), N) & keep
    if additive is None:
        seen = np.ones((L, N), dtype=bool)
    else:
        import torch
        a = additive[0] if additive.dim() == 4 else additive          # batch element 0
        while a.dim() > 2:
            if a.shape[0] != 1:
                raise ModelError(f"{info['name']}: layer {layer}: a per-head attention mask, which certkit does not read")
            a = a[0]
        if a.dtype == torch.bool:
            seen = a.cpu().numpy()
        else:
            seen = (a > torch.finfo(a.dtype).min / 2).cpu().numpy()
        seen = np.broadcast_to(seen, (max(seen.shape[0], L), N))[:L]
    if not np.array_equal(seen, expected):
        i, j = map(int, np.argwhere(seen != expected)[0])
        raise ModelError(f"{info['name']}: layer {layer}: the model's attention mask lets query {i} "
                         f"{'see' if seen[i, j] else 'not see'} key {j}, unlike {mask or 'no mask'} with padding "
                         f"dropped")
