"""Gate the trainer you already have: time its loop and print the record contract.

``from axbgate_record import StepTimer`` needs neither torch nor the axbgate server stack
(it imports torch's pieces only when a process group is running). The integrations are
imported on demand and need their framework:

- :class:`axbgate_record.hf.AxbgateCallback`: a Hugging Face ``transformers`` ``TrainerCallback``
  (``pip install 'axbgate[hf]'``);
- :class:`axbgate_record.lightning.AxbgateCallback`: a Lightning ``Callback``
  (``pip install 'axbgate[lightning]'``);
- torchtitan and Megatron-LM need no code: a gate with ``workload.log_format`` ``torchtitan`` /
  ``megatron`` reads their own log lines (docs/integrations.md).

The rule every run of a gate follows arrives in ``AXBGATE_*`` variables
(:class:`MeasureRule`, docs/record-contract.md).
"""

from axbgate_record.dist import init_distributed
from axbgate_record.emit import emit, format_record
from axbgate_record.rule import ENV_NAMES, MeasureRule, total_steps
from axbgate_record.timer import StepTimer

__all__ = ["ENV_NAMES", "MeasureRule", "StepTimer", "emit", "format_record", "init_distributed",
           "total_steps"]
