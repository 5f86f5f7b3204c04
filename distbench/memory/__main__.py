import os
import sys

from distbench.launch.timeline import finish
from distbench.launch.ranks import run_configs
from distbench.memory.harness import main

code = run_configs(main, sys.argv[1:])  # one configuration, or several (--batch: distbench.launch.batch)
# As the training family: results written and renamed, process groups destroyed; leave without the
# interpreter's teardown (a Gloo thread occasionally aborts it).
finish()  # this rank's phase marks (distbench.launch.timeline): os._exit runs no atexit
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
