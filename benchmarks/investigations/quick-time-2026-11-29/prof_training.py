"""One MLP training job (the quick answer's: distbench.training defaults, NCCL) under cProfile, per rank:
where its set-up seconds go (the timeline's setup_s: model build, DDP wrap, placement check).
    torchrun --nproc-per-node N prof_training.py OUTDIR"""
import cProfile
import os
import pstats
import sys
import time

t0 = time.time()
out = sys.argv[1]
rank = os.environ.get("RANK", "0")
pr = cProfile.Profile()
pr.enable()
from distbench.training import harness  # noqa: E402

rc = harness.main(["--backend", "nccl", "--model", "mlp", "--out", f"{out}/t.csv"], keep_groups=True)
pr.disable()
with open(f"{out}/rank{rank}.txt", "w") as f:
    f.write(f"rc {rc}, {time.time() - t0:.2f} s in all\n")
    pstats.Stats(pr, stream=f).sort_stats("cumulative").print_stats(70)
