"""User-facing errors and the exit codes a script can tell apart.

Verdict codes 0-4 belong to the kernel (VERIFIED, REJECTED, MALFORMED, UNSUPPORTED, internal
error).  Errors in what the user asked for get codes from BSD's sysexits.h, never 2, so that a
bad command line is never mistaken for a MALFORMED certificate.
"""

USAGE = 64        # EX_USAGE: a bad argument or value (the message names it)
NO_INPUT = 66     # EX_NOINPUT: an input file or folder is missing or unreadable
UNAVAILABLE = 69  # EX_UNAVAILABLE: a model or extra that is not installed (the message gives the pip command)
CANT_CREATE = 73  # EX_CANTCREAT: an output cannot be written (--out is a file, not writable, ...)
INTERRUPTED = 130


class UserError(ValueError):
    """Bad input from the user: the message names the argument, file, field or value."""
    exit_code = USAGE


class InputError(UserError):
    """An input file or folder is missing or unreadable."""
    exit_code = NO_INPUT


class OutputError(UserError):
    """An output cannot be written."""
    exit_code = CANT_CREATE


class MissingModel(UserError):
    """A built-in model whose package is not installed (the message gives the pip command)."""
    exit_code = UNAVAILABLE
