"""Semantics records (issue 19): the bundled trainer's AXBGATE_SEMANTICS round trip, the
harness's BF16_SEMANTICS read into the same stored form, and the import of its probes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from orchestrator.app.cli import main
from orchestrator.db.models import Run
from orchestrator.domain.errors import RecordError
from orchestrator.domain.measure import measure_run
from orchestrator.domain.records import parse
from orchestrator.settings import get_settings
from tests.harness_logs import variant_log
from trainer.config import load_recipe
from trainer.records import format_record


def _payload():
    from trainer.semantics import payload

    coverage = {"num_trainable_params": 3, "trainable_numel": 100, "not_in_optimizer": 0,
                "param_dtypes": {"float32": {"params": 3, "numel": 100}},
                "state_dtypes": {"exp_avg": {"float32": {"params": 3, "numel": 100}},
                                 "exp_avg_sq": {"float32": {"params": 3, "numel": 100}}},
                "declared_master_dtype": "float32", "fp32_coverage": 1.0}
    probe = {"step": 0, "tensors": {"grad:proj_in.weight": {"sha256": "ab" * 32, "l2_norm": 0.5,
                                                            "sum": -0.1, "max_abs": 0.05}}}
    return payload(load_recipe("tiny"), 2, [2.0, 1.9], [0.8, 0.7], coverage, probe)


def test_trainer_semantics_record_round_trips():
    sem = _payload()
    assert sem["global_batch_size"] == 4 and sem["tokens_per_step"] == 4 * 32
    text = format_record("AXBGATE_SEMANTICS", sem) + "\n"
    parsed = parse(text)
    assert parsed.semantics["source"] == "AXBGATE_SEMANTICS"
    for key in ("local_batch_size", "grad_accum_steps", "world_size", "samples_per_step", "loss",
                "grad_norm", "dtypes", "probe", "precision", "series_first_step"):
        assert parsed.semantics[key] == sem[key], key


def test_malformed_semantics_record_names_the_line():
    bad = format_record("AXBGATE_SEMANTICS", {**_payload(), "loss": "high"})
    with pytest.raises(RecordError, match="line 2.*'loss' must be a list of numbers"):
        parse("noise\n" + bad + "\n")
    with pytest.raises(RecordError, match="second AXBGATE_SEMANTICS"):
        line = format_record("AXBGATE_SEMANTICS", _payload())
        parse(line + "\n" + line + "\n")


def test_harness_semantics_read_into_the_stored_form():
    parsed = parse(variant_log("pack_d016"))
    sem = parsed.semantics
    assert sem["source"] == "BF16_SEMANTICS" and sem["series_first_step"] == 1
    assert len(sem["loss"]) == 30 and sem["loss"][1] == pytest.approx(0.25)
    assert sem["grad_norm"][3] == pytest.approx(0.25)
    probe = sem["probe"]
    assert probe["step"] == 10
    tensor = probe["tensors"]["grad:adaln_single.linear.weight"]
    assert tensor["sha256"] == "cd" * 32 and tensor["l2_norm"] == 0.25
    assert tensor["sum"] == pytest.approx(1e-7 * 100663296)
    assert "bf16_semantics" in parsed.provenance  # kept whole, as before
    # batch comes from BF16_RESULT: local batch 2 x accumulation 1 x 8 ranks
    outcome = measure_run(parsed)
    assert outcome.fields["semantics"]["samples_per_step"] == 16
    norm_only = parse(variant_log("grad_norm_sync")).semantics
    assert norm_only["loss"] == [] and norm_only["grad_norm"][0] == 1.0 and len(norm_only["grad_norm"]) == 30


def test_import_log_stores_the_harness_probes(capsys, tmp_path):
    log = tmp_path / "pack.log"
    log.write_text(variant_log("pack_d016"))
    code = main(["import-log", str(log), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    [summary] = json.loads(out)
    with Session(create_engine(get_settings().database_url)) as session:
        run = session.get(Run, summary["run_id"])
        assert run.semantics["probe"]["tensors"]["grad:adaln_single.linear.weight"]["sha256"] == "cd" * 32
        assert run.semantics["global_batch_size"] == 16 and len(run.semantics["loss"]) == 30
