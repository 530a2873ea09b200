"""Diffusers-layout checkpoints on 2 gloo ranks: rank-local load, sharded export (issue 27).

The rank side runs this file as a script under ``torchrun --nproc_per_node 2``; its
assertions run in both ranks and rank 0 writes a JSON summary the pytest side checks.
The CLI test runs ``python -m trainer train`` as a gate would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                            "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env["AXBGATE_LOG_LEVEL"] = "WARNING"
    return env


def _torchrun(args: list[str], timeout: int = 180) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def _records(stdout: str) -> dict[str, list]:
    recs: dict[str, list] = {}
    for line in stdout.splitlines():
        if line.startswith("AXBGATE_"):
            prefix, body = line.split(" ", 1)
            recs.setdefault(prefix, []).append(json.loads(body))
    return recs


# --------------------------------------------------------------------------- pytest side

def test_rank_local_load_and_sharded_export(tmp_path):
    res = _torchrun([__file__, str(tmp_path)])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    out = json.loads((tmp_path / "out.json").read_text())
    video = out["video_bytes"]
    for mode in ("split", "packed"):
        per_rank = out[mode]["bytes_read"]
        assert sum(per_rank) == video  # every row read once, by one rank
        assert max(per_rank) < 0.6 * video  # each rank about its half
        assert out[mode]["num_skipped"] == [133, 133]


def test_cli_run_from_checkpoint_trains_like_the_init(tmp_path):
    """fp32 folder of the recipe's own init: same losses as the random init, bitwise; with
    padded prompts and image-to-video conditioning on; export keeps the dtype."""
    ckpt = tmp_path / "ckpt"
    common = ["--recipe", "tiny", "model.singleton_timestep=false",
              "data.num_text_valid_tokens=5", "data.first_frame_conditioning_p=0.5",
              "measure.warmup_steps=1", "measure.measured_steps=3"]
    env = _env()
    subprocess.run([sys.executable, "-m", "trainer", "write-checkpoint", "--out", str(ckpt),
                    "--max-shard-gb", "0.0002", "--device", "cpu", *common[:2]],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    runs = {}
    for tag, extra in (("init", []),
                       ("loaded", [f"checkpoint.load_safetensors={ckpt}",
                                   f"checkpoint.export_safetensors={tmp_path / 'export'}",
                                   "checkpoint.export_max_shard_gb=0.0002"])):
        res = _torchrun(["-m", "trainer", "train", *common, *extra])
        (tmp_path / f"{tag}.log").write_text(res.stdout + res.stderr)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
        runs[tag] = _records(res.stdout)
    losses = {tag: [s["loss"] for s in recs["AXBGATE_STEP"]] for tag, recs in runs.items()}
    assert losses["loaded"] == losses["init"] and len(losses["init"]) == 4
    assert "skipped 133 audio/audio-video tensors" in (tmp_path / "loaded.log").read_text()
    from safetensors import safe_open

    files = sorted((tmp_path / "export").glob("*.safetensors"))
    assert len(files) > 1 and (tmp_path / "export" / "diffusion_pytorch_model.safetensors.index.json").is_file()
    for f in files:
        with safe_open(str(f), "pt") as handle:
            assert {handle.get_slice(k).get_dtype() for k in handle.keys()} == {"F32"}


# --------------------------------------------------------------------------- rank side

def _full(model) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))


def _rank_main(tmp: Path) -> dict:
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file

    from trainer import checkpoint, load_recipe
    from trainer.diffusers_layout import write_init_checkpoint
    from trainer.train import build, init_distributed

    torch.set_num_threads(1)
    base = load_recipe("tiny")
    d = init_distributed(base)
    folder = tmp / "diffusers"
    if d.rank == 0:
        write_init_checkpoint(base, folder, max_shard_bytes=60_000)
    dist.barrier()
    out: dict = {}
    for mode in ("split", "packed"):
        packed = str(mode == "packed").lower()
        init_recipe = load_recipe("tiny", [f"model.packed_qkv={packed}"])
        want, _ = build(init_recipe, d)
        model, _ = build(init_recipe, d)
        with torch.no_grad():
            for p in model.parameters():
                p.to_local().fill_(float("nan"))
        report = checkpoint.load_safetensors(model, folder)
        got, ref = _full(model), _full(want)
        for key, value in ref.items():
            assert torch.equal(got[key], value), key
        reports = [None, None]
        dist.all_gather_object(reports, [report.bytes_read, report.num_skipped])
        out[mode] = {"bytes_read": [r[0] for r in reports], "num_skipped": [r[1] for r in reports]}
        out["video_bytes"] = sum(v.numel() * 4 for v in ref.values())
        # bf16 sharded export from 2 ranks, reload, export again: the same bytes
        first, again = tmp / f"bf16_{mode}", tmp / f"bf16_{mode}_again"
        checkpoint.export_safetensors(model, first, dtype="bfloat16", max_shard_bytes=30_000)
        reloaded, _ = build(load_recipe("tiny", [f"model.packed_qkv={packed}"]), d)
        checkpoint.load_safetensors(reloaded, first)
        checkpoint.export_safetensors(reloaded, again, like=first, max_shard_bytes=30_000)
        if d.rank == 0:
            names = sorted(f.name for f in first.iterdir())
            assert names == sorted(f.name for f in again.iterdir()) and len(names) > 2
            for name in names:
                assert (first / name).read_bytes() == (again / name).read_bytes(), name
            shards = [load_file(f) for f in first.glob("*.safetensors")]
            assert all(t.dtype == torch.bfloat16 for s in shards for t in s.values())
        dist.barrier()
    return out


if __name__ == "__main__":
    import torch.distributed as dist

    result = _rank_main(Path(sys.argv[1]))
    if dist.get_rank() == 0:
        (Path(sys.argv[1]) / "out.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()
    # As trainer/__main__.py: skip interpreter teardown (a gloo C++ thread destructor can
    # call std::terminate at exit on CPU).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
