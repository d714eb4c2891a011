"""Start and stop a real AWX beside the local control plane, for the tests that run the
collection's AWX recipes (tests/integration/awx/) and for trying them by hand.

AWX is built from the source tarballs of ``$LIFECYCLE_MACHINE_AWX_SOURCES`` (by default
``shared/awx`` in the folder that holds the checkout) and the package registries: a Python 3.11 virtualenv with AWX's pinned requirements from PyPI,
receptor from the Go module proxy, PostgreSQL and Redis from Debian (run as plain processes in
the state folder), and jobs run by Debian's podman in the collection's execution environment (EE),
an image built from a Debian root file system without any registry. Everything built is cached
outside the repository under ``<cache>/awx-<AWX commit>/``, each part keyed on what it is made
from, as hack/build-tools.sh does for the control plane:

    python3 hack/awx.py build            venv, receptor, migrated database template, awx.awx, EE base (cached)
    python3 hack/awx.py up [--dir .awx]  build what is missing, start AWX, build the EE from HEAD, write <dir>/admin.json
    python3 hack/awx.py ee [--dir .awx]  rebuild the EE image from HEAD's collection (up does it too)
    python3 hack/awx.py down [--dir .awx]
    python3 hack/awx.py status [--dir .awx]

``up`` is idempotent: with AWX running it only makes sure the EE holds HEAD's collection and the
project repository HEAD's files. ``<dir>/admin.json`` has what a script needs: ``url``,
``username``, ``password`` (new at each start), ``ee_image`` and ``project_root``, a folder whose
git repositories AWX projects can use as ``file://`` URLs (``project_root/lifecycle-machine`` is
HEAD of this checkout). Jobs run with the host's network, so they reach a control plane on the
loopback address.

Only the standard library is used: it runs before the project's venv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from base64 import b64encode
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster  # hack/cluster.py, beside this file

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "awx"
SOURCES = Path(os.environ.get("LIFECYCLE_MACHINE_AWX_SOURCES", REPO.parent / "shared" / "awx"))
CACHE = Path(os.environ.get("LIFECYCLE_MACHINE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lifecycle-machine")
DEFAULT_DIR = REPO / ".awx"

AWX_VERSION = "24.6.2.dev145"  # what the tarball's commit reports (145 commits after 24.6.1)
RECEPTOR_VERSION = "v1.4.4"  # AWX's receptorctl pin
# The four sources AWX's requirements_git.txt names, in the order they install, with the
# version each reports (setuptools-scm cannot read one from a tarball).
GIT_REQUIREMENTS = (
    ("ansible-runner", "2.4.1.dev0", "."),
    ("awx_plugins.interfaces", "0.0.1.dev0", "."),
    ("awx-plugins", "0.0.1.dev0", "."),
    ("django-ansible-base", "2024.10.22", ".[rest_filters,jwt_consumer,resource_registry,rbac]"),
)
# Left out of AWX's requirements.txt: its git lines (installed from the tarballs above), its
# pip pin, and uwsgi (gunicorn serves the API: uwsgi's --http router reset connections at random).
SKIPPED_REQUIREMENTS = ("pip==", "uwsgi==", "uwsgitop==")
EXTRA_REQUIREMENTS = ("drf-yasg==1.21.7", "gunicorn==23.0.0")
PG_BIN = Path(os.environ.get("LIFECYCLE_MACHINE_PG_BIN", "/usr/lib/postgresql/15/bin"))
RECEPTOR_CONF = Path("/etc/receptor/receptor.conf")  # fixed in AWX's code
HOST_ID = "awx-lm"
EE_IMAGE = "localhost/lifecycle-machine-ee:latest"
EE_DEBIAN_SUITE = "bookworm"
EE_DEBIAN_PACKAGES = ("python3", "python3-pip", "git", "ca-certificates", "openssh-client")
# The EE's Python side, as extensions/awx/execution-environment.yml asks for it.
EE_PIP = ("ansible-core>=2.19,<2.20", "ansible-runner>=2.4")
ADMIN = "admin"


# -- sources and cache keys ------------------------------------------------------------------


def source_tarball(name: str) -> Path:
    found = sorted(p for p in SOURCES.glob(f"{name}-*.tar.gz") if re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{40}}\.tar\.gz", p.name))
    if len(found) != 1:
        raise SystemExit(f"expected one {name}-<commit>.tar.gz in {SOURCES}, found {len(found)}")
    return found[0]


def awx_commit() -> str:
    return source_tarball("awx").name.removeprefix("awx-").removesuffix(".tar.gz")


def cache_dir() -> Path:
    return CACHE / f"awx-{awx_commit()[:12]}"


def _key(*parts: str | bytes | Path) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.read_bytes() if isinstance(part, Path) else part.encode() if isinstance(part, str) else part
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def venv_key() -> str:
    tarballs = [source_tarball(n) for n in ("awx", "ansible-runner", "awx_plugins.interfaces", "awx-plugins", "django-ansible-base")]
    return _key(*(t.name for t in tarballs), repr(GIT_REQUIREMENTS), repr(SKIPPED_REQUIREMENTS), repr(EXTRA_REQUIREMENTS), sys.version.split()[0])


def db_key() -> str:
    """What the migrated and bootstrapped database depends on: AWX (its migrations), what the
    bootstrap runs, and the one setting it records (the EE image, registered as AWX's default)."""
    return _key(venv_key(), EE_IMAGE, repr(_bootstrap_commands("x")))


def ee_base_key() -> str:
    return _key(EE_DEBIAN_SUITE, repr(EE_DEBIAN_PACKAGES), repr(EE_PIP), REPO / "requirements.txt", _kubernetes_core_version())


def _kubernetes_core_version() -> str:
    manifest = _kubernetes_core_dir() / "MANIFEST.json"
    return json.loads(manifest.read_text())["collection_info"]["version"]


def _kubernetes_core_dir() -> Path:
    """kubernetes.core as the project's venv has it (the ansible package on PyPI carries it;
    Galaxy cannot be reached): the EE gets the same version the tests run with."""
    found = sorted((REPO / ".venv" / "lib").glob("python3*/site-packages/ansible_collections/kubernetes/core"))
    if not found:
        raise SystemExit("kubernetes.core not found in .venv: run `make venv` first")
    return found[-1]


def _run(argv: list[str | Path], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], check=True, **kwargs)


