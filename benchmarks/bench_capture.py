"""Memory of capturing a model's heads: certkit's capture (Q, K and the reconstruction check of
every head) against a plain forward pass of the same model (PyTorch's scaled_dot_product_attention,
which never holds the probabilities) and against an eager forward pass that returns every layer's
attention probabilities (output_attentions=True, what keeping them costs).

    python benchmarks/bench_capture.py [--layers 4] [--heads 8] [--lengths 1024,2048,4096,8192]
                                       [--baseline REV] [--baseline-max 2048]

A randomly initialised Llama-style decoder (grouped-query attention, rotary embeddings, d_head 32,
float32) is written with transformers' own config classes to a temporary folder and loaded back
through certkit's local-folder path, as a user's checkpoint would be.  Each measurement runs in a
fresh process; printed: peak resident memory (ru_maxrss) and seconds per mode, and the ratio of
certkit's capture to the plain (sdpa) forward pass.  The probabilities of all layers and heads take
layers x heads x L^2 x 8 bytes in float64 (4 in float32).  With --baseline REV, certkit's capture
also runs from a git worktree of revision REV (e.g. b369996, which kept every probability) for the
lengths up to --baseline-max, side by side in the same run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import torch
from certkit.models import extract as ex
mode, folder, L = sys.argv[1], sys.argv[2], int(sys.argv[3])
model, tok, info = ex.load(folder)
ids = [i % 250 + 3 for i in range(L)]
t = time.perf_counter()
if mode == "capture":
    c = ex.capture(model, info, ids)
    err = float(ex.reconstruction(c).max())
else:
    if mode == "forward":
        model.set_attn_implementation("sdpa")
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False, output_attentions=mode == "attentions")
    err = None
seconds = time.perf_counter() - t
print(json.dumps({{"rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "seconds": seconds,
                   "err": err}}))
"""


def measure(mode, folder, L, root=ROOT):
    r = subprocess.run([sys.executable, "-c", CHILD.format(root=root), mode, folder, str(L)],
                       capture_output=True, text=True)
    if r.returncode:
        return {"rss_gib": float("nan"), "seconds": float("nan"), "err": None, "failed": r.stderr.strip()[-300:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--lengths", default="1024,2048,4096,8192")
    p.add_argument("--baseline", metavar="REV", help="also run certkit's capture from this git revision")
    p.add_argument("--baseline-max", type=int, default=2048, help="largest L for the baseline (default 2048)")
    a = p.parse_args()
    from transformers import LlamaConfig, LlamaForCausalLM
    import torch
    torch.manual_seed(0)
    lengths = [int(x) for x in a.lengths.split(",")]
    base = None
    if a.baseline:
        base = tempfile.mkdtemp(prefix="certkit-bench-capture-baseline-")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", base, a.baseline], check=True,
                       capture_output=True)
    try:
        with tempfile.TemporaryDirectory(prefix="certkit-bench-capture-") as folder:
            LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=32 * a.heads, num_hidden_layers=a.layers,
                                         num_attention_heads=a.heads, num_key_value_heads=max(1, a.heads // 2),
                                         intermediate_size=64 * a.heads, max_position_embeddings=max(lengths),
                                         attn_implementation="eager")).save_pretrained(folder)
            print(f"Llama-style decoder: {a.layers} layers x {a.heads} heads, d_head 32, float32")
            print(f"{'L':>6} {'probs f64':>10} {'forward (sdpa)':>16} {'output_attentions':>20} {'certkit capture':>18} "
                  f"{'capture/forward':>16}" + (f" {'baseline ' + a.baseline[:10]:>22}" if base else "") + "  max|A-P|")
            for L in lengths:
                probs = a.layers * a.heads * L * L * 8 / 2**30
                m = {mode: measure(mode, folder, L) for mode in ("forward", "attentions", "capture")}
                if base and L <= a.baseline_max:
                    m["baseline"] = measure("capture", folder, L, base)
                cell = {k: f"{v['rss_gib']:.2f} GiB {v['seconds']:5.1f} s" for k, v in m.items()}
                err = m["capture"]["err"]
                print(f"{L:>6} {probs:>7.2f} GiB {cell['forward']:>16} {cell['attentions']:>20} {cell['capture']:>18} "
                      f"{m['capture']['rss_gib'] / m['forward']['rss_gib']:>15.2f}x"
                      + (f" {cell.get('baseline', '-'):>22}" if base else "")
                      + f"  {err if err is None else f'{err:.1e}'}")
                for k, v in m.items():
                    if "failed" in v:
                        print(f"       {k} failed: {v['failed']}")
    finally:
        if base:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", base], capture_output=True)


if __name__ == "__main__":
    main()
