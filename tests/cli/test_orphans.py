"""After kill -9 of the parent, the worker processes of `verify --jobs 2`
(certkit.batch) and of calibrate / certify --model --workers 2 (certkit.parallel) exit within a
few seconds instead of running on, reparented (PR_SET_PDEATHSIG on Linux, a parent check
elsewhere)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import paths

ROOT = str(paths.ROOT)
GRACE = 5.0           # seconds the workers get to notice

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc") and not sys.platform == "darwin",
                                reason="needs /proc or psutil to list processes")


def children(pid):
    """Pids of the live (not zombie) children of pid."""
    try:
        import psutil
        return {c.pid for c in psutil.Process(pid).children() if c.status() != psutil.STATUS_ZOMBIE}
    except ImportError:
        pass
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(d))
    return out


def alive(pid):
    try:
        import psutil
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    except ImportError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def survivors_after_kill(cmd, want, cwd=None, timeout=60):
    """Start cmd, wait until it has `want` worker children, kill -9 it; (workers, survivors after GRACE s,
    seconds until the last one was gone)."""
    p = subprocess.Popen(cmd, cwd=cwd, env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        t0, workers = time.time(), set()
        while time.time() - t0 < timeout:
            # spawn: the workers are python processes (the resource tracker is one more child)
            workers = children(p.pid)
            if len(workers) >= want:
                break
            assert p.poll() is None, "the parent ended before its workers started"
            time.sleep(0.1)
        assert len(workers) >= want, f"only {len(workers)} children appeared"
        time.sleep(1.0)                        # the workers are in their tasks now
        workers = children(p.pid)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        t_kill = time.time()
        left = set(workers)
        while left and time.time() - t_kill < GRACE:
            left = {w for w in left if alive(w)}
            time.sleep(0.05)
        return workers, left, time.time() - t_kill
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for w in children(p.pid) if p.poll() is None else ():
            os.kill(w, signal.SIGKILL)


BATCH = textwrap.dedent("""
    import time
    from certkit.batch import ordered
    if __name__ == "__main__":
        for _ in ordered(time.sleep, [60] * 8, jobs=2):
            pass
""")
PARALLEL = textwrap.dedent("""
    import time
    from certkit.parallel import run
    if __name__ == "__main__":
        for _ in run(time.sleep, [60] * 8, workers=2):
            pass
""")


@pytest.mark.parametrize("name,script", [("batch (verify --jobs)", BATCH),
                                         ("parallel (calibrate / certify --model --workers)", PARALLEL)])
def test_workers_die_with_their_parent(name, script, tmp_path):
    f = tmp_path / "parent.py"
    f.write_text(script)
    workers, left, seconds = survivors_after_kill([sys.executable, str(f)], want=2)
    try:
        assert len(workers) >= 2
        assert not left, f"{name}: {len(left)} of {len(workers)} workers still alive {GRACE} s after kill -9"
    finally:
        for w in left:
            os.kill(w, signal.SIGKILL)


def test_verify_jobs_workers_die_with_the_cli(tmp_path):
    """The real command: certkit verify --jobs 2 on many copies of a certificate."""
    import shutil
    src = os.path.join(ROOT, "tests", "golden", "valid")
    for i in range(40):
        shutil.copytree(src, tmp_path / f"copy{i}")
    workers, left, seconds = survivors_after_kill(
        [sys.executable, "-m", "certkit", "verify", "--jobs", "2", "--route", "arb", str(tmp_path)], want=2)
    try:
        assert not left, f"{len(left)} of {len(workers)} verify workers alive {GRACE} s after kill -9"
    finally:
        for w in left:
            os.kill(w, signal.SIGKILL)


def test_a_dead_parent_is_noticed_without_prctl(monkeypatch):
    """The fallback (not Linux): the watcher ends the process once its parent is gone."""
    from certkit import parallel
    code = textwrap.dedent("""
        import os, sys, time
        from certkit import parallel
        sys.platform = "darwin"                 # no prctl: the polling watcher
        parallel.PARENT_POLL = 0.1
        parallel.die_with_parent(os.getppid())
        print("armed", flush=True)
        time.sleep(60)
    """)
    # an intermediate shell is the parent; killing it orphans the python process
    p = subprocess.Popen(["/bin/sh", "-c", f"{sys.executable} -c '{code}' & echo $!; wait"],
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    child = int(p.stdout.readline())
    assert p.stdout.readline().strip() == "armed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    t0 = time.time()
    while alive(child) and time.time() - t0 < GRACE:
        time.sleep(0.05)
    gone = not alive(child)
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, "the watcher did not end the orphaned process"
    assert parallel.parent_alive(os.getppid())
