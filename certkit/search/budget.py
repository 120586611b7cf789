"""Anytime certification: a time budget for one sandwich and the safe points where the searches stop.

A Budget of B seconds starts when it is made.  The sandwich engine (certkit.search.sandwich) makes
it the active budget of its searches (a context variable, so threads and worker processes each
see their own), and the searches call tick() at safe points: between two candidates, at every
step of a loop, before every objective evaluation of an L-BFGS run.  Once the deadline has passed,
tick() raises BudgetSpent; nothing half-done survives it (a search's shared records are appended
whole, and certificates are written and checked between safe points), and the engine returns
the best sandwich whose ends the kernel has already VERIFIED.

Some steps cannot be cut: a kernel check or a judgement of a factorisation (certkit.kernel), a
LAPACK call.  step(key) wraps one: it measures the step, and refuses to start it (BudgetSpent)
when its last duration (or, the first time, that of a step `like` it) would end it more than
SLACK x B after the deadline.

Without an active budget, tick() and step() do nothing, and the searches compute exactly what
they compute without this module: the budget decides only where they stop.
"""
import contextvars
import time
from contextlib import contextmanager

SLACK = 0.05      # a step that cannot be cut may end at most SLACK x B after the deadline (the goal is 10 %)


def now():
    """The budget's clock (monotonic seconds); tests replace it with a fake one."""
    return time.monotonic()


class BudgetSpent(Exception):
    """Raised at a safe point once the active budget is spent; the sandwich engine catches it."""


class Budget:
    """B seconds from now: tick() raises BudgetSpent once they have passed; step(key) guards a step
    that cannot be cut (see the module docstring)."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.start = now()
        self.deadline = self.start + self.seconds
        self.costs: dict[str, float] = {}

    def share_spent(self, fraction: float) -> bool:
        """Whether fraction x B of the budget has passed."""
        return now() >= self.start + fraction * self.seconds

    def part(self, fraction: float) -> "Budget":
        """A budget of fraction x B seconds from now that ends no later than this one."""
        return Budget(min(fraction * self.seconds, self.deadline - now()))

    def spent(self) -> bool:
        return now() >= self.deadline

    def tick(self) -> None:
        if now() >= self.deadline:
            raise BudgetSpent

    @contextmanager
    def step(self, key: str, like: str | None = None):
        t = now()
        last = self.costs.get(key, self.costs.get(like) if like else None)
        if t >= self.deadline or (last is not None and t + last > self.deadline + SLACK * self.seconds):
            raise BudgetSpent
        yield
        self.costs[key] = now() - t


_active: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("certkit_budget", default=None)


def current() -> Budget | None:
    """The active budget (None outside a budgeted sandwich)."""
    return _active.get()


def tick() -> None:
    """A safe point: BudgetSpent if the active budget is spent, else nothing."""
    b = _active.get()
    if b is not None and now() >= b.deadline:
        raise BudgetSpent


@contextmanager
def step(key: str, like: str | None = None):
    """A step that cannot be cut, named key (its duration is remembered per key; like: the key of a
    step whose duration predicts this one's until it has its own): see Budget.step."""
    b = _active.get()
    if b is None:
        yield
        return
    with b.step(key, like):
        yield


@contextmanager
def active(budget: Budget | None):
    """Make budget the active one inside the block (None: no budget)."""
    token = _active.set(budget)
    try:
        yield budget
    finally:
        _active.reset(token)
