"""Anytime certification (certkit.certify(..., budget=), certify --budget): wherever the budget stops
the searches, both ends of the sandwich are kernel-VERIFIED certificates (or the trivial upper bound
min(n, N)) with lower <= upper, the sandwich only narrows as the budget grows, a budget the
searches do not reach gives the bytes of a run without one (deepen=False), and the time they leave
goes to deeper descents of the upper search (deepen=True, the default).  The clock is a fake one
that counts its own reads, so where a run stops does not depend on the machine's load."""
import inspect
import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import certkit
from certkit import synthetic
from certkit.search import budget as budget_mod
from certkit.search.sandwich import STOPPED, sandwich

EPS = Fraction(1, 4)


@pytest.fixture(scope="module")
def head():
    return synthetic.head("gaussian", 40, 6, beta=Fraction(2), seed=3, name="g40")


class CountingClock:
    """A fake budget clock: each read is one second later than the one before."""

    def __init__(self):
        self.reads = 0

    def __call__(self):
        self.reads += 1
        return float(self.reads)


def files(s):
    """{side: (document bytes, sidecars)} of a Sandwich's certificates."""
    return {side: (c.document, c.sidecars) for side in ("lower", "upper") if (c := getattr(s, side)) is not None}


def check_sandwich(s):
    """Both ends VERIFIED by the kernel (now, on their bytes) and ordered."""
    lo, up = s.bounds
    assert s.lower is not None and 1 <= lo <= up <= min(s.head.n, s.head.N)
    for c in (s.lower, s.upper):
        if c is not None:
            assert certkit.verify(c).status == "VERIFIED", c
            assert c.eps == s.eps


def test_budget_zero_gives_the_trivial_sandwich_verified(head):
    s = certkit.certify(head, eps=EPS, budget=0, peers=("svd",))
    assert s.stopped_on_budget and s.budget == 0.0
    assert s.lower.bound == 1 and s.lower.kind == "lower-decoding-margin" and s.upper is None
    assert s.bounds == (1, 40) and s.width == 40.0
    assert s.peers["svd"] == {"k": None, "certified_error": None, "seconds": 0.0, "note": STOPPED}
    check_sandwich(s)
    assert "stopped on the budget of 0 s" in repr(s)


def test_a_budget_the_searches_do_not_reach_gives_the_same_certificates(head):
    free = certkit.certify(head, eps=EPS, peers=("svd", "nystrom"))
    timed = certkit.certify(head, eps=EPS, peers=("svd", "nystrom"), budget=10 ** 6, deepen=False)
    assert not timed.stopped_on_budget and free.budget is None and timed.budget == 10 ** 6
    assert files(timed) == files(free) and len(files(free)) == 2
    strip = lambda peers: {p: {k: v for k, v in d.items() if k != "seconds"} for p, d in peers.items()}
    assert strip(timed.peers) == strip(free.peers)
    row, row0 = timed.row(), free.row()
    assert row["budget"] == 10 ** 6 and row["stopped_on_budget"] is False and row["width"] == round(free.width, 4)
    assert "budget" not in row0 and {k: v for k, v in row.items() if k not in ("budget", "stopped_on_budget", "width",
                                                                                "seconds", "peers")} == \
        {k: v for k, v in row0.items() if k not in ("seconds", "peers")}


def test_a_stop_at_any_safe_point_keeps_a_verified_sandwich_that_narrows_with_the_budget(head, monkeypatch):
    clock = CountingClock()
    monkeypatch.setattr(budget_mod, "now", clock)
    full = sandwich(head, EPS, budget=10 ** 9, deepen=False)
    total = clock.reads
    assert not full.stopped_on_budget and total > 50
    free = sandwich(head, EPS)
    assert files(full) == files(free)
    last = (0, 10 ** 9)
    seen = set()
    for b in sorted({0, 1, 2, 3, 5, 8} | {int(total * f) for f in np.linspace(0.05, 0.95, 19)}):
        clock.reads = 0
        s = sandwich(head, EPS, budget=b, deepen=False)
        assert s.stopped_on_budget, b
        check_sandwich(s)
        lo, up = s.bounds
        assert lo >= last[0] and up <= last[1], (b, s.bounds, last)       # only narrower with more time
        last = (lo, up)
        seen.add(s.bounds)
    assert len(seen) >= 3                          # the stages are reached one after the other
    assert last[0] <= full.bounds[0] and last[1] >= full.bounds[1]


