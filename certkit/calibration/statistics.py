"""Statistics of the calibration rows (certkit.calibration): Spearman(r_SVD_int, R_con) pooled, per m,
per eps, per length, per layer and rank-within-m, each with a 95 % cluster-bootstrap interval
(resampling heads), for the Q, K-only bridge and, when the rows have it, the bias-aware one; the
share of full-dimensional configurations with r_SVD_int < r_exact under the stated definitions; the
sandwiches; the attention-sink mass.  No scipy: the ranks and the bootstrap are vectorised numpy (a
few seconds for ~7,500 rows)."""
import zlib
from fractions import Fraction

import numpy as np

BRIDGES = ("r_svd_int", "r_svd_int_bias")          # Q, K only; the full centred logits beta Q K^T + bias
STRATA = (("by_m", "multiplier"), ("by_eps", "eps"), ("by_L", "L"), ("by_layer", "layer"))
RESAMPLES = 1000
DEFINITIONS = {
    "full_dimensional": "r_exact = min(d_head, n − 1): the visible dimension of Q, K is as large as the doubly "
                        "centred logits allow (n − 1 caps it when d_head ≥ n)",
    "full_dimensional_old": "r_exact = d_head (the previous definition; it selects nothing when every n − 1 < d_head)",
    "full_rank_bias": "r_exact_bias = n − 1: the centred logits βQKᵀ + bias have full rank",
    "rank_within_m": "ranks of r_SVD_int and of R_con computed within each multiplier m (midranks, centred and "
                     "divided by the stratum size), then one Pearson correlation over the pooled within-m ranks; "
                     "with strata of equal size this is the correlation of the raw within-m ranks",
    "bootstrap": "95 % percentile interval over resamples of heads (clusters (layer, head), drawn with replacement "
                 "among the stratum's heads; every configuration of a drawn head comes along), seeded",
    "sink_mass": "the mean over query rows of the attention mass on the two special tokens (positions 0 and n − 1; "
                 "for a decoder the first token, position 0, the only key every query sees)",
    "masked": "for a head with a row mask (a decoder: causal, sliding window, sinks) r_exact is the masked visible "
              "dimension r_M (docs/mathematics.md §4.5) and full-dimensional means r_M = r_exact_max = min(d_head, "
              "rows that see two keys − 1); R_sym is not applicable (—): the symbolic chain assumes one key set "
              "shared by every row and no bound of r_ε by r_M alone holds under a causal mask (§4.5)",
}


def frac_key(v):
    """Sort key of an exact numeral ('1/4', 3, '7/20')."""
    return Fraction(str(v))


def has_bias_bridge(rows):
    """True when the rows carry the bias-aware bridge (r_svd_int_bias; bridge version >= 2)."""
    return any(r.get("r_svd_int_bias") is not None for r in rows)


def weighted_ranks(v, W):
    """Midranks of the values v (length n) in the multisets where row j of a resample b appears
    W[b, j] times: shape (B, n), ties averaged (the ranks scipy.stats.rankdata gives the expanded data)."""
    order = np.argsort(v, kind="stable")
    vs = v[order]
    starts = np.flatnonzero(np.r_[True, vs[1:] != vs[:-1]])
    group = np.empty(len(v), dtype=np.intp)
    group[order] = np.cumsum(np.r_[True, vs[1:] != vs[:-1]]) - 1
    G = np.add.reduceat(W[:, order], starts, axis=1)
    mid = np.cumsum(G, axis=1) - G + (G + 1) / 2
    return mid[:, group]


def weighted_pearson(a, b, W):
    """Pearson correlation of the columns a, b (B x n or n) with row weights W (B x n): one value per
    resample, NaN where one side is constant."""
    s = W.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        da = a - ((W * a).sum(axis=1) / s)[:, None]
        db = b - ((W * b).sum(axis=1) / s)[:, None]
        va, vb = (W * da * da).sum(axis=1), (W * db * db).sum(axis=1)
        r = (W * da * db).sum(axis=1) / np.sqrt(va * vb)
    r[(va <= 1e-12 * (W * a * a).sum(axis=1)) | (vb <= 1e-12 * (W * b * b).sum(axis=1)) | ~(s > 0)] = np.nan
    return np.clip(r, -1, 1)


