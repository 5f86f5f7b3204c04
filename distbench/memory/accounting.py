"""Where a training step's memory goes, counted from the tensors themselves (runs in the torchrun
ranks and in tests; imports torch).

Every count is over unique storages, so views (a DDP gradient that is a view into its bucket, a
parameter's transposed view saved for backward) count once. Under FSDP2 a parameter is a DTensor:
its local shard is what this rank holds.

- parameters: the model's parameter storages;
- gradients: the storages of `.grad` of the trainable parameters (DDP with
  gradient_as_bucket_view: the buckets, which the gradients are views of);
- optimizer state: the storages of the tensors in `optimizer.state` (momentum, AdamW's two moments
  and its step counters);
- activations: the storages autograd saves for backward during forward
  (torch.autograd.graph.saved_tensors_hooks), except parameter storages. That includes what
  autograd keeps of the inputs, autocast's low-precision copies of the weights, and the parameters
  FSDP2 gathers for a block (they are saved for its backward), since those are held until
  backward like any activation.
"""

from __future__ import annotations

import torch


def local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard; any other tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _key(t: torch.Tensor) -> tuple:
    s = local(t).untyped_storage()
    return (s.device.type, s.device.index, s.data_ptr())


def unique_storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (None entries skipped)."""
    seen: dict[tuple, int] = {}
    for t in tensors:
        if t is None:
            continue
        s = local(t).untyped_storage()
        seen.setdefault(_key(t), s.nbytes())
    return sum(seen.values())


def parameter_bytes(model: torch.nn.Module) -> int:
    return unique_storage_bytes(model.parameters())


def gradient_bytes(model: torch.nn.Module) -> int:
    return unique_storage_bytes(p.grad for p in model.parameters() if p.requires_grad)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return unique_storage_bytes(v for state in optimizer.state.values() for v in state.values()
                                if isinstance(v, torch.Tensor))


class SavedActivations:
    """Context manager: the bytes of the distinct non-parameter storages autograd saves for
    backward while it is active (read `.bytes` after the forward pass)."""

    def __init__(self, model: torch.nn.Module):
        self.exclude = {_key(p) for p in model.parameters()}
        self.saved: dict[tuple, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t):
        if isinstance(t, torch.Tensor):
            key = _key(t)
            if key not in self.exclude:
                self.saved.setdefault(key, local(t).untyped_storage().nbytes())
        return t

    @property
    def bytes(self) -> int:
        return sum(self.saved.values())

    def __enter__(self):
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)


# Bytes of optimizer state per trainable parameter element, and per parameter tensor (AdamW's step
# counter), by the optimizer's definition (fp32 state).
OPTIMIZER_STATE = {"sgd": (0, 0), "sgd_momentum": (4, 0), "adamw": (8, 4)}


def estimate(n_params: int, n_trainable: int, n_trainable_tensors: int, optimizer: str, world_size: int,
             sharded: bool, param_bytes: int = 4) -> dict[str, int]:
    """The analytic model-state estimate per rank (what a calculator would say): parameters x
    bytes, gradients of the trainable parameters (same dtype), optimizer state per OPTIMIZER_STATE;
    divided by the world size when FSDP shards them."""
    per_elem, per_tensor = OPTIMIZER_STATE[optimizer]
    n = world_size if sharded else 1
    return {"params": -(-n_params // n) * param_bytes, "grads": -(-n_trainable // n) * param_bytes,
            "optimizer": -(-n_trainable // n) * per_elem + n_trainable_tensors * per_tensor}
