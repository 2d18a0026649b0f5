"""Stand-in for pypa's get-pip.py, which ansible-test fetches from ci-files.testing.ansible.com
(unreachable here) to put pip into the virtual environments it makes for sanity tests.

Like get-pip.py it runs pip from a bundled copy: a pip wheel downloaded from PyPI that lies next
to this file (scripts/bootstrap puts both in ansible-test's cache).
"""

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WHEEL = sorted(glob.glob(os.path.join(HERE, "pip-*.whl")))[-1]
sys.path.insert(0, WHEEL)

from pip._internal.cli.main import main  # noqa: E402  (import from the wheel on sys.path)

# get-pip.py's own flags; ansible-test passes them when it wants neither package.
args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall"] + args))
