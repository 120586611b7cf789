"""Resource exhaustion is a verdict, never exit 4: out of memory and a per-file time limit give
UNSUPPORTED with a "resource limit" message (kernel check(); the CLI's --time-limit uses it)."""
import glob
import json
import os
import subprocess
import sys
import textwrap

from certkit.choices import check

import paths

ROOT = str(paths.ROOT)


def test_out_of_memory_is_unsupported_not_internal_error(tmp_path):
    """A 40 MB certificate (within the 64 MiB file limit) whose JSON needs hundreds of MB of Python
    objects, checked under an address-space limit of the process's size + 120 MB."""
    with open(os.path.join(ROOT, "tests", "golden", "valid", "gauss-n24-factor.json")) as f:
        doc = json.load(f)
    doc["provenance"] = {"padding": [0] * (20 * 10 ** 6)}
    p = tmp_path / "huge.json"
    p.write_text(json.dumps(doc, separators=(",", ":")))
    code = textwrap.dedent(f"""
        import resource, sys
        from certkit.choices import check
        size = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + 120 * 2 ** 20, resource.RLIM_INFINITY))
        v = check({str(p)!r})
        print(v.status, v.message)
        sys.exit(v.exit_code)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stdout.startswith("UNSUPPORTED resource limit: out of memory"), r.stdout


def test_time_limit_is_unsupported_and_restores_the_alarm():
    import signal
    cert = sorted(glob.glob(os.path.join(ROOT, "data", "certificates", "gauss-n256-d64-factor.json")))[0]
    before = signal.getsignal(signal.SIGALRM)
    v = check(cert, "arb", time_limit=1e-3)            # the Arb route takes far longer than 1 ms here
    assert v.status == "UNSUPPORTED" and v.message.startswith("resource limit: not decided within"), v.line()
    assert signal.getsignal(signal.SIGALRM) == before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert check(cert, "fast", time_limit=60).status == "VERIFIED"
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
