"""Recipe-level measurement defaults (issue 14).

A gate's measurement rule (warmup count or steady-state warmup, measured steps or a time
window) is the gate's, the same for every run. When a request on the bundled trainer leaves
a field of that rule out, the control recipe's ``[measure]`` section supplies it, so each
recipe carries the rule that suits its step time: the full-width H200 recipe warms up to
steady state and measures a 60 s window (19.4% of a 1xH200 A X B not measuring,
``benchmarks/results/gate_cost_h200x1_2026-12-01``), the CPU demo a 3 s window. Fields the
request sets win; external commands keep the request defaults (10 + 20 fixed).

The rule is taken in two groups, so a request gets exactly what it names: the warmup
(``warmup_mode``, ``warmup_steps``, ``max_warmup_steps``) and the window (``measured_steps``,
``measured_seconds``). A request that sets any field of a group takes the group's other fields
from the request defaults, not from the recipe: ``--warmup-steps 10 --measured-steps 20`` is
the campaign's fixed 10 + 20 on every recipe.
"""

from __future__ import annotations

from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.gate_spec import GateCreate

MEASURE_GROUPS = (("warmup_mode", "warmup_steps", "max_warmup_steps"),
                  ("measured_steps", "measured_seconds"))
"""``GateCreate`` fields that take the recipe's ``[measure]`` value when the request sets no
field of their group (same names as ``trainer.config.MeasureConfig``)."""


def _recipe_names_window(name: str) -> bool:
    """Whether the recipe's own TOML ``[measure]`` names a window (not a dataclass default)."""
    from trainer.config import recipe_measure_keys

    return bool(recipe_measure_keys(name) & {"measured_steps", "measured_seconds"})


def _auto_window(gate_in: GateCreate, given: set[str]) -> GateCreate:
    """Decide ``auto_window`` (its docstring): the cost model's window for a sequential
    candidate gate with a conditioning run on the bundled trainer, unless a window is named.

    Raises:
        ValidationFailed: ``auto_window`` true on a gate the cost model cannot serve.
    """
    from orchestrator.verdict import get_policy

    policy = get_policy(gate_in.policy, **gate_in.policy_params)
    eligible = (gate_in.policy == "sequential" and gate_in.kind == "candidate"
                and gate_in.workload.recipe is not None
                and getattr(policy, "num_conditioning_runs", 0) >= 1)
    if gate_in.auto_window and not eligible:
        raise ValidationFailed("auto_window", "the cost model chooses the window after the "
                               "conditioning run of a sequential candidate gate on a bundled "
                               "recipe; this gate has none: give measured_steps or "
                               "measured_seconds instead")
    if gate_in.auto_window is None:
        auto = eligible and not given and not _recipe_names_window(gate_in.workload.recipe)
        return gate_in.model_copy(update={"auto_window": True}) if auto else gate_in
    return gate_in


def apply_recipe_measure_defaults(gate_in: GateCreate) -> GateCreate:
    """Fill the measurement fields the request left out (see below), then decide the
    cost-model window (:func:`_auto_window`)."""
    given = set(gate_in.model_fields_set.intersection(MEASURE_GROUPS[1]))
    return _apply_recipe_semantics(_auto_window(_apply_recipe(gate_in), given))


def _apply_recipe_semantics(gate_in: GateCreate) -> GateCreate:
    """Take ``semantic_floor_prefix_steps`` from the control recipe's ``[measure]`` when the
    request leaves it out (issue 24 point 8); an external command keeps the policy default.

    Raises:
        ValidationFailed: The recipe cannot be loaded (``workload.recipe``).
    """
    name = gate_in.workload.recipe
    if name is None or gate_in.semantic_floor_prefix_steps is not None:
        return gate_in
    from trainer import load_recipe

    try:
        steps = load_recipe(name, []).measure.semantic_floor_prefix_steps
    except (ValueError, FileNotFoundError, KeyError) as exc:
        raise ValidationFailed("workload.recipe", str(exc)) from None
    return gate_in if steps is None else gate_in.model_copy(update={"semantic_floor_prefix_steps": steps})


def _apply_recipe(gate_in: GateCreate) -> GateCreate:
    """Fill the measurement fields the request left out from the control recipe.

    Args:
        gate_in: The validated request.

    Returns:
        ``gate_in`` itself when nothing is taken from the recipe (an external command, or
        every field set), else a re-validated copy with the recipe's values.

    Raises:
        ValidationFailed: The recipe cannot be loaded (``workload.recipe``), or the rule
            that results is inconsistent (e.g. ``max_warmup_steps`` below ``warmup_steps``).
    """
    name = gate_in.workload.recipe
    given = gate_in.model_fields_set
    groups = MEASURE_GROUPS[:1] if gate_in.auto_window else MEASURE_GROUPS  # the window: cost model
    missing = [f for group in groups if not given.intersection(group) for f in group]
    if name is None or not missing:
        return gate_in
    from trainer import load_recipe

    try:
        measure = load_recipe(name, []).measure
    except (ValueError, FileNotFoundError, KeyError) as exc:
        raise ValidationFailed("workload.recipe", str(exc)) from None
    data = gate_in.model_dump(mode="python", exclude_unset=True)
    data.update({field: getattr(measure, field) for field in missing})
    try:
        return GateCreate.model_validate(data)
    except ValueError as exc:
        raise ValidationFailed("warmup_steps", f"{exc} (measurement fields the request left "
                                               f"out come from recipe {name!r}'s [measure]: "
                                               f"{', '.join(missing)})") from None
