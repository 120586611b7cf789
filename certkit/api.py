"""certkit's public Python API: results are objects in memory first; writing files is explicit.

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps },   A = row-softmax(beta Q K^T + log w + bias),

the smallest rank of an approximation whose attention output is within eps for every value
matrix bounded by 1 (docs/mathematics.md §1).  certify() searches for a lower and an upper bound,
writes each as a certificate and keeps it only if the trusted kernel VERIFIES it; verify() asks
the kernel about any certificate.  Every eps is exact (certkit.numbers: 0.1 means 1/10).
"""
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from numbers import Integral
from typing import Any

from .certificate import Certificate, Comparison, LayerComparison, OutputComparison, Sandwich
from .choices import check
from .driver import ATTEMPTS, SEED
from .calibration import EPS, LENGTHS, MODEL, MULTIPLIERS
from .head import Head
from .kernel import DEFAULT_ROUTE, ROUTES, Verdict
from .errors import UserError
from .numbers import (PEER_NAMES, parse_budget, parse_distance, parse_eps, parse_eps_list, parse_jobs, parse_output_eps,
                      parse_peers, parse_time_limit)
from .results import AuditResult, CalibrateResult, CausalLaw, ScaleResult, Table, TablesResult
from .scaling import DEFAULT_LAWS as SCALE_LAWS, EPS as SCALE_EPS, POINTS as SCALE_POINTS, \
    TOLERANCE as SCALE_TOLERANCE
from .symbolic import FORMATS as TABLE_FORMATS
from .threads import limited

__all__ = ["Certificate", "Sandwich", "Comparison", "OutputComparison", "certify", "compare", "verify", "audit", "scale", "calibrate", "tables",
           "AuditResult", "ScaleResult", "CausalLaw", "CalibrateResult", "TablesResult", "Table"]

EpsLike = str | int | float | Fraction               # an exact number: 0.1 means 1/10 (certkit.numbers)
Indices = str | int | Sequence[int]                   # "all", "0-6", "0,3,5", 4 or [0, 3, 5]
Target = str | os.PathLike[str] | Certificate         # a certificate file, a folder of them, or one in memory
Verdicts = Verdict | list["Verdicts"]                  # verify's answer: a list for a folder or a list


@contextmanager
def needs(extra: str, what: str) -> Iterator[None]:
    """Imports inside the block: a missing optional dependency names the extra to install."""
    try:
        yield
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"certkit.{what} needs the {extra!r} extra: pip install 'certkit[{extra}]' "
                                  f"(module {e.name} is not installed)", name=e.name) from None


@limited()
def certify(head: Head, eps: EpsLike | Sequence[EpsLike], *, peers: Sequence[str] = PEER_NAMES, seed: int = SEED,
            attempts: int = ATTEMPTS, budget: float | None = None, deepen: bool = True) -> Sandwich | list[Sandwich]:
    """Certified sandwich lower <= r_eps(A) <= upper for a Head at one eps (a list of eps gives
    a list of Sandwiches).  The lower search (decoding contractions, Frobenius tail) runs first,
    then the upper search (truncated SVD, LP row fits, joint l1 refinement) stops where it meets
    it; the kernel judges every candidate and only VERIFIED certificates are returned.  peers:
    names among "svd", "nystrom", "performer", "linformer" (seeded by seed; all four by default, as
    `certkit certify`; () for none).

    budget: seconds for each eps (the peers included), or None (no limit).  The sandwich is then
    anytime: r >= 1 (the trivial r <= min(n, N) needs no certificate), a fast lower bound, the
    truncated SVD's upper bound, then the full searches, each VERIFIED improvement replacing an end;
    when the budget is spent the searches stop at their next safe point (usually within 10 % of the
    budget: docs/api.md) and the best sandwich so far comes back with .stopped_on_budget True.
    deepen: the time the searches and the peers leave goes to deeper descents of the upper search
    (refinements with 4, 16, 64 times the iterations; method "deepened"), until the budget ends
    them (the sandwich is not marked stopped for that).  With deepen=False a budget the searches
    do not reach gives the same certificates as no budget.

    >>> import numpy as np, certkit
    >>> Q = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, 0.0]])
    >>> s = certkit.certify(certkit.Head.from_arrays(Q, Q, beta=2), eps="1/4")
    >>> s.lower.bound <= s.upper.bound, s.upper.verdict.status
    (True, 'VERIFIED')
    """
    with needs("search", "certify"):
        from .driver import sandwiches
        from .search import sandwich as engine  # noqa: F401  (the engine the driver runs: a missing extra named now)
    if not isinstance(head, Head):
        raise TypeError(f"certify: expected a certkit.Head, got {type(head).__name__} (use Head.from_arrays)")
    seconds, peers = parse_budget(budget), parse_peers(peers)
    for name, value in (("seed", seed), ("attempts", attempts)):       # as --seed and --attempts (type=int)
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise UserError(f"certify: {name} must be an integer, got {value!r:.60}")
    if not isinstance(deepen, bool):
        raise UserError(f"certify: deepen must be True or False, got {deepen!r:.60}")
    if isinstance(eps, (list, tuple)):
        return list(sandwiches(head, parse_eps_list(eps), peers, seed, attempts, budget=seconds, deepen=deepen))
    return next(sandwiches(head, [parse_eps(eps)], peers, seed, attempts, budget=seconds, deepen=deepen))


