"""`python -m stoker ...`: the `stoker` command (stoker/cli.py)."""
import sys

from stoker.cli import main

sys.exit(main())
