import sys

# Ctrl-C while the CLI is still being imported (numpy, the native module) is an interruption
# like any other: one line and 130, not a traceback from the middle of an import.
try:
    from pybench.cli.main import main
    code = main()
except KeyboardInterrupt:
    print("pybench: interrupted", file=sys.stderr)
    code = 130
sys.exit(code)
