"""The training harness's rank state (distbench.training.harness runs it): the workload built from
the registry (distbench.workloads.registry), wrapped in DDP or sharded with FSDP2 (`wrap_model`), one
training step, the timing loop, the replicas' check and DDP's bucket layout. The phases that use it
are in distbench.training.phases."""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import sys
import time

from distbench.core.layout_spec import layout
from distbench.launch.ranks import RankContext, first_line, ranks_text
from distbench.workloads.layouts import data_rank
from distbench.workloads.registry import workload

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


def compile_seconds(warmup_s: list[float], timed_ms: list[float]) -> float:
    """compile_time_s of one phase of a compiled job: the wall time of its warm-up calls beyond
    as many steady calls (the median of its timed calls), in seconds, never negative. Torch compiles a
    step lazily, in the first calls (forward, then backward in the first backward, again wherever a guard
    fails), so this is the compilation plus whatever else a first call pays (the allocator's first
    allocations, a communicator's set-up: under a second on GPUs, against tens of seconds of inductor);
    the timed calls, and the tokens/s made of them, never include it. NaN without timed calls."""
    if not timed_ms:
        return math.nan
    steady_s = statistics.median(timed_ms) / 1e3
    return max(0.0, sum(warmup_s) - len(warmup_s) * steady_s)


# A compiled job's warm-up (TrainingHarness.warm_up): at least one call, then more while any rank's last
# call still compiled something (a recompilation on the second step: guards on what the first created),
# at most this many beyond training.warmup_steps, so no compilation lands in the timed steps.
COMPILE_EXTRA_WARMUP = 8


# --- everything below runs inside the torchrun ranks ------------------------------------------