def test_the_stages_come_in_order_each_replacing_an_end(head):
    said = []
    s = sandwich(head, EPS, budget=10 ** 6, progress=said.append, deepen=False)
    assert said[0].startswith("1 <= r <= 40 (lower: lower-decoding-margin)")
    stages = [t for t in said if t in ("SVD upper", "fast lower", "lower search", "late lower search (interlude)",
                                       "late lower search")]
    assert stages == ["fast lower", "SVD upper", "lower search", "late lower search (interlude)", "late lower search"]
    fast, svd = said.index("fast lower"), said.index("SVD upper")
    assert said[fast + 1].startswith("4 <= r <= 40 (lower: ") and "(upper: svd)" in said[svd + 1]
    last_upper = [t for t in said if "(upper: " in t][-1]
    assert last_upper.startswith(f"{s.lower.bound} <= r <= {s.upper.bound} (upper: refined)")


@pytest.fixture(scope="module")
def deep_head():
    """A head whose upper end the deeper descents lower: 9 <= r <= 13 without them, upper 12 after
    the second round (16 x 400 iterations per refinement)."""
    return synthetic.head("gaussian", 48, 6, beta=Fraction(3), seed=2, name="g48")


def test_the_time_the_searches_leave_goes_to_deeper_descents_of_the_upper_end(deep_head, monkeypatch):
    """deepen (the default under a budget): after the searches and the peers, upper.search's rounds
    from its best, until the budget ends them; the sandwich is not marked stopped for that, its
    lower end and peers are the unbudgeted run's, and its upper end only falls as the budget grows."""
    from certkit.search import sandwich as sandwich_mod
    monkeypatch.setattr(sandwich_mod, "ROUNDS", 2)
    free = sandwich(deep_head, EPS, peers=("svd",))
    clock = CountingClock()
    monkeypatch.setattr(budget_mod, "now", clock)
    said = []
    deep = sandwich(deep_head, EPS, peers=("svd",), budget=10 ** 9, progress=said.append)
    assert not deep.stopped_on_budget and files(deep)["lower"] == files(free)["lower"]
    assert deep.peers["svd"]["k"] == free.peers["svd"]["k"] is not None
    assert deep.upper.bound < free.upper.bound and deep.upper.search["method"] == "deepened"
    assert said.index("deeper upper search") > [i for i, t in enumerate(said) if t.endswith("; peers")][0]
    check_sandwich(deep)
    total, ups = clock.reads, []
    clock.reads = 0
    shallow = sandwich(deep_head, EPS, peers=("svd",), budget=10 ** 9, deepen=False)
    searched = clock.reads                                # the searches and the peers: deepening starts here
    assert files(shallow) == files(free) and searched < total
    for b in sorted({searched + int((total - searched) * f) for f in (0.1, 0.5, 0.9)}):
        clock.reads = 0
        s = sandwich(deep_head, EPS, peers=("svd",), budget=b)
        assert not s.stopped_on_budget and s.lower.bound == free.lower.bound and s.peers["svd"]["k"] is not None
        check_sandwich(s)
        ups.append(s.upper.bound)
    assert ups == sorted(ups, reverse=True) and free.upper.bound >= ups[0] and ups[-1] >= deep.upper.bound


def test_the_deeper_rounds_start_from_the_best_and_never_return_a_worse_rank(deep_head):
    """upper.search(start=r, rounds=2): r's factorisation is the start, every rank it reports is
    judged within eps and below r's (on this head the second round reaches 12 from 13)."""
    from certkit.search import upper
    A = deep_head.attention()
    judge = lambda U, V: float(np.abs(A - U @ V.T).sum(axis=1).max())
    r = upper.search(A, 0.25, judge)
    seen = []
    deep = upper.search(A, 0.25, judge, start=r, rounds=2, improved=seen.append)
    assert deep["k"] < r["k"] and seen and deep["tried"][:len(r["tried"])] == r["tried"]
    assert all(b["k"] < r["k"] and b["method"] == "deepened" and judge(b["U"], b["V"]) <= 0.25 for b in seen)
    assert judge(deep["U"], deep["V"]) <= 0.25


def test_the_descent_calls_its_interlude_after_every_rank_it_tries(monkeypatch):
    """upper.descend's interlude(failed): after each rank tried, saying whether it was reached (refine is
    faked: ranks >= 5 reach eps, smaller ones do not)."""
    from certkit.search import upper
    monkeypatch.setattr(upper, "refine", lambda A, C, G, **kw: (C, G))
    monkeypatch.setattr(upper, "factor_row_errors", lambda A, C, G: np.array([0.0 if C.shape[1] >= 5 else 1.0]))
    rng = np.random.default_rng(0)
    A, C, G = rng.random((40, 40)), rng.random((40, 16)), rng.random((16, 40))
    seen, calls = [], []
    pause = lambda failed: calls.append((list(seen), failed))
    for k, _, _ in upper.descend(A, 0.25, C, G, rescue=False, interlude=pause):
        seen.append(k)
    assert seen == [14, 12, 10, 8, 6, 5]           # steps of 16 // 8 = 2, then 1 after the failure at 4
    assert [c for c in calls if c[1]] == [([14, 12, 10, 8, 6], True)]    # 4 failed; not tried again after 5
    assert len(calls) == 7 and calls[0] == ([], False)      # after every rank tried, before it is yielded


