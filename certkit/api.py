"""certkit's public Python API: results are objects in memory first; writing files is explicit.

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps },   A = row-softmax(beta Q K^T + log w + bias),

the smallest rank of an approximation whose attention output is within eps for every value
matrix bounded by 1 (docs/mathematics.md §1).  certify() searches for a lower and an upper bound,
writes each as a certificate and keeps it only if the trusted kernel VERIFIES it; verify() asks
the kernel about any certificate.  Every eps is exact (certkit.numbers: 0.1 means 1/10).
"""
import os
import tempfile
from contextlib import contextmanager

from .certificate import Certificate, Sandwich
from .head import Head
from .kernel import DEFAULT_ROUTE, check
from .numbers import parse_eps, parse_eps_list
from .threads import limited

__all__ = ["Certificate", "Sandwich", "certify", "verify", "audit", "scale", "calibrate", "tables"]


@contextmanager
def needs(extra, what):
    """Imports inside the block: a missing optional dependency names the extra to install."""
    try:
        yield
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"certkit.{what} needs the {extra!r} extra: pip install 'certkit[{extra}]' "
                                  f"(module {e.name} is not installed)", name=e.name) from None


@limited()
def certify(head, eps, *, peers=(), seed=0, attempts=24):
    """Certified sandwich lower <= r_eps(A) <= upper for a Head at one eps (a list of eps gives
    a list of Sandwiches).  The lower search (decoding contractions, Frobenius tail) runs first,
    then the upper search (truncated SVD, LP row fits, joint l1 refinement) stops where it meets
    it; the kernel judges every candidate and only VERIFIED certificates are returned.  peers:
    names among "svd", "nystrom", "performer", "linformer" (seeded by seed).

    >>> import numpy as np, certkit
    >>> Q = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, 0.0]])
    >>> s = certkit.certify(certkit.Head.from_arrays(Q, Q, beta=2), eps="1/4")
    >>> s.lower.bound <= s.upper.bound, s.upper.verdict.status
    (True, 'VERIFIED')
    """
    with needs("search", "certify"):
        from .search.sandwich import sandwich
    if not isinstance(head, Head):
        raise TypeError(f"certify: expected a certkit.Head, got {type(head).__name__} (use Head.from_arrays)")
    if isinstance(eps, (list, tuple)):
        A, inst = head.attention(), head.instance()
        return [sandwich(head, e, peers, seed, attempts, A=A, inst=inst) for e in parse_eps_list(eps)]
    return sandwich(head, parse_eps(eps), tuple(peers), seed, attempts)


@limited(preload=())
def verify(target, route=DEFAULT_ROUTE, *, time_limit=None, jobs=1):
    """The kernel's Verdict (.status VERIFIED / REJECTED / MALFORMED / UNSUPPORTED / INTERNAL-ERROR,
    .exit_code 0-4, .message) on a certificate: a path, a Certificate in memory (written to a
    temporary folder and checked there), a folder (a list: every certificate under it, sorted) or
    a list of any of these.  route "auto": fast, then Arb where fast rejects (n N <= 2^20); "fast"
    only; "arb" Arb ball arithmetic throughout (slow).  time_limit:
    seconds per certificate, beyond which it is UNSUPPORTED "resource limit" (SIGALRM: call from the
    main thread).  jobs: a folder's certificates are checked in that many worker processes (the
    list keeps the sorted order; a script then needs the `if __name__ == "__main__":` guard of
    Python's "spawn" start method)."""
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
def audit(target, eps=None, r="auto", with_torch=True):
    """Audit the symbolic chain (docs/mathematics.md §7): for a Head at each eps, or for an
    upper-chain certificate file, one record per (eps, r) with every chain quantity by numpy,
    torch, the kernel's proven bound, the exact Arb enclosure and mpmath; records with flags
    mark disagreements (certkit.commands.audit.flags)."""
    if isinstance(target, Head) and eps is None:
        raise TypeError("audit: give eps for a Head")
    with needs("search", "audit"):
        from .commands.audit import audit_certificate, audit_head
    if isinstance(target, Head):
        return audit_head(target, parse_eps_list(eps, "eps"), rs=r, with_torch=with_torch)
    return audit_certificate(os.fspath(target), rs=r, with_torch=with_torch)


@limited()
def scale(families=("sphere", "ball", "interaction"), eps="7/20", points=13, tolerance=0.01,
          out=None, crosscheck=False, causal_lengths=None):
    """The certified scaling laws (docs/mathematics.md §8.2-8.5): per family and dimension,
    parametric lattice certificates over three decades of beta, each VERIFIED by the kernel, and
    the least-squares slope of log M against the theory exponent ((d-1)/2 sphere, d/2 ball, r/2
    interaction); with causal_lengths (e.g. (64, 256, 1024)), certified sandwiches for causal
    attention at beta = 0 against the context length.  Returns {"points", "slopes", "headline",
    "crosscheck", "causal"}; certificates go under out/certificates (a temporary folder, removed,
    when out is None)."""
    e = parse_eps(eps)
    families = [families] if isinstance(families, str) else list(families)
    with needs("search", "scale"):
        from .commands.scale import FAMILIES, causal_law, crosscheck as crosscheck_, grid, headline, point, slopes
    with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
        base = out or tmp
        cert_dir = os.path.join(base, "certificates")
        os.makedirs(cert_dir, exist_ok=True)
        rows = [point(f, d, x, e, cert_dir) for f in families for d in FAMILIES[f]["dims"] for x in grid(f, points)]
        return {"points": rows, "slopes": slopes(rows, tolerance), "headline": headline(e, cert_dir),
                "crosscheck": crosscheck_(e, base) if crosscheck else [],
                "causal": causal_law(e, cert_dir, tuple(causal_lengths)) if causal_lengths else None}


@limited()
def calibrate(model="minilm", **grid):
    """The real-model calibration grid (docs/mathematics.md §4-§7 on pretrained heads): per
    (layer, head, length, multiplier, eps) r_exact, r_SVD_int, r_opt, R_sym and the certified
    sandwich.  Keyword arguments as certkit.commands.calibrate.calibrate; returns {"rows", "summary", "out"}."""
    with needs("models", "calibrate"):
        from .commands.calibrate import calibrate as run_grid
    return run_grid(model=model, **grid)


@limited()
def tables(names=None, out=None, formats=("csv", "md", "tex")):
    """Tables of certified constants (theta_m, N_net, C_m, lattice margins, typical log10 S_r):
    {name: {"title", "columns", "rows"}} with every value an Arb enclosure [lo, hi] rounded
    outward beside an mpmath approximation; with out, also written as CSV / Markdown / LaTeX."""
    with needs("search", "tables"):
        from .commands.tables import TABLES, build_tables
    result = {}
    for name, title, fn in TABLES:
        if names is None or name in names:
            columns, rows = fn()
            result[name] = {"title": title, "columns": columns, "rows": rows}
    if out is not None:
        build_tables(out, tuple(formats), names)
    return result
