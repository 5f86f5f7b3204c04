import sys

from distbench.comm.cli import main

sys.exit(main())
