"""The launch preamble (DESIGN.md section 5) and its address facts."""

from __future__ import annotations

import pytest

from health.network import parse_proc_net_route, route_interface_for
from health.preamble import NodeAddressFacts, build_preamble, derive_master_port

IFACES = {"lo": ("127.0.0.1",), "eth0": ("10.1.2.3",), "ib0": ("172.16.0.11",), "docker0": ()}


def facts(rank=0, **kw):
    base = dict(node_rank=rank, num_nodes=2, node0_hostname="gpu001", interfaces=IFACES,
                route_interface="ib0", default_route_interface="eth0")
    base.update(kw)
    return NodeAddressFacts(**base)


def test_node0_uses_own_address_even_if_hostname_maps_to_loopback():
    # On node 0 the hosts file maps gpu001 -> 127.0.1.1; the preamble must not care.
    pre = build_preamble(facts(0, node0_resolved=("127.0.1.1",)), master_port=29500,
                         base_env={})
    assert pre.master_addr == "172.16.0.11"
    assert pre.env["GLOO_SOCKET_IFNAME"] == pre.env["NCCL_SOCKET_IFNAME"] == "ib0"
    assert pre.env["MASTER_PORT"] == "29500"
    assert "route to the other nodes" in pre.reason


def test_other_node_resolves_node0_and_drops_loopback():
    pre = build_preamble(facts(1, node0_resolved=("127.0.1.1", "172.16.0.10")),
                         master_port=29500, base_env={})
    assert pre.master_addr == "172.16.0.10"
    with pytest.raises(ValueError, match="resolves only to"):
        build_preamble(facts(1, node0_resolved=("127.0.1.1",)), master_port=1, base_env={})
    with pytest.raises(ValueError, match="resolves only to"):
        build_preamble(facts(1, node0_resolved=()), master_port=1, base_env={})


def test_interface_rules():
    pick = lambda f, pref=None: build_preamble(f, master_port=2, base_env={},  # noqa: E731
                                               preferred_interface=pref).interface
    assert pick(facts(0), "eth0") == "eth0"
    assert pick(facts(0, route_interface=None)) == "eth0"
    assert pick(facts(0, route_interface=None, default_route_interface=None)) == "eth0"
    assert pick(facts(0, route_interface="lo")) == "eth0"  # loopback never qualifies
    with pytest.raises(ValueError, match="configured interface 'docker0'"):
        pick(facts(0), "docker0")
    with pytest.raises(ValueError, match="no non-loopback"):
        pick(facts(0, interfaces={"lo": ("127.0.0.1",)}, route_interface=None,
                   default_route_interface=None))


def test_passthrough_and_overrides():
    env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1", "NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0,1",
           "HOME": "/root", "PATH": "/bin", "MASTER_ADDR": "gpu001"}
    pre = build_preamble(facts(0), master_port=3, base_env=env,
                         overrides={"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"})
    assert pre.env["NCCL_NVLS_ENABLE"] == "0"
    assert pre.env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert pre.env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert pre.env["NCCL_DEBUG"] == "INFO" and pre.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert pre.env["NCCL_SOCKET_IFNAME"] == "eth0" and pre.env["GLOO_SOCKET_IFNAME"] == "ib0"
    assert "HOME" not in pre.env and "PATH" not in pre.env
    assert pre.env["MASTER_ADDR"] == "172.16.0.11"  # a hostname from the env is replaced
    with pytest.raises(ValueError, match="loopback"):
        build_preamble(facts(0), master_port=3, base_env={}, overrides={"MASTER_ADDR": "127.0.0.1"})
    with pytest.raises(ValueError, match="master_port"):
        build_preamble(facts(0), master_port=70000, base_env={})


def test_master_port_fresh_per_run_and_agreed():
    ports = [derive_master_port("job-4242", i) for i in range(50)]
    assert ports == [derive_master_port("job-4242", i) for i in range(50)]  # every node agrees
    assert len(set(ports)) >= 49  # fresh per run (a rare hash collision allowed)
    assert all(20000 <= p < 32768 for p in ports)  # below the ephemeral range
    assert derive_master_port("job-4243", 0) != derive_master_port("job-4242", 0)
    with pytest.raises(ValueError):
        derive_master_port("j", -1)


ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0102000A\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0002000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
ib0\t000010AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
ib0\t0A0010AC\t00000000\t0005\t0\t0\t0\tFFFFFFFF\t0\t0\t0
"""


def test_proc_net_route_longest_prefix():
    routes = parse_proc_net_route(ROUTE)
    assert routes[0] == ("eth0", "0.0.0.0/0", "10.0.2.1")
    assert ("ib0", "172.16.0.0/16", "0.0.0.0") in routes
    assert route_interface_for(routes, "172.16.0.10") == "ib0"
    assert route_interface_for(routes, "10.0.2.77") == "eth0"
    assert route_interface_for(routes, "8.8.8.8") == "eth0"
    assert route_interface_for(parse_proc_net_route(ROUTE.splitlines()[0]), "1.2.3.4") is None


def test_infer_node_rank():
    import socket  # noqa: PLC0415

    from health.gate import infer_node_rank  # noqa: PLC0415

    me = socket.gethostname()
    assert infer_node_rank(["a", "b"], {"SLURM_NODEID": "1"}) == 1
    assert infer_node_rank(["solo"], {}) == 0
    assert infer_node_rank(["other", me], {}) == 1
    with pytest.raises(ValueError, match="--node-rank"):
        infer_node_rank(["x-not-me", "y-not-me"], {})
