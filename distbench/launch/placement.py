"""Which GPU every rank of a job got, and the check that no two ranks share one (seed 004's most
common scaling bug). Shared by every benchmark family; runs inside the torchrun ranks."""

from __future__ import annotations

import os
import socket

from distbench.core.run_label import node_name


def gpu_identity(props) -> dict:
    """Name, UUID and PCI bus id from torch.cuda.get_device_properties (placement and the env probe share it)."""
    pci = None
    if hasattr(props, "pci_bus_id"):
        pci = f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
    return {"name": props.name, "uuid": str(getattr(props, "uuid", "")) or None, "pci_bus_id": pci}


def rank_record(rank: int, local_rank: int, device) -> dict:
    """This rank's placement: rank, LOCAL_RANK, CUDA_VISIBLE_DEVICES, device, GPU name/UUID/PCI bus."""
    rec = {"rank": rank, "local_rank": local_rank, "hostname": socket.gethostname(), "node": node_name(),
           "pid": os.getpid(),
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": str(device),
           "device_index": device.index, "pci_bus_id": None, "uuid": None, "gpu_name": None}
    if device.type == "cuda":
        import torch

        ident = gpu_identity(torch.cuda.get_device_properties(device))
        rec.update(gpu_name=ident["name"], uuid=ident["uuid"], pci_bus_id=ident["pci_bus_id"])
    return rec


def check_placement(records: list[dict]) -> str | None:
    """Return an error message when two ranks share a GPU."""
    seen: dict[str, int] = {}
    for r in records:
        key = r.get("uuid")
        if not key:
            continue
        host_key = f"{r.get('hostname')}/{key}"
        if host_key in seen:
            return (f"ranks {seen[host_key]} and {r['rank']} share one GPU ({key} on {r.get('hostname')}, "
                    f"CUDA_VISIBLE_DEVICES={r.get('cuda_visible_devices')!r}, LOCAL_RANK={r.get('local_rank')}). "
                    "Launch one process per GPU: torchrun --nproc_per_node=<number of GPUs>, and do not "
                    "restrict CUDA_VISIBLE_DEVICES to fewer GPUs than ranks per node.")
        seen[host_key] = r["rank"]
    return None


def placement_line(rec: dict) -> str:
    """The line every rank's placement is printed as, first thing in a job's log (seed 004)."""
    return (f"placement: rank {rec['rank']} LOCAL_RANK={rec['local_rank']} "
            f"CUDA_VISIBLE_DEVICES={rec['cuda_visible_devices']} device={rec['device']} "
            f"gpu={rec['gpu_name']} uuid={rec['uuid']} host={rec['hostname']}")


def gather_and_check(dist, group, rank: int, local_rank: int, device, world_size: int, placement_out=None):
    """All ranks: gather every rank's record over `group`; rank 0 prints them and writes
    `placement_out` (JSON: ranks, error). Returns (records, error message or None)."""
    import sys

    records = [None] * world_size
    dist.all_gather_object(records, rank_record(rank, local_rank, device), group=group)
    problem = check_placement(records)
    if rank == 0:
        for rec in records:
            print(placement_line(rec), file=sys.stderr, flush=True)
        if placement_out:
            from distbench.core.io import atomic_write_json
            atomic_write_json(placement_out, {"ranks": records, "error": problem})
    return records, problem
