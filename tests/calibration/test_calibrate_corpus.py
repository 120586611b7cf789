"""The paper's study on your corpus: `calibrate --text FILE | --tokens FILE` computes the grid on
the first window of each length of your input (the tokenizer's own special tokens), records the
input's sha256, and refuses to mix two inputs in one folder."""
import hashlib
import json

import pytest

pytest.importorskip("transformers")

from certkit.cli import main  # noqa: E402
from certkit.models import extract as ex  # noqa: E402

GRID = ["--layers", "0", "--heads", "2", "--lengths", "16", "--multipliers", "1", "--eps", "1/4", "--no-plots"]


def test_calibrate_on_a_text_file(tmp_path, capsys):
    text = ex.builtin_text()[0][30000:33000]
    (tmp_path / "mine.txt").write_text(text)
    out = tmp_path / "cal"
    assert main(["calibrate", "--text", str(tmp_path / "mine.txt"), *GRID, "--out", str(out)]) == 0, \
        capsys.readouterr().err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["text"] == "--text" and meta["text_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    assert row["L"] == 16 and row["lower"] <= row["R_con"]
    # another text into the same folder is refused; the same text resumes (nothing recomputed)
    (tmp_path / "other.txt").write_text(text[::-1])
    assert main(["calibrate", "--text", str(tmp_path / "other.txt"), *GRID, "--out", str(out)]) == 64
    assert "holds groups computed on another text" in capsys.readouterr().err
    assert main(["calibrate", "--text", str(tmp_path / "mine.txt"), *GRID, "--out", str(out)]) == 0
    assert "0 groups computed, 1 already done" in capsys.readouterr().out


def test_calibrate_on_token_ids_and_its_errors(tmp_path, capsys):
    (tmp_path / "ids.txt").write_text(" ".join(str(1000 + i) for i in range(40)))
    out = tmp_path / "cal"
    assert main(["calibrate", "--tokens", str(tmp_path / "ids.txt"), *GRID, "--out", str(out)]) == 0
    assert json.loads((out / "meta.json").read_text())["text"] == "--tokens"
    assert main(["calibrate", "--tokens", str(tmp_path / "ids.txt"), "--text", str(tmp_path / "ids.txt"),
                 *GRID, "--out", str(tmp_path / "x")]) == 64
    assert "not both" in capsys.readouterr().err
    assert main(["calibrate", "--text", str(tmp_path / "none.txt"), *GRID, "--out", str(tmp_path / "x")]) == 66
