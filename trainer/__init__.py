"""The bundled FSDP2 LTX-2 trainer (DESIGN.md section 8) and its record output.

Public API (importing this package does not import torch):

- :func:`load_recipe` validates a recipe name or path plus ``section.key=value``
  overrides and returns a :class:`Recipe` (``model_dump()`` is what the ledger stores).
- :func:`flops_per_sample` gives the DESIGN.md section 2 model FLOPs per sample.
- :func:`list_recipes` names the bundled recipes.

Run training with ``python -m trainer train --recipe NAME [overrides]``.
"""

from trainer.config import Recipe, apply_overrides, list_recipes, load_recipe
from trainer.flops import flops_per_sample

__all__ = ["Recipe", "apply_overrides", "flops_per_sample", "list_recipes", "load_recipe"]
