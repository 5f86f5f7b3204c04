import json
from pathlib import Path

from distbench.comm.analysis.plots import make_all
from distbench.pipeline.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    Path(sm.output[0]).mkdir(parents=True, exist_ok=True)
    peak = json.loads(Path(sm.input.advice).read_text()).get("peak")
    gpus = json.loads(Path(sm.input.env).read_text()).get("gpus") or [{}]
    for f in make_all(sm.input.summary, sm.output[0], peak=peak, gpu_name=gpus[0].get("name")):
        print(f)
