"""Hugging Face ``transformers`` integration: a ``TrainerCallback`` that gates a ``Trainer``.

::

    from axbgate_record import total_steps
    from axbgate_record.hf import AxbgateCallback

    args = TrainingArguments(..., max_steps=total_steps(), logging_steps=1)
    Trainer(model=model, args=args, train_dataset=ds, callbacks=[AxbgateCallback()]).train()

One interval per optimizer step: from one ``on_step_end`` to the next (the batch fetches,
forward/backward of every accumulation micro-step, the optimizer step and the Trainer's own
logging in between), closed by a device synchronisation; the first from ``on_train_begin``.
The callback stops the Trainer once the gate's rule is met (``control.should_training_stop``),
so ``max_steps`` may be larger than the rule needs; a Trainer that stops first fails the run
with the reason. ``logging_steps=1`` puts every step's loss and gradient norm (the Trainer's
rank-mean) into the semantics record; with a larger ``logging_steps`` the series has gaps and
is not compared. Needs ``pip install 'axbgate[hf]'``.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from axbgate_record.timer import StepTimer

__all__ = ["AxbgateCallback"]


class AxbgateCallback(TrainerCallback):
    """Times every optimizer step of a ``Trainer`` under the gate's rule.

    Args:
        tokens_per_sample: Tokens per sample (sequence length), for ``tokens_per_s``.
        **timer_options: Passed to :class:`~axbgate_record.StepTimer` (``reduce``,
            ``noop_outside_gate``, ``stream``, ``environ``, ``rule``, ``sync``).
    """

    def __init__(self, *, tokens_per_sample: int | None = None, **timer_options: Any) -> None:
        self.tokens_per_sample = tokens_per_sample
        self.timer_options = timer_options
        self.timer: StepTimer | None = None
        self.result: dict[str, Any] | None = None
        """What :meth:`StepTimer.finish` returned, after training."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.timer = StepTimer(local_batch_size=args.per_device_train_batch_size,
                               grad_accum_steps=args.gradient_accumulation_steps,
                               tokens_per_sample=self.tokens_per_sample, **self.timer_options)
        self.timer.start()

    def on_step_end(self, args, state, control, **kwargs):
        timer = self.timer
        if timer is None or timer.done():
            return
        timer.step()
        if timer.done():
            control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.timer is not None and logs and state.global_step >= 1:
            self.timer.record(state.global_step - 1, loss=logs.get("loss"), grad_norm=logs.get("grad_norm"))

    def on_train_end(self, args, state, control, **kwargs):
        if self.timer is not None:
            self.result = self.timer.finish()
