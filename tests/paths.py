"""Where things are, for a test in any folder under tests/: the repository's root, tests/ and the golden
corpora (tests/golden/, built by tests/golden/build.py).  tests/ is on sys.path (pyproject.toml's
[tool.pytest.ini_options] pythonpath), so a test imports this and the other shared helpers by name."""
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent
GOLDEN = TESTS / "golden"
