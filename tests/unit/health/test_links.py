"""Slow-tray localization from directed link rates (health.links, pure parts)."""

from health.links import judge_links, link_pairs


def _links(rates):
    return [{"src": a, "dst": b, "bytes": 4 << 20, "seconds": 0.0, "gbps": g} for (a, b), g in rates.items()]


def test_pairs_are_ring_neighbours_both_ways():
    assert link_pairs(1) == []
    assert link_pairs(2) == [(0, 1), (1, 0)]
    assert link_pairs(3) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)]


def test_all_fast_passes():
    ok, named, msg, measured = judge_links(_links({("t1", "t2"): 20.0, ("t2", "t1"): 3.0}))
    assert ok and named == [] and "2 links, slowest 3 Gbit/s" == msg  # jitter: above the 1 Gbit/s floor
    assert measured["gbps_by_link"] == {"t1->t2": 20.0, "t2->t1": 3.0}


def test_two_nodes_slow_egress_names_the_sender():
    ok, named, msg, measured = judge_links(_links({("tray1", "tray2"): 22.0, ("tray2", "tray1"): 0.046}))
    assert not ok and named == ["tray2"]
    assert msg.startswith("slow tray tray2 (sending side): tray2->tray1 0.046 Gbit/s")
    assert measured["fail_below_gbps"] == 1.0


def test_three_nodes_slow_ingress_names_the_receiver():
    rates = {("a", "b"): 20.0, ("b", "a"): 20.0, ("b", "c"): 0.05, ("c", "b"): 20.0,
             ("c", "a"): 20.0, ("a", "c"): 0.05}
    ok, named, msg, _ = judge_links(_links(rates))
    assert not ok and named == ["c"] and "(receiving side)" in msg


def test_slow_links_no_single_node_explains():
    rates = {("a", "b"): 0.05, ("b", "a"): 20.0, ("b", "c"): 0.05, ("c", "b"): 20.0,
             ("c", "a"): 20.0, ("a", "c"): 20.0}
    ok, named, msg, _ = judge_links(_links(rates))
    assert not ok and named == [] and "no single node explains them" in msg


def test_a_follower_node_that_judged_exits_zero_so_node_0_can_report():
    """srun --kill-on-bad-exit: a follower's exit 1 used to kill node 0 before it printed the
    allocation's verdict ("health gate exited with status 143"); a hang still exits 3."""
    from types import SimpleNamespace

    from health.cli import _follower_exit
    from health.timeouts import EXIT_FAILED, EXIT_HANG, EXIT_OK

    assert _follower_exit(SimpleNamespace(exit_code=EXIT_FAILED)) == EXIT_OK
    assert _follower_exit(SimpleNamespace(exit_code=EXIT_OK)) == EXIT_OK
    assert _follower_exit(SimpleNamespace(exit_code=EXIT_HANG)) == EXIT_HANG
