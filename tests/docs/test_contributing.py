"""CONTRIBUTING.md's recipes (a certificate kind, a compression method, a model family) are complete
enough to follow: each has a list of the files it touches, every file named exists (a `<placeholder>`
matches at least one file), and a registry named beside a file is defined in it."""
import glob
import os
import re

import pytest

import paths

ROOT = str(paths.ROOT)
RECIPES = {"Add a certificate kind": "certkit/kernel/check.py", "Add a compression method or a KV cache":
           "certkit/compress.py", "Add a model family": "certkit/models/families.py"}


def recipe(title):
    """[(path, registry or None)] of the recipe's "Files to touch" list."""
    with open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8") as f:
        text = f.read()
    assert f"\n## {title}\n" in text, title
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    assert "Files to touch" in section, title
    items = [line for line in section.split("Files to touch", 1)[1].splitlines() if line.startswith("* `")]
    out = []
    for item in items:
        head = item[2:].split(":", 1)[0]                    # "`a`, `b` (`REGISTRY`)"
        registry = re.search(r"\(`([A-Z_]+)`\)", head)
        paths = [p for p in re.findall(r"`([^`]+)`", head) if not registry or p != registry.group(1)]
        out += [(p, registry.group(1) if registry else None) for p in paths]
    return out


@pytest.mark.parametrize("title", RECIPES)
def test_every_file_a_recipe_names_exists(title):
    files = recipe(title)
    assert len(files) >= 4, files
    for path, _ in files:
        pattern = re.sub(r"<[^>]+>", "*", path)
        assert glob.glob(os.path.join(ROOT, pattern)), f"{title}: {path} does not exist"


@pytest.mark.parametrize("title", RECIPES)
def test_each_recipe_names_its_registry_and_the_registry_is_there(title):
    files = recipe(title)
    registries = [(p, r) for p, r in files if r]
    assert RECIPES[title] in {p for p, _ in registries}, f"{title}: names no registry in {RECIPES[title]}"
    for path, name in registries:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert re.search(rf"^{name}\b[^=\n]*=", f.read(), re.M), f"{path} defines no {name}"


def test_the_registries_hold_what_the_recipes_say():
    """The row fields the recipes name are the registries' fields."""
    from certkit.compress import Compressor, METHODS
    from certkit.kernel import KINDS
    from certkit.models.families import FAMILIES, Family
    assert {"since", "relation", "lemmas", "rule", "shape", "enclosure"} <= set(next(iter(KINDS.values()))._fields)
    assert {"name", "example", "models", "producer", "cost", "params"} <= set(Compressor.__dataclass_fields__)
    assert {"name", "label", "decoder", "route", "gguf", "window", "position_limit"} <= set(Family.__dataclass_fields__)
    assert METHODS and FAMILIES
