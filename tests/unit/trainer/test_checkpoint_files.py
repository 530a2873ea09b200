"""Diffusers-layout load and export on one process: files, keys, dtypes, round trips (issue 27)."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from trainer import load_recipe
from trainer.checkpoint import export_safetensors, init_weights, load_safetensors
from trainer.checkpoint_files import SliceReader, list_tensors, resolve_files
from trainer.diffusers_layout import (
    INDEX_NAME,
    WEIGHTS_NAME,
    audio_video_key_shapes,
    is_audio_video_key,
    plan_shards,
    shard_file_name,
    write_init_checkpoint,
)
from trainer.model import LTX2VideoTransformer


def _model(packed: bool = False, extra: list[str] | None = None, init: bool = True):
    recipe = load_recipe("tiny", [f"model.packed_qkv={str(packed).lower()}", *(extra or [])])
    model = LTX2VideoTransformer(recipe.model, recipe.data)
    if init:
        init_weights(model, recipe.train.init_std, recipe.train.seed)
    else:
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(float("nan"))
    return recipe, model


def _same_params(a, b) -> None:
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(p, q), name


def _files_equal(a, b) -> None:
    names = sorted(f.name for f in a.iterdir())
    assert names == sorted(f.name for f in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
def test_audio_video_folder_loads_and_skips_with_a_note(tmp_path, caplog, packed):
    recipe, want = _model(packed)
    info = write_init_checkpoint(recipe, tmp_path, max_shard_bytes=50_000)
    assert info["num_files"] > 1 and (tmp_path / INDEX_NAME).is_file()
    _, model = _model(packed, init=False)
    with caplog.at_level(logging.WARNING, logger="trainer.checkpoint"):
        report = load_safetensors(model, tmp_path)
    _same_params(model, want)
    av = audio_video_key_shapes(recipe.model)
    av_bytes = sum(torch.Size(s).numel() * 4 for s in av.values())
    assert (report.num_skipped, report.skipped_bytes) == (len(av), av_bytes) == (133, 460608)
    note = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert note and "133 audio/audio-video tensors (0.0004606 GB)" in note[0]
    assert report.num_tensors == 65 and report.file_dtypes == {"F32": 65}
    assert report.bytes_read == sum(p.numel() * 4 for p in want.parameters())


def test_single_file_index_and_folder_forms(tmp_path):
    recipe, want = _model()
    single = tmp_path / "one" / "video.safetensors"
    export_safetensors(want, single)
    folder = tmp_path / "folder"
    export_safetensors(want, folder)  # fits one shard: diffusion_pytorch_model.safetensors
    assert sorted(f.name for f in folder.iterdir()) == [WEIGHTS_NAME]
    sharded = tmp_path / "sharded"
    export_safetensors(want, sharded, max_shard_bytes=40_000)
    for path in (single, single.parent, folder, sharded, sharded / INDEX_NAME):
        _, model = _model(init=False)
        load_safetensors(model, path)  # a video-only checkpoint is accepted as before
        _same_params(model, want)
    assert resolve_files(sharded)[1] == sharded / INDEX_NAME


def test_round_trip_is_bitwise_and_keeps_the_dtype(tmp_path):
    recipe, trained = _model(packed=True)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p))
    first = tmp_path / "bf16"
    export_safetensors(trained, first, dtype="bfloat16", max_shard_bytes=30_000)
    assert all(t.dtype == torch.bfloat16 for f in first.glob("*.safetensors")
               for t in load_file(f).values())
    _, split = _model(init=False)
    load_safetensors(split, first)  # bf16 into float32 masters: exact
    assert all(p.dtype == torch.float32 for p in split.parameters())
    again = tmp_path / "again"
    export_safetensors(split, again, dtype="auto", like=first, max_shard_bytes=30_000)
    _files_equal(first, again)  # same bytes: names, dtypes, shards, index
    fp32 = tmp_path / "fp32.safetensors"
    export_safetensors(split, fp32)  # auto without a source: the registered dtype
    _, back = _model(packed=True, init=False)
    load_safetensors(back, fp32)
    export_safetensors(back, tmp_path / "fp32_again.safetensors", like=fp32)
    assert fp32.read_bytes() == (tmp_path / "fp32_again.safetensors").read_bytes()
    with safe_open(str(fp32), "pt") as handle:
        assert handle.metadata() == {"format": "pt"}
        assert all(handle.get_slice(k).get_dtype() == "F32" for k in handle.keys())


def test_folder_export_removes_stale_weight_files(tmp_path):
    _, model = _model()
    export_safetensors(model, tmp_path, max_shard_bytes=20_000)
    before = sorted(f.name for f in tmp_path.iterdir())
    assert INDEX_NAME in before and len(before) > 3
    (tmp_path / "notes.txt").write_text("kept")
    export_safetensors(model, tmp_path)  # now one file
    assert sorted(f.name for f in tmp_path.iterdir()) == [WEIGHTS_NAME, "notes.txt"]


def _video_state(tmp_path):
    recipe, model = _model()
    path = tmp_path / "src.safetensors"
    export_safetensors(model, path)
    return load_file(path)


def _load_error(tmp_path, state, name="bad.safetensors", extra=None) -> str:
    path = tmp_path / name
    save_file(state, str(path))
    _, model = _model(extra=extra, init=False)
    with pytest.raises(ValueError) as err:
        load_safetensors(model, path)
    return str(err.value)


def test_bad_checkpoints_are_named(tmp_path):
    state = _video_state(tmp_path)
    missing = dict(state)
    missing.pop("proj_in.weight")
    assert "missing 1 keys" in _load_error(tmp_path, missing) and "proj_in.weight" in \
        _load_error(tmp_path, missing)
    extra = {**state, "transformer_blocks.0.attn1.to_gate_logits.weight": torch.zeros(4, 64)}
    msg = _load_error(tmp_path, extra)
    assert "1 unexpected keys" in msg and "to_gate_logits" in msg
    deeper = {**state, **{k.replace("blocks.1.", "blocks.2."): v.clone() for k, v in state.items()
                          if k.startswith("transformer_blocks.1.")}}
    assert "has 3 transformer blocks, the recipe's model.num_layers = 2" in \
        _load_error(tmp_path, deeper)
    msg = _load_error(tmp_path, state, extra=["model.head_dim=8"])
    assert "has shape" in msg and "model.num_heads" in msg
    ints = {**state, "proj_in.bias": torch.zeros(64, dtype=torch.int32)}
    assert "I32" in _load_error(tmp_path, ints)
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    _, model = _model(init=False)
    with pytest.raises(ValueError, match="not readable as safetensors"):
        load_safetensors(model, tmp_path / "junk.safetensors")
    with pytest.raises(ValueError, match="does not exist"):
        load_safetensors(model, tmp_path / "nowhere")


def test_folder_and_index_errors(tmp_path):
    (tmp_path / "transformer").mkdir()
    with pytest.raises(ValueError, match="transformer/ subfolder"):
        resolve_files(tmp_path)
    index = tmp_path / "transformer" / INDEX_NAME
    index.write_text(json.dumps({"weight_map": {"a": shard_file_name(0, 2)}}))
    with pytest.raises(ValueError, match="names missing shard files"):
        resolve_files(tmp_path / "transformer")
    index.write_text("{not json")
    with pytest.raises(ValueError, match="is not a safetensors index"):
        resolve_files(index)
    (tmp_path / "x.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="neither a .safetensors file"):
        resolve_files(tmp_path / "x.bin")


def test_slice_reader_reopens_within_its_budget(tmp_path):
    tensors = {f"w{i}": torch.randn(64, 32) for i in range(4)}
    path = tmp_path / "t.safetensors"
    save_file(tensors, str(path))
    infos = list_tensors([path])
    with SliceReader(budget_bytes=30 * 32 * 4) as reader:  # one slice per mapping
        got = {k: reader.rows(infos[k], k, 10, 40).clone() for k in tensors}
    assert reader.num_opens == 4 and reader.bytes_read == 4 * 30 * 32 * 4
    for key, value in tensors.items():
        assert torch.equal(got[key], value[10:40])


def test_layout_helpers():
    assert is_audio_video_key("audio_proj_in.weight")
    assert is_audio_video_key("av_cross_attn_video_a2v_gate.linear.bias")
    assert is_audio_video_key("transformer_blocks.3.video_to_audio_attn.to_q.weight")
    assert is_audio_video_key("transformer_blocks.3.video_a2v_cross_attn_scale_shift_table")
    assert is_audio_video_key("transformer_blocks.3.audio_to_video_attn.norm_k.weight")
    assert not is_audio_video_key("transformer_blocks.3.attn2.to_k.weight")
    assert not is_audio_video_key("scale_shift_table")
    assert shard_file_name(0, 3) == "diffusion_pytorch_model-00001-of-00003.safetensors"
    assert plan_shards([("a", 4), ("b", 4), ("c", 9), ("d", 1)], 8) == [["a", "b"], ["c"], ["d"]]
