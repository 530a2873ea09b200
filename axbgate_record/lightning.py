"""Lightning integration: a ``Callback`` that gates a ``lightning.pytorch.Trainer`` fit.

::

    from axbgate_record import total_steps
    from axbgate_record.lightning import AxbgateCallback

    trainer = L.Trainer(max_steps=total_steps(), callbacks=[AxbgateCallback(local_batch_size=8)])
    trainer.fit(model, loader)

One interval per optimizer step (``trainer.global_step`` advancing in
``on_train_batch_end``; accumulation micro-batches belong to their step), closed by a device
synchronisation; the first from ``on_train_start``. The callback sets ``trainer.should_stop``
once the gate's rule is met; a fit that ends first fails the run with the reason, an
exception prints a failed result. The loss is what ``training_step`` returned for the step's
last micro-batch on rank 0 (return the rank-mean loss to compare it across ranks). Needs
``pip install 'axbgate[lightning]'`` (``lightning``; ``pytorch_lightning`` works too).
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone pytorch_lightning package
    from pytorch_lightning.callbacks import Callback

from axbgate_record.timer import StepTimer

__all__ = ["AxbgateCallback"]


def _loss(outputs: Any) -> Any:
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    return None if outputs is None else getattr(outputs, "detach", lambda: outputs)()


class AxbgateCallback(Callback):
    """Times every optimizer step of a Lightning fit under the gate's rule.

    Args:
        local_batch_size: Samples per rank per micro-batch (None: the train loader's
            ``batch_size``, else 1).
        tokens_per_sample: Tokens per sample, for ``tokens_per_s``.
        **timer_options: Passed to :class:`~axbgate_record.StepTimer`.
    """

    def __init__(self, *, local_batch_size: int | None = None, tokens_per_sample: int | None = None,
                 **timer_options: Any) -> None:
        self.local_batch_size = local_batch_size
        self.tokens_per_sample = tokens_per_sample
        self.timer_options = timer_options
        self.timer: StepTimer | None = None
        self.result: dict[str, Any] | None = None
        self._global_step = 0

    def on_train_start(self, trainer, pl_module):
        batch = self.local_batch_size or getattr(trainer.train_dataloader, "batch_size", None) or 1
        self.timer = StepTimer(local_batch_size=int(batch), grad_accum_steps=trainer.accumulate_grad_batches,
                               tokens_per_sample=self.tokens_per_sample, **self.timer_options)
        self._global_step = trainer.global_step
        self.timer.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        timer = self.timer
        if timer is None or trainer.global_step == self._global_step or timer.done():
            return  # an accumulation micro-batch, or the rule is already met
        self._global_step = trainer.global_step
        timer.step(loss=_loss(outputs))
        if timer.done():
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module):
        if self.timer is not None:
            self.result = self.timer.finish()

    def on_exception(self, trainer, pl_module, exception):
        if self.timer is not None:
            self.timer.fail(exception)
