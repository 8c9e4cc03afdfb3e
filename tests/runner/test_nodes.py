import socket

from accelbench.runner.nodes import interconnect_env, node_name


def test_the_scheduler_name_wins_over_the_host_name():
    assert node_name({"SLURMD_NODENAME": "gpu017"}) == "gpu017"
    assert node_name({}) == socket.gethostname()


def test_the_transport_settings_are_kept_and_credentials_are_not():
    env = {
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_SOCKET_IFNAME": "ib0",
        "NCCL_NET": "IB",
        "HSA_FORCE_FINE_GRAIN_PCIE": "1",
        "GLOO_SOCKET_IFNAME": "eth0",
        "FI_PROVIDER": "cxi",
        "NCCL_SECRET_KEY": "x",
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    assert interconnect_env(env) == {
        "FI_PROVIDER": "cxi",
        "GLOO_SOCKET_IFNAME": "eth0",
        "HSA_FORCE_FINE_GRAIN_PCIE": "1",
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_NET": "IB",
        "NCCL_SOCKET_IFNAME": "ib0",
    }
