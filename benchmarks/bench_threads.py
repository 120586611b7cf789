"""A single-process certify on a busy machine: certkit's default (one BLAS thread, certkit.threads)
against the same run pinned to one thread by the environment, and against a BLAS pool of one
thread per core (CERTKIT_THREADS = cores: what every single-process run did before).

    python benchmarks/bench_threads.py [--busy 2] [--repeats 3] [--spec gaussian:n=512,d=32,beta=2,seed=0]

Busy processes (pure-Python loops, one per --busy) run beside every measurement.  Runs are
interleaved (A B C, A B C, ...) and the medians compared as ratios to the environment-pinned run.
Goal: default / pinned <= 1.2.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUSY = "import time\nt = time.time()\nwhile time.time() - t < 3600:\n    pass\n"


def run(spec, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "CERTKIT_THREADS"}
    env.update(env_extra, PYTHONPATH=ROOT)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "certkit", "certify", "--synthetic", spec, "--eps", "1/4",
                        "--peers", "none", "--out", out], check=True, env=env, capture_output=True)
        return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside the runs (default 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spec", default="gaussian:n=512,d=32,beta=2,seed=0")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    one = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    cases = {"default (certkit.threads)": {}, "pinned by the environment": one,
             f"CERTKIT_THREADS={cores} (before: a pool per core)": {"CERTKIT_THREADS": str(cores)}}
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(a.busy)]
    try:
        times = {c: [] for c in cases}
        for _ in range(a.repeats):
            for c, env in cases.items():
                times[c].append(run(a.spec, env))
    finally:
        for p in busy:
            p.kill()
    base = statistics.median(times["pinned by the environment"])
    print(f"certify --synthetic {a.spec}, {a.busy} busy processes, {cores} cores, {a.repeats} interleaved runs each")
    for c, ts in times.items():
        m = statistics.median(ts)
        print(f"  {c:<45} median {m:7.2f} s   ratio {m / base:5.2f}   runs {', '.join(f'{t:.2f}' for t in ts)}")


if __name__ == "__main__":
    main()
