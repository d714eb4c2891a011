"""Settings of the test bed's AWX (hack/awx.py): AWX's defaults, then what a server
outside a container needs. Everything that differs between machines comes from the
environment hack/awx.py sets for each process (LM_AWX_*), so every process of one
AWX reads the same values; a key made per process would break encrypted fields
between them."""

import copy
import os
import sys

from awx.settings import defaults as _defaults

# AWX's defaults, every public name of them, as AWX's own settings files take them.
globals().update({_name: _value for _name, _value in vars(_defaults).items() if not _name.startswith("_")})

_HOME = os.environ["LM_AWX_HOME"]
_RUN = os.environ["LM_AWX_RUN"]  # the sockets: PostgreSQL, Redis
# Projects, job output and the jobs' private data: AWX lists no playbook under a path with a
# dot folder in it (such as the checkout's .awx), so these live in a folder without one.
_DATA = os.environ["LM_AWX_DATA"]

DEBUG = False
ALLOWED_HOSTS = ["*"]
SECRET_KEY = os.environ["LM_AWX_SECRET_KEY"]
BROADCAST_WEBSOCKET_SECRET = os.environ["LM_AWX_SECRET_KEY"]
SYSTEM_UUID = "00000000-0000-0000-0000-000000000000"
INSTALL_UUID = "00000000-0000-0000-0000-000000000000"
CLUSTER_HOST_ID = "awx-lm"
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
INSIGHTS_TRACKING_STATE = False
AWX_DISABLE_TASK_MANAGERS = False

DATABASES = {
    "default": {
        "ATOMIC_REQUESTS": True,
        "ENGINE": "awx.main.db.profiled_pg",
        "NAME": os.environ.get("LM_AWX_DB", "awx"),
        "USER": "awx",
        "PASSWORD": "",
        "HOST": _RUN,
        "PORT": os.environ["LM_AWX_PG_PORT"],
        "OPTIONS": {"sslmode": "disable"},
    }
}
BROKER_URL = f"unix://{_RUN}/redis.sock"
CACHES = {"default": {"BACKEND": "awx.main.cache.AWXRedisCache", "LOCATION": f"unix://{_RUN}/redis.sock?db=1"}}
CHANNEL_LAYERS = {
    "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [BROKER_URL], "capacity": 10000, "group_expiry": 157784760}}
}

STATIC_ROOT = os.path.join(_DATA, "static")
PROJECTS_ROOT = os.path.join(_DATA, "projects")
JOBOUTPUT_ROOT = os.path.join(_DATA, "job_status")
LOG_ROOT = os.path.join(_HOME, "logs")
AWX_ISOLATION_BASE_PATH = os.path.join(_DATA, "isolation")
LOG_AGGREGATOR_MAX_DISK_USAGE_PATH = _HOME
LOG_AGGREGATOR_RSYSLOGD_ERROR_LOG_FILE = os.path.join(LOG_ROOT, "rsyslog.err")
BASE_VENV_PATH = os.path.join(_HOME, "venv")

# Jobs run in the local execution environment image, on the host's network so that
# they reach the local control plane on the loopback address; the folder holding the
# project repositories is mounted so that a file:// project can be cloned.
_EE = os.environ["LM_AWX_EE_IMAGE"]
GLOBAL_JOB_EXECUTION_ENVIRONMENTS = [{"name": "lifecycle.machine EE", "image": _EE}]
CONTROL_PLANE_EXECUTION_ENVIRONMENT = _EE
DEFAULT_CONTAINER_RUN_OPTIONS = ["--network", "host"]
AWX_ISOLATION_SHOW_PATHS = [os.environ["LM_AWX_PROJECT_ROOT"]]

# Logs to files of the state folder's logs/ (hack/awx.py starts every process with
# its output there), at INFO, nothing to syslog.
_LOGGING = _defaults.LOGGING
_LOGGING["handlers"]["console"]["level"] = "INFO"
for _handler in _LOGGING["handlers"].values():  # AWX named the files under its own LOG_ROOT
    if "filename" in _handler:
        _handler["filename"] = os.path.join(LOG_ROOT, os.path.basename(_handler["filename"]))

this_module = sys.modules[__name__]
DEFAULTS_SNAPSHOT = {name: copy.deepcopy(getattr(this_module, name)) for name in dir(this_module) if name.isupper()}
del this_module
