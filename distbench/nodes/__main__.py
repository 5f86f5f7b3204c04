import os
import sys

from distbench.launch.timeline import finish
from distbench.nodes.harness import main

code = main()
# As the other families: results written, process groups destroyed; leave without the interpreter's
# teardown (a Gloo thread occasionally aborts it).
finish()  # this rank's phase marks (distbench.launch.timeline): os._exit runs no atexit
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
