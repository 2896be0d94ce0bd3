import sys

from pybench.cli.main import main

sys.exit(main())
