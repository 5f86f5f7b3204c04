import sys

from distbench.comm.harness import main

sys.exit(main())