@limited()
def compare(head: Head, replacement: "Head | str", *, eps: EpsLike | None = None,
            out: str | os.PathLike[str] | None = None, norm: str | None = None,
            relative: bool = False) -> "Comparison | OutputComparison":
    """The certified distance  max_i ||A_i - A'_i||_1 <= eps  between a head's attention A and a
    replacement's A' (by the operator identity, the worst error of the attention output over all
    value matrices with entries in [-1, 1]; docs/mathematics.md §10).  replacement: a Head of the
    same n x N (certkit.compress builds the common ones) or a method spelling such as "quant:int8",
    "lowrank:k=16", "evict:sinks=4,window=64", "topk:k=32".  eps None: the smallest eps this search
    states (the kernel's proven bound rounded up to 4 significant digits, checked on the fast route);
    a given eps is claimed as it is (route auto: fast, then Arb on the rows it leaves open).  Returns a Comparison:
    .distance (exact, None if not proved), .estimate (float64), .certificate (kernel-VERIFIED) and
    .verdict; out: a file path to keep the certificate at (else it lives in memory only).

    norm "inf" or "2": instead, the error of the head's output on its own values (a head with values V
    and optionally its slice W of the output projection, Head.from_arrays(..., values=V, projection=W)):
    max_i ||(A V W - A' V' W)_i|| <= eps in that row norm, or with relative=True that divided by
    ||(A V W)_i|| (kind attention-output-distance, format 1.3).  A method such as "kv:q4_0" quantises
    the keys and the values as an engine's cache stores them.  Returns an OutputComparison.

    >>> import numpy as np, certkit
    >>> h = certkit.Head.from_arrays(np.eye(4), np.eye(4), beta=2)
    >>> c = certkit.compare(h, "quant:int4")
    >>> c.verdict.status, c.distance is not None and c.estimate <= c.distance
    ('VERIFIED', True)
    """
    with needs("search", "compare"):
        from .compress import MethodError, parse_methods
        from .search.compare import certify_distance, certify_output_distance
    if not isinstance(head, Head):
        raise TypeError(f"compare: expected a certkit.Head, got {type(head).__name__} (use Head.from_arrays)")
    if isinstance(replacement, str):
        methods = parse_methods(replacement)
        if len(methods) != 1:
            raise MethodError(f"compare: {replacement!r} spells {len(methods)} settings; give one")
        replacement = methods[0].apply(head)
    if not isinstance(replacement, Head):
        raise TypeError(f"compare: replacement must be a certkit.Head or a method string, got {type(replacement).__name__}")
    if norm is not None:
        if norm not in ("inf", "2"):
            raise UserError(f"compare: norm must be \"inf\" or \"2\", got {norm!r}")
        return certify_output_distance(head, replacement, norm, bool(relative),
                                       None if eps is None else parse_output_eps(eps),
                                       None if out is None else os.fspath(out))
    return certify_distance(head, replacement, None if eps is None else parse_distance(eps),
                            None if out is None else os.fspath(out))


