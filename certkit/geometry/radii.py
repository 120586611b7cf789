"""Radii and diameters of point sets (docs/mathematics.md §4.2, §5.2).

rad(X) = min_c max_i |x_i - c| (the Chebyshev radius) and diam(X) = max_{i,i'} |x_i - x_i'|, in
floats.  Any centre c gives a valid radius rad_c(X) >= rad(X), so the centres here need not be
optimal: chebyshev_centre polishes Bădoiu–Clarkson by SLSQP, fast_centre stops before the polish.
"""
import numpy as np
import scipy.optimize

from .floats import BLOCK


def chebyshev_centre(X, bc_iters=200, max_rounds=12):
    """A near-minimal enclosing ball of the rows of X: (c, radius), radius = max_i |x_i - c|.

    rad(X) = min_c max_i |x_i - c| (docs/mathematics.md notation).  Any c gives the valid radius
    rad_c(X) >= rad(X); the checker never needs optimality (docs/mathematics.md §4.2, §11).  Method:
    Bădoiu–Clarkson iterations c <- c + (x_far - c)/(t + 1) (radius within (1 + 1/sqrt t) of
    optimal), then the convex program  min_{c, s} s  s.t.  |x_i - c|^2 <= s  by SLSQP on an
    active set of far points, enlarged by violators until every point is inside.  The best of
    {mean, Bădoiu–Clarkson, SLSQP} by the recomputed max distance is returned.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError("X must be a non-empty p x k array")
    p, k = X.shape
    if k == 0:
        return np.zeros(0), 0.0

    def rad_of(c):
        return float(np.sqrt(np.max(np.sum((X - c) ** 2, axis=1))))

    cands = [X.mean(axis=0)]
    if p == 1:
        return X[0].copy(), 0.0
    c = X[0].copy()
    for t in range(1, bc_iters + 1):
        far = int(np.argmax(np.sum((X - c) ** 2, axis=1)))
        c = c + (X[far] - c) / (t + 1)
    cands.append(c.copy())
    R0 = rad_of(c)
    if R0 > 0 and np.isfinite(R0):
        Y = (X - c) / R0                                 # well scaled: radius 1 about 0
        dist = np.sqrt(np.sum(Y * Y, axis=1))
        take = min(p, max(2 * (k + 2), 32))
        active = set(np.argsort(-dist)[:take].tolist()) | set(np.nonzero(dist >= 0.7)[0].tolist())
        z = np.concatenate([np.zeros(k), [1.0]])
        for _ in range(max_rounds):
            idx = np.array(sorted(active))
            Ya = Y[idx]

            def cons(v, Ya=Ya):
                return v[-1] - np.sum((Ya - v[:-1]) ** 2, axis=1)

            def cons_jac(v, Ya=Ya):
                J = np.empty((len(Ya), k + 1))
                J[:, :k] = 2.0 * (Ya - v[:-1])
                J[:, k] = 1.0
                return J

            res = scipy.optimize.minimize(
                lambda v: v[-1], z, jac=lambda v: np.concatenate([np.zeros(k), [1.0]]),
                method="SLSQP", constraints=[dict(type="ineq", fun=cons, jac=cons_jac)],
                options=dict(maxiter=200, ftol=1e-15))
            z = res.x
            z[-1] = max(z[-1], float(np.max(np.sum((Ya - z[:-1]) ** 2, axis=1))))
            d2 = np.sum((Y - z[:-1]) ** 2, axis=1)
            viol = np.nonzero(d2 > z[-1] * (1 + 1e-12))[0]
            if viol.size == 0:
                break
            active |= set(viol[np.argsort(-d2[viol])][: max(k + 2, 16)].tolist())
        cands.append(c + R0 * z[:-1])
    radii = [rad_of(cc) for cc in cands]
    best = int(np.argmin(radii))
    return cands[best], radii[best]


def diameter(X):
    """diam{x_i} = max_{i,i'} |x_i - x_i'| in float, blocked (docs/mathematics.md §5.2 omega_K).

    The rows are first centred at their mean (which lies in their convex hull, so every |x|
    is <= diam afterwards); blocked Gram distances |x|^2 + |y|^2 - 2<x, y> then have absolute
    error O(k u diam^2), i.e. relative error O(k u) at the maximising pair.  The maximising
    pair is recomputed by direct subtraction.
    """
    X = np.asarray(X, dtype=np.float64)
    p = X.shape[0]
    if p < 2 or X.shape[1] == 0:
        return 0.0
    Y = X - X.mean(axis=0)
    nrm = np.sum(Y * Y, axis=1)
    best, bi, bj = -1.0, 0, 0
    step = max(1, BLOCK // max(p, 1))
    for i0 in range(0, p, step):
        blk = Y[i0:i0 + step]
        D2 = nrm[i0:i0 + step, None] + nrm[None, :] - 2.0 * (blk @ Y.T)
        a = int(np.argmax(D2))
        v = float(D2.flat[a])
        if v > best:
            best, bi, bj = v, i0 + a // p, a % p
    return float(np.linalg.norm(X[bi] - X[bj]))


def fast_centre(X):
    """(c, radius about c): chebyshev_centre's Bădoiu–Clarkson centre, no SLSQP polish."""
    if X.shape[1] == 0 or X.shape[0] == 0:
        return np.zeros(X.shape[1]), 0.0
    return chebyshev_centre(X, max_rounds=0)
