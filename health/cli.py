"""``python -m health`` / ``axbgate health``: run the health gate and report it.

Usage::

    python -m health [--criteria FILE_OR_NAME] [--json] [--records] [--nproc N]
                     [--nodes H0,H1,...] [--node-rank R] [--job-id ID]
                     [--interface IFACE] [--inject-fault never_join:RANK]

stdout: the table, then the record lines (``AXBGATE_HEALTH`` per check, then
``AXBGATE_ALLOCATION``); with ``--json`` one JSON object and nothing else; ``--records`` adds
the record lines after the JSON object (what the gate driver reads) and ``--no-records``
leaves them out of the table output. Only node 0
(or, with one Slurm task per GPU, rank 0) prints them; other nodes write their view to
stderr.

Exit status: 0 healthy or degraded (runs allowed), 1 failed, 2 usage error, 3 failed
because a stage hung.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from health.timeouts import EXIT_HANG, EXIT_OK, EXIT_USAGE

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="axbgate health", description=__doc__.split("\n\n")[0])
    p.add_argument("--criteria", help="criteria TOML path or shipped name (default: auto)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the "
                   "table (and nothing else, unless --records)")
    p.add_argument("--records", action=argparse.BooleanOptionalAction, default=None,
                   help="also print the AXBGATE_HEALTH/AXBGATE_ALLOCATION record lines "
                   "(default: with the table, not with --json)")
    p.add_argument("--nproc", type=int, help="ranks on this node (default: GPUs, or 2 on CPU)")
    p.add_argument("--nodes", help="comma-separated hostnames, node 0 first (multi-node "
                   "without Slurm)")
    p.add_argument("--node-rank", type=int, help="this node's index in --nodes (default: "
                   "SLURM_NODEID, else this host's position in --nodes)")
    p.add_argument("--job-id", help="allocation id all nodes share (derives MASTER_PORT)")
    p.add_argument("--interface", help="socket interface (default: auto-detect)")
    p.add_argument("--inject-fault", help="prove the hang path: never_join:<rank>")
    return p


def _follower_exit(report) -> int:
    """Exit status of a task that does not report the allocation: 0 for a judged verdict
    (healthy, degraded OR failed), so that ``srun --kill-on-bad-exit`` does not kill node 0
    before it prints the allocation's verdict records (a follower that exits 1 first used to
    cut the report off: "health gate exited with status 143"); 3 on a hang."""
    return report.exit_code if report.exit_code == EXIT_HANG else EXIT_OK


def main(argv: list[str]) -> int:
    """Run the gate from the command line.

    Args:
        argv: arguments without the program name.

    Returns:
        The exit status (see the module docstring).
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and EXIT_USAGE
    logging.basicConfig(
        level=os.environ.get("AXBGATE_LOG_LEVEL", "WARNING"),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    from health.gate import run_health_gate  # noqa: PLC0415 - keep --help fast

    try:
        report = run_health_gate(
            args.criteria,
            nproc=args.nproc,
            hostnames=args.nodes.split(",") if args.nodes else None,
            node_rank=args.node_rank,
            job_id=args.job_id,
            interface=args.interface,
            inject_fault=args.inject_fault,
        )
    except ValueError as exc:
        sys.stderr.write(f"axbgate health: {exc}\n")
        return EXIT_USAGE
    out = json.dumps(report.to_dict()) if args.json else report.format_table()
    if os.environ.get("SLURM_PROCID", "0") != "0" and args.nodes is None:
        return _follower_exit(report)  # one task per GPU: rank 0 reports the allocation
    if report.node_rank != 0:
        # One launcher per node: node 0 prints the records; the others' view goes to
        # stderr so it is in the log without duplicating the allocation's records.
        sys.stderr.write(f"node {report.node_rank} view:\n{out}\n")
        return _follower_exit(report)
    sys.stdout.write(out + "\n")
    if args.records if args.records is not None else not args.json:
        sys.stdout.write("\n".join(report.to_records()) + "\n")
    sys.stdout.flush()
    return report.exit_code
