"""docs/guide/hostile-files.md lists every hostile input reported against certkit with the test that holds it:
each named test must exist (a table that names a test nobody wrote, or one renamed away, fails here)."""
import re

from paths import ROOT

ROW = re.compile(r"^\| (\d+) \| .+ \| .+ \| `([\w/]+\.py)::(\w+)` \|$")


def test_every_case_in_the_hostile_table_names_a_test_that_exists():
    rows = [ROW.match(line) for line in (ROOT / "docs" / "guide" / "hostile-files.md").read_text().splitlines()
            if line.startswith("| ") and "::" in line]
    assert all(rows) and len(rows) >= 44, [r for r in rows if not r]
    assert [int(r.group(1)) for r in rows] == list(range(1, len(rows) + 1))
    for r in rows:
        source = (ROOT / "tests" / r.group(2)).read_text()
        assert re.search(rf"^def {r.group(3)}\(", source, re.M), f"{r.group(2)}::{r.group(3)} does not exist"
