"""Peak host memory per rank while loading a Diffusers-layout LTX-2 checkpoint (issue 27).

Writes a ``save_pretrained``-compatible folder at full LTX-2 width (d 4096, FFN 16384,
audio and audio-video tensors included, sharded with an index) under /tmp, then starts
2 CPU gloo ranks with ``torchrun`` that build the recipe's FSDP2 model exactly as
``trainer.train.build`` does and load the folder, and prints one row per rank:

* ``baseline``: the rank's resident memory (VmRSS) after imports and the process group,
  before the model exists;
* ``shard``: bytes of this rank's FSDP2 parameter shards (float32 masters, padding
  included: what the rank must hold);
* ``peak``: VmHWM over the build and load (reset through /proc/self/clear_refs once the
  baseline is read);
* ``ratio`` = (peak - baseline) / shard; the target is ``peak <= baseline + 1.3 shard``.

Modes: ``rank-local`` is ``trainer.train.build`` with ``checkpoint.load_safetensors``
(``trainer.checkpoint.load_safetensors``); ``whole-file`` is the loader before issue 27
(every rank ``safetensors.torch.load_file`` of every file, then the full tensors sliced
into the shards); ``init`` is ``build`` without a checkpoint (the recipe's random init);
``empty`` only materialises the shards and writes zeros into them (what holding the
shards costs; its ``ok`` is "-"). ``ok``: within the target and the loaded values equal
the written ones. The folder is deleted at the end (``--keep`` keeps it).

Usage (repo root, CPU):
    .venv/bin/python benchmarks/checkpoint_rss.py --num-layers 2 --dtype float32 \
        --modes rank-local,whole-file
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _status(field: str) -> int:
    """A /proc/self/status memory field, bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _recipe(args):
    from trainer import load_recipe

    return load_recipe("ltx2-bench-h200", [
        f"model.num_layers={args.num_layers}", "parallel.device=cpu", "parallel.compile=false",
        "parallel.param_dtype=float32", "model.attention_backend=math"])


def _whole_file_load(model, folder: Path) -> None:
    """The loader before issue 27: every rank reads every file whole."""
    from safetensors.torch import load_file

    from trainer.checkpoint import _assign, clean_name, diffusers_to_native
    from trainer.checkpoint_files import resolve_files

    state = {}
    for f in resolve_files(folder)[0]:
        state.update(load_file(str(f)))
    names = [clean_name(n) for n, _ in model.named_parameters()]
    native = diffusers_to_native(state, names)
    for name, param in model.named_parameters():
        _assign(param, native[clean_name(name)].float())


def rank_side(args) -> None:
    """Runs in each torchrun rank: baseline, build + load, peak; rank 0 writes the JSON."""
    import torch
    import torch.distributed as dist

    from trainer import checkpoint
    from trainer.model import LTX2VideoTransformer
    from trainer.parallelize import parallelize
    from trainer.train import build, init_distributed

    torch.set_num_threads(1)
    recipe = _recipe(args)
    d = init_distributed(recipe)
    dist.barrier()
    baseline = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS
    start = time.perf_counter()
    materialized = None
    if args.mode == "rank-local":
        over = recipe.model_copy(update={"checkpoint": recipe.checkpoint.model_copy(
            update={"load_safetensors": str(args.folder)})})
        model, _ = build(over, d)
    elif args.mode == "init":
        model, _ = build(recipe, d)
    else:
        with torch.device("meta"):
            model = LTX2VideoTransformer(recipe.model, recipe.data)
        parallelize(model, recipe.parallel, d.mesh)
        model.to_empty(device=d.device)
        with torch.no_grad():  # touch the pages: what the shards alone occupy
            for p in model.parameters():
                p.to_local().zero_()
        materialized = _status("VmHWM")
        if args.mode == "whole-file":
            _whole_file_load(model, args.folder)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM")
    storages = {p.to_local().untyped_storage().data_ptr(): p.to_local().untyped_storage().nbytes()
                for p in model.parameters()}
    shard = sum(storages.values())
    # correctness: a sample of parameters equals the recipe's init (written by the same rule)
    probe = dict(model.named_parameters())["transformer_blocks.0.ff.net.2.weight"].full_tensor()
    want = checkpoint._init_value("transformer_blocks.0.ff.net.2.weight", probe.shape,
                                  recipe.train.init_std, recipe.train.seed, torch.device("cpu"))
    rows = [None] * d.world_size
    dist.all_gather_object(rows, {"rank": d.rank, "baseline": baseline, "shard": shard,
                                  "peak": peak, "seconds": seconds, "materialized": materialized,
                                  "correct": bool(torch.equal(
                                      probe, want.to(getattr(torch, args.dtype)).to(probe.dtype)))})
    if d.rank == 0:
        Path(args.result).write_text(json.dumps(rows))
    dist.barrier()
    dist.destroy_process_group()


