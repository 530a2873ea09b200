"""Use cases of the nightly re-gate (issue 7): tracked repositories, checks, re-gates,
outcomes and bisection. Each public function is one transaction's worth of work (the
caller commits).

Decisions documented here:

* First check of a repository without a measured head: the current head becomes the
  measured head (``baseline`` event) without a gate; re-gates start with the next
  commit. A re-gate needs a control that someone accepted as the reference, and the
  head at the time the branch was added is that reference.
* ``pass``: the candidate becomes the measured head; the stopping point carries over
  to it as timing-neutral (``carries_over`` on the event).
* ``improvement``: flagged and notified, and the candidate also becomes the measured
  head (otherwise every later re-gate would compare against the slower source and a
  later regression smaller than the improvement would pass unnoticed).
* ``regression``: flagged and notified; the measured head stays, so later commits keep
  being compared with the last good source until the regression is fixed or a person
  accepts it (``PATCH /repos/{id}`` with ``last_measured_sha``).
* No verdict (job never started, health failed, a run crashed, cancelled): a
  ``no_verdict`` alert and notification. The pair is re-gated at the next check up to
  ``nightly.max_attempts`` times, then the scheduler waits for the branch to move.
* One re-gate (or bisection) per repository at a time; idempotency keys per
  (repository, control, candidate, attempt) and per bisection step make a restarted
  scheduler find its gates instead of submitting them again.
"""

from orchestrator.usecases.regate.checks import check_repository, schedule_regate
from orchestrator.usecases.regate.common import build_gate_request
from orchestrator.usecases.regate.outcomes import on_gate_finished
from orchestrator.usecases.regate.repos import (
    add_repository,
    get_repository,
    get_repository_view,
    list_repositories,
    remove_repository,
    rotate_webhook_secret,
    update_repository,
)

__all__ = [
    "add_repository",
    "build_gate_request",
    "check_repository",
    "get_repository",
    "get_repository_view",
    "list_repositories",
    "on_gate_finished",
    "remove_repository",
    "rotate_webhook_secret",
    "schedule_regate",
    "update_repository",
]