def test_a_budgeted_upper_search_pauses_for_the_interlude_lower_search_at_LATE_AT(head, monkeypatch):
    """Under a budget the interlude runs the late lower candidates once LATE_AT of the budget has passed,
    even if no rank failed (the fake clock: one second per read); what it did not finish runs after
    the end of the descent."""
    from certkit.search import sandwich as sandwich_mod
    clock = CountingClock()
    monkeypatch.setattr(budget_mod, "now", clock)
    said = []
    monkeypatch.setattr(sandwich_mod, "LATE_AT", 0.0)          # at once: at the descent's first rank
    sandwich(head, EPS, budget=10 ** 9, progress=said.append)
    growth, late = said.index("late lower search (interlude)"), said.index("late lower search")
    assert "(upper: refined)" not in " ".join(said[:growth]) and said.count("late lower search (interlude)") == 1
    assert said.count("late lower search") == 1 and "(upper: refined)" in " ".join(said[growth:late])


def slow_late_candidates(steps, runs):
    """A stand-in for late_candidates: runs gets [stages, safe points passed] per call; `steps` safe
    points in the growth stage, none in the pruning's, no candidate."""
    def late(A, eps, pruning, growth=None, soft=True, stages=("pruning", "growth"), above=0):
        runs.append([stages, 0])
        if "growth" in stages:
            for _ in range(steps):
                budget_mod.tick()
                runs[-1][1] += 1
        yield from ()
    return late


def test_the_interlude_cuts_the_growth_at_its_share_of_the_budget_and_it_resumes_after_the_descent(
        head, monkeypatch):
    """The interlude: the pruning's soft decoders, then the growth for INTERLUDE_SHARE x B seconds (one
    fake second per safe point); then the descent goes on, after it the growth runs again to its end,
    and the sandwich did not stop."""
    from certkit.search import sandwich as sandwich_mod
    monkeypatch.setattr(budget_mod, "now", CountingClock())
    monkeypatch.setattr(sandwich_mod, "LATE_AT", 0.0)
    runs, B = [], 10 ** 6
    share = sandwich_mod.INTERLUDE_SHARE * B
    steps = int(1.5 * share)                       # more than the share, less than the budget
    monkeypatch.setattr(sandwich_mod, "late_candidates", slow_late_candidates(steps, runs))
    s = sandwich(head, EPS, budget=B, deepen=False)
    assert [r[0] for r in runs] == [("pruning",), ("growth",), ("growth",)]
    assert 0.99 * share <= runs[1][1] <= share and runs[2][1] == steps
    assert not s.stopped_on_budget
    check_sandwich(s)


def test_a_budget_that_ends_in_the_interlude_stops_the_sandwich(head, monkeypatch):
    from certkit.search import sandwich as sandwich_mod
    monkeypatch.setattr(budget_mod, "now", CountingClock())
    monkeypatch.setattr(sandwich_mod, "LATE_AT", 0.0)
    monkeypatch.setattr(sandwich_mod, "INTERLUDE_SHARE", 2.0)
    runs = []
    monkeypatch.setattr(sandwich_mod, "late_candidates", slow_late_candidates(10 ** 6, runs))
    s = sandwich(head, EPS, budget=10 ** 5, peers=("svd",))
    assert s.stopped_on_budget and [r[0] for r in runs] == [("pruning",), ("growth",)] and runs[1][1] < 10 ** 5
    assert s.peers["svd"]["note"] == STOPPED
    check_sandwich(s)


def test_the_late_lower_search_runs_once_in_every_sandwich(head):
    for budget in (None, 10 ** 6):
        said = []
        s = sandwich(head, EPS, budget=budget, progress=said.append)
        assert said.count("late lower search") == 1
        assert said.index("late lower search") > [i for i, t in enumerate(said) if t.startswith("lower >= ")][0]
        check_sandwich(s)


