"""The executor, run as a folder: `python3 -I -B <this folder> --uid=N ...`
(sandbox/bundle.c; sandbox/direct.c for the test backend).  The package is
mcp_executor/ beside this file; see its __init__.py."""

import os
import sys

from mcp_executor.main import main

# Python put this folder first on sys.path to find mcp_executor, now
# imported whole.  The calls' code runs in children of this process: the
# folder must shadow none of its modules.
HERE = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.realpath(p) != HERE]
main()
