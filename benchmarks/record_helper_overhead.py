"""What the record helper's slowest-rank reduction costs a training loop (issue 26).

Compares, on the same ranks and the same step, a loop without the timer (``none``), with
``StepTimer(reduce="gather")`` (every rank's list once, after the loop) and with
``StepTimer(reduce="allreduce")`` (one float64 MAX all-reduce after every step). The step is
a fixed CPU matmul chain (``--step-ms`` of work, calibrated on rank 0) plus one gradient-sized
all-reduce, like a data-parallel step. Each repetition runs the three modes in a rotated
order; the loop's own wall time per step (an outer clock, not the timer's) is compared.

Run from the repo root (CPU, gloo):

    .venv/bin/python -m torch.distributed.run --nproc_per_node=2 \
        benchmarks/record_helper_overhead.py --steps 200 --repeats 7

On GPU pass ``--device cuda`` (NCCL; the step is then matmuls on the device). Prints a table
(rank 0): median seconds per step per mode, and the difference to ``none`` in microseconds
and percent, with the spread over repetitions.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import torch
import torch.distributed as dist

from axbgate_record import MeasureRule, StepTimer


def _work(weight: torch.Tensor, grad: torch.Tensor, rounds: int) -> None:
    for _ in range(rounds):
        torch.mm(weight, weight, out=grad)
    dist.all_reduce(grad)


def _run(mode: str, steps: int, weight, grad, rounds: int, sync) -> float:
    rule = MeasureRule(warmup_steps=0, measured_steps=steps)
    sink = io.StringIO()
    dist.barrier()
    start = time.perf_counter()
    if mode == "none":
        for _ in range(steps):
            _work(weight, grad, rounds)
            sync()
    else:
        timer = StepTimer(reduce=mode, rule=rule, stream=sink, sync=sync)
        while not timer.done():
            _work(weight, grad, rounds)
            timer.step()
    elapsed = time.perf_counter() - start
    if mode != "none":
        timer.finish()  # the gather is after the loop: not part of the step time
    dist.barrier()
    return elapsed / steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    torch.set_num_threads(1)
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    weight = torch.randn(256, 256, device=device) / 16
    grad = torch.empty_like(weight)
    t0 = time.perf_counter()
    _work(weight, grad, 20)
    sync()
    per_round = (time.perf_counter() - t0) / 20
    rounds = torch.tensor([max(1, round(args.step_ms / 1000 / per_round))], device=device)
    dist.broadcast(rounds, 0)
    rounds = int(rounds.item())
    modes = ["none", "gather", "allreduce"]
    results: dict[str, list[float]] = {m: [] for m in modes}
    _run("none", 20, weight, grad, rounds, sync)  # warm the process group and caches
    for rep in range(args.repeats):
        for mode in modes[rep % 3:] + modes[:rep % 3]:
            results[mode].append(_run(mode, args.steps, weight, grad, rounds, sync))
    if dist.get_rank() == 0:
        base = statistics.median(results["none"])
        print(f"# record helper overhead: world {dist.get_world_size()}, device {args.device}, "
              f"{args.steps} steps x {args.repeats} repeats, {rounds} matmul rounds per step")
        print(f"{'mode':<10} {'median s/step':>14} {'min':>10} {'max':>10} {'vs none us':>11} {'vs none %':>10}")
        for mode in modes:
            vals = results[mode]
            med = statistics.median(vals)
            print(f"{mode:<10} {med:>14.6f} {min(vals):>10.6f} {max(vals):>10.6f} "
                  f"{(med - base) * 1e6:>11.1f} {(med - base) / base * 100:>10.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
