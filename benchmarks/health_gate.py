"""Health-gate benchmark: full gate on 1 and 2 GPUs, timed, plus an independent busbw
reference in the same call (issue 4, "Done when").

Usage (device machine, from the repository root)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 benchmarks/health_gate.py run --out DIR

``run`` does, in order:

1. saves ``nvidia-smi -q`` (a recorded reading for the parser tests);
2. runs ``python3 -m health --json`` with ``CUDA_VISIBLE_DEVICES=0`` (1 GPU) and on all
   GPUs, timing each whole command (goal: < 60 s);
3. runs the reference: this file's ``reference`` mode under ``torch.distributed.run``,
   a plain loop written separately from ``health.collectives`` (wall clock around
   the whole loop after ``cuda.synchronize``, not CUDA events; busbw per nccl-tests
   ``doc/PERFORMANCE.md``: all-reduce 2(n-1)/n, all-gather and reduce-scatter
   (n-1)/n);
4. writes ``health_h200.txt``: date, machine, command, both gates' tables and the
   gate-vs-reference busbw comparison (agreement goal: within 5%).

``--cpu`` runs the same flow with gloo on a CPU machine (to test the script).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

SAFETY = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
          "NVSHMEM_DISABLE_NVLS": "1"}
OPS = ("all_reduce", "all_gather", "reduce_scatter")


def reference(num_elements: int, warmup: int, iters: int) -> None:
    """One rank of the reference loop (started by torch.distributed.run)."""
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    count = num_elements - num_elements % n
    full = torch.ones(count, dtype=torch.bfloat16, device=dev)
    part = torch.ones(count // n, dtype=torch.bfloat16, device=dev)
    calls = {
        "all_reduce": (lambda: dist.all_reduce(full), 2.0 * (n - 1) / n),
        "all_gather": (lambda: dist.all_gather_into_tensor(full, part), (n - 1) / n),
        "reduce_scatter": (lambda: dist.reduce_scatter_tensor(part, full), (n - 1) / n),
    }
    out = {}
    for op, (call, factor) in calls.items():
        for _ in range(warmup):
            call()
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        if cuda:
            torch.cuda.synchronize()
        mean = (time.perf_counter() - t0) / iters
        slowest = torch.tensor([mean], dtype=torch.float64, device=dev)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        t = float(slowest.item())
        out[op] = {"mean_ms": t * 1e3, "busbw_gbps": count * 2 / t * factor / 1e9}
    if rank == 0:
        print(  # noqa: T201 - the reference rank reports on stdout
            "REFERENCE " + json.dumps({"world_size": n, "size_bytes": count * 2, **out}),
            flush=True,
        )
    dist.destroy_process_group()


def _gate(label: str, extra_env: dict[str, str], args: list[str], log: list[str]) -> dict:
    cmd = [sys.executable, "-m", "health", "--json", *args]
    env = {**os.environ, **extra_env}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
    wall = time.perf_counter() - t0
    log.append(f"$ {' '.join(f'{k}={v}' for k, v in extra_env.items())} {shlex.join(cmd)}")
    log.append(f"exit {proc.returncode}, wall {wall:.2f} s")
    log.append(proc.stderr[-4000:])
    first, _, records = proc.stdout.partition("\n")
    try:
        report = json.loads(first)
    except json.JSONDecodeError:
        report = {"verdict": "unparsed", "checks": [], "raw": proc.stdout[-4000:]}
    return {"label": label, "cmd": cmd, "env": extra_env, "rc": proc.returncode,
            "wall_s": wall, "report": report, "records": records}


def _table(gate: dict) -> str:
    rep = gate["report"]
    lines = [f"## {gate['label']}: verdict {rep.get('verdict')}, exit {gate['rc']}, "
             f"wall {gate['wall_s']:.2f} s, criteria {rep.get('criteria')}",
             f"stage seconds (rank 0): {json.dumps(rep.get('stage_seconds', {}))}",
             f"{'STATUS':6} {'CHECK':24} {'WHERE':14} MESSAGE"]
    for c in rep.get("checks", []):
        where = (c.get("host") or "-") + (f":gpu{c['gpu_index']}" if "gpu_index" in c else "")
        lines.append(f"{c['status']:6} {c['check']:24} {where:14} {c.get('message', '')[:120]}")
    return "\n".join(lines)


def _cross_check_readers(smi_text: str, out: Path, log: list[str]) -> None:
    """Read the GPUs through NVML and through the nvidia-smi parser, side by side."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from health.nvml import NvmlReader
    from health.smi import parse_smi_q

    try:
        nv = [r.to_dict() for r in NvmlReader().read()]
        sm = [r.to_dict() for r in parse_smi_q(smi_text)]
    except Exception as exc:  # noqa: BLE001 - record and go on with the gates
        log.append(f"reader cross-check failed: {type(exc).__name__}: {exc}")
        return
    diff = {}
    for a, b in zip(nv, sm, strict=False):
        for k, v in a.items():
            if k not in ("nvlink_active_links", "nvlink_errors") and b.get(k) != v:
                diff.setdefault(a["index"], {})[k] = {"nvml": v, "smi": b.get(k)}
    (out / "readers.json").write_text(json.dumps({"nvml": nv, "smi": sm, "differ": diff},
                                                 indent=1, default=str))


