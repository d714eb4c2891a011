"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads from
a host this machine cannot reach. It does the same job with what is reachable:
the standard library's bundled pip (ensurepip) installs pip, which then installs
the requested packages from the package index.

ansible-test runs it as ``python get_pip_<ver>.py <pip options> <packages>``;
get-pip.py's own ``--no-setuptools``/``--no-wheel`` flags are accepted and dropped.
"""

import subprocess
import sys

args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True, stdout=subprocess.DEVNULL)
sys.exit(subprocess.run([sys.executable, "-m", "pip", "install", *args], check=False).returncode)
