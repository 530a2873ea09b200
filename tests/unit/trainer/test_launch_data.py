"""Launch environment (torchrun / srun / lone) and the input pipeline."""

import pytest
import torch
from safetensors.torch import save_file

from trainer import load_recipe
from trainer.data import RepeatedBatches
from trainer.train import resolve_launch_env


def test_srun_environment_maps_to_torch_variables():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
           "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29511"}
    assert resolve_launch_env(env) == (5, 8, 1)
    assert env["RANK"] == "5" and env["WORLD_SIZE"] == "8" and env["LOCAL_RANK"] == "1"
    assert env["MASTER_ADDR"] == "10.0.0.7" and env["MASTER_PORT"] == "29511"


def test_torchrun_variables_win_over_slurm():
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "SLURM_PROCID": "0",
           "MASTER_PORT": "1234"}
    assert resolve_launch_env(env) == (1, 2, 1)


def test_lone_process_and_missing_port():
    env: dict[str, str] = {}
    assert resolve_launch_env(env) == (0, 1, 0)
    assert env["MASTER_ADDR"] == "127.0.0.1" and int(env["MASTER_PORT"]) > 0
    with pytest.raises(ValueError, match="MASTER_PORT"):
        resolve_launch_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})


def test_synthetic_batches_are_deterministic_and_split_consistently():
    r2 = load_recipe("tiny", ["train.local_batch_size=2", "data.num_batches=2"])
    r1 = load_recipe("tiny", ["train.local_batch_size=1", "train.grad_accum_steps=2"])
    a = RepeatedBatches(r2, 0, torch.device("cpu"))
    b = RepeatedBatches(r1, 0, torch.device("cpu"))
    it = iter(a)
    first, second, third = next(it), next(it), next(it)
    assert first[0]["latents"].shape == (2, 32, 16) and first[0]["text"].shape == (2, 8, 32)
    assert first[0]["sigma"].shape == (2,) and torch.all((first[0]["sigma"] > 0) & (first[0]["sigma"] < 1))
    assert not torch.equal(first[0]["latents"], second[0]["latents"])
    assert third is first  # the pool repeats; no work in the timed loop
    micro = next(iter(b))
    for key in ("latents", "noise", "text", "sigma"):
        assert torch.equal(torch.cat([micro[0][key], micro[1][key]]), first[0][key])
    other_rank = next(iter(RepeatedBatches(r2, 1, torch.device("cpu"))))
    assert not torch.equal(other_rank[0]["latents"], first[0]["latents"])


def test_safetensors_latents_source(tmp_path):
    latents = torch.randn(3, 16, 2, 4, 4)  # [S, C, F, H, W] of the tiny recipe
    text = torch.randn(3, 8, 32)
    path = tmp_path / "latents.safetensors"
    save_file({"latents": latents, "text": text}, str(path))
    recipe = load_recipe("tiny", ['data.source="safetensors"', f'data.path="{path}"'])
    micro = next(iter(RepeatedBatches(recipe, 0, torch.device("cpu"))))
    torch.testing.assert_close(micro[0]["latents"][1], latents[1].flatten(1).T)
    torch.testing.assert_close(micro[0]["text"][0], text[0])
    save_file({"latents": latents[:, :, :1].contiguous(), "text": text}, str(path))
    with pytest.raises(ValueError, match="latents shape"):
        RepeatedBatches(recipe, 0, torch.device("cpu"))
    with pytest.raises(ValueError, match="data.path is required"):
        load_recipe("tiny", ['data.source="safetensors"'])