def compare_layer(heads: list, replacement: "str | list", *, norm: str = "2", relative: bool = False,
                  eps: EpsLike | None = None, out: str | os.PathLike[str] | None = None) -> "LayerComparison":
    """The certified error of a layer's attention block:  max_i ||(sum_h (A_h V_h - A'_h V'_h) W_O^h)_i|| <= eps  in
    the row norm "inf" or "2" (relative=True: divided by ||(sum_h A_h V_h W_O^h)_i||), for the heads of one layer
    (each with values and its slice W_O^h of the output projection, as certkit.heads_from_model gives them) and a
    replacement per head: a method spelling applied to every head ("kv:q4_0", "kivi:bits=2", "evict:sinks=4,
    window=256", "evict:window=128,heavy=128") or a list of Heads.  One kernel-VERIFIED certificate (kind
    attention-output-distance, format 1.3, a {"heads": [...]} instance).  Returns a LayerComparison: .distance,
    .estimate, .certificate, .verdict and .rows (per token: the certified bound and float value, absolute and
    relative; .rows.stats() gives max / mean / p99)."""
    with needs("search", "compare"):
        from .compress import MethodError, parse_methods
        from .search.compare import certify_layer_output
    heads = list(heads)
    if not heads or not all(isinstance(h, Head) for h in heads):
        raise TypeError("compare_layer: expected a non-empty list of certkit.Head (one layer's heads)")
    if isinstance(replacement, str):
        methods = parse_methods(replacement)
        if len(methods) != 1:
            raise MethodError(f"compare_layer: {replacement!r} spells {len(methods)} settings; give one")
        replacement = [methods[0].apply(h) for h in heads]
    if norm not in ("inf", "2"):
        raise UserError(f"compare_layer: norm must be \"inf\" or \"2\", got {norm!r}")
    layer = str(heads[0].provenance.get("layer", "layer"))
    return certify_layer_output(layer, heads, list(replacement), norm, bool(relative),
                                None if eps is None else parse_output_eps(eps), None if out is None else os.fspath(out))


@limited(preload=())
def verify(target: Target | list[Any] | tuple[Any, ...], route: str = DEFAULT_ROUTE, *,
           time_limit: float | None = None, jobs: int = 1) -> Verdicts:
    """The kernel's Verdict (.status VERIFIED / REJECTED / MALFORMED / UNSUPPORTED / INTERNAL-ERROR,
    .exit_code 0-4, .message) on a certificate: a path, a Certificate in memory (written to a
    temporary folder and checked there), a folder (a list: every certificate under it, sorted) or
    a list of any of these.  route "auto": fast, then Arb on the rows it leaves open (docs/numerics.md
    §3.1); "fast" only; "arb" Arb ball arithmetic throughout (slow).  time_limit:
    seconds per certificate, beyond which it is UNSUPPORTED "resource limit" (SIGALRM: call from the
    main thread).  jobs: a folder's certificates are checked in that many worker processes (the
    list keeps the sorted order; a script then needs the `if __name__ == "__main__":` guard of
    Python's "spawn" start method)."""
    time_limit, jobs = parse_time_limit(time_limit), parse_jobs(jobs)
    if route not in ROUTES:                 # the kernel's check() raises a ValueError: name the argument instead
        raise UserError(f"verify: route must be one of {', '.join(ROUTES)}, got {route!r:.60}")
    if isinstance(target, Certificate):
        with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
            return check(target.save(os.path.join(tmp, "certificate.json")), route, time_limit)
    if isinstance(target, (list, tuple)):
        return [verify(t, route, time_limit=time_limit, jobs=jobs) for t in target]
    path = os.fspath(target)
    if os.path.isdir(path):
        from .batch import certificates_under, check_verdict, ordered
        return list(ordered(check_verdict, certificates_under(path)[0], (route, time_limit), jobs))
    return check(path, route, time_limit)


@limited()
def audit(target: Head | str | os.PathLike[str], eps: EpsLike | Sequence[EpsLike] | None = None, *,
          r: str | int | Sequence[int] = "auto", with_torch: bool = True) -> AuditResult:
    """Audit the symbolic chain (docs/mathematics.md §7) of a Head at each eps, or of a certificate
    file (an upper-chain certificate's own witness, else chain witnesses of its head at its eps):
    every chain quantity by numpy, torch, the kernel's proven bound, the exact Arb enclosure and
    mpmath.  r: "auto" (the r with the smallest certified R_sym), "all" (0..r_num) or integers.
    Returns an AuditResult: .rows one per (source, eps, r, quantity), .records `certkit audit
    --json`'s records, .flags the disagreements (empty when every route agrees)."""
    if isinstance(target, Head) and eps is None:
        raise TypeError("audit: give eps for a Head")
    with needs("search", "audit"):
        from .auditing import audit_certificate, audit_head, audit_result
    if isinstance(target, Head):
        return audit_result(audit_head(target, parse_eps_list(eps, "eps"), rs=r, with_torch=with_torch))
    return audit_result(audit_certificate(os.fspath(target), rs=r, with_torch=with_torch))