def _write(args) -> dict:
    from trainer.diffusers_layout import write_init_checkpoint

    start = time.perf_counter()
    info = write_init_checkpoint(_recipe(args), args.folder, dtype=args.dtype,
                                 max_shard_bytes=int(args.max_shard_gb * 1e9), device="cpu")
    info["seconds"] = time.perf_counter() - start
    return info


def main() -> int:
    """Write the folder, run each mode on 2 gloo ranks, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--max-shard-gb", type=float, default=1.0)
    p.add_argument("--modes", default="rank-local,whole-file")
    p.add_argument("--folder", type=Path, default=Path("/tmp/axbgate-checkpoint-rss"))
    p.add_argument("--keep", action="store_true")
    p.add_argument("--rank-side", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_side:
        rank_side(args)
        sys.stdout.flush()
        os._exit(0)  # as trainer/__main__.py: no gloo teardown at exit
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "AXBGATE_LOG_LEVEL": "WARNING"}
    try:
        if args.folder.exists():
            shutil.rmtree(args.folder)
        info = _write(args)
        files = sorted(args.folder.glob("*.safetensors"))
        print(f"checkpoint: {args.folder} ({len(files)} shards + index, {info['total_bytes'] / 1e9:.3f} GB,"
              f" {info['num_tensors']} tensors of which {info['num_audio_video_tensors']} audio/AV,"
              f" {args.dtype}, d 4096, {args.num_layers} blocks), written in {info['seconds']:.1f} s")
        print(f"{'mode':<11} {'rank':>4} {'baseline GB':>11} {'shard GB':>9} {'peak GB':>8} "
              f"{'ratio':>6} {'target GB':>9} {'load s':>7} {'ok':>4}")
        for mode in args.modes.split(","):
            result = args.folder.with_suffix(f".{mode}.json")
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node=2", __file__, "--rank-side", "--mode", mode,
                   "--result", str(result), "--folder", str(args.folder),
                   "--num-layers", str(args.num_layers), "--dtype", args.dtype]
            res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                 check=False, timeout=1800)
            if res.returncode != 0:
                print(f"{mode}: failed (exit {res.returncode})\n{res.stderr[-3000:]}")
                continue
            for row in json.loads(result.read_text()):
                target = row["baseline"] + 1.3 * row["shard"]
                ratio = (row["peak"] - row["baseline"]) / row["shard"]
                ok = ("-" if mode == "empty" else "yes" if row["peak"] <= target and row["correct"]
                      else "NO" if row["correct"] else "WRONG")
                print(f"{mode:<11} {row['rank']:>4} {row['baseline'] / 1e9:>11.3f} "
                      f"{row['shard'] / 1e9:>9.3f} {row['peak'] / 1e9:>8.3f} {ratio:>6.3f} "
                      f"{target / 1e9:>9.3f} {row['seconds']:>7.2f} {ok:>4}")
            result.unlink()
    finally:
        if not args.keep and args.folder.exists():
            shutil.rmtree(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