def compile_count() -> int | None:
    """How many compilations torch has timed in this process so far (dynamo's frames, AOTAutograd's
    forward and its lazily compiled backward, inductor's passes: torch._dynamo.utils'
    compilation_time_metrics); a call after which it grew compiled something. None where this torch
    keeps no such record (then the warm-up is training.warmup_steps calls, at least one)."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return None
    return sum(len(v) for v in compilation_time_metrics.values())


def compile_failure(e: BaseException) -> str | None:
    """The message of a failed torch.compile ('torch.compile failed: InductorError: InvalidCxxCompiler: No
    working C++ compiler found ...': torch's first line), or None when `e` is not the compiler's: dynamo and
    inductor raise TorchDynamoException (BackendCompilerFailed, InductorError, Unsupported, ...), lazily,
    at the compiled model's first call; an error of the compiled code at run time is the measurement's."""
    try:
        from torch._dynamo.exc import TorchDynamoException
    except ImportError:
        return None
    seen = e
    while seen is not None:
        if isinstance(seen, TorchDynamoException):
            return f"torch.compile failed: {first_line(e)}"
        seen = seen.__cause__
    return None


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
        super().__init__(args.backend, args.op_timeout_s, ctrl_on_gloo_too=True, progress_unit="steps")
        self.args = args
        self.energy = EnergyMeter(self.device)
        self.device_name = self.torch.cuda.get_device_name(self.device) if self.cuda else "cpu"
        self.wrapped = self.model = self.opt = None
        self.hook_error: str | None = None
        self.n_buckets: int | None = None
        self.bucket_bytes: list[int] | None = None
        # a compiled job (--compile): the last timed phase's compile_time_s (compile_seconds; NaN when eager),
        # a note when torch still compiled during its timed calls, and the compiler's failure, once seen
        # ((COMPILE_FAILED, message): the phases that run the compiled model are not run again)
        self.compile_s = math.nan
        self.warmup_calls = 0
        self.timed_note = ""
        self.compile_error: tuple[str, str] | None = None

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
        """The workload (distbench.workloads.registry), its data for this rank's batch (split into
        --grad-accum micro-batches) and what a step needs."""
        from distbench.workloads import mlp as models

        torch, args = self.torch, self.args
        spec = workload(args.model)
        self._align_buf = torch.zeros(1, device=self.device)
        torch.manual_seed(0)  # every rank starts from the same weights (DDP broadcasts rank 0's too)
        # fsdp_tp: the ranks of one TP group read the same sequences (distbench.workloads.layouts)
        built = spec.build(args, data_rank(args.strategy, self.rank, getattr(args, "tp_size", None)), self.device)
        self.model, self.loss_fn, self.counts = built.model, built.loss_fn, built.counts
        self.flops_per_sample = spec.flops_per_sample(args, built.counts)
        x, y = built.data(args.batch_size)
        self.param_bytes = models.grad_param_bytes(self.model)
        self.param_names = [n for n, p in self.model.named_parameters() if p.requires_grad]
        self.micro = list(zip(x.chunk(args.grad_accum), y.chunk(args.grad_accum)))
        self.autocast = lambda: models.autocast(args.dtype, self.device)
        self.attention_kernel = self.sdpa_kernel(x[:1]) if spec.attention else ""

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

    def wrap_model(self):
        """Wrap the model in DDP or shard it with FSDP2 (--strategy), then the optimizer over the
        wrapped model's trainable parameters. Collective (DDP broadcasts rank 0's parameters; FSDP
        shards them): every rank calls it."""
        from distbench.workloads import mlp as models

        if layout(self.args.strategy).sharded:
            from distbench.workloads.fsdp import FSDPUnavailable

            try:
                self.shard()
            except FSDPUnavailable as e:  # not applicable here: said so
                spec = layout(self.args.strategy)
                what = f"layout {spec.name}" if spec.group else "FSDP2 (fully_shard)"
                raise PhaseError("skipped", f"{what} cannot run with backend {self.args.backend} "
                                            f"on {self.device.type} here: {e}") from e
        else:
            self.wrap_ddp()
        params = [p for p in self.wrapped.parameters() if p.requires_grad]
        self.opt = models.make_optimizer(self.args.optimizer, params, fused=self.cuda)
        if self.args.compile:
            # A shared launch (distbench.launch.batch) runs several configurations in one process: the one
            # before may have compiled the same model code for its own modules. Its frames and guards go, so
            # this job compiles its own (and is timed doing so) instead of piling up recompilations until
            # dynamo's recompile limit makes it fall back to eager, a "compiled" job that ran eager.
            self.torch._dynamo.reset()
        self.set_forward()

    def set_forward(self):
        """The step's forward and loss: the wrapped model (DDP or FSDP2) and its loss, each under
        torch.compile with --compile. torch.compile is lazy: it compiles at the first call, in warm-up
        (warm_up), where a failure is the job's compile_failed. A re-wrapped DDP model (phases.run_phase,
        after a failed phase) gets its forward again here; after a compile failure none is compiled."""
        compiled = self.args.compile and self.compile_error is None
        self.fwd = self.torch.compile(self.wrapped) if compiled else self.wrapped
        # The loss is compiled too: inductor fuses the fp32 upcast into the log-softmax, so the
        # (batch x seq x vocab) fp32 copy of the logits (4.6 GiB for gpt 1.3b at batch 24) is never
        # materialised; a separate graph because DDP's forward is a graph boundary anyway.
        self.loss = self.torch.compile(self.loss_fn) if compiled else self.loss_fn

    def shard(self):
        """FSDP2 per block (distbench.workloads.fsdp.fully_shard_blocks: gpt/lora's decoder blocks,
        the MLP's Linear + GELU blocks), and the groups comm_alone gathers and reduce-scatters."""
        from distbench.workloads.layouts import shard_layout

        torch, args = self.torch, self.args
        shard_layout(self.model, args.strategy, args.dtype == "bfloat16", self.world_size, self.device.type,
                     getattr(args, "shard_size", None), getattr(args, "tp_size", None))
        self.wrapped = self.model
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
        m = self.wrapped
        m.set_requires_gradient_sync(enabled)
        m.set_reshard_after_backward(enabled)
        if hasattr(m, "set_reshard_after_forward"):  # torch >= 2.7; before, blocks re-gather in backward
            for block in self.model.blocks:
                block.set_reshard_after_forward(enabled)
        if enabled:
            m.reshard()

    def wrap_ddp(self):
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
        self.wrapped = DDP(self.model, **kw)
        self.hook_error = None
        if args.comm_hook != "none":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = {"bf16_compress": default_hooks.bf16_compress_hook,
                    "fp16_compress": default_hooks.fp16_compress_hook}[args.comm_hook]
            try:
                self.wrapped.register_comm_hook(state=None, hook=hook)
            except (TypeError, RuntimeError, ValueError) as e:
                self.hook_error = f"DDP rejects comm hook {args.comm_hook} with backend {args.backend} here: {first_line(e)}"
        # The hook's outcome must be the same on every rank (a rank with the hook and one without
        # would not match their collectives).
        if not self.agree(self.hook_error is None) and self.hook_error is None:
            self.hook_error = f"another rank's DDP rejects comm hook {args.comm_hook}"

    def step(self, sync_grads: bool):
        n = len(self.micro)
        fsdp = layout(self.args.strategy).sharded
        for i, (x, y) in enumerate(self.micro):
            sync = sync_grads and i == n - 1
            if fsdp and n > 1:
                self.wrapped.set_requires_gradient_sync(sync)
            with contextlib.nullcontext() if sync or fsdp else self.wrapped.no_sync():
                with self.autocast():
                    loss = self.loss(self.fwd(x), y)
                if n > 1:
                    loss = loss / n
                loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    # -- timing -------------------------------------------------------------------------------

    def timed(self, fn, warmup: int, n: int, marks: bool = False) -> tuple[list[float], list[float]]:
        """This rank's time (ms) of each of `n` back-to-back calls of `fn`, and its energy (mJ per
        call, NaN when unavailable).

        The ranks are aligned once (an un-timed all-reduce and a sync), then the calls run back to
        back as in training: on GPU a CUDA event is recorded between calls and the host syncs only
        after the last one, so a call's time is the gap between its two events and no per-call host
        work (or another rank's late start) lands inside it; the collectives keep the ranks in step.
        On CPU the host clock is read between calls. Energy: NVML's counter is read before and after
        the whole run (it updates too coarsely for one step) and divided evenly over the calls.
        marks: the timed calls are bracketed by distbench.training.inspect's marker all-reduces, outside
        the timing (training.inspect: NCCL Inspector's records of exactly these calls)."""
        torch, beacon = self.torch, self.beacon
        warmup_s = self.warm_up(fn, warmup)
        compiles = compile_count() if self.args.compile else None
        if marks:
            from distbench.training.inspect import MARK_START_ELEMS, marker
            marker(self, MARK_START_ELEMS)
        self.align()
        e0 = self.energy.read_mj()
        if self.cuda:
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            events[0].record()
            for i in range(n):
                fn()
                events[i + 1].record()
                beacon.done()  # host side, after the event is queued: not in the GPU's time
            events[-1].synchronize()
            times = [events[i].elapsed_time(events[i + 1]) for i in range(n)]
        else:
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
                beacon.done()  # between two clock readings, never inside one
        self.sync()
        e1 = self.energy.read_mj()
        if marks:
            from distbench.training.inspect import MARK_END_ELEMS, marker
            marker(self, MARK_END_ELEMS)
        per_call = (e1 - e0) / n if e0 is not None and e1 is not None else math.nan
        self.compile_s = compile_seconds(warmup_s, times) if self.args.compile else math.nan
        self.warmup_calls = len(warmup_s)
        # the check that the timed calls exclude the compilation: torch compiled nothing during them, else
        # the rows say so (their times, and tokens/s, then include it)
        after = compile_count() if compiles is not None else None
        self.timed_note = (f"torch compiled during the timed steps ({after - compiles} compilation(s) after "
                           f"{len(warmup_s)} warm-up step(s)): their times include it"
                           if after is not None and after != compiles else "")
        return times, [per_call] * n

    def warm_up(self, fn, warmup: int) -> list[float]:
        """`warmup` un-timed calls of `fn`. Compiled (--compile): each call's wall time in seconds (synced,
        for compile_seconds), at least one call, and more while any rank's last call still compiled
        something, up to COMPILE_EXTRA_WARMUP more: the ranks agree on each (a rank that ran one call
        fewer would leave its peers in a collective). Eager: the calls, and [] (no compile time)."""
        if not self.args.compile:
            for _ in range(warmup):
                fn()
                self.beacon.done()
            return []
        out: list[float] = []
        while True:
            before = compile_count()
            t0 = time.perf_counter()
            fn()
            self.sync()
            out.append(time.perf_counter() - t0)
            self.beacon.done()
            compiled = before is not None and compile_count() != before
            if len(out) >= max(warmup, 1) and (self.agree(not compiled) or len(out) >= warmup + COMPILE_EXTRA_WARMUP):
                return out

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
        if not layout(self.args.strategy).replicas:
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
        if layout(self.args.strategy).sharded:
            return [t * 4 for _, t in reversed(self.fsdp_groups) if t], "FSDP groups"
        if getattr(self.wrapped, "_has_rebuilt_buckets", False):
            try:
                buckets = sorted(self.wrapped.reducer._get_zeros_like_grad_buckets(), key=lambda b: b.index())
                sizes = [b.buffer().numel() * b.buffer().element_size() for b in buckets]
                if sizes and sum(sizes) == sum(self.param_bytes):
                    return sizes, "reducer"
            except Exception as e:  # noqa: BLE001 - private API: fall back to the computed layout
                print(f"distbench: reducer buckets unreadable ({first_line(e)}): computing DDP's layout", file=sys.stderr)
        cfg = getattr(self.wrapped, "_bucket_config", None)
        cap = int(getattr(self.wrapped, "bucket_bytes_cap", self.args.bucket_cap_mb * 2**20))
        # torch >= 2.9 keeps the first bucket's cap in _bucket_config; older releases always used
        # dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB).
        first = int(getattr(cfg, "first_bucket_bytes_cap", DEFAULT_FIRST_BUCKET_BYTES))
        return ddp_bucket_layout(self.param_bytes, cap, first), "computed"