def _log(message: str) -> None:
    print(f"[awx] {message}", file=sys.stderr, flush=True)


def _ready_marker(path: Path) -> Path:
    return path.with_name(path.name + ".done")


# -- build: venv, receptor, awx.awx, database template, EE base ------------------------------


def _extract(tarball: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(into, filter="data")
    return into / top


def build_venv() -> Path:
    venv = cache_dir() / f"venv-{venv_key()}"
    if _ready_marker(venv).exists():
        return venv
    _log(f"building AWX {AWX_VERSION} in {venv} (PyPI; a few minutes when cold)")
    shutil.rmtree(venv, ignore_errors=True)
    with tempfile.TemporaryDirectory() as work:
        src = _extract(source_tarball("awx"), Path(work))
        requirements = Path(work) / "requirements.txt"
        lines = (src / "requirements" / "requirements.txt").read_text().splitlines()
        requirements.write_text("\n".join(line for line in lines if "git+" not in line and not line.startswith(SKIPPED_REQUIREMENTS)) + "\n")
        _run([sys.executable, "-m", "venv", venv])
        pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run([*pip, "--upgrade", "pip<24.1", "wheel"])
        _run([*pip, "-r", requirements, *EXTRA_REQUIREMENTS])
        for name, version, target in GIT_REQUIREMENTS:
            tree = _extract(source_tarball(name), Path(work) / name)
            _run([*pip, "--no-deps", target], cwd=tree, env={**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": version})
        _run([*pip, "--no-deps", "."], cwd=src, env={**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": AWX_VERSION})
    _ready_marker(venv).touch()
    return venv


def awx_collection_root() -> Path:
    """A collections path holding awx.awx of the same AWX release (configure_awx.yml's modules),
    built from the tarball's awx_collection/ with the version templated in as AWX's own build does
    (the modules compare it with the server's and warn when they differ)."""
    root = cache_dir() / f"collections-{_key(source_tarball('awx').name, AWX_VERSION)}"
    if (root / "ansible_collections" / "awx" / "awx" / "MANIFEST.json").exists():
        return root
    galaxy = REPO / ".venv" / "bin" / "ansible-galaxy"
    with tempfile.TemporaryDirectory() as work:
        collection = _extract(source_tarball("awx"), Path(work)) / "awx_collection"
        galaxy_yml = collection / "galaxy.yml"
        galaxy_yml.write_text(galaxy_yml.read_text().replace("version: 0.0.1-devel", f"version: {AWX_VERSION.replace('.dev', '-dev')}"))
        api = collection / "plugins" / "module_utils" / "controller_api.py"
        api.write_text(api.read_text().replace('    _COLLECTION_VERSION = "0.0.1-devel"', f'    _COLLECTION_VERSION = "{AWX_VERSION}"'))
        _run([galaxy, "collection", "build", "--force", "--output-path", work, collection], stdout=subprocess.DEVNULL)
        tarball = next(Path(work).glob("awx-awx-*.tar.gz"))
        _run([galaxy, "collection", "install", "--offline", "--force", "-p", root, tarball], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return root


def build_receptor() -> Path:
    out = CACHE / f"receptor-{RECEPTOR_VERSION}" / "receptor"
    if out.exists():
        return out
    _log(f"building receptor {RECEPTOR_VERSION} from the Go module proxy")
    module = f"github.com/ansible/receptor@{RECEPTOR_VERSION}"
    env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    info = json.loads(subprocess.run(["go", "mod", "download", "-json", module], check=True, capture_output=True, text=True, env=env).stdout)
    with tempfile.TemporaryDirectory() as work:
        src = Path(work) / "receptor"
        shutil.copytree(info["Dir"], src)
        for path in src.rglob("*"):
            path.chmod(path.stat().st_mode | 0o200)
        out.parent.mkdir(parents=True, exist_ok=True)
        ldflags = f"-s -w -X github.com/ansible/receptor/internal/version.Version={RECEPTOR_VERSION.lstrip('v')}"
        _run(["go", "build", "-trimpath", "-ldflags", ldflags, "-o", f"{out}.tmp", "./cmd/receptor-cl"], cwd=src, env=env)
    Path(f"{out}.tmp").rename(out)
    return out


def _bootstrap_commands(password: str) -> list[list[str]]:
    """What upstream's development bootstrap runs after the migration, without its demo data
    (which clones a project from GitHub)."""
    return [
        ["createsuperuser", "--noinput", f"--username={ADMIN}", "--email=admin@localhost"],
        ["register_default_execution_environments"],
        ["provision_instance", f"--hostname={HOST_ID}", "--node_type=hybrid"],
        ["register_queue", "--queuename=controlplane", "--instance_percent=100"],
        ["register_queue", "--queuename=default", "--instance_percent=100"],
    ]


def build_database() -> Path:
    """A dump of AWX's database migrated and bootstrapped (the migration alone takes minutes,
    single-threaded), and the secret key its encrypted fields were made with."""
    dump = cache_dir() / f"db-{db_key()}.dump"
    if dump.exists():
        return dump
    venv = build_venv()
    _log("migrating AWX's database (single-threaded, several minutes when cold)")
    secret = dump.with_suffix(".secret")
    secret_key = secrets.token_hex(32)
    with tempfile.TemporaryDirectory(prefix="lm-awx-db-") as work:
        home = Path(work)
        _prepare_home(home)
        state = {"pg_port": cluster._free_port(), "db": "awx"}
        try:
            _start_postgres(home, state)
            _createdb(home, state, "awx")
            _start_redis(home, state)
            env = _awx_env(home, state, secret_key, ee_image=EE_IMAGE)
            manage = venv / "bin" / "awx-manage"
            _run([manage, "migrate", "--noinput"], env=env, stdout=_logfile(home, "migrate"), stderr=subprocess.STDOUT)
            for command in _bootstrap_commands(""):
                _run(
                    [manage, *command],
                    env={**env, "DJANGO_SUPERUSER_PASSWORD": secrets.token_urlsafe(16)},
                    stdout=_logfile(home, "bootstrap"),
                    stderr=subprocess.STDOUT,
                )
            _run([PG_BIN / "pg_dump", "-Fc", "-h", _sockets(home), "-p", state["pg_port"], "-U", "awx", "-f", f"{dump}.tmp", "awx"])
        finally:
            _stop_home(home, state)
    secret.write_text(secret_key)
    secret.chmod(0o600)
    Path(f"{dump}.tmp").rename(dump)
    return dump


def _containers_env(home: Path | None = None) -> dict:
    """podman as these machines need it: its own configuration (runc, no raised limits, the
    host's network, cgroupfs, file events) and image storage in the cache, shared by every run."""
    conf_dir = CACHE / "podman"
    conf_dir.mkdir(parents=True, exist_ok=True)
    containers = conf_dir / "containers.conf"
    containers.write_text(
        "[containers]\n"
        'default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]\n'
        'netns = "host"\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
    )
    storage = conf_dir / "storage.conf"
    storage.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{conf_dir / "storage"}"\nrunroot = "/tmp/lm-podman-run-{os.getuid()}"\n')
    return {"CONTAINERS_CONF": str(containers), "CONTAINERS_STORAGE_CONF": str(storage)}


def _podman(*argv: str | Path, capture: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, **_containers_env()}
    return subprocess.run(["podman", *map(str, argv)], check=True, env=env, capture_output=capture, text=capture)


def _image_exists(name: str) -> bool:
    env = {**os.environ, **_containers_env()}
    return subprocess.run(["podman", "image", "exists", name], check=False, env=env).returncode == 0


def build_ee_base() -> str:
    """The EE without the collection: Debian's Python 3.11, ansible-core and ansible-runner, the
    collection's Python requirements and kubernetes.core, as execution-environment.yml asks,
    built from a Debian root file system (mmdebstrap) instead of a registry's base image."""
    image = f"localhost/lm-ee-base:{ee_base_key()}"
    if _image_exists(image):
        return image
    debian = f"localhost/lm-ee-debian:{_key(EE_DEBIAN_SUITE, repr(EE_DEBIAN_PACKAGES))}"
    with tempfile.TemporaryDirectory(prefix="lm-ee-") as work:
        context = Path(work)
        if not _image_exists(debian):
            _log(f"building the EE's Debian {EE_DEBIAN_SUITE} root file system (mmdebstrap, minutes when cold)")
            rootfs = context / "rootfs.tar"
            _run(["mmdebstrap", "--quiet", "--variant=apt", f"--include={','.join(EE_DEBIAN_PACKAGES)}", EE_DEBIAN_SUITE, rootfs], stdout=subprocess.DEVNULL)
            _podman("import", "--change", 'CMD ["/bin/bash"]', rootfs, debian, capture=True)
            rootfs.unlink()
        shutil.copy(REPO / "requirements.txt", context / "requirements.txt")
        shutil.copytree(_kubernetes_core_dir(), context / "kubernetes.core", symlinks=True)
        pip_cert = _pip_cert()
        (context / "Containerfile").write_text(
            f"FROM {debian}\n"
            "COPY requirements.txt /tmp/requirements.txt\n"
            # Debian marks its Python as externally managed; the EE's Python is ours alone.
            f"RUN {'PIP_CERT=/host-certs/' + pip_cert.name + ' ' if pip_cert else ''}python3 -m pip install --no-cache-dir --break-system-packages "
            + " ".join(f"'{r}'" for r in EE_PIP)
            + " -r /tmp/requirements.txt && rm /tmp/requirements.txt\n"
            "COPY kubernetes.core /usr/share/ansible/collections/ansible_collections/kubernetes/core\n"
            'LABEL org.opencontainers.image.title="lifecycle.machine execution environment (base)"\n'
        )
        _log(f"building the EE base image {image} (PyPI)")
        volume = ["-v", f"{pip_cert.parent}:/host-certs:ro"] if pip_cert else []
        _podman("build", "--quiet", "--network", "host", *volume, "-t", image, context, capture=True)
    return image


def _pip_cert() -> Path | None:
    """The host's CA bundle, for the image's own pip: a machine whose registries are reached
    through a proxy with a CA of its own has that CA there (update-ca-certificates), and pip
    inside the image has none of the host's configuration."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def build_ee(commit: str = "HEAD") -> str:
    """The EE with the collection built from ``commit``'s files (hack/build-collection.sh), as
    ``EE_IMAGE``; rebuilt only when the tarball differs from the one the image holds."""
    base = build_ee_base()
    with tempfile.TemporaryDirectory(prefix="lm-ee-") as work:
        context = Path(work)
        env = {**os.environ, "ANSIBLE_GALAXY": str(REPO / ".venv" / "bin" / "ansible-galaxy")}
        _run(["bash", REPO / "hack" / "build-collection.sh", context, commit], env=env, stdout=subprocess.DEVNULL)
        tarball = next(context.glob("lifecycle-machine-*.tar.gz"))
        digest = _key(tarball)
        label = f"org.lifecycle-machine.collection={digest}"
        if _image_exists(EE_IMAGE):
            labels = _podman("image", "inspect", "--format", "{{json .Labels}}", EE_IMAGE, capture=True).stdout
            if json.loads(labels or "{}").get("org.lifecycle-machine.collection") == digest and base in _ee_base_of(EE_IMAGE):
                return EE_IMAGE
        tarball.rename(context / "lifecycle-machine.tar.gz")
        (context / "Containerfile").write_text(
            f"FROM {base}\n"
            "COPY lifecycle-machine.tar.gz /tmp/lifecycle-machine.tar.gz\n"
            "RUN ansible-galaxy collection install --offline -p /usr/share/ansible/collections /tmp/lifecycle-machine.tar.gz"
            " && rm /tmp/lifecycle-machine.tar.gz\n"
            f'LABEL org.opencontainers.image.title="lifecycle.machine execution environment" {label} org.lifecycle-machine.base="{base}"\n'
        )
        _log(f"building {EE_IMAGE} with the collection of {commit}")
        _podman("build", "--quiet", "--network", "host", "-t", EE_IMAGE, context, capture=True)
    return EE_IMAGE


def _ee_base_of(image: str) -> str:
    labels = _podman("image", "inspect", "--format", "{{json .Labels}}", image, capture=True).stdout
    return json.loads(labels or "{}").get("org.lifecycle-machine.base", "")


def build() -> None:
    build_venv()
    awx_collection_root()
    build_receptor()
    build_database()
    build_ee_base()


# -- processes -------------------------------------------------------------------------------


def _as_postgres() -> list[str]:
    """PostgreSQL refuses to run as root: run its programs as the postgres user then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def runtime_dir(home: Path) -> Path:
    """Where PostgreSQL's data and the sockets live: a short path (a unix socket's path has a
    limit of about 100 bytes) that the postgres user can reach even when the checkout is in a
    folder it cannot enter (root's home)."""
    return Path(tempfile.gettempdir()) / f"lm-awx-{hashlib.sha256(str(home).encode()).hexdigest()[:10]}"


def _prepare_home(home: Path) -> None:
    for sub in ("logs", "project_root"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    run = runtime_dir(home)
    shutil.rmtree(run, ignore_errors=True)
    (run / "run").mkdir(parents=True)
    (run / "pg").mkdir()
    for sub in ("projects", "job_status", "isolation", "static"):
        (run / "data" / sub).mkdir(parents=True)
    if os.geteuid() == 0:
        run.chmod(0o755)
        shutil.chown(run / "run", "postgres")
        shutil.chown(run / "pg", "postgres")
        (run / "run").chmod(0o775)


def _logfile(home: Path, name: str):
    return open(home / "logs" / f"{name}.log", "ab")  # the child keeps its own descriptor


def _start_postgres(home: Path, state: dict) -> None:
    data = runtime_dir(home) / "pg"
    if not (data / "PG_VERSION").exists():
        _run([*_as_postgres(), PG_BIN / "initdb", "-D", data, "-U", "awx", "--auth=trust"], stdout=subprocess.DEVNULL)
    options = f"-c listen_addresses=127.0.0.1 -p {state['pg_port']} -k {_sockets(home)} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    _run(
        [*_as_postgres(), PG_BIN / "pg_ctl", "-D", data, "-l", runtime_dir(home) / "run" / "postgres.log", "-o", options, "-w", "start"],
        stdout=subprocess.DEVNULL,
    )


def _sockets(home: Path) -> Path:
    return runtime_dir(home) / "run"


def _createdb(home: Path, state: dict, name: str, dump: Path | None = None) -> None:
    _run([PG_BIN / "createdb", "-h", _sockets(home), "-p", state["pg_port"], "-U", "awx", name])
    if dump:
        _run([PG_BIN / "pg_restore", "--no-owner", "-h", _sockets(home), "-p", state["pg_port"], "-U", "awx", "-d", name, dump])


def _start_redis(home: Path, state: dict) -> None:
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            "0",
            "--unixsocket",
            str(_sockets(home) / "redis.sock"),
            "--unixsocketperm",
            "700",
            "--dir",
            str(_sockets(home)),
            "--save",
            "",
        ],
        stdout=_logfile(home, "redis"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    state.setdefault("pids", {})["redis"] = proc.pid
    cluster.poll((_sockets(home) / "redis.sock").exists, 20, "redis to listen")


def _stop_home(home: Path, state: dict) -> None:
    cluster._stop(list((state.get("pids") or {}).values()))
    data = runtime_dir(home) / "pg"
    if (data / "postmaster.pid").exists():
        subprocess.run([*_as_postgres(), str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], stdout=subprocess.DEVNULL, check=False)
    shutil.rmtree(runtime_dir(home), ignore_errors=True)


def _awx_env(home: Path, state: dict, secret_key: str, ee_image: str) -> dict:
    venv = build_venv()
    return {
        **os.environ,
        **_containers_env(),
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": str(HERE),
        "DJANGO_SETTINGS_MODULE": "lm_awx_settings",
        "LM_AWX_HOME": str(home),
        "LM_AWX_RUN": str(_sockets(home)),
        "LM_AWX_DATA": str(runtime_dir(home) / "data"),
        "LM_AWX_SECRET_KEY": secret_key,
        "LM_AWX_PG_PORT": str(state["pg_port"]),
        "LM_AWX_DB": state.get("db", "awx"),
        "LM_AWX_EE_IMAGE": ee_image,
        "LM_AWX_PROJECT_ROOT": str(home / "project_root"),
    }


def _write_receptor_conf(home: Path, venv: Path) -> None:
    """AWX reads receptor's configuration at a fixed path to find its control socket, and
    starts jobs through its local work type, which runs ``ansible-runner worker``."""
    conf = [
        {"node": {"id": HOST_ID}},
        {"local-only": None},
        {"log-level": "info"},
        {"control-service": {"service": "control", "filename": str(_sockets(home) / "receptor.sock"), "permissions": "0660"}},
        {"work-command": {"worktype": "local", "command": str(venv / "bin" / "ansible-runner"), "params": "worker", "allowruntimeparams": True}},
    ]
    RECEPTOR_CONF.parent.mkdir(parents=True, exist_ok=True)
    # JSON is YAML: receptor and AWX both read it.
    RECEPTOR_CONF.write_text(json.dumps(conf, indent=1) + "\n")


def _spawn(home: Path, state: dict, name: str, argv: list, env: dict) -> None:
    proc = subprocess.Popen(
        [str(a) for a in argv], stdout=_logfile(home, name), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=home
    )
    state.setdefault("pids", {})[name] = proc.pid


def _state_file(home: Path) -> Path:
    return home / "state.json"


def _read_state(home: Path) -> dict:
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
        return json.loads(_state_file(home).read_text())
    return {}


def is_running(home: Path) -> bool:
    state = _read_state(home)
    pids = state.get("pids") or {}
    return bool(pids) and all(cluster._pid_alive(pid) for pid in pids.values()) and _ping(state.get("url", "")) is not None


def _ping(url: str) -> dict | None:
    if not url:
        return None
    try:
        with urllib.request.urlopen(f"{url}/api/v2/ping/", timeout=5) as answer:
            return json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def api(admin: dict, method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, dict]:
    """One request to AWX's REST API as the admin of ``admin.json``."""
    request = urllib.request.Request(
        f"{admin['url']}{urllib.parse.quote(path, safe='/?=&%,:')}", method=method, data=json.dumps(body).encode() if body is not None else None
    )
    request.add_header("Authorization", "Basic " + b64encode(f"{admin['username']}:{admin['password']}".encode()).decode())
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            text = answer.read()
            return answer.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"detail": text.decode(errors="replace")[:500]}


def _has_capacity(admin: dict) -> bool | str:
    status, answer = api(admin, "GET", f"/api/v2/instances/?hostname={HOST_ID}")
    if status != 200 or not answer.get("results"):
        return f"HTTP {status}"
    instance = answer["results"][0]
    return (instance.get("capacity", 0) > 0 and instance.get("node_state") == "ready") or f"capacity {instance.get('capacity')}, {instance.get('node_state')}"


def resolve_commit(commit: str) -> str:
    """The commit's sha; ``worktree`` is the checkout's tracked files as they are, edits included
    (``git stash create``: a commit object that touches neither the index nor the files), HEAD
    when nothing is edited."""
    if commit == "worktree":
        stashed = subprocess.run(["git", "-C", str(REPO), "stash", "create"], check=True, capture_output=True, text=True).stdout.strip()
        return stashed or resolve_commit("HEAD")
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", f"{commit}^{{commit}}"], check=True, capture_output=True, text=True).stdout.strip()


def sync_project(home: Path, sha: str) -> Path:
    """``project_root/lifecycle-machine``: a git repository holding commit ``sha`` of this
    checkout on its ``main`` branch, which AWX projects clone as ``file://``."""
    repo = home / "project_root" / "lifecycle-machine"
    if not (repo / "HEAD").exists():
        _run(["git", "init", "--quiet", "--bare", "--initial-branch=main", repo])
    _run(["git", "-C", REPO, "push", "--quiet", "--force", str(repo), f"{sha}:refs/heads/main"])
    return repo


def up(home: Path = DEFAULT_DIR, commit: str = "HEAD") -> dict:
    home = Path(home).resolve()
    sha = resolve_commit(commit)
    if is_running(home):
        build_ee(sha)
        sync_project(home, sha)
        return json.loads((home / "admin.json").read_text())
    down(home)
    venv = build_venv()
    receptor = build_receptor()
    dump = build_database()
    secret_key = dump.with_suffix(".secret").read_text()
    ee_image = build_ee(sha)
    shutil.rmtree(home, ignore_errors=True)
    _prepare_home(home)
    sync_project(home, sha)
    state: dict = {"pg_port": cluster._free_port(), "web_port": cluster._free_port(), "db": "awx"}
    try:
        _start_postgres(home, state)
        _createdb(home, state, "awx", dump)
        _start_redis(home, state)
        env = _awx_env(home, state, secret_key, ee_image)
        password = secrets.token_urlsafe(18)
        _run(
            [venv / "bin" / "awx-manage", "update_password", f"--username={ADMIN}", f"--password={password}"],
            env=env,
            stdout=_logfile(home, "bootstrap"),
            stderr=subprocess.STDOUT,
        )
        _write_receptor_conf(home, venv)
        _spawn(home, state, "receptor", [receptor, "--config", RECEPTOR_CONF], env)
        _spawn(
            home,
            state,
            "web",
            [venv / "bin" / "gunicorn", "--bind", f"127.0.0.1:{state['web_port']}", "--workers", "2", "--timeout", "120", "awx.wsgi:application"],
            env,
        )
        _spawn(home, state, "dispatcher", [venv / "bin" / "awx-manage", "run_dispatcher"], env)
        _spawn(home, state, "callback_receiver", [venv / "bin" / "awx-manage", "run_callback_receiver"], env)
        state["url"] = f"http://127.0.0.1:{state['web_port']}"
        _state_file(home).write_text(json.dumps(state, indent=2))
        admin = {
            "url": state["url"],
            "username": ADMIN,
            "password": password,
            "ee_image": ee_image,
            "project_root": str(home / "project_root"),
            "version": AWX_VERSION,
        }
        cluster.poll(lambda: _ping(state["url"]) is not None, 120, f"AWX to answer at {state['url']} (logs: {home / 'logs'})", interval=1)
        cluster.poll(lambda: _has_capacity(admin) is True, 180, f"AWX's instance to have capacity (logs: {home / 'logs'})", interval=1)
        # The organization an installed AWX starts with (upstream makes it with its demo data,
        # whose project clones from GitHub: left out of the database template).
        status, answer = api(admin, "POST", "/api/v2/organizations/", {"name": "Default", "description": "The default organization"})
        if status not in (201, 400):
            raise RuntimeError(f"creating the Default organization: HTTP {status} {answer}")
    except BaseException:
        _state_file(home).write_text(json.dumps(state, indent=2))
        down(home)
        raise
    admin_file = home / "admin.json"
    admin_file.write_text(json.dumps(admin, indent=2) + "\n")
    admin_file.chmod(0o600)
    return admin


def down(home: Path = DEFAULT_DIR) -> None:
    home = Path(home).resolve()
    state = _read_state(home)
    pids = state.get("pids") or {}
    # The jobs' runners first (they are children of receptor), then the rest.
    cluster._stop([pids[name] for name in ("dispatcher", "callback_receiver", "web") if pids.get(name)])
    cluster._stop([pids[name] for name in ("receptor",) if pids.get(name)])
    _stop_home(home, {"pids": {k: v for k, v in pids.items() if k == "redis"}})
    _stop_jobs(home)
    with contextlib.suppress(FileNotFoundError):
        _state_file(home).unlink()


def _stop_jobs(home: Path) -> None:
    """Containers of jobs still running (a job is a podman container named ansible_runner_*)."""
    env = {**os.environ, **_containers_env()}
    listed = subprocess.run(["podman", "ps", "-q", "--filter", "name=ansible_runner_"], check=False, capture_output=True, text=True, env=env)
    ids = listed.stdout.split()
    if ids:
        subprocess.run(["podman", "rm", "-f", "-t", "2", *ids], check=False, capture_output=True, env=env)


def status(home: Path = DEFAULT_DIR) -> int:
    home = Path(home).resolve()
    if is_running(home):
        state = _read_state(home)
        print(f"AWX running at {state['url']} ({home / 'admin.json'})")
        return 0
    print("AWX not running")
    return 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=("build", "up", "down", "status", "ee"))
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="state folder (default .awx)")
    parser.add_argument(
        "--commit",
        default=os.environ.get("LIFECYCLE_MACHINE_AWX_COMMIT", "HEAD"),
        help="the commit whose collection the EE holds and the project serves; worktree: the tracked files as edited",
    )
    args = parser.parse_args(argv)
    cluster.restore_sigint()
    home = Path(args.dir)
    if args.command == "build":
        build()
    elif args.command == "up":
        admin = up(home, args.commit)
        print(f"AWX {AWX_VERSION} at {admin['url']} (admin: {Path(args.dir).resolve() / 'admin.json'})")
    elif args.command == "down":
        down(home)
    elif args.command == "ee":
        print(build_ee(resolve_commit(args.commit)))
    else:
        return status(home)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
