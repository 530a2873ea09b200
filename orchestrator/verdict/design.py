"""The planned role order of a sequential gate: conditioning, A X B, then balanced blocks.

A gate runs ``num_conditioning_runs`` control runs (measured, left out of the estimate:
a cold GPU's first run is faster), then the sandwich A X B, then pairs of one candidate
and one control until the run budget ``max_runs`` is used. Which order each pair runs in
is the design:

* ``mirror`` (default since sequential v3): pairs come in blocks of two; the first pair of
  a block is ``X C`` or ``C X`` at random, the second is its mirror image, so every block is
  ``X C C X`` or ``C X X C``. The first block is always ``C X X C``: the early look (after
  A X B and one pair) then reads ``C X C C X``, whose candidate runs sit on one odd and one
  even position (``C X C X C`` put both on odd ones, and with anti-correlated neighbours
  and a too-quiet history the early look falsely decided 1.2-1.3% per side;
  benchmarks/results/verdict_noise_*). Within a block the candidate and the control positions have
  the same mean and the same count of odd positions, so neither a linear drift nor a
  noise that alternates from run to run (period 2: anti-correlated neighbours) moves the
  estimate; the random orientation keeps any other periodic structure from lining up
  with the candidate (randomised complete blocks: Montgomery, Design and Analysis of
  Experiments, ch. 4; the ABBA cross-over order: Jones & Kenward, Design and Analysis of
  Cross-Over Trials, ch. 2). A last lone pair (odd number of pairs) is ``X C``, so a gate
  that runs its whole budget ends on a control.
* ``alternate``: always ``X C`` (sequential v1/v2: ``A A X B X A X B ...``). A noise that
  alternates from run to run then aliases completely onto the candidate (measured: false
  accepts 2.3-4.3% per side at a neighbour correlation of -0.5; benchmarks/verdict_noise.py).

Controls are labelled ``A`` and ``B`` alternately in run order, starting with ``A`` (the
conditioning run and the first control of the sandwich are both ``A``): the labels only
say which control is which; both are the control side.

The orientation of each block comes from ``random.Random(seed)`` (Mersenne Twister; its
``random()`` sequence for an integer seed is the same on every Python 3 version), so the
seed stored with a gate reproduces its planned pattern exactly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["DESIGNS", "label_controls", "planned_codes", "planned_roles", "roles_to_codes"]

DESIGNS: tuple[str, ...] = ("mirror", "alternate")
"""Accepted values of ``SequentialPolicy.design``."""

CONTROL, CANDIDATE = 0, 1
"""Role codes used by the vectorised core (``seqcore.py``)."""


def planned_codes(design: str, seed: int | None, max_runs: int, num_conditioning_runs: int
                  ) -> tuple[int, ...]:
    """The planned pattern as role codes (0 control, 1 candidate).

    Args:
        design: ``mirror`` or ``alternate`` (module docstring).
        seed: Seed of the block orientations; None gives the fixed orientation
            ``X C C X`` for every ``mirror`` block (a gate judged without its seed).
        max_runs: Run budget, conditioning runs included.
        num_conditioning_runs: Leading control runs left out of the estimate.

    Returns:
        ``num_conditioning_runs + 3 + 2k`` codes with the largest k within ``max_runs``.

    Raises:
        ValueError: Unknown design, or a budget smaller than conditioning + A X B.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    first = [CONTROL] * num_conditioning_runs + [CONTROL, CANDIDATE, CONTROL]
    if max_runs < len(first):
        raise ValueError(f"max_runs {max_runs} is smaller than the first look "
                         f"({len(first)} runs)")
    num_pairs = (max_runs - len(first)) // 2
    rng = random.Random(seed) if seed is not None else None
    codes = list(first)
    for index in range(num_pairs):
        if design == "alternate":
            pair = [CANDIDATE, CONTROL]
        elif index % 2 == 0:
            lone = index == num_pairs - 1
            flip = (not lone) and rng is not None and rng.random() < 0.5
            if index == 0:
                flip = True  # the first block is C X X C: the early look is parity-balanced
            pair = [CONTROL, CANDIDATE] if flip else [CANDIDATE, CONTROL]
        else:
            pair = codes[-2:][::-1]
        codes.extend(pair)
    return tuple(codes)


def label_controls(codes: Sequence[int]) -> tuple[str, ...]:
    """Role letters of a code sequence: ``X`` for candidates, ``A``/``B`` alternately for
    controls (the first two controls are both ``A`` when the first is a conditioning run
    followed by the sandwich's A; see the module docstring).

    Args:
        codes: Role codes in run order.

    Returns:
        One letter per code.
    """
    out: list[str] = []
    seen_x = False
    next_label = "A"
    for code in codes:
        if code == CANDIDATE:
            out.append("X")
            seen_x = True
            continue
        if not seen_x:
            out.append("A")  # every control before the first candidate is an A
            next_label = "B"
            continue
        out.append(next_label)
        next_label = "A" if next_label == "B" else "B"
    return tuple(out)


def planned_roles(design: str, seed: int | None, max_runs: int,
                  num_conditioning_runs: int) -> tuple[str, ...]:
    """The planned pattern as role letters (see :func:`planned_codes`).

    Returns:
        E.g. ``("A", "A", "X", "B", "A", "X", "X", "B", "X", "A")`` (mirror, one flipped block).
    """
    return label_controls(planned_codes(design, seed, max_runs, num_conditioning_runs))


def roles_to_codes(roles: Sequence[str]) -> tuple[int, ...]:
    """Role letters to codes (``X`` -> 1, ``A``/``B`` -> 0).

    Raises:
        ValueError: A role other than A, X or B.
    """
    out = []
    for role in roles:
        if role not in ("A", "B", "X"):
            raise ValueError(f"role must be A, X or B, got {role!r}")
        out.append(CANDIDATE if role == "X" else CONTROL)
    return tuple(out)
