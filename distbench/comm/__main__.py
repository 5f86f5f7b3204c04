import os
import sys

from distbench.comm.cli import main
from distbench.launch.timeline import finish

code = main()
# The CSVs are written and renamed, the process groups destroyed: leave without the interpreter's
# teardown, as the training and memory families do (it cost about a second per job: the job's
# fixed cost, distbench.launch.timeline), after writing this rank's phase marks.
finish()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
