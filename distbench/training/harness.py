"""DDP training benchmark harness: one torchrun job measures one DDP configuration of the
synthetic MLP (distbench.workloads.mlp) in three phases, on the same model and optimizer.

Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.training --backend gloo \
        --hidden-dim 256 --num-layers 2 --batch-size 32 --out training.csv --placement-out placement.json

Phases (CSV column `phase`), each `--warmup-steps` un-timed then `--steps` timed (all-reduce:
`--allreduce-trials` timed):
- step:            the real step: forward, loss, backward (DDP all-reduces the gradient buckets
                   while backward runs), optimizer.step, zero_grad(set_to_none=True). With
                   --grad-accum N the rank's batch is N micro-batches, all but the last under
                   no_sync. Afterwards every rank's parameters are compared exactly (`correct`).
- compute_only:    the same steps inside ddp_model.no_sync(): no gradient communication at all.
- comm_alone: the gradient bytes DDP syncs per step, all-reduced alone in DDP's bucket layout
                   (one flat tensor per bucket, in the order DDP reduces them: the bucket holding
                   the last layers first, the first layers' bucket last), launched back to back
                   asynchronously as DDP's reducer does, then waited on; with a compression hook
                   in its wire dtype (bf16/fp16: half the bytes). `last_bucket_ms` is the last
                   bucket alone, timed in separate trials: it is the part of DDP's communication
                   that cannot overlap backward.
step - compute_only is the communication the step exposes; comm_alone is what it would cost
with no overlap at all.

Timing: after warm-up the ranks are aligned once (an un-timed small all-reduce and a sync), then
the measured steps run back to back, as in training. GPU: a CUDA event is recorded between steps
and the host syncs after the last one, so a step's time is the gap between its events (no host
work between steps, no late start of another rank inside a step). CPU: the host clock between
steps. Each rank times its own steps; the row's `step_time_ms` is the slowest rank's (a
synchronous job runs at its pace), with the fastest and slowest in `step_time_ms_rank_min` /
`_rank_max`. (The first GPU run, 2026-11-26, timed each step between an alignment and a sync with
NVML reads inside the window; another rank's late start then landed in the step: see
benchmarks/training-h200x2-2026-11-26.)

Energy (`energy_j`): NVML's total-energy counter (millijoules) read before and after a phase's
measured steps on every rank's GPU, divided evenly over the steps and summed over ranks (the
counter updates too coarsely for one step); empty when pynvml is missing or any rank's counter
cannot be read (never estimated).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import statistics
import sys
import time
from pathlib import Path

from distbench.core.choices import BACKENDS, COMM_HOOKS, OPTIMIZERS, SCALINGS
from distbench.core.choices import TRAINING_DTYPES as TRAIN_DTYPES
from distbench.launch.ranks import RankContext, failure_status, first_line, node_count, ranks_text
from distbench.workloads.cli import add_model_args, resolve_model_args
from distbench.training.contract import TRAINING_COLUMN_NAMES, TRAINING_PHASES

# DDP's own default bucket_cap_mb. Passing it explicitly is not the same as leaving it out in
# torch >= 2.9 (the first bucket's 1 MiB cap only applies when bucket_cap_mb is None), so the
# harness leaves it out when this value is asked for: config "plain" is DDP as users get it.
DDP_DEFAULT_BUCKET_CAP_MB = 25.0
DEFAULT_FIRST_BUCKET_BYTES = 2**20  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


def ddp_bucket_layout(param_bytes: list[int], bucket_cap_bytes: int, first_bucket_cap_bytes: int) -> list[int]:
    """Bytes per bucket, in the order DDP reduces them, for gradients of `param_bytes` (parameter
    order, one dtype and device). Mirrors the reducer's rebuilt layout (after the first iteration):
    parameters in gradient-ready order (for a feed-forward model, reverse parameter order) are
    packed greedily; a bucket closes once it holds >= its cap (the first bucket's cap, then
    bucket_cap). A parameter is never split."""
    sizes, cur, cap = [], 0, first_bucket_cap_bytes
    for nbytes in reversed(param_bytes):
        cur += nbytes
        if cur >= cap:
            sizes.append(cur)
            cur, cap = 0, bucket_cap_bytes
    if cur:
        sizes.append(cur)
    return sizes


def per_rank_batch(scaling: str, batch_size: int, global_batch_size: int | None, world_size: int) -> tuple[int, int]:
    """(per-rank batch, global batch). weak: per-rank fixed; strong: global fixed, split evenly."""
    if scaling == "weak":
        return batch_size, batch_size * world_size
    if global_batch_size is None:
        raise ValueError("--scaling strong needs --global-batch-size")
    if global_batch_size % world_size:
        raise ValueError(f"--global-batch-size {global_batch_size} is not divisible by the world size {world_size}")
    return global_batch_size // world_size, global_batch_size


# --- everything below runs inside the torchrun ranks ------------------------------------------

class PhaseError(Exception):
    """A phase that cannot run or did not complete: (status, message)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class EnergyMeter:
    """NVML's total-energy counter of this rank's GPU, in millijoules; None where unavailable."""

    def __init__(self, device):
        self.handle = self.nvml = None
        if device.type != "cuda":
            return
        try:
            import pynvml  # type: ignore[import-not-found]
            import torch

            pynvml.nvmlInit()
            props = torch.cuda.get_device_properties(device)
            uuid = str(getattr(props, "uuid", "") or "")
            handle = None
            if uuid:
                with contextlib.suppress(Exception):
                    handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
            if handle is None and hasattr(props, "pci_bus_id"):
                bus = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
                handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # MIG slices and old GPUs raise here
            self.nvml, self.handle = pynvml, handle
        except Exception:  # noqa: BLE001 - no pynvml, no NVML, no counter: energy stays empty
            self.handle = None

    def read_mj(self) -> float | None:
        if self.handle is None:
            return None
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:  # noqa: BLE001
            return None


