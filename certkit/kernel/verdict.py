"""Verdicts: the user-facing contract of the kernel.

VERIFIED / REJECTED / MALFORMED / UNSUPPORTED, exit codes 0/1/2/3; 4 is an internal error
(a kernel bug), never reported as REJECTED.  Only kernel.check() builds a VERIFIED Verdict.
"""
from dataclasses import dataclass, field

EXIT = {"VERIFIED": 0, "REJECTED": 1, "MALFORMED": 2, "UNSUPPORTED": 3, "INTERNAL-ERROR": 4}


class Malformed(Exception):
    """The certificate is not a well-formed format-1.0 document: JSON path + what is wrong."""
    status = "MALFORMED"

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path, self.what = path, what


class Unsupported(Exception):
    """A well-formed document this checker does not read (version, kind) or, with a message starting
    "resource limit", cannot decide within its limits (memory, time)."""
    status = "UNSUPPORTED"


class Rejected(Exception):
    """A recomputed enclosure does not certainly support the claim: step/rule + both numbers."""
    status = "REJECTED"

    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"{step}: {detail}")


@dataclass(frozen=True)
class Verdict:
    status: str            # one of EXIT's keys
    message: str           # canonical claim (VERIFIED) or the located reason
    details: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    def line(self) -> str:
        return f"{self.status:<11} {self.message}"
