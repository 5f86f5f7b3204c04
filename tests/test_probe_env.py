from types import SimpleNamespace

from distbench.probes.env import collect_env, gpu_identity


def test_env_probe_on_this_host():
    env = collect_env()
    assert env["torch"] and env["python"] and env["cpu_count"] >= 1 and env["gloo_available"]
    assert env["gpu_count"] == len(env["gpus"])


def test_gpu_identity_formats_the_pci_bus_id_like_nvidia_smi():
    props = SimpleNamespace(name="NVIDIA H200", uuid="28aa25ea-2fc5", pci_domain_id=0, pci_bus_id=6, pci_device_id=0)
    assert gpu_identity(props) == {"name": "NVIDIA H200", "uuid": "28aa25ea-2fc5", "pci_bus_id": "0000:06:00.0"}
