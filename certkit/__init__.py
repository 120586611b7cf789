"""certkit: machine-checkable certificates for the approximation rank of softmax attention.

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps },   A = row-softmax(beta Q K^T).

    >>> import certkit
    >>> head = certkit.Head.from_arrays([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], beta="1/8")
    >>> certkit.certify(head, eps="1/4").bounds
    (1, 1)

Untrusted code (certkit.search) writes certificates; the trusted kernel (certkit.kernel) checks
them.  The public API (docs/api.md) is imported lazily: `import certkit` stays light.
"""
__version__ = "0.2.0"

__all__ = ["Head", "Certificate", "Sandwich", "Verdict", "certify", "verify", "audit", "scale",
           "calibrate", "tables", "OverSqrt", "BetaInterval", "UserError", "__version__"]
_HOMES = {"Head": "head", "Verdict": "kernel", "OverSqrt": "numbers", "BetaInterval": "numbers",
          "UserError": "errors"}


def __getattr__(name):
    """certkit.X for the public names, imported on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'certkit' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{_HOMES.get(name, 'api')}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
