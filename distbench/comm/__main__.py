from distbench.launch.ranks import exit_rank
from distbench.comm.main import main

# one configuration; then out without the
# interpreter's teardown (distbench.launch.ranks.exit_rank says why)
exit_rank(main())