@limited()
def scale(families: str | Sequence[str] = SCALE_LAWS, *, eps: EpsLike = SCALE_EPS, points: int = SCALE_POINTS,
          tolerance: float = SCALE_TOLERANCE, out: str | os.PathLike[str] | None = None, crosscheck: bool = True,
          causal_lengths: Sequence[int] | None = None) -> ScaleResult:
    """The certified scaling laws (docs/mathematics.md §8.2-8.5), as `certkit scale` computes them:
    per family and dimension, parametric lattice certificates over three decades of beta, each
    VERIFIED by the kernel, and the least-squares slope of log M against the theory exponent ((d-1)/2
    sphere, d/2 ball, r/2 interaction); the 65^4 headline point; with crosscheck, small instances
    checked as explicit matrices; with the family "causal" (or causal_lengths given, e.g. (64, 256,
    1024); default 64..4096), certified sandwiches for causal attention at beta = 0 against the
    context length.  Returns a ScaleResult: .rows the points, .slopes, .headline, .crosscheck, .causal
    (a CausalLaw or None); certificates go under out/certificates (a temporary folder, removed, when
    out is None)."""
    e = parse_eps(eps)
    with needs("search", "scale"):
        from .scaling.laws import laws
    return laws(families, e, points, tolerance, out, crosscheck, causal_lengths)


def calibrate(model: str | os.PathLike[str] | Any = MODEL, *, layers: Indices = "all", heads: Indices = "all",
              lengths: str | Sequence[int | str] = LENGTHS, multipliers: str | Sequence[EpsLike] = MULTIPLIERS,
              eps: EpsLike | Sequence[EpsLike] = EPS, out: str | os.PathLike[str] | None = None, workers: int = 1,
              scheduler: str | None = None, plots: bool = False, progress: bool = False, text: str | None = None,
              tokens: Sequence[int] | None = None) -> CalibrateResult:
    """The real-model calibration grid (docs/mathematics.md §4-§7 on pretrained heads): per
    (length, layer, head, multiplier m, eps) r_exact, r_SVD_int, r_opt, R_sym and the certified
    sandwich, at beta = m/sqrt(d_head).  model: "minilm", "mpnet", "smollm2", a local folder of any
    family certify --model reads or a GGUF file (a decoder keeps its row mask: r_exact is the masked
    visible dimension of docs/mathematics.md §4.5 and R_sym is None, R_sym_applicable False);
    layers, heads: "all", "0-6", "0,3,5" or lists of indices; lengths, multipliers, eps: lists or
    comma-separated text, exact (0.15 means 3/20).  out: the folder of configs, certificates,
    results.{csv,json} and SUMMARY.md (plots=True adds the figures); finished groups found there
    are not recomputed; None: a new temporary folder, kept (it holds the certificates the rows
    name).  workers: processes, or scheduler: a Dask scheduler ("local", "local:N", an address);
    progress: a bar on stderr.  text (a str) or tokens (token ids): your corpus instead of certkit's
    built-in text (the first window of each length).  Returns a CalibrateResult (.rows as
    results.json's, .summary, .out, .meta, .computed, .skipped)."""
    with needs("models", "calibrate"):
        from .calibration import calibrate as run_grid
    return run_grid(model, layers, heads, lengths, multipliers, eps, out, workers, progress=progress, plots=plots,
                    scheduler=scheduler, text=text, tokens=tokens)


@limited()
def tables(names: Sequence[str] | None = None, *, out: str | os.PathLike[str] | None = None,
           formats: Sequence[str] = TABLE_FORMATS) -> TablesResult:
    """Tables of certified constants (theta_m, N_net, C_m, lattice margins, typical log10 S_r),
    every value an Arb enclosure [lo, hi] rounded outward beside an mpmath approximation: a
    TablesResult (.tables name -> Table, each with .title, .columns, .rows; .rows every row led by
    its table's name); with out, also written as CSV / Markdown / LaTeX (`certkit tables`' bytes)."""
    with needs("search", "tables"):
        from .symbolic.tables import tables as build
    return build(names, out, formats)
