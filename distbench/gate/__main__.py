import sys

from distbench.gate.cli import main

sys.exit(main())