def test_a_step_that_cannot_be_cut_is_not_started_when_it_would_overrun(monkeypatch):
    t = [0.0]
    monkeypatch.setattr(budget_mod, "now", lambda: t[0])
    b = budget_mod.Budget(10)
    with budget_mod.active(b):
        with budget_mod.step("svd"):
            t[0] += 4                              # the step took 4 s
        budget_mod.tick()                          # 4 s of 10: go on
        t[0] = 6.4                                 # 6.4 + 4 ends before 10 + 0.5: still allowed
        with budget_mod.step("svd"):
            t[0] = 9.0
        t[0] = 7.0                                 # 7 + 2.6 (its last time) ends in time too
        with budget_mod.step("svd"):
            t[0] = 7.5
        with pytest.raises(budget_mod.BudgetSpent):
            with budget_mod.step("svd"):           # 7.5 + 0.5 ends in time; it takes 2.4 s, and 9.9 + 2.4 > 10.5
                t[0] = 9.9
            with budget_mod.step("svd"):
                pass
        t[0] = 9.0
        with pytest.raises(budget_mod.BudgetSpent):    # never run: predicted by the 2.4 s of "svd"
            with budget_mod.step("check", like="svd"):
                pass
        with budget_mod.step("judge", like="unknown"):   # nothing to predict it by: run
            t[0] = 9.5
        t[0] = 10.0
        with pytest.raises(budget_mod.BudgetSpent):
            budget_mod.tick()
    budget_mod.tick()                              # no active budget: nothing happens
    with budget_mod.step("svd"):
        pass


@pytest.mark.parametrize("bad", [-1, "abc", "nan", float("inf"), True, "1e12"])
def test_a_bad_budget_is_a_user_error(head, bad):
    with pytest.raises(certkit.UserError, match="budget"):
        certkit.certify(head, eps=EPS, budget=bad)


def test_budget_is_keyword_only_and_typed():
    p = inspect.signature(certkit.certify).parameters["budget"]
    assert p.kind is p.KEYWORD_ONLY and p.default is None and "float" in str(p.annotation)
    assert "budget" in certkit.certify.__doc__


def run(*args):
    return subprocess.run([sys.executable, "-m", "certkit", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_cli_budget_rows_summary_and_the_same_bytes_when_not_reached(tmp_path):
    spec = ["certify", "--synthetic", "gaussian:n=24,d=4,beta=2,seed=1", "--eps", "1/4,1/2", "--peers", "svd"]
    r = run(*spec, "--budget", "0", "--out", tmp_path / "zero")
    assert r.returncode == 1, r.stderr                 # no upper certificate: a bound is missing
    assert r.stdout.count("<= r_eps(A) <= 24 (trivial)") == 2 and r.stdout.count("[stopped on the budget") == 2
    rows = json.loads((tmp_path / "zero" / "summary.json").read_text())
    assert [(x["lower"], x["upper"], x["budget"], x["stopped_on_budget"], x["width"]) for x in rows] == \
        [(1, None, 0.0, True, 24.0)] * 2
    assert rows[0]["peers"]["svd"]["note"] == STOPPED
    md = (tmp_path / "zero" / "summary.md").read_text()
    assert "**2 of 2 sandwiches stopped on the budget**" in md and "| stopped on the budget |" in md
    header = (tmp_path / "zero" / "summary.csv").read_text().splitlines()[0].split(",")
    assert {"budget", "stopped_on_budget", "width"} <= set(header)
    v = run("verify", *(tmp_path / "zero" / x["lower_file"] for x in rows))
    assert v.returncode == 0 and v.stdout.count("VERIFIED") == 2

    assert run(*spec, "--budget", "100000", "--no-deepen", "--out", tmp_path / "big").returncode == 0
    assert run(*spec, "--out", tmp_path / "none").returncode == 0
    certs = lambda d: {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file() and
                       not p.name.startswith(("summary.", "."))}
    assert certs(tmp_path / "big") == certs(tmp_path / "none") and len(certs(tmp_path / "none")) >= 4
    big = json.loads((tmp_path / "big" / "summary.json").read_text())
    none = json.loads((tmp_path / "none" / "summary.json").read_text())
    assert all(x["stopped_on_budget"] is False for x in big)
    assert all("budget" not in x for x in none)
    assert "| stopped on the budget |" not in (tmp_path / "none" / "summary.md").read_text()
    extra = ("seconds", "peers", "budget", "stopped_on_budget", "width")
    strip = lambda x: {k: v for k, v in x.items() if k not in extra}
    assert [strip(x) for x in big] == [strip(x) for x in none]


def test_cli_no_deepen_needs_a_budget(tmp_path):
    r = run("certify", "--synthetic", "gaussian:n=8", "--no-deepen", "--out", tmp_path)
    assert r.returncode == 64 and "--no-deepen needs --budget" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("value, needle", [("-1", "outside [0,"), ("soon", "is not a number"),
                                           ("nan", "is not a number")])
def test_cli_bad_budget_exits_64(tmp_path, value, needle):
    r = run("certify", "--synthetic", "gaussian:n=8", "--budget", value, "--out", tmp_path)
    assert r.returncode == 64 and "--budget" in r.stderr and needle in r.stderr and "Traceback" not in r.stderr
