"""The scaling laws of the approximation rank, every point a kernel-VERIFIED certificate
(docs/mathematics.md §8.2-8.5):

    laws.py     the lattice families against beta (sphere beta^((d-1)/2), ball beta^(d/2),
                interaction Gamma^(r/2)): parametric lower-lattice certificates, least-squares
                slopes with 95 % intervals, the 65^4 headline point, the explicit cross-check, and
                the causal law of prefix averaging against the context length (Theta(log n))
    growth.py   the causal growth law on real decoder heads (certified sandwiches against n)

certkit.scale (the public API) and `certkit scale` (certkit/commands/scale.py) both call laws.laws.
"""
from fractions import Fraction

# the defaults of certkit.scale and `certkit scale` alike (laws.laws)
DEFAULT_LAWS = ("sphere", "ball", "interaction", "causal")
EPS = Fraction(35, 100)
POINTS = 13                  # points per line, log-spaced over three decades
TOLERANCE = 0.01             # the relative slope error allowed
CAUSAL_NS = (64, 128, 256, 512, 1024, 2048, 4096)      # the causal family's context lengths (about 3 min)
