"""Sweeps on Dask distributed (certkit.parallel): the same results as the process pool and the
serial run, and nothing lost when a worker dies mid-run."""
import json
import os
import sys

import pytest

from certkit import parallel
from certkit.errors import UserError

from paths import ROOT

distributed = pytest.importorskip("distributed")
ENV_BEFORE = os.environ.get("OMP_NUM_THREADS")


@pytest.mark.parametrize("text,want", [(None, None), ("local", ("local", 2)), ("local:3", ("local", 3)),
                                       ("tcp://10.0.0.1:8786", ("address", "tcp://10.0.0.1:8786")),
                                       ("host:8786", ("address", "host:8786"))])
def test_parse_scheduler(text, want):
    assert parallel.parse_scheduler(text) == want


@pytest.mark.parametrize("text", ["local:0", "local:x", "nowhere"])
def test_bad_scheduler(text):
    with pytest.raises(UserError, match="scheduler"):
        parallel.parse_scheduler(text)


def square_or_die(task):
    """Squares task["x"]; the first time a task with die=True runs, its worker process exits."""
    marker = task.get("marker")
    if marker and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)                     # the worker dies holding this task
    return task["x"] ** 2


def test_a_killed_worker_loses_nothing(tmp_path):
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    tasks = [{"x": x} for x in range(6)] + [{"x": 10, "marker": str(tmp_path / "died")}]
    got = sorted(parallel.run(square_or_die, tasks, scheduler="local:2"))
    assert (tmp_path / "died").exists()                      # a worker did die mid-run
    assert got == sorted([x * x for x in range(6)] + [100])  # and every task still has its result


def test_calibrate_on_a_local_cluster_equals_the_process_pool(tmp_path):
    """Both routes run one BLAS thread per worker process: identical numbers, identical bytes."""
    pytest.importorskip("transformers")
    from certkit import calibration as calibrate
    grid = dict(layers=[0], heads=[0, 1], lengths=[16], multipliers=["1"], eps=["1/4"])
    a = calibrate.calibrate(out=str(tmp_path / "serial"), workers=2, **grid)
    b = calibrate.calibrate(out=str(tmp_path / "dask"), scheduler="local:2", **grid)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert len(a.rows) == 2 and strip(a.rows) == strip(b.rows)
    for folder, _, files in os.walk(tmp_path / "serial" / "certificates"):
        for f in files:
            twin = os.path.join(str(tmp_path / "dask"), os.path.relpath(os.path.join(folder, f), str(tmp_path / "serial")))
            assert open(os.path.join(folder, f), "rb").read() == open(twin, "rb").read()
    meta = json.load(open(tmp_path / "dask" / "meta.json"))
    assert meta["grid"]["lengths"] == [16]
    assert os.environ.get("OMP_NUM_THREADS") == ENV_BEFORE          # the caller's environment restored


def test_model_certify_on_a_local_cluster_equals_the_serial_run(tmp_path):
    pytest.importorskip("transformers")
    import subprocess
    from transformers import LlamaConfig, LlamaForCausalLM
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 num_key_value_heads=1, intermediate_size=64,
                                 max_position_embeddings=128)).save_pretrained(str(tmp_path / "llama"))
    (tmp_path / "ids.txt").write_text(" ".join(str(i % 64) for i in range(48)))
    base = [sys.executable, "-m", "certkit", "certify", "--model", str(tmp_path / "llama"), "--tokens",
            str(tmp_path / "ids.txt"), "--length", "48", "--eps", "1/4", "--peers", "none"]
    for out, extra in (("serial", ["--workers", "2"]), ("dask", ["--scheduler", "local:2"])):
        r = subprocess.run(base + ["--out", str(tmp_path / out)] + extra, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    rows = {o: [{k: v for k, v in r.items() if k != "seconds"}
                for r in json.load(open(tmp_path / o / "summary.json"))["rows"]] for o in ("serial", "dask")}
    assert len(rows["serial"]) == 2 and rows["serial"] == rows["dask"]
    for h in ("l0-h0", "l0-h1"):
        for side in ("lower", "upper"):
            name = f"eps-1_4.{side}.json"
            assert (tmp_path / "serial" / h / name).read_bytes() == (tmp_path / "dask" / h / name).read_bytes()


def test_the_worker_settings_file_matches_the_local_cluster_settings():
    """docs/dask-workers.yaml (for workers started by hand) and LOCAL_WORKERS (--scheduler local)
    are the same settings, and the file, read by Dask, drops the nanny's malloc variable."""
    yaml = pytest.importorskip("yaml")
    dask = pytest.importorskip("dask")
    from certkit.parallel import LOCAL_WORKERS
    path = ROOT / "docs" / "dask-workers.yaml"
    flat = {}

    def walk(d, prefix):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, prefix + k + ".")
            else:
                flat[prefix + k] = v
    walk(yaml.safe_load(path.read_text()), "")
    assert flat == LOCAL_WORKERS
    with dask.config.set(LOCAL_WORKERS):
        env = dask.config.get("distributed.nanny.pre-spawn-environ")
        assert env["MALLOC_TRIM_THRESHOLD_"] is None         # the nanny skips None (unsets it)
        assert str(env["OMP_NUM_THREADS"]) == "1" and not dask.config.get("distributed.worker.profile.enabled")
