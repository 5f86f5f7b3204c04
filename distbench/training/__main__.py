import sys

from distbench.launch.ranks import exit_rank, run_configs
from distbench.training.harness import main

# one configuration, or several (--batch: distbench.launch.batch); then out without the
# interpreter's teardown (distbench.launch.ranks.exit_rank says why)
exit_rank(run_configs(main, sys.argv[1:]))
