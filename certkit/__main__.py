"""python -m certkit: the certkit command line (certkit.cli)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
