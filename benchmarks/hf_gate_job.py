"""A real Hugging Face Trainer job for benchmarks/integration_h200.sh (issue 26).

GPT-2 built from a config (no download, no internet): ``HF_MODEL=gpt2-small`` (12 layers,
width 768, 50,257-token vocabulary, 1,024-token sequences: 124 M parameters) or ``tiny``
(2 layers, width 64, for the CPU dry run); random token ids from a fixed seed; AdamW; bf16
on CUDA. The Trainer runs ``max_steps=axbgate_record.total_steps()`` and
``axbgate_record.hf.AxbgateCallback`` stops it when the gate's rule (``AXBGATE_*``) is met.
Switches a gate compares (environment of one side):

- ``HF_GRAD_CKPT=1``: gradient checkpointing (recomputes every block's forward: slower);
- ``HF_ATTN=eager|sdpa``: the attention implementation (default ``sdpa``).
"""

import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from axbgate_record import total_steps
from axbgate_record.hf import AxbgateCallback

SIZES = {"gpt2-small": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
         "tiny": dict(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=64)}


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int, vocab: int) -> None:
        self.ids = torch.randint(0, vocab, (n, seq), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    size = SIZES[os.environ.get("HF_MODEL", "gpt2-small")]
    cuda = torch.cuda.is_available()
    torch.manual_seed(0)
    config = GPT2Config(**size, bos_token_id=0, eos_token_id=0,
                        attn_implementation=os.environ.get("HF_ATTN", "sdpa"))
    model = GPT2LMHeadModel(config)
    batch = int(os.environ.get("HF_BATCH", "8"))
    seq = size["n_positions"]
    args = TrainingArguments(
        output_dir=os.environ.get("HF_OUT_DIR", "/tmp/hf-gate-out"), max_steps=total_steps(),
        per_device_train_batch_size=batch, logging_steps=1, learning_rate=3e-4, bf16=cuda,
        use_cpu=not cuda, gradient_checkpointing=os.environ.get("HF_GRAD_CKPT") == "1",
        report_to=[], save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0)
    data = Tokens(n=batch * 512, seq=seq, vocab=size["vocab_size"])
    Trainer(model=model, args=args, train_dataset=data,
            callbacks=[AxbgateCallback(tokens_per_sample=seq)]).train()


if __name__ == "__main__":
    main()
