import os
import sys

from distbench.launch.timeline import finish
from distbench.launch.ranks import run_configs
from distbench.training.harness import main

code = run_configs(main, sys.argv[1:])  # one configuration, or several (--batch: distbench.launch.batch)
# The results are written and renamed, the process groups destroyed. Leave without running the
# interpreter's teardown: with Gloo, a background thread of torch's occasionally aborts the process
# there ("terminate called without an active exception", exit -6), which would turn a complete job
# into a failed one (seen once in CI-like runs of tests/test_training_harness.py).
finish()  # this rank's phase marks (distbench.launch.timeline): os._exit runs no atexit
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
