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

__all__ = ["Head", "RowMask", "KeyRows", "Certificate", "Sandwich", "Comparison", "OutputComparison", "LayerComparison", "Verdict", "certify", "compare",
           "compare_layer", "verify",
           "audit", "scale",
           "calibrate", "tables", "heads_from_model", "OverSqrt", "BetaInterval", "UserError", "__version__"]
_HOMES = {**dict.fromkeys(["certify", "compare", "compare_layer", "verify", "audit", "scale", "calibrate", "tables"], "api"),
          "Certificate": "certificate", "Sandwich": "certificate", "Comparison": "certificate",
          "OutputComparison": "certificate", "LayerComparison": "certificate",
          "heads_from_model": "models", "Head": "head", "RowMask": "head", "KeyRows": "head", "Verdict": "kernel", "OverSqrt": "numbers", "BetaInterval": "numbers", "UserError": "errors"}

from .lazy import exports  # noqa: E402

__getattr__, __dir__ = exports(__name__, _HOMES)
