"""A head given as arrays: A = row-softmax(beta Q K^T + log w + bias).

File formats (no pickle anywhere):
  .npz          numpy archive read with allow_pickle=False
  .safetensors  read with the safetensors library (numpy backend)
Keys: Q (n x d) and K (N x d) (aliases: queries, keys), beta (a scalar; optional when given on the
command line), optional weights (N, >= 0; 0 drops a column) and bias (n x N).  float16/32/64 and
integer arrays are converted to float64 exactly.

beta on the command line is exact: "2", "1/8", "0.125", or "c/sqrt(D)" (e.g. "1/sqrt(64)",
the usual 1/sqrt(d_head) scaling).  A beta stored in the file is taken at its exact binary value.
"""
import os
import re
from fractions import Fraction

import numpy as np

ALIASES = {"Q": ("Q", "queries", "q"), "K": ("K", "keys", "k"), "beta": ("beta",),
           "weights": ("weights", "column_weights"), "bias": ("bias", "logit_bias")}


class HeadFileError(ValueError):
    """Bad head input: the message names the file, the key and the problem."""


def parse_beta(text):
    """Exact beta from a command-line string: Fraction or ("over_sqrt", c, D)."""
    s = str(text).strip()
    m = re.fullmatch(r"(.+)/\s*sqrt\((.+)\)", s)
    try:
        if m:
            c, D = Fraction(m.group(1).strip()), Fraction(m.group(2).strip())
            if D <= 0:
                raise ValueError
            return ("over_sqrt", c, D)
        b = Fraction(s)
    except (ValueError, ZeroDivisionError):
        raise HeadFileError(f"--beta {text!r}: expected a number like 2, 1/8, 0.125 or 1/sqrt(64)") from None
    if b < 0:
        raise HeadFileError(f"--beta {text!r}: beta must be >= 0")
    return b


def _load_arrays(path):
    if not os.path.exists(path):
        raise HeadFileError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise HeadFileError(f"{path}: not a regular file")
    if path.endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except ValueError as e:
            raise HeadFileError(f"{path}: unreadable .npz (object arrays need pickle, refused): {e}") from None
        except Exception as e:  # zipfile.BadZipFile, OSError, ...
            raise HeadFileError(f"{path}: unreadable .npz: {e}") from None
    if path.endswith(".safetensors"):
        try:
            from safetensors.numpy import load_file
            return load_file(path)
        except Exception as e:
            raise HeadFileError(f"{path}: unreadable .safetensors: {e}") from None
    raise HeadFileError(f"{path}: a head file must be .npz or .safetensors")


def _get(arrays, path, key, required=True):
    for a in ALIASES[key]:
        if a in arrays:
            x = np.asarray(arrays[a])
            if x.dtype.kind not in "fiu" :
                raise HeadFileError(f"{path}: {a}: dtype {x.dtype} is not numeric")
            x = x.astype(np.float64)
            if not np.all(np.isfinite(x)):
                raise HeadFileError(f"{path}: {a}: non-finite entries")
            return x
    if required:
        raise HeadFileError(f"{path}: missing array {key!r} (keys present: {', '.join(sorted(arrays)) or 'none'})")
    return None


def read_head(path, beta=None):
    """dict(Q, K, beta, weights, bias, family, name) for the head stored at path.

    beta: an exact value (Fraction / ("over_sqrt", c, D)) overriding the file's."""
    arrays = _load_arrays(path)
    Q, K = _get(arrays, path, "Q"), _get(arrays, path, "K")
    if Q.ndim != 2 or K.ndim != 2 or Q.shape[1] != K.shape[1] or 0 in Q.shape or 0 in K.shape:
        raise HeadFileError(f"{path}: Q {Q.shape} and K {K.shape} must be n x d and N x d with n, N, d >= 1")
    if beta is None:
        b = _get(arrays, path, "beta", required=False)
        if b is None:
            raise HeadFileError(f"{path}: no 'beta' array in the file; give --beta")
        if b.size != 1:
            raise HeadFileError(f"{path}: beta: expected a scalar, got shape {b.shape}")
        beta = Fraction(float(b.reshape(-1)[0]))
        if beta < 0:
            raise HeadFileError(f"{path}: beta: must be >= 0, got {float(beta)}")
    w = _get(arrays, path, "weights", required=False)
    if w is not None and (w.shape != (K.shape[0],) or (w < 0).any() or not (w > 0).any()):
        raise HeadFileError(f"{path}: weights: need shape ({K.shape[0]},), entries >= 0, not all 0")
    bias = _get(arrays, path, "bias", required=False)
    if bias is not None and bias.shape != (Q.shape[0], K.shape[0]):
        raise HeadFileError(f"{path}: bias: shape {bias.shape}, expected {(Q.shape[0], K.shape[0])}")
    return {"Q": Q, "K": K, "beta": beta, "weights": w, "bias": bias, "family": "file",
            "name": os.path.splitext(os.path.basename(path))[0]}


def beta_float(beta):
    """A float near beta (for untrusted search only)."""
    if isinstance(beta, tuple):
        return float(beta[1]) / float(beta[2]) ** 0.5 if beta[0] == "over_sqrt" else float(beta[1])
    return float(beta)
