import sys

from distbench.training.harness import main

sys.exit(main())