class TrainingHarness(RankContext):
    def __init__(self, args):
        # Bookkeeping runs on its own Gloo group also under --backend gloo: a phase can fail on one
        # rank mid-step while the others are still in DDP's collectives, and a vote on the default
        # group would then be paired with one of those (a hang until --op-timeout-s is the honest
        # outcome, not mismatched collectives).
        super().__init__(args.backend, args.op_timeout_s, ctrl_on_gloo_too=True)
        self.args = args
        self.energy = EnergyMeter(self.device)
        self.device_name = self.torch.cuda.get_device_name(self.device) if self.cuda else "cpu"
        self.ddp = self.model = self.opt = None
        self.hook_error: str | None = None
        self.n_buckets: int | None = None
        self.bucket_bytes: list[int] | None = None

    def align(self):
        """One un-timed small all-reduce on the backend under test: the ranks start a timed step together."""
        if self.world_size > 1:
            self.dist.all_reduce(self._align_buf)
        self.sync()

    def release(self):
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    # -- the model ----------------------------------------------------------------------------

    def build(self):
        from distbench.workloads import gpt, mlp as models

        torch, args = self.torch, self.args
        self._align_buf = torch.zeros(1, device=self.device)
        torch.manual_seed(0)  # every rank starts from the same weights (DDP broadcasts rank 0's too)
        if args.model == "mlp":
            self.model = models.make_mlp(args.hidden_dim, args.num_layers).to(self.device)
            x, y = models.make_batch(args.batch_size, args.hidden_dim, self.rank, self.device)
            self.loss_fn = torch.nn.functional.cross_entropy
            n = sum(p.numel() for p in self.model.parameters())
            self.counts = {"total": n, "trainable": n}
            # 6 FLOPs per weight per sample (2 forward, 4 backward), as gpt.flops_per_token's 6 N
            self.flops_per_sample = 6 * n
        else:
            with self.device:  # initialised where it runs: a 1.3B model is slow to initialise on the CPU
                self.model = gpt.make_gpt(self.gpt_cfg)
                if args.model == "lora":
                    gpt.apply_lora(self.model, args.lora_rank, args.lora_alpha)
            self.counts = gpt.param_counts(self.model)
            self.flops_per_sample = args.seq_len * int(gpt.flops_per_token(
                self.gpt_cfg, self.counts["non_embedding"], self.counts["trainable"] if args.model == "lora" else None))
            x, y = gpt.make_tokens(args.batch_size, self.gpt_cfg, self.rank, self.device)
            self.loss_fn = gpt.lm_loss
        self.param_bytes = models.grad_param_bytes(self.model)
        self.param_names = [n for n, p in self.model.named_parameters() if p.requires_grad]
        self.micro = list(zip(x.chunk(args.grad_accum), y.chunk(args.grad_accum)))
        self.autocast = lambda: models.autocast(args.dtype, self.device)
        self.attention_kernel = self.sdpa_kernel(x[:1]) if args.model != "mlp" else ""

    @property
    def gpt_cfg(self):
        from distbench.workloads import gpt

        a = self.args
        return gpt.gpt_config(a.gpt_size, a.vocab_size, a.seq_len, a.gpt_layers, a.gpt_heads, a.gpt_dim)

    def sdpa_kernel(self, sample) -> str:
        """Which attention implementation scaled_dot_product_attention dispatches to for this
        model's shapes and dtype (flash, efficient, cudnn, flash_for_cpu, math, ...): the aten op
        one forward of the first block's attention records, read from torch.profiler's CPU-side op
        list (no GPU trace needed)."""
        torch = self.torch
        block = self.model.blocks[0]
        try:
            with torch.no_grad(), self.autocast(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                h = self.model.tok_emb(sample) + self.model.pos_emb(torch.arange(sample.shape[1], device=sample.device))
                block.attn(block.ln_attn(h))
            names = {e.key for e in prof.key_averages()}
        except Exception as e:  # noqa: BLE001 - the kernel name is information, not a measurement
            return f"unknown ({first_line(e, 80)})"
        for op, label in (("aten::_scaled_dot_product_flash_attention_for_cpu", "flash_for_cpu"),
                          ("aten::_scaled_dot_product_flash_attention", "flash"),
                          ("aten::_scaled_dot_product_cudnn_attention", "cudnn"),
                          ("aten::_scaled_dot_product_efficient_attention", "efficient"),
                          ("aten::_scaled_dot_product_attention_math", "math")):
            if op in names:
                return label
        return "unknown"

    def build_ddp(self):
        """Collective (DDP broadcasts rank 0's parameters; FSDP shards them): every rank calls it."""
        from distbench.workloads import mlp as models

        if self.args.strategy == "fsdp":
            from distbench.workloads.gpt import FSDPUnavailable

            try:
                self.shard()
            except FSDPUnavailable as e:  # not applicable here: said so
                raise PhaseError("skipped", f"FSDP2 (fully_shard) cannot run with backend {self.args.backend} "
                                            f"on {self.device.type} here: {e}") from e
        else:
            self.wrap()
        params = [p for p in self.ddp.parameters() if p.requires_grad]
        self.opt = models.make_optimizer(self.args.optimizer, params, fused=self.cuda)
        self.fwd = self.torch.compile(self.ddp) if self.args.compile else self.ddp
        # The loss is compiled too: inductor fuses the fp32 upcast into the log-softmax, so the
        # (batch x seq x vocab) fp32 copy of the logits (4.6 GiB for gpt 1.3b at batch 24) is never
        # materialised; a separate graph because DDP's forward is a graph boundary anyway.
        self.loss = self.torch.compile(self.loss_fn) if self.args.compile else self.loss_fn

    def shard(self):
        """FSDP2 per block (distbench.workloads.gpt.fully_shard_blocks), and the groups comm_alone
        gathers and reduce-scatters."""
        from distbench.workloads.gpt import fully_shard_blocks

        torch = self.torch
        fully_shard_blocks(self.model, bfloat16=self.args.dtype == "bfloat16")
        self.ddp = self.model
        self.hook_error = None
        self.fsdp_param_dtype = torch.bfloat16 if self.args.dtype == "bfloat16" else torch.float32
        # (all parameters, trainable parameters) per FSDP group in forward order: root first, then
        # the blocks (what comm_alone gathers and reduce-scatters)
        root = {id(p) for b in self.model.blocks for p in b.parameters()}
        groups = [[p for p in self.model.parameters() if id(p) not in root]] + [list(b.parameters()) for b in self.model.blocks]
        self.fsdp_groups = [(sum(p.numel() for p in g), sum(p.numel() for p in g if p.requires_grad)) for g in groups]

    def fsdp_comm(self, enabled: bool):
        """FSDP without any communication (compute_only): gradients stay unreduced and the
        gathered parameters stay gathered between steps; back to normal with enabled=True."""
        m = self.ddp
        m.set_requires_gradient_sync(enabled)
        m.set_reshard_after_backward(enabled)
        if hasattr(m, "set_reshard_after_forward"):  # torch >= 2.7; before, blocks re-gather in backward
            for block in self.model.blocks:
                block.set_reshard_after_forward(enabled)
        if enabled:
            m.reshard()

    def wrap(self):
        """(Re-)wrap the model in DDP with the job's settings and register the comm hook. A hook
        DDP rejects on this backend/build leaves DDP without it and is reported by phase step."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        args = self.args
        kw = {"gradient_as_bucket_view": args.gradient_as_bucket_view, "static_graph": args.static_graph}
        # torch 2.13 deprecates broadcast_buffers (FutureWarning whenever it is passed) in favour of
        # forward_sync_buffers, whose False still syncs at init: pass it only to turn it off.
        if not args.broadcast_buffers:
            kw["broadcast_buffers"] = False
        if args.bucket_cap_mb != DDP_DEFAULT_BUCKET_CAP_MB:
            kw["bucket_cap_mb"] = args.bucket_cap_mb
        if self.cuda:
            kw.update(device_ids=[self.device.index], output_device=self.device.index)
        self.ddp = DDP(self.model, **kw)
        self.hook_error = None
        if args.comm_hook != "none":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = {"bf16_compress": default_hooks.bf16_compress_hook,
                    "fp16_compress": default_hooks.fp16_compress_hook}[args.comm_hook]
            try:
                self.ddp.register_comm_hook(state=None, hook=hook)
            except (TypeError, RuntimeError, ValueError) as e:
                self.hook_error = f"DDP rejects comm hook {args.comm_hook} with backend {args.backend} here: {first_line(e)}"
        # The hook's outcome must be the same on every rank (a rank with the hook and one without
        # would not match their collectives).
        if not self.agree(self.hook_error is None) and self.hook_error is None:
            self.hook_error = f"another rank's DDP rejects comm hook {args.comm_hook}"

    def step(self, sync_grads: bool):
        n = len(self.micro)
        fsdp = self.args.strategy == "fsdp"
        for i, (x, y) in enumerate(self.micro):
            sync = sync_grads and i == n - 1
            if fsdp and n > 1:
                self.ddp.set_requires_gradient_sync(sync)
            with contextlib.nullcontext() if sync or fsdp else self.ddp.no_sync():
                with self.autocast():
                    loss = self.loss(self.fwd(x), y)
                if n > 1:
                    loss = loss / n
                loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    # -- timing -------------------------------------------------------------------------------

    def timed(self, fn, warmup: int, n: int) -> tuple[list[float], list[float]]:
        """This rank's time (ms) of each of `n` back-to-back calls of `fn`, and its energy (mJ per
        call, NaN when unavailable).

        The ranks are aligned once (an un-timed all-reduce and a sync), then the calls run back to
        back as in training: on GPU a CUDA event is recorded between calls and the host syncs only
        after the last one, so a call's time is the gap between its two events and no per-call host
        work (or another rank's late start) lands inside it; the collectives keep the ranks in step.
        On CPU the host clock is read between calls. Energy: NVML's counter is read before and after
        the whole run (it updates too coarsely for one step) and divided evenly over the calls."""
        torch = self.torch
        for _ in range(warmup):
            fn()
        self.align()
        e0 = self.energy.read_mj()
        if self.cuda:
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            events[0].record()
            for i in range(n):
                fn()
                events[i + 1].record()
            events[-1].synchronize()
            times = [events[i].elapsed_time(events[i + 1]) for i in range(n)]
        else:
            stamps = [time.perf_counter()]
            for _ in range(n):
                fn()
                stamps.append(time.perf_counter())
            times = [(stamps[i + 1] - stamps[i]) * 1e3 for i in range(n)]
        self.sync()
        e1 = self.energy.read_mj()
        per_call = (e1 - e0) / n if e0 is not None and e1 is not None else math.nan
        return times, [per_call] * n

    def reset_peak(self):
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def peak(self) -> list[float]:
        if not self.cuda:
            return [math.nan, math.nan]
        return [float(self.torch.cuda.max_memory_allocated(self.device)),
                float(self.torch.cuda.max_memory_reserved(self.device))]

    # -- checks -------------------------------------------------------------------------------

    def param_fingerprint(self) -> list[int]:
        """Two exact integer checksums per parameter (sum of its bit patterns, and a position-
        weighted sum), computed on the device: equal on two ranks iff (barring collisions) the
        parameters are bitwise equal."""
        torch = self.torch
        out = []
        chunk = 2**20
        for p in self.model.parameters():
            if not p.requires_grad:
                continue
            flat = p.detach().reshape(-1)
            bits = flat.view({8: torch.int32, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[flat.element_size()])
            parts = []
            for i in range(0, bits.numel(), chunk):
                c = bits[i:i + chunk].to(torch.int64)
                w = torch.arange(c.numel(), device=c.device, dtype=torch.int64) % 251 + 1
                parts.append(torch.stack([c.sum(), (c * w).sum()]))  # < 2**31 * 2**8 * 2**20: no overflow
            sums = torch.stack(parts).cpu().tolist()
            out += [sum(s[0] for s in sums), sum(s[1] for s in sums)]
        return out

    def replicas_agree(self) -> tuple[bool | None, str]:
        """DDP: every rank's parameters are bitwise equal after phase step. FSDP keeps one sharded
        copy, so there are no replicas to compare: None (not checked)."""
        if self.args.strategy == "fsdp":
            return None, ""
        torch = self.torch
        # Python ints can exceed int64 after summing chunks: reduce them into int64's range exactly.
        mine = [(v + 2**63) % 2**64 - 2**63 for v in self.param_fingerprint()]
        t = torch.tensor(mine, dtype=torch.int64)
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        self.dist.all_gather(out, t, group=self.ctrl)
        ref = out[0]
        bad_ranks, bad_params = [], set()
        for r, o in enumerate(out[1:], start=1):
            diff = (o != ref).reshape(-1, 2).any(dim=1)
            if bool(diff.any()):
                bad_ranks.append(r)
                bad_params.update(self.param_names[i] for i in diff.nonzero().reshape(-1).tolist())
        if not bad_ranks:
            return True, ""
        names = sorted(bad_params)
        return False, (f"DDP replicas differ after phase step: rank(s) {ranks_text(bad_ranks)} hold parameters "
                       f"unlike rank 0's ({len(names)} of {len(self.param_names)}: {', '.join(names[:5])}"
                       f"{' ...' if len(names) > 5 else ''})")

    # -- bucket layout ------------------------------------------------------------------------

    def bucket_layout(self) -> tuple[list[int], str]:
        """Bytes per gradient bucket in the order DDP reduces them, and where the layout came from.

        torch (2.13) has no public accessor. `_get_ddp_logging_data()["bucket_sizes"]` is recorded
        at construction and never updated: it shows the initial single bucket, not the layout DDP
        rebuilds after the first iteration and uses from then on. The reducer's
        `_get_zeros_like_grad_buckets()` (private, used by DDP's optimizer-overlap code) returns
        GradBuckets shaped like the current buckets, by index = reduction order; it is used once the
        reducer has rebuilt its buckets. Otherwise (no completed DDP iteration, or the private API is
        gone) the layout is computed the way the reducer rebuilds it (ddp_bucket_layout), assuming
        gradients become ready in reverse parameter order; the reducer records the real order, which
        can differ slightly (e.g. under autocast with static_graph a first-layer bias lands in a
        bucket of its own), so the reducer's layout is preferred.

        FSDP: one entry per FSDP group holding trainable parameters (root, then the blocks): its
        gradients' bytes (fp32), in the order they are reduce-scattered (blocks in reverse, root
        last)."""
        if self.args.strategy == "fsdp":
            return [t * 4 for _, t in reversed(self.fsdp_groups) if t], "FSDP groups"
        if getattr(self.ddp, "_has_rebuilt_buckets", False):
            try:
                buckets = sorted(self.ddp.reducer._get_zeros_like_grad_buckets(), key=lambda b: b.index())
                sizes = [b.buffer().numel() * b.buffer().element_size() for b in buckets]
                if sizes and sum(sizes) == sum(self.param_bytes):
                    return sizes, "reducer"
            except Exception as e:  # noqa: BLE001 - private API: fall back to the computed layout
                print(f"distbench: reducer buckets unreadable ({first_line(e)}): computing DDP's layout", file=sys.stderr)
        cfg = getattr(self.ddp, "_bucket_config", None)
        cap = int(getattr(self.ddp, "bucket_bytes_cap", self.args.bucket_cap_mb * 2**20))
        # torch >= 2.9 keeps the first bucket's cap in _bucket_config; older releases always used
        # dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB).
        first = int(getattr(cfg, "first_bucket_bytes_cap", DEFAULT_FIRST_BUCKET_BYTES))
        return ddp_bucket_layout(self.param_bytes, cap, first), "computed"

    # -- phases -------------------------------------------------------------------------------

    def run_phase(self, phase: str) -> tuple[list[list[float]] | None, dict]:
        """Run one phase on every rank. Returns (per-rank vectors, extras) or raises PhaseError
        (the same on every rank)."""
        args = self.args
        err, result, extras = None, None, {}
        self.reset_peak()
        try:
            if phase == "step":
                if self.hook_error:
                    raise PhaseError("skipped", self.hook_error)
                times, energy = self.timed(lambda: self.step(True), args.warmup_steps, args.steps)
                result = times + energy
            elif phase == "compute_only" and args.strategy == "fsdp":
                # No collective at all: the first warm-up step gathers the parameters, which then
                # stay gathered; gradients stay unreduced, so the optimizer (holding the shards)
                # has no gradients and skips its update: compute-only leaves the optimizer out.
                self.fsdp_comm(False)
                try:
                    times, energy = self.timed(lambda: self.step(False), max(args.warmup_steps, 1), args.steps)
                finally:
                    self.fsdp_comm(True)
                result = times + energy
            elif phase == "compute_only":
                def step():
                    with self.ddp.no_sync():
                        self.step(False)
                times, energy = self.timed(step, args.warmup_steps, args.steps)
                result = times + energy
            elif args.strategy == "fsdp":
                result, extras = self.fsdp_comm_alone()
            else:
                result, extras = self.comm_alone()
        except PhaseError as e:
            err = (e.status, e.message)
        except Exception as e:  # noqa: BLE001 - any failure is this phase's (oom or failed), recorded, not the job's
            err = (failure_status(e), first_line(e))
        if err is not None:
            result = None
            if self.opt is not None:
                self.opt.zero_grad(set_to_none=True)
            self.release()
        ok = self.agree(err is None)
        if not ok:
            # A step cut short leaves DDP's reducer mid-iteration: the next phase gets a fresh
            # wrapper. The condition must be the same on every rank (the wrapper is collective).
            if phase != "comm_alone" and not (phase == "step" and self.hook_error) and args.strategy == "ddp":
                self.wrap()
            raise PhaseError(*(err or ("failed", f"phase {phase} failed on another rank")))
        return self.gather_rows(result + self.peak()), extras

    def fsdp_comm_alone(self) -> tuple[list[float], dict]:
        """FSDP's collectives of one step, alone: per group (root, then the blocks) an all-gather
        of its parameters in the gathered dtype, in forward order; the blocks' all-gathers again in
        reverse order (FSDP2 reshards the blocks after forward); then a reduce-scatter of each
        group's trainable gradients in fp32, in reverse order, root last. Each buffer is the group's
        size padded to a multiple of the world size, as FSDP pads its flat shards. Launched back to
        back asynchronously, then waited on. last_bucket_ms: the root's reduce-scatter alone (the
        last, after backward ends)."""
        torch, dist = self.torch, self.dist
        ws = self.world_size

        def padded(n):
            return -(-n // ws) * ws

        gathers = [torch.empty(padded(n), dtype=self.fsdp_param_dtype, device=self.device) for n, _ in self.fsdp_groups]
        shards = [torch.empty(g.numel() // ws, dtype=g.dtype, device=self.device) for g in gathers]
        reduces = [torch.empty(padded(t), dtype=torch.float32, device=self.device) if t else None for _, t in self.fsdp_groups]
        reduced = [torch.empty(r.numel() // ws, dtype=torch.float32, device=self.device) if r is not None else None
                   for r in reduces]
        n_groups = len(gathers)
        order = ([("ag", i) for i in range(n_groups)] + [("ag", i) for i in reversed(range(1, n_groups))]
                 + [("rs", i) for i in reversed(range(n_groups)) if reduces[i] is not None])

        def launch(kind, i):
            if kind == "ag":
                return dist.all_gather_into_tensor(gathers[i], shards[i], async_op=True)
            return dist.reduce_scatter_tensor(reduced[i], reduces[i], async_op=True)

        # Check once: shards of rank r hold r + 1 -> the gathered buffer is ranks in order; every
        # rank's gradients hold 1 -> the reduced shard holds the world size (exact).
        for s in shards:
            s.fill_(self.rank + 1)
        for r in reduces:
            if r is not None:
                r.fill_(1)
        for w in [launch(k, i) for k, i in order]:
            w.wait()
        self.sync()
        ok = all(bool((g.view(ws, -1) == torch.arange(1, ws + 1, device=self.device, dtype=g.dtype)[:, None]).all())
                 for g in gathers)
        ok = ok and all(bool((r == ws).all()) for r in reduced if r is not None)
        for t in shards + [r for r in reduces if r is not None]:
            t.zero_()

        def all_collectives():
            for w in [launch(k, i) for k, i in order]:
                w.wait()

        last = next((("rs", i) for k, i in reversed(order) if k == "rs"), order[-1])
        times, energy = self.timed(all_collectives, self.args.warmup_steps, self.args.allreduce_trials)
        last_t, _ = self.timed(lambda: launch(*last).wait(), 1, self.args.allreduce_trials)
        elem = torch.empty((), dtype=self.fsdp_param_dtype).element_size()
        wire = sum(g.numel() * elem for g in gathers) + sum(g.numel() * elem for g in gathers[1:]) \
            + sum(r.numel() * 4 for r in reduces if r is not None)
        return times + energy + last_t + [1.0 if ok else 0.0], {"wire_bytes": wire}

    def comm_alone(self) -> tuple[list[float], dict]:
        torch, dist, args = self.torch, self.dist, self.args
        wire = {"none": torch.float32, "bf16_compress": torch.bfloat16, "fp16_compress": torch.float16}[args.comm_hook]
        elem = torch.empty((), dtype=wire).element_size()
        # Gradients are float32 (4 bytes); a compression hook casts a bucket to its wire dtype.
        bufs = [torch.empty(b // 4, dtype=wire, device=self.device) for b in self.bucket_bytes]
        # Check once, before warm-up: every element is the sum of the ranks' values (exact in any
        # of these dtypes for small integers). Then zero them: sums of zeros stay finite.
        for b in bufs:
            b.fill_(self.rank + 1)
        for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
            w.wait()
        self.sync()
        expect = self.world_size * (self.world_size + 1) // 2
        correct = all(bool((b == expect).all()) for b in bufs)
        for b in bufs:
            b.zero_()

        def all_buckets():
            for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
                w.wait()

        def last_bucket():
            dist.all_reduce(bufs[-1])

        times, energy = self.timed(all_buckets, args.warmup_steps, args.allreduce_trials)
        last, _ = self.timed(last_bucket, 1, args.allreduce_trials)
        return times + energy + last + [1.0 if correct else 0.0], {"wire_bytes": sum(self.bucket_bytes) // 4 * elem}


def window_lines(phase: str, rows: list[dict], every: int) -> list[str]:
    """One progress line per window of `every` measured steps: median step time, samples/s and
    (language models) tokens/s. Printed once the phase ends, since its steps run back to back with
    a single sync at the end (a per-step print would add host work inside the timed run)."""
    from distbench.core.units import human_time_us, sig3

    out = []
    for start in range(0, len(rows), max(1, every)):
        w = rows[start:start + max(1, every)]
        step_us = statistics.median(r["step_time_ms"] for r in w) * 1e3
        text = (f"{phase} phase, steps {w[0]['step']}-{w[-1]['step']}: step {human_time_us(step_us)}, "
                f"{sig3(statistics.median(r['samples_per_s'] for r in w))} samples/s")
        if w[0].get("tokens_per_s") is not None:
            text += f", {sig3(statistics.median(r['tokens_per_s'] for r in w))} tokens/s"
        out.append(text)
    return out


def base_row(args, h: TrainingHarness) -> dict:
    return {
        "backend": args.backend, "world_size": h.world_size, "nodes": node_count(), "model": args.model, "strategy": args.strategy,
        "hidden_dim": args.hidden_dim, "num_layers": args.num_layers,
        "n_heads": args.gpt_heads if args.model != "mlp" else None,
        "seq_len": args.seq_len if args.model != "mlp" else None,
        "vocab_size": args.vocab_size if args.model != "mlp" else None,
        "lora_rank": args.lora_rank if args.model == "lora" else None, "compile": args.compile, "batch_size": args.batch_size, "global_batch_size": args.global_batch_size,
        "scaling": args.scaling, "dtype": args.dtype, "optimizer": args.optimizer, "bucket_cap_mb": float(args.bucket_cap_mb),
        "gradient_as_bucket_view": args.gradient_as_bucket_view, "static_graph": args.static_graph,
        "broadcast_buffers": args.broadcast_buffers, "comm_hook": args.comm_hook, "grad_accum": args.grad_accum,
        "nccl_env": args.nccl_env_label, "config": args.config_label, "phase": None, "step": 0,
        "step_time_ms": None, "step_time_ms_rank_min": None, "step_time_ms_rank_max": None, "last_bucket_ms": None,
        "samples_per_s": None, "samples_per_s_per_device": None, "tokens_per_s": None, "tokens_per_s_per_device": None,
        "params_total": getattr(h, "counts", {}).get("total"), "params_trainable": getattr(h, "counts", {}).get("trainable"),
        "flops_per_sample": getattr(h, "flops_per_sample", None), "device_name": h.device_name,
        "attention_kernel": getattr(h, "attention_kernel", ""), "grad_bytes": h.grad_bytes,
        "n_buckets": h.n_buckets, "peak_mem_allocated_bytes": None, "peak_mem_reserved_bytes": None,
        "energy_j": None, "correct": None, "status": "ok", "message": "",
    }


def phase_rows(args, h: TrainingHarness, phase: str, per_rank, correct, message) -> list[dict]:
    n = args.allreduce_trials if phase == "comm_alone" else args.steps
    row = {**base_row(args, h), "phase": phase}
    peak_alloc = max(r[-2] for r in per_rank)
    peak_res = max(r[-1] for r in per_rank)
    rows = []
    for s in range(n):
        times = [r[s] for r in per_rank]
        energies = [r[n + s] for r in per_rank]
        t = max(times)
        out = {**row, "step": s, "step_time_ms": t, "step_time_ms_rank_min": min(times), "step_time_ms_rank_max": t,
               "energy_j": None if any(math.isnan(e) for e in energies) else sum(energies) / 1e3,
               "peak_mem_allocated_bytes": None if math.isnan(peak_alloc) else int(peak_alloc),
               "peak_mem_reserved_bytes": None if math.isnan(peak_res) else int(peak_res),
               "correct": correct, "status": "ok" if correct is not False else "wrong", "message": message}
        if phase == "comm_alone":
            out["last_bucket_ms"] = max(r[2 * n + s] for r in per_rank)
        else:
            sps = args.global_batch_size / (t / 1e3)
            out.update(samples_per_s=sps, samples_per_s_per_device=sps / h.world_size)
            if args.model != "mlp":
                out.update(tokens_per_s=sps * args.seq_len, tokens_per_s_per_device=sps * args.seq_len / h.world_size)
        rows.append(out)
    return rows


def status_rows(args, h: TrainingHarness, phase: str, status: str, message: str) -> list[dict]:
    n = args.allreduce_trials if phase == "comm_alone" else args.steps
    return [{**base_row(args, h), "phase": phase, "step": s, "status": status, "message": message} for s in range(n)]


def _flag(name: str):
    def parse(v: str) -> bool:
        flags = {"false": False, "true": True}
        if v.lower() not in flags:
            raise argparse.ArgumentTypeError(f"{name}: expected false or true, got {v!r}")
        return flags[v.lower()]
    return parse


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.training", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=BACKENDS, required=True)
    add_model_args(p)
    p.add_argument("--compile", type=_flag("--compile"), default=False, metavar="{false,true}",
                   help="wrap the (DDP/FSDP) model in torch.compile; warm-up absorbs the compilation")
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank per optimizer step (weak scaling)")
    p.add_argument("--scaling", choices=SCALINGS, default="weak",
                   help="weak: --batch-size per rank; strong: --global-batch-size split over the ranks")
    p.add_argument("--global-batch-size", type=int, help="strong scaling: samples per optimizer step over all ranks (ignored for weak)")
    p.add_argument("--dtype", choices=TRAIN_DTYPES, default="float32", help="bfloat16: torch.autocast; parameters stay float32")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd")
    p.add_argument("--bucket-cap-mb", type=float, default=DDP_DEFAULT_BUCKET_CAP_MB,
                   help="DDP bucket_cap_mb (25, DDP's default, is left to DDP: its first bucket is then capped at 1 MiB)")
    p.add_argument("--gradient-as-bucket-view", type=_flag("--gradient-as-bucket-view"), default=False, metavar="{false,true}")
    p.add_argument("--static-graph", type=_flag("--static-graph"), default=False, metavar="{false,true}")
    p.add_argument("--broadcast-buffers", type=_flag("--broadcast-buffers"), default=True, metavar="{false,true}")
    p.add_argument("--comm-hook", choices=COMM_HOOKS, default="none",
                   help="DDP communication hook from torch.distributed.algorithms.ddp_comm_hooks.default_hooks")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (no_sync on all but the last)")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--log-every", type=int, default=10,
                   help="print one line per this many measured steps (after the phase: the steps are timed back to back)")
    p.add_argument("--allreduce-trials", type=int, default=10)
    p.add_argument("--config-label", default="plain", help="label written to the config column")
    p.add_argument("--nccl-env-label", default="default", help="label written to the nccl_env column")
    p.add_argument("--op-timeout-s", type=int, default=300, help="process-group timeout per collective")
    p.add_argument("--out", required=True, help="CSV to write (rank 0); atomically renamed when complete")
    p.add_argument("--placement-out", help="JSON with every rank's GPU placement")
    p.add_argument("--profile-dir", help="after the timed phases, profile --profile-steps more training steps with "
                                         "torch.profiler and write each rank's Chrome trace here (distbench.launch.profiling)")
    p.add_argument("--profile-steps", type=int, default=3, help="steps recorded by --profile-dir")
    args = p.parse_args(argv)

    for name in ("batch_size", "grad_accum", "steps", "allreduce_trials", "log_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup_steps < 0:
        p.error("--warmup-steps must be >= 0")
    if args.bucket_cap_mb <= 0:
        p.error("--bucket-cap-mb must be > 0")
    resolve_model_args(p, args)
    if args.strategy == "fsdp" and args.comm_hook != "none":
        p.error("--comm-hook is a DDP option; FSDP reduces in fp32 (bf16 parameters under --dtype bfloat16)")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        args.batch_size, args.global_batch_size = per_rank_batch(args.scaling, args.batch_size, args.global_batch_size, world_size)
    except ValueError as e:
        p.error(str(e))
    if args.batch_size % args.grad_accum:
        p.error(f"the per-rank batch {args.batch_size} is not divisible by --grad-accum {args.grad_accum}")
    return args


def profile_steps(h: TrainingHarness, args) -> None:
    """Traces on request: a few more real steps (gradients synced) under torch.profiler, after every
    timed phase, so no measured row is taken under the profiler. A failure costs the trace only."""
    from distbench.launch.profiling import profile_pass

    try:
        path = profile_pass(h.torch, lambda: h.step(sync_grads=True), args.profile_steps, args.profile_dir, h.rank,
                            h.cuda, h.sync)
        h.say(f"profile: {args.profile_steps} step(s) traced, rank {h.rank}: {path}")
    except RuntimeError as e:  # torch.OutOfMemoryError included: the measured rows are already written
        h.say(f"profile: no trace on rank {h.rank}: {first_line(e)}")


def main(argv=None) -> int:
    from distbench.core.io import PartialCsvs

    args = parse_args(argv)
    h = TrainingHarness(args)
    if not h.placement_ok(args.placement_out):
        return 3
    writer = PartialCsvs([(Path(args.out), TRAINING_COLUMN_NAMES)]) if h.rank == 0 else None
    say = h.say

    # grad_bytes: what DDP all-reduces per optimizer step on each rank (the wire dtype's bytes).
    h.grad_bytes = h.n_buckets = None
    build_err = None
    wrapping = "sharding it with FSDP2" if args.strategy == "fsdp" else "wrapping it in DDP"
    for what, build in (("building the model and its data", h.build), (wrapping, h.build_ddp)):
        try:
            build()
        except PhaseError as e:
            build_err = (e.status, e.message)
        except RuntimeError as e:  # torch.OutOfMemoryError included
            build_err = (failure_status(e), f"{what}: {first_line(e)}")
        if not h.agree(build_err is None):
            build_err = build_err or ("failed", f"another rank failed {what}")
            break
    if getattr(h, "param_bytes", None):
        h.grad_bytes = sum(h.param_bytes) // (2 if args.comm_hook != "none" else 1)
    if build_err:
        for phase in TRAINING_PHASES:
            if writer:
                writer.write(0, status_rows(args, h, phase, *build_err))
        say(f"{build_err[0]}: {build_err[1]}")
    else:
        for phase in TRAINING_PHASES:
            shape = (f"mlp {args.hidden_dim}x{args.num_layers}" if args.model == "mlp" else
                     f"{args.model} {args.num_layers}L/{args.gpt_heads}H/{args.hidden_dim}d seq {args.seq_len}")
            say(f"measuring {phase}: {shape} {args.strategy}, batch {args.batch_size}/rank, "
                f"{h.world_size} rank(s), {args.dtype}, {args.optimizer}, comm hook {args.comm_hook}, "
                f"compile {args.compile}, config {args.config_label}")
            correct, message = None, ""
            try:
                per_rank, extras = h.run_phase(phase)
            except PhaseError as e:
                per_rank, error = None, e
            if phase == "step":
                # The layout DDP settled on (after its bucket rebuild), for every row and for
                # phase comm_alone; computed the reducer's way when phase step did not run.
                h.bucket_bytes, source = h.bucket_layout()
                h.n_buckets = len(h.bucket_bytes)
                say(f"{h.n_buckets} gradient bucket(s) ({source} layout), in reduction order: {h.bucket_bytes} B")
            if per_rank is None:
                if writer:
                    writer.write(0, status_rows(args, h, phase, error.status, error.message))
                say(f"{phase}: {error.status}: {error.message}")
                continue
            if phase == "step":
                correct, message = h.replicas_agree()
            elif phase == "comm_alone":
                bad = [r for r, v in enumerate(per_rank) if v[-3] == 0]
                correct = not bad
                if bad:
                    message = f"all-reduced buckets differ from the expected sum on rank(s) {ranks_text(bad)}"
            rows = phase_rows(args, h, phase, [v[:-3] + v[-2:] if phase == "comm_alone" else v for v in per_rank],
                              correct, message)
            if writer:
                writer.write(0, rows)
            if phase != "comm_alone":
                for line in window_lines(phase, rows, args.log_every):
                    say(line)
            med = statistics.median(r["step_time_ms"] for r in rows)
            tail = (f", {statistics.median(r['samples_per_s'] for r in rows):.1f} samples/s"
                    + (f", {statistics.median(r['tokens_per_s'] for r in rows):.0f} tokens/s" if args.model != "mlp" else "")
                    if phase != "comm_alone"
                    else f", last bucket {statistics.median(r['last_bucket_ms'] for r in rows):.3f} ms, "
                         f"{extras['wire_bytes']} B in {h.n_buckets} bucket(s)")
            say(f"{phase}: median step {med:.3f} ms{tail}{'' if correct is not False else ' WRONG: ' + message}")
    if args.profile_dir and not build_err:
        profile_steps(h, args)
    h.dist.barrier(group=h.ctrl)
    if writer is not None:
        writer.close()
    # Drop DDP (its reducer holds Gloo/NCCL work) before the groups go, so nothing of it is torn
    # down at interpreter exit.
    h.ddp = h.model = h.opt = None
    gc.collect()
    h.dist.barrier(group=h.ctrl)
    h.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
