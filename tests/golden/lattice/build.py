"""Build the lower-lattice golden corpus: hand-written parametric certificates (not produced by
certkit.search.lattice) with the verdict each must get and why.  Run from the repository root:
    python tests/golden/lattice/build.py
Every file is checked here; a case that does not come out as expected stops the build."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
from certkit.choices import check  # noqa: E402


def doc(instance, witness, bound, eps="7/20"):
    return {"format": "certkit-certificate", "version": "1.0", "kind": "lower-lattice",
            "claim": {"quantity": "r_eps", "relation": ">=", "bound": str(bound), "eps": eps},
            "instance": instance, "witness": witness, "assumptions": ["lattice-construction"]}


def ball(d, beta, L, K, mode="weights"):
    return {"construction": "ball", "d": str(d), "beta": str(beta), "spacing": str(L), "half_width": str(K), "mode": mode}


SPHERE3 = {"construction": "sphere", "d": "3", "mu": "9/2", "radius_squared": "100"}
CASES = {  # name: (document, verdict, message fragment, reason)
    # 65^4: d (L K + h)^2 = 4 (9*32 + 4)^2 = 341056 <= 409600; margin 2(S_4/theta)^4 - 1 ~ 0.99998 (docs/mathematics.md table, L = 9)
    "ball-65x4-tokens": (doc(ball(4, 409600, 9, 32, "tokens"), {"cell": ["-4", "4"]}, 17850625), "VERIFIED", ">= 17850625", ""),
    # d = 2, L = 5: margin 0.9636 (docs/mathematics.md table); 2 (5*2 + 2)^2 = 288 <= 400
    "ball-d2-weights": (doc(ball(2, 400, 5, 2), {"cell": ["-2", "2"]}, 25), "VERIFIED", ">= 25", ""),
    # even spacing L = 4, cells {-2..1}: h = 2; 3 (4*3 + 2)^2 = 588 <= 600
    "ball-d3-even": (doc(ball(3, 600, 4, 3), {"cell": ["-2", "1"]}, 343, eps="1/2"), "VERIFIED", ">= 343", ""),
    # a weaker claim than the messages allow is fine
    "ball-weaker-claim": (doc(ball(2, 400, 5, 2), {"cell": ["-2", "2"]}, 10), "VERIFIED", ">= 10", ""),
    # hemisphere lattice d = 3: theta_{9/2}^2 - 1 ~ 0.4666 < (1 - 0.35)/(1.35) ~ 0.4815; #{|u|^2 <= 100, u in Z^2} = 317
    "sphere-d3": (doc(SPHERE3, {}, 317), "VERIFIED", ">= 317", ""),
    # interaction r = 2, rho^2 = 256, L = 5, K = 1: 2 (5 + 2)^2 = 98 <= 256; 9 messages
    "interaction-r2": (doc({"construction": "interaction", "r": "2", "rho_squared": "256", "spacing": "5", "half_width": "1"},
                           {"cell": ["-2", "2"]}, 9), "VERIFIED", ">= 9", ""),
    # --- REJECTED
    "ball-one-message-too-many": (doc(ball(2, 400, 5, 2), {"cell": ["-2", "2"]}, 26), "REJECTED", "lower-lattice/ball/size", ""),
    "ball-margin-below-eps": (doc(ball(2, 400, 5, 2), {"cell": ["-2", "2"]}, 25, eps="97/100"), "REJECTED", "lower-lattice/ball/margin", ""),
    # K = 3: 2 (15 + 2)^2 = 578 > 400: corner cells leave the key ball
    "ball-cell-outside-key-ball": (doc(ball(2, 400, 5, 3), {"cell": ["-2", "2"]}, 49), "REJECTED", "lower-lattice/ball/inside", ""),
    # the paper's likely L = 10, K = 32 at 640^2: 4 (320 + 5)^2 = 422500 > 409600
    "ball-65x4-L10": (doc(ball(4, 409600, 10, 32, "tokens"), {"cell": ["-5", "4"]}, 17850625), "REJECTED", "lower-lattice/ball/inside", ""),
    # cells {-3..3} (7 wide) overlap at spacing 5
    "ball-overlapping-cells": (doc(ball(2, 400, 5, 1), {"cell": ["-3", "3"]}, 9), "REJECTED", "lower-lattice/ball/cells", ""),
    # d = 6, L = 3: 2 (S_1/theta)^6 - 1 < 0 (docs/mathematics.md table)
    "ball-d6-L3": (doc(ball(6, 10 ** 6, 3, 100), {"cell": ["-1", "1"]}, 201 ** 6, eps="1/100"), "REJECTED", "lower-lattice/ball/margin", ""),
    "sphere-one-point-too-many": (doc(SPHERE3, {}, 318), "REJECTED", "lower-lattice/sphere/size", ""),
    # mu = 2: theta_2^2 - 1 ~ 0.93 > 0.4815
    "sphere-mu-too-small": (doc(dict(SPHERE3, mu="2"), {}, 317), "REJECTED", "lower-lattice/sphere/energy", ""),
    "interaction-too-wide": (doc({"construction": "interaction", "r": "2", "rho_squared": "256", "spacing": "5", "half_width": "3"},
                                 {"cell": ["-2", "2"]}, 49), "REJECTED", "lower-lattice/interaction/inside", ""),
    # --- MALFORMED / UNSUPPORTED
    "ball-missing-half-width": (doc({k: v for k, v in ball(2, 400, 5, 2).items() if k != "half_width"}, {"cell": ["-2", "2"]}, 25),
                                "MALFORMED", "$.instance.half_width: required key is missing", ""),
    "ball-bad-mode": (doc(ball(2, 400, 5, 2, "rounded"), {"cell": ["-2", "2"]}, 25), "MALFORMED", "$.instance.mode", ""),
    "ball-json-int-d": (doc(dict(ball(2, 400, 5, 2), d=2), {"cell": ["-2", "2"]}, 25), "MALFORMED", "$.instance.d", ""),
    "sphere-witness-not-empty": (doc(SPHERE3, {"cell": ["0", "0"]}, 317), "MALFORMED", "$.witness.cell: unknown key", ""),
    "sphere-mu-below-range": (doc(dict(SPHERE3, mu="1/8"), {}, 317), "MALFORMED", "$.instance.mu", ""),
    "unknown-construction": (doc({"construction": "torus"}, {}, 1), "UNSUPPORTED", "torus", ""),
}


def main():
    expected = {}
    for name, (d, verdict, frag, _) in CASES.items():
        path = os.path.join(HERE, f"{name}.json")
        with open(path, "w") as f:
            json.dump(d, f, indent=1)
            f.write("\n")
        v = check(path)
        if v.status != verdict or frag not in v.message:
            raise SystemExit(f"{name}: expected {verdict} containing {frag!r}, got {v.line()}")
        expected[f"{name}.json"] = {"verdict": verdict, "contains": frag}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(expected)} lattice cases written to {HERE}")


if __name__ == "__main__":
    main()
