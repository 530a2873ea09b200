"""The bundled trainer on CPU: 2 gloo processes (issue 3, "Done when").

Each scenario runs this file as a script under ``torchrun --nproc_per_node 2``;
assertions run inside both ranks (a failure makes torchrun exit non-zero) and
rank 0 writes what the pytest side checks further as JSON. The CLI tests run
``python -m trainer train`` exactly as a gate would and parse the record lines.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------- helpers

def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                            "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env["AXBGATE_LOG_LEVEL"] = "WARNING"
    return env


def _torchrun(args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def _scenario(name: str, tmp_path: Path) -> dict:
    res = _torchrun([__file__, name, str(tmp_path)])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    return json.loads((tmp_path / f"{name}.json").read_text())


def _train(tmp_path: Path, tag: str, overrides: list[str]) -> tuple[int, dict[str, list]]:
    res = _torchrun(["-m", "trainer", "train", "--recipe", "tiny", *overrides])
    (tmp_path / f"{tag}.log").write_text(res.stdout + res.stderr)
    recs: dict[str, list] = {}
    for line in res.stdout.splitlines():
        if line.startswith("AXBGATE_"):
            prefix, body = line.split(" ", 1)
            recs.setdefault(prefix, []).append(json.loads(body))
    return res.returncode, recs


def _check_contract(recs: dict[str, list], warmup: int, measured: int) -> None:
    """docs/record-contract.md v1: prefixes, required keys, types, consistency."""
    assert len(recs["AXBGATE_PROVENANCE"]) == 1
    steps, (timing,), (result,) = recs["AXBGATE_STEP"], recs["AXBGATE_TIMING"], recs["AXBGATE_RESULT"]
    for rec in [*steps, timing, result, *recs["AXBGATE_PROVENANCE"]]:
        assert rec["v"] == 1
    assert [s["step"] for s in steps] == list(range(warmup + measured))
    for s in steps:
        assert isinstance(s["slowest_rank_step_s"], float) and s["slowest_rank_step_s"] > 0
        assert s["phase"] == ("warmup" if s["step"] < warmup else "measured")
        assert math.isfinite(s["loss"]) and math.isfinite(s["grad_norm"])
        assert s["rank_step_s"] <= s["slowest_rank_step_s"]
    assert timing["num_warmup_steps"] == warmup and timing["num_measured_steps"] == measured
    slowest = timing["slowest_rank_step_s"]
    assert slowest == [s["slowest_rank_step_s"] for s in steps]
    per_rank = timing["per_rank_step_s"]
    assert len(per_rank) == 2 and slowest == [max(a, b) for a, b in zip(*per_rank)]
    for key in ("median_step_s", "world_size", "local_batch_size", "grad_accum_steps"):
        assert key in result
    assert result["status"] == "ok" and result["world_size"] == 2
    assert abs(result["median_step_s"] - statistics.median(slowest[warmup:])) <= 1e-9 * result[
        "median_step_s"]
    assert result["mfu_pct"] is None and result["flops_per_sample"] == 24772608  # CPU: no MFU
    prov = recs["AXBGATE_PROVENANCE"][0]
    assert prov["recipe"]["name"] == "tiny" and prov["torch_version"]


# --------------------------------------------------------------------------- pytest side

def test_cli_records_loss_falls_and_dcp_resume(tmp_path):
    common = ["train.fused_adamw=on", "parallel.param_dtype=bfloat16"]
    code, full = _train(tmp_path, "full", [*common, "measure.warmup_steps=2",
                                           "measure.measured_steps=4"])
    assert code == 0, (tmp_path / "full.log").read_text()[-4000:]
    _check_contract(full, 2, 4)
    losses = [s["loss"] for s in full["AXBGATE_STEP"]]
    assert losses[-1] < losses[0] * 0.97, losses  # same batch every step: loss must fall
    assert all(b < a for a, b in itertools.pairwise(losses)), losses

    records_mod = pytest.importorskip("orchestrator.domain.records")
    parsed = records_mod.parse((tmp_path / "full.log").read_text())
    assert parsed.slowest_rank_step_s() == full["AXBGATE_TIMING"][0]["slowest_rank_step_s"]
    assert parsed.num_warmup_steps() == 2 and parsed.num_measured_steps() == 4

    dcp_dir = tmp_path / "dcp"
    code, first = _train(tmp_path, "first", [*common, "measure.warmup_steps=0",
                                             "measure.measured_steps=3",
                                             f"checkpoint.save_dcp={dcp_dir}"])
    assert code == 0, (tmp_path / "first.log").read_text()[-4000:]
    code, resumed = _train(tmp_path, "resumed", [*common, "measure.warmup_steps=0",
                                                 "measure.measured_steps=3",
                                                 f"checkpoint.resume_dcp={dcp_dir}"])
    assert code == 0, (tmp_path / "resumed.log").read_text()[-4000:]
    assert [s["loss"] for s in first["AXBGATE_STEP"]] == losses[:3]
    resumed_losses = [s["loss"] for s in resumed["AXBGATE_STEP"]]
    assert resumed_losses == pytest.approx(losses[3:], rel=1e-6, abs=0), (resumed_losses, losses)


def test_non_finite_loss_fails_the_run(tmp_path):
    code, recs = _train(tmp_path, "nan", ["train.lr=1e30", "train.max_grad_norm=1e30",
                                          "measure.warmup_steps=0", "measure.measured_steps=4"])
    assert code != 0
    (result,) = recs["AXBGATE_RESULT"]
    assert result["status"] == "failed" and "non-finite" in result["error"]
    assert result["num_completed_steps"] < 4 and result["median_step_s"] is None
    assert "AXBGATE_TIMING" not in recs


def test_compiled_checkpointed_grouped_run(tmp_path):
    """The one compiled CPU run: regional compile + full AC + 2-block FSDP unit + accumulation."""
    code, recs = _train(tmp_path, "compiled", [
        "parallel.compile=true", "parallel.activation_checkpointing=full",
        "parallel.modules_per_group=2", "model.packed_qkv=true", "train.grad_accum_steps=2",
        "measure.warmup_steps=1", "measure.measured_steps=2"])
    assert code == 0, (tmp_path / "compiled.log").read_text()[-4000:]
    (result,) = recs["AXBGATE_RESULT"]
    assert result["status"] == "ok" and result["grad_accum_steps"] == 2
    losses = [s["loss"] for s in recs["AXBGATE_STEP"]]
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_sharded_fp32_state_and_optimizer_coverage(tmp_path):
    out = _scenario("fsdp_state", tmp_path)
    assert out["num_params"] == out["num_state"] == out["num_in_groups"] > 0


def test_packed_vs_split_and_export_reload_bit_exact(tmp_path):
    out = _scenario("packed_split_export", tmp_path)
    assert out["num_split_keys"] > out["num_packed_params"]


def test_grad_accumulation_matches_larger_batch(tmp_path):
    out = _scenario("accum", tmp_path)
    assert out["max_rel_diff"] < 1e-4


# --------------------------------------------------------------------------- rank side

def _build(overrides: list[str]):
    from trainer import load_recipe
    from trainer.train import build, init_distributed

    recipe = load_recipe("tiny", overrides)
    d = init_distributed(recipe)
    model, optimizer = build(recipe, d)
    return recipe, d, model, optimizer


def _full(model) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))


def _rank_fsdp_state(tmp: Path) -> dict:
    import torch
    from torch.distributed.tensor import DTensor, Shard

    from trainer.data import RepeatedBatches
    from trainer.train import train_step

    recipe, d, model, optimizer = _build(["parallel.param_dtype=bfloat16", "train.fused_adamw=on"])
    params = list(model.parameters())
    for p in params:
        assert isinstance(p, DTensor) and p.dtype == torch.float32 and p.requires_grad
        assert p.placements == (Shard(0),)
    batch = next(iter(RepeatedBatches(recipe, d.rank, d.device)))
    train_step(model, optimizer, batch, recipe.train.max_grad_norm)
    state = optimizer.state
    assert {id(p) for p in state} == {id(p) for p in params}
    grouped = [id(p) for g in optimizer.param_groups for p in g["params"]]
    assert sorted(grouped) == sorted(id(p) for p in params)  # each param exactly once
    for p in params:
        s = state[p]
        for key in ("exp_avg", "exp_avg_sq"):
            m = s[key]
            assert isinstance(m, DTensor) and m.dtype == torch.float32
            assert m.placements == p.placements and m.shape == p.shape
        assert s["step"].dtype == torch.float32 and s["step"].device == p.device
    return {"num_params": len(params), "num_state": len(state), "num_in_groups": len(grouped)}


def _rank_packed_split_export(tmp: Path) -> dict:
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file

    from trainer import checkpoint, load_recipe
    from trainer.data import RepeatedBatches
    from trainer.model import flow_matching_loss
    from trainer.train import build, train_step

    rp, d, packed, opt = _build(["model.packed_qkv=true"])
    rs = load_recipe("tiny", ["model.packed_qkv=false"])
    split, _ = build(rs, d)
    micro = next(iter(RepeatedBatches(rp, d.rank, d.device)))
    with torch.no_grad():
        lp, ls = flow_matching_loss(packed, micro[0]), flow_matching_loss(split, micro[0])
    torch.testing.assert_close(lp, ls, rtol=1e-6, atol=1e-7)
    for _ in range(2):
        train_step(packed, opt, micro, rp.train.max_grad_norm)
    first = tmp / "packed.safetensors"
    checkpoint.export_safetensors(packed, first)
    exported = load_file(str(first))
    assert not any("to_qkv" in k or "to_kv" in k for k in exported)
    assert "transformer_blocks.0.attn1.to_k.weight" in exported
    fresh_split, _ = build(rs, d)
    checkpoint.load_safetensors(fresh_split, first)
    fresh_packed, _ = build(rp, d)
    checkpoint.load_safetensors(fresh_packed, first)
    want = _full(packed)
    got = _full(fresh_packed)
    for key, value in want.items():
        assert torch.equal(got[key], value), key
    again = tmp / "split_again.safetensors"
    checkpoint.export_safetensors(fresh_split, again)
    second = load_file(str(again))
    assert set(second) == set(exported)
    for key, value in exported.items():
        assert torch.equal(second[key], value), key
    with torch.no_grad():
        torch.testing.assert_close(flow_matching_loss(fresh_split, micro[0]),
                                   flow_matching_loss(packed, micro[0]), rtol=1e-6, atol=1e-7)
    dist.barrier()
    return {"num_split_keys": len(exported), "num_packed_params": len(want)}


def _rank_accum(tmp: Path) -> dict:
    import torch

    from trainer import load_recipe
    from trainer.data import RepeatedBatches
    from trainer.train import accumulate_grads, build

    r2, d, m2, _ = _build(["train.local_batch_size=2", "train.grad_accum_steps=1"])
    r1 = load_recipe("tiny", ["train.local_batch_size=1", "train.grad_accum_steps=2"])
    m1, _ = build(r1, d)
    l2 = accumulate_grads(m2, next(iter(RepeatedBatches(r2, d.rank, d.device))))
    l1 = accumulate_grads(m1, next(iter(RepeatedBatches(r1, d.rank, d.device))))
    torch.testing.assert_close(l1, l2, rtol=1e-6, atol=1e-7)
    worst = 0.0
    for (n1, p1), (n2, p2) in zip(m1.named_parameters(), m2.named_parameters()):
        assert n1 == n2
        g1, g2 = p1.grad.full_tensor(), p2.grad.full_tensor()
        torch.testing.assert_close(g1, g2, rtol=1e-4, atol=1e-7)
        worst = max(worst, ((g1 - g2).norm() / g2.norm().clamp_min(1e-30)).item())
    return {"max_rel_diff": worst}


def _main(name: str, tmp: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    out = {"fsdp_state": _rank_fsdp_state, "packed_split_export": _rank_packed_split_export,
           "accum": _rank_accum}[name](Path(tmp))
    if dist.get_rank() == 0:
        (Path(tmp) / f"{name}.json").write_text(json.dumps(out))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
    # Same exit path as `python -m trainer train`: skip interpreter teardown, where a gloo
    # C++ thread destructor intermittently calls std::terminate on CPU (SIGABRT after
    # the work and the result file are complete; trainer/__main__.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
