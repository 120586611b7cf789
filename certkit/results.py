"""Results of certkit's table-shaped computations: frozen records with two views.

A result is a table, its rows one dict each (column name -> value, as `--json` writes them), with
the column order `columns` (keys beyond it follow in the order they first appear), plus what the
computation found beside the table as attributes:

    AuditResult       certkit.audit      one row per (source, eps, r, chain quantity) and route
    ScaleResult       certkit.scale      one row per certified lattice point; .slopes, .headline,
                                         .crosscheck, .causal (a CausalLaw: one row per length n)
    CalibrateResult   certkit.calibrate  one row per (length, layer, head, multiplier, eps)
    TablesResult      certkit.tables     .tables: name -> Table (one row per table row)

Each has `.to_csv(path=None)` (the CSV text, also written to path when given) and `.frame()` (a
pandas DataFrame; pandas is not a dependency of certkit).
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True, kw_only=True, repr=False)
class Records:
    """A table as records: rows (one dict per row) and the order of their columns."""
    rows: list[Row]
    columns: tuple[str, ...] = ()

    def fields(self) -> list[str]:
        """The CSV / DataFrame columns: `columns`, then any other key of a row in order of appearance."""
        out = list(self.columns)
        seen = set(out)
        for r in self.rows:
            for k in r:
                if k not in seen:
                    seen.add(k)
                    out.append(k)
        return out

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """The rows as CSV text (a header line, then one line per row; None is an empty cell);
        written to path too when path is given."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.fields(), lineterminator="\n")
        w.writeheader()
        w.writerows(self.rows)
        text = buf.getvalue()
        if path is not None:
            from .outputs import write_atomic
            write_atomic(path, text)
        return text

    def frame(self) -> Any:
        """The rows as a pandas.DataFrame (columns in the order of fields()); needs pandas."""
        try:
            import pandas
        except ModuleNotFoundError:
            raise ModuleNotFoundError(f"{type(self).__name__}.frame() needs pandas, which is not installed: "
                                      "pip install pandas (or use .rows or .to_csv())", name="pandas") from None
        return pandas.DataFrame(self.rows, columns=self.fields())

    def __repr__(self) -> str:
        fields = self.fields()
        more = ", ..." if len(fields) > 6 else ""
        return f"{type(self).__name__}({len(self.rows)} rows: {', '.join(fields[:6])}{more})"


@dataclass(frozen=True, kw_only=True, repr=False)
class AuditResult(Records):
    """The audit of the symbolic chain (docs/mathematics.md §7): rows, one per (source, eps, r,
    quantity), hold that quantity by every route (numpy, torch, the kernel's proven bound, Arb,
    mpmath); records, one per (source, eps, r), are `certkit audit --json`'s records (with
    "checks", "ordering", "flags", "seconds"); flags lists the disagreements (empty: all agree)."""
    records: list[Row]
    flags: list[Row]


@dataclass(frozen=True, kw_only=True, repr=False)
class CausalLaw(Records):
    """r_eps of causal attention at beta = 0 against the context length n (docs/mathematics.md
    §8.5): rows, one per n, the certified lower and upper bounds; the least-squares fits
    M = a + b ln n of each (None with fewer than 3 certified points) and the theory's slopes."""
    lower_fit: Row | None
    upper_fit: Row | None
    theory: Row


@dataclass(frozen=True, kw_only=True, repr=False)
class ScaleResult(Records):
    """The certified scaling laws (docs/mathematics.md §8.2-8.5): rows, one per lattice point, each
    a kernel-VERIFIED parametric lower bound M; slopes, one per (family, dim), the fitted exponent
    against the theory; headline, the 65^4 ball point; crosscheck, parametric vs explicit matrices
    (empty when not asked); causal, the causal law (None without the causal family); out, the folder
    of the certificates (None: a temporary folder, removed)."""
    eps: Fraction
    tolerance: float
    slopes: list[Row]
    headline: Row
    crosscheck: list[Row]
    causal: CausalLaw | None
    out: str | None


@dataclass(frozen=True, kw_only=True, repr=False)
class CalibrateResult(Records):
    """The real-model calibration grid: rows as results.json's (to_csv() gives results.csv);
    summary, the statistics; out, the folder; meta, model, grid and reconstruction errors;
    computed and skipped, the groups (length, layer, head, multiplier) computed now and found done."""
    summary: Row
    out: str
    meta: Row
    computed: int
    skipped: int


@dataclass(frozen=True, kw_only=True, repr=False)
class Table(Records):
    """One table of certified constants: every value a string, "_lo"/"_hi" columns an Arb enclosure
    rounded outward, "_approx" mpmath; to_csv() gives the bytes of `certkit tables`' <name>.csv."""
    name: str
    title: str


@dataclass(frozen=True, kw_only=True, repr=False)
class TablesResult(Records):
    """Tables of certified constants: tables, name -> Table; rows, every row of every table led by
    its table's name (column "table"), so one frame holds them all."""
    tables: dict[str, Table] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Table:
        return self.tables[name]