def spearman_weighted(x, y, W, strata=None):
    """Spearman correlation of x, y for each resample (rows of W); strata: an integer label per
    configuration for the rank-within-stratum variant (ranks computed within each stratum, centred
    and divided by the stratum's size, then one Pearson correlation)."""
    if strata is None:
        return weighted_pearson(weighted_ranks(x, W), weighted_ranks(y, W), W)
    rx, ry = np.zeros(W.shape), np.zeros(W.shape)
    for s in np.unique(strata):
        i = np.flatnonzero(strata == s)
        Ws = W[:, i]
        size = Ws.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rx[:, i] = np.where(size > 0, (weighted_ranks(x[i], Ws) - (size + 1) / 2) / size, 0)
            ry[:, i] = np.where(size > 0, (weighted_ranks(y[i], Ws) - (size + 1) / 2) / size, 0)
    return weighted_pearson(rx, ry, W)


def spearman_cell(x, y, clusters, strata=None, seed=0, resamples=RESAMPLES, tag=""):
    """{"rho", "ci95", "configurations", "heads"}: Spearman(x, y) (None when undefined) and its
    95 % cluster-bootstrap interval: resamples of the distinct clusters (heads) drawn with
    replacement, each drawn head bringing all its configurations.  Seeded by (seed, crc32(tag)):
    the same cell gets the same interval whatever else is computed.  No interval with < 2 heads."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ids, cl = np.unique(np.asarray(clusters), return_inverse=True)
    cell = {"rho": None, "ci95": None, "configurations": int(len(x)), "heads": int(len(ids))}
    if len(x) < 3:
        return cell
    if np.ptp(x) == 0 or np.ptp(y) == 0:        # a constant variable: no rank correlation
        cell["constant"] = "r_SVD_int" if np.ptp(x) == 0 else "R_con"
        return cell
    rho = spearman_weighted(x, y, np.ones((1, len(x))), strata)[0]
    if np.isnan(rho):
        return cell
    cell["rho"] = float(rho)
    if len(ids) < 2:
        return cell
    rng = np.random.default_rng([seed, zlib.crc32(tag.encode())])
    counts = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=resamples).astype(float)
    block = max(1, 2_000_000 // len(x))
    boot = np.concatenate([spearman_weighted(x, y, counts[b:b + block][:, cl], strata)
                           for b in range(0, resamples, block)])
    boot = boot[~np.isnan(boot)]
    if len(boot):
        cell["ci95"] = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
    return cell


def head_id(r, i):
    """The cluster of a row: its head (layer, head) as one integer; a row that names no head is its own."""
    return r["layer"] * 100_000 + r["head"] if "layer" in r and "head" in r else -1 - i


def breakdown(rows, bridge, seed=0, resamples=RESAMPLES):
    """Spearman(bridge, R_con) pooled, rank-within-m and per m, eps, L, layer (spearman_cell each)."""
    ok = [r for r in rows if r.get(bridge) is not None and r.get("R_con") is not None]
    x = np.array([r[bridge] for r in ok], dtype=float)
    y = np.array([r["R_con"] for r in ok], dtype=float)
    heads = np.array([head_id(r, i) for i, r in enumerate(ok)], dtype=np.int64)
    ms = sorted({r.get("multiplier", "1") for r in ok}, key=frac_key)
    m_idx = np.array([ms.index(r.get("multiplier", "1")) for r in ok], dtype=np.intp)
    # the resamples are seeded by the stratum, not the bridge: both bridges see the same heads drawn
    out = {"pooled": spearman_cell(x, y, heads, None, seed, resamples, "pooled"),
           "rank_within_m": spearman_cell(x, y, heads, m_idx, seed, resamples, "within_m")}
    for name, field in STRATA:
        if not all(field in r for r in ok):
            continue
        values = sorted({r[field] for r in ok}, key=frac_key)
        out[name] = {}
        for v in values:
            i = np.array([r[field] == v for r in ok])
            out[name][str(v)] = spearman_cell(x[i], y[i], heads[i], None, seed, resamples, f"{name}/{v}")
    return out


def share_below(rows, full, below):
    """(configurations that are full-dimensional, share of them with `below`) under the predicate full."""
    sel = [r for r in rows if full(r)]
    return len(sel), (sum(1 for r in sel if below(r)) / len(sel) if sel else None)


def statistics(rows, seed=0, resamples=RESAMPLES):
    """Summary statistics of calibration rows (the keys are listed in docs/report.md):
    * spearman, spearman_ci95, pearson, spearman_by_eps, spearman_by_m, spearman_within_m(_ci95):
      the Q, K-only bridge r_SVD_int against R_con; spearman_bias, spearman_bias_ci95,
      spearman_bias_by_m, spearman_bias_within_m(_ci95) the same for r_svd_int_bias (when present);
    * spearman_breakdown[bridge][pooled | rank_within_m | by_m | by_eps | by_L | by_layer]: cells
      {rho, ci95, configurations, heads} with 95 % cluster-bootstrap intervals (resampling heads);
    * full_dimensional / share_svd_below_exact (r_exact = min(d_head, n - 1)), full_dimensional_old /
      share_svd_below_exact_old (r_exact = d_head), full_rank_bias / share_svd_below_exact_bias
      (r_exact_bias = n - 1, r_svd_int_bias < r_exact_bias); definitions (the texts);
    * sandwiches, median_upper_over_lower, max_upper_over_lower, tight, median_R_con_over_n;
      R_sym_computed (rows with a VERIFIED R_sym), R_sym_informative (R_sym < n);
    * sink_mass_by_m (median), median_seconds_per_config."""
    bridges = [b for b in BRIDGES if b == "r_svd_int" or has_bias_bridge(rows)]
    ok = [r for r in rows if r.get("R_con") is not None and r.get("r_svd_int") is not None]
    s = {"configurations": len(rows), "with_both": len(ok),
         "heads": len({(r["layer"], r["head"]) for r in rows if "layer" in r}), "bridges": bridges,
         "bootstrap": {"resamples": resamples, "seed": seed, "unit": "head (layer, head)"}}
    if rows:
        s["spearman_breakdown"] = {b: breakdown(rows, b, seed, resamples) for b in bridges}
        for b, pre in (("r_svd_int", "spearman"), ("r_svd_int_bias", "spearman_bias")):
            if b not in s["spearman_breakdown"]:
                continue
            t = s["spearman_breakdown"][b]
            if t["pooled"]["rho"] is not None:
                s[pre], s[pre + "_ci95"] = t["pooled"]["rho"], t["pooled"]["ci95"]
            if t["rank_within_m"]["rho"] is not None:
                s[pre + "_within_m"], s[pre + "_within_m_ci95"] = t["rank_within_m"]["rho"], t["rank_within_m"]["ci95"]
            for name in ("by_m", "by_eps"):
                if name in t:
                    s[f"{pre}_{name}"] = {v: c["rho"] for v, c in t[name].items() if c["rho"] is not None}
    if len(ok) >= 3:
        x = np.array([r["r_svd_int"] for r in ok], dtype=float)
        y = np.array([r["R_con"] for r in ok], dtype=float)
        p = weighted_pearson(x, y, np.ones((1, len(x))))[0]
        if not np.isnan(p):
            s["pearson"] = float(p)
    below = lambda r: r.get("r_svd_int") is not None and r["r_svd_int"] < r["r_exact"]
    s["full_dimensional"], s["share_svd_below_exact"] = share_below(
        rows, lambda r: r["r_exact"] == r.get("r_exact_max", min(r["d_head"], r["n"] - 1)), below)
    s["full_dimensional_old"], s["share_svd_below_exact_old"] = share_below(rows, lambda r: r["r_exact"] == r["d_head"], below)
    s["definitions"] = dict(DEFINITIONS)
    if has_bias_bridge(rows):
        s["full_rank_bias"], s["share_svd_below_exact_bias"] = share_below(
            rows, lambda r: r.get("r_exact_bias") == r["n"] - 1,
            lambda r: r.get("r_svd_int_bias") is not None and r["r_svd_int_bias"] < r["r_exact_bias"])
    sw = [r for r in rows if r.get("R_con") is not None and r.get("lower")]
    if sw:
        ratio = [r["R_con"] / r["lower"] for r in sw]
        s.update(sandwiches=len(sw), median_upper_over_lower=float(np.median(ratio)), max_upper_over_lower=float(max(ratio)),
                 tight=sum(1 for r in sw if r["R_con"] == r["lower"]),
                 median_R_con_over_n=float(np.median([r["R_con"] / r["n"] for r in sw])))
    s["R_sym_computed"] = sum(1 for r in rows if r.get("R_sym") is not None)
    s["R_sym_not_applicable"] = sum(1 for r in rows if r.get("R_sym_applicable") is False)
    s["masked"] = sum(1 for r in rows if r.get("mask") is not None)
    s["R_sym_informative"] = sum(1 for r in rows if r.get("R_sym") is not None and r["R_sym"] < r["n"])
    sinks = [r for r in rows if r.get("sink_mass") is not None and "multiplier" in r]
    if sinks:
        s["sink_mass_by_m"] = {m: float(np.median([r["sink_mass"] for r in sinks if r["multiplier"] == m]))
                               for m in sorted({r["multiplier"] for r in sinks}, key=frac_key)}
    s["median_seconds_per_config"] = float(np.median([r["seconds"] for r in rows])) if rows else None
    return s
