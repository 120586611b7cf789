"""Real attention heads (untrusted): any local Hugging Face folder of a supported family, or a
transformers model in memory, read offline in eager attention; Q and K captured exactly as the
model's scores use them; every head checked against the model's own attention probabilities
(docs/models.md).

    heads_from_model(model_or_dir, text=..., tokens=..., length=128, layers=..., heads=...)  -> [Head]

Importing this package loads neither torch nor transformers: heads_from_model does, when called.
"""
from ..lazy import exports

__all__ = ["heads_from_model", "ModelError"]
__getattr__, __dir__ = exports(__name__, {"heads_from_model": "extract", "ModelError": "extract"})
