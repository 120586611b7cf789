"""The same certificate bytes whatever the BLAS thread count of the machine, --workers or
--scheduler (certkit.threads: every process certkit runs computes with one BLAS thread unless
CERTKIT_THREADS says otherwise).  Before, the serial run used every core's BLAS thread and the
workers one, and the witness floats of upper certificates differed in their last bits."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT



def certkit(args, threads=None):
    """certkit in a fresh process; threads: the machine's BLAS threads (the *_NUM_THREADS variables)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "CERTKIT_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    if threads is not None:
        env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    p = subprocess.run([sys.executable, "-m", "certkit", *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return p


def files_of(folder):
    """{relative path: bytes} of every certificate and sidecar under folder (summaries and a head's
    rows.json hold timings)."""
    out = {}
    for dirpath, _, names in os.walk(folder):
        for n in names:
            if not n.startswith("summary.") and not n.startswith(".") and n != "rows.json":   # rows hold timings
                path = os.path.join(dirpath, n)
                out[os.path.relpath(path, folder)] = Path(path).read_bytes()
    return out


def test_certificates_do_not_depend_on_the_machines_blas_threads(tmp_path):
    """n = 512: large enough for OpenBLAS to use two threads when it may (the upper certificate's
    factor sidecars differed between one and two threads before)."""
    spec = ["certify", "--synthetic", "gaussian:n=512,d=32,beta=2,seed=0", "--eps", "1/4", "--peers", "none"]
    certkit(spec + ["--out", tmp_path / "one"], threads=1)
    certkit(spec + ["--out", tmp_path / "two"], threads=2)
    one, two = files_of(tmp_path / "one"), files_of(tmp_path / "two")
    assert len(one) >= 4 and one == two


def test_model_certificates_are_the_same_serial_workers_dask_and_any_threads(tmp_path):
    pytest.importorskip("distributed")
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=256, initializer_range=0.1)).save_pretrained(tmp_path / "llama")
    (tmp_path / "ids.txt").write_text(" ".join(str((7 * i) % 64) for i in range(160)))
    base = ["certify", "--model", tmp_path / "llama", "--tokens", tmp_path / "ids.txt", "--length", 160,
            "--heads", "0,3", "--eps", "1/4", "--peers", "svd"]
    runs = {"serial, 2 threads": ([], 2), "serial, 1 thread": ([], 1), "--workers 2": (["--workers", 2], 2),
            "--scheduler local:2": (["--scheduler", "local:2"], None)}
    got = {}
    for i, (name, (extra, threads)) in enumerate(runs.items()):
        certkit(base + ["--out", tmp_path / f"o{i}"] + extra, threads=threads)
        got[name] = files_of(tmp_path / f"o{i}")
        rows = json.loads((tmp_path / f"o{i}" / "summary.json").read_text())["rows"]
        assert [r["head"] for r in rows] == ["l0-h0", "l0-h3"]
    first = got["serial, 2 threads"]
    assert len(first) >= 8
    for name, files in got.items():
        assert files == first, f"{name}: {sorted(set(files) ^ set(first)) or 'same names, other bytes'}"


def test_compare_writes_the_same_bytes_serial_with_workers_and_on_dask(tmp_path):
    """certkit compare: the same certificates (and the same certified numbers) serially, with
    --workers 2 and on a local Dask cluster."""
    pytest.importorskip("distributed")
    base = ["compare", "--synthetic", "gaussian:n=96,d=8,beta=1/2,seed=1,mask=causal", "--synthetic",
            "clustered:n=64,d=8,seed=2,mask=causal",
            "--method", "quant:int8,fp8;lowrank:k=2;topk:k=8;evict:sinks=2,window=16", "--eps", "1/10"]
    got, numbers = {}, {}
    for name, extra in (("serial", []), ("workers", ["--workers", 2]), ("dask", ["--scheduler", "local:2"])):
        certkit(base + ["--out", tmp_path / name] + extra, threads=2)
        got[name] = files_of(tmp_path / name)
        rows = json.loads((tmp_path / name / "summary.json").read_text())["rows"]
        numbers[name] = [(r["head"], r["method"], r["certified"]) for r in rows]
    assert len(got["serial"]) >= 10 and all(c for _, _, c in numbers["serial"])
    for name in ("workers", "dask"):
        assert got[name] == got["serial"], f"{name}: {sorted(set(got[name]) ^ set(got['serial'])) or 'other bytes'}"
        assert numbers[name] == numbers["serial"]
