"""Lazy package exports (PEP 562): a package's public names, imported from their submodules on
first use, so that importing the package stays light (no scipy, sympy or torch at import time)."""
import importlib
import sys


def exports(package, homes):
    """(__getattr__, __dir__) for package (its __name__) whose public names live in submodules:
    homes maps each name to the submodule (relative to package) that defines it."""
    def getattr_(name):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{homes[name]}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_():
        return sorted(set(vars(sys.modules[package])) | set(homes))
    return getattr_, dir_
