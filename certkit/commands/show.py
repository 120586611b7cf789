"""certkit show CERT.json: a certificate's canonical claim, kind, assumptions, instance shapes,
witness fields, provenance and sha256, read without checking (exit 2 MALFORMED header, 3
UNSUPPORTED version or kind)."""
import json
import os

from ..errors import InputError
from ..kernel import Malformed, Unsupported
from ..kernel.numerics import kind_and_claim, read_json


def add_arguments(p):
    p.add_argument("certificate", metavar="CERT.json")


def run(args):
    p = args.certificate
    if not os.path.exists(p):
        raise InputError(f"{p}: no such file")
    if os.path.isdir(p):
        raise InputError(f"{p}: is a folder, not a certificate file")
    try:
        doc, sha = read_json(p)
        kind, c = kind_and_claim(doc)
    except Malformed as e:
        print(f"MALFORMED   {e.path}: {e.what}")
        return 2
    except Unsupported as e:
        print(f"UNSUPPORTED {e}")
        return 3
    inst = doc["instance"]

    def shape(x):
        if isinstance(x, dict):
            return "×".join(map(str, x.get("shape", []))) + f" ({x.get('file')})"
        if isinstance(x, list):
            return f"{len(x)}×{len(x[0]) if x and isinstance(x[0], list) else 1} (inline)"
        return "?"
    print(f"claim       {c.text}")
    print(f"kind        {kind.name}")
    print(f"assumptions {', '.join(doc['assumptions'])}")
    if kind.shape == "parametric" and isinstance(inst, dict):     # no arrays
        print(f"instance    {', '.join(f'{k}={v}' for k, v in inst.items())}")
    elif isinstance(inst, dict):
        for who, x in (("", inst), ("replacement ", inst.get("replacement"))):
            if not isinstance(x, dict):
                continue
            print(f"{who}beta".ljust(11) + f" {json.dumps(x.get('beta'))}")
            print(f"{who}queries".ljust(11) + f" {shape(x.get('queries'))}")
            print(f"{who}keys".ljust(11) + f" {shape(x.get('keys'))}")
            for k in ("column_weights", "logit_bias", "values", "projection"):
                if k in x:
                    print(f"{who}{k}".ljust(11) + f" {shape(x[k])}")
            if "row_mask" in x:
                print(f"{who}row_mask".ljust(11) + f" {json.dumps(x['row_mask'])}")
    else:
        print("instance    ? (not an object)")
    print(f"witness     {', '.join(sorted(doc['witness'])) if isinstance(doc['witness'], dict) else '?'}")
    if "provenance" in doc:
        print(f"provenance  {json.dumps(doc['provenance'])}")
    print(f"sha256      {sha}")
    print("(not checked: run certkit verify)")
    return 0