def run(out: Path, cpu: bool) -> int:
    """The whole benchmark (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    missing = {k: v for k, v in SAFETY.items() if os.environ.get(k) != v}
    if missing and not cpu:
        print(f"refusing: set {missing} (NVLink multicast must stay off)", file=sys.stderr)  # noqa: T201
        return 2
    log: list[str] = []
    smi = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True) if not cpu else None
    if smi is not None:
        (out / "nvidia_smi_q.txt").write_text(smi.stdout)
        _cross_check_readers(smi.stdout, out, log)
    if cpu:
        gates = [_gate("cpu 2 ranks (gloo)", {}, ["--criteria", "cpu-gloo"], log)]
        nref, ref_args = 2, ["--num-elements", str(1 << 20), "--warmup", "2", "--iters", "10"]
    else:
        gates = [_gate("1x H200", {"CUDA_VISIBLE_DEVICES": "0"}, [], log),
                 _gate("2x H200", {}, [], log)]
        nref, ref_args = 2, ["--num-elements", str(128 << 20), "--warmup", "8", "--iters", "128"]
    ref_cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={nref}", __file__, "reference", *ref_args]
    t0 = time.perf_counter()
    ref = subprocess.run(ref_cmd, capture_output=True, text=True, timeout=300)
    log.append(f"$ {shlex.join(ref_cmd)}\nexit {ref.returncode}, wall "
               f"{time.perf_counter() - t0:.2f} s\n{ref.stderr[-3000:]}")
    line = next((x for x in ref.stdout.splitlines() if x.startswith("REFERENCE ")), None)
    refd = json.loads(line.split(" ", 1)[1]) if line else {}
    multi = gates[-1]["report"]
    rows = ["| op | gate busbw GB/s | reference busbw GB/s | gate/reference | within 5% |",
            "|---|---|---|---|---|"]
    agree = True
    for op in OPS:
        chk = next((c for c in multi.get("checks", []) if c["check"] == f"busbw_{op}"), None)
        g = None if chk is None else chk["measured"]["busbw_gbps"]
        r = refd.get(op, {}).get("busbw_gbps")
        if g is None or r is None:
            rows.append(f"| {op} | {g} | {r} | - | no data |")
            agree = False
            continue
        ok = abs(g / r - 1) <= 0.05
        agree &= ok
        rows.append(f"| {op} | {g:.2f} | {r:.2f} | {g / r:.4f} | {'yes' if ok else 'NO'} |")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    head = [
        f"date: {now}",
        f"machine: {socket.gethostname()} {platform.platform()} python {platform.python_version()}",
        "command: " + " ".join(f"{k}={os.environ.get(k)}" for k in SAFETY)
        + " " + shlex.join([sys.executable, *sys.argv]),
    ]
    if smi is not None:
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,"
                               "clocks.max.sm,power.limit", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
        head.append("gpus:\n" + gpus)
    body = [
        "\n".join(head), "",
        *(_table(g) + "\n" for g in gates),
        "## gate wall time (whole `python -m health` command; goal < 60 s)",
        *(f"- {g['label']}: {g['wall_s']:.2f} s (exit {g['rc']})" for g in gates), "",
        f"## busbw: gate ({gates[-1]['label']}) vs independent reference "
        f"(size {refd.get('size_bytes')} B bf16, {refd.get('world_size')} ranks)",
        *rows, f"all within 5%: {agree}", "",
        "## reference raw", json.dumps(refd), "",
        "## gate record lines (" + gates[-1]["label"] + ")", gates[-1]["records"],
    ]
    (out / "health_h200.txt").write_text("\n".join(body) + "\n")
    (out / "gates.json").write_text(json.dumps([{k: v for k, v in g.items() if k != "records"}
                                                 for g in gates], indent=1))
    (out / "log.txt").write_text("\n".join(log))
    print("\n".join(body[:-2]))  # noqa: T201 - benchmark output
    return 0 if agree and all(g["wall_s"] < 60 for g in gates) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--cpu", action="store_true")
    f = sub.add_parser("reference")
    f.add_argument("--num-elements", type=int, default=128 << 20)
    f.add_argument("--warmup", type=int, default=8)
    f.add_argument("--iters", type=int, default=128)
    a = p.parse_args()
    if a.mode == "reference":
        reference(a.num_elements, a.warmup, a.iters)
        return 0
    return run(a.out, a.cpu)


if __name__ == "__main__":
    sys.exit(main())
