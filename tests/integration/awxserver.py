"""A real AWX for the tests marked ``awx`` (hack/awx.py), configured from the collection's own
recipes: extensions/awx/rbac.yml applied to the control plane as shipped, and
extensions/awx/configure_awx.yml run with the awx.awx collection of the same AWX release
against its REST API. Jobs run in the collection's execution environment (HEAD's collection),
through receptor and ansible-runner, with the credential of the shipped ServiceAccount.

Loaded by conftest.py as a pytest plugin."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import awx as awx_tool
import pytest
import yaml
from conftest import COLLECTIONS_ROOT, REPO
from rbachelpers import RBAC, SA_NAME, SA_USER, api_server_and_ca, apply, service_account_token

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

AWX_DIR = REPO / "extensions" / "awx"
FINAL = ("successful", "failed", "error", "canceled")


class AwxError(AssertionError):
    pass


class Awx:
    """AWX's REST API as its admin (``.awx/admin.json``)."""

    def __init__(self, admin: dict):
        self.admin = admin
        self.url = admin["url"]

    def request(self, method: str, path: str, body: dict | None = None, expect: tuple[int, ...] = (200, 201, 202, 204)) -> dict:
        status, answer = awx_tool.api(self.admin, method, path if path.startswith("/api/") else f"/api/v2/{path.lstrip('/')}", body)
        if status not in expect:
            raise AwxError(f"{method} {path}: HTTP {status} {json.dumps(answer)[:2000]}")
        return answer

    def get(self, path: str) -> dict:
        return self.request("GET", path)

    def post(self, path: str, body: dict | None = None, expect: tuple[int, ...] = (200, 201, 202, 204)) -> dict:
        return self.request("POST", path, body or {}, expect)

    def all(self, path: str) -> list[dict]:
        """Every item of a paged list."""
        items, page = [], path + ("&" if "?" in path else "?") + "page_size=200"
        while page:
            answer = self.request("GET", page)
            items.extend(answer["results"])
            page = answer.get("next")
        return items

    def named(self, kind: str, name: str) -> dict:
        found = self.get(f"{kind}/?name={urllib.parse.quote(name)}")["results"]
        if len(found) != 1:
            raise AwxError(f"{len(found)} {kind} named {name!r}")
        return found[0]

    def launch(self, template: str, extra_vars: dict | None = None, expect: tuple[int, ...] = (201,), **fields) -> dict:
        """Launch the job template named ``template`` with survey answers ``extra_vars``; the
        launch's answer (``job`` is the new job's id)."""
        jt = self.named("job_templates", template)
        return self.post(f"job_templates/{jt['id']}/launch/", {"extra_vars": extra_vars or {}, **fields}, expect=expect)

    def wait(self, job_id: int, timeout: float = 600, kind: str = "jobs", events: bool = True) -> dict:
        """The job once final and, with ``events``, once all its events are stored (earlier
        some are still missing)."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(f"{kind}/{job_id}/")
            if job["status"] in FINAL and (not events or job.get("event_processing_finished", True)):
                return job
            if time.monotonic() > deadline:
                raise AwxError(f"{kind} {job_id} still {job['status']} after {timeout} s:\n{self.stdout(job_id, kind)[-3000:]}")
            time.sleep(1)

    def stdout(self, job_id: int, kind: str = "jobs") -> str:
        status, answer = awx_tool.api(self.admin, "GET", f"/api/v2/{kind}/{job_id}/stdout/?format=json")
        return answer.get("content", "") if status == 200 else f"(stdout: HTTP {status})"

    def events(self, job_id: int, kind: str = "jobs") -> list[dict]:
        return self.all(f"{kind}/{job_id}/{'job_events' if kind == 'jobs' else 'events'}/?order_by=counter")

    def run(self, template: str, extra_vars: dict | None = None, timeout: float = 600, **fields) -> dict:
        """Launch and wait; fail with the job's output unless it succeeded."""
        job = self.wait(self.launch(template, extra_vars, **fields)["job"], timeout)
        if job["status"] != "successful":
            raise AwxError(f"job {job['id']} ({template}) {job['status']}: {job.get('job_explanation')}\n{self.stdout(job['id'])[-6000:]}")
        return job


@pytest.fixture(scope="session")
def awx_admin() -> Iterator[dict]:
    """A real AWX: the one ``make awx-up`` started, else one started for this session and
    stopped at its end, pass or fail. Its EE and project hold HEAD of this checkout."""
    home = REPO / ".awx"
    lock_path = REPO / ".tmp" / "awx.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = not awx_tool.is_running(home)
        try:
            admin = awx_tool.up(home, os.environ.get("LIFECYCLE_MACHINE_AWX_COMMIT", "HEAD"))
        except BaseException:
            if started:
                awx_tool.down(home)
            raise
    try:
        yield admin
    finally:
        if started:
            awx_tool.down(home)


def configure_env(admin: dict) -> dict:
    """What ansible-playbook needs to run configure_awx.yml against this AWX: awx.awx's
    CONTROLLER_* variables, and no kubeconfig of the tests."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("K8S_AUTH_", "CONTROLLER_")) and name != "KUBECONFIG"}
    env.update(
        {
            "CONTROLLER_HOST": admin["url"],
            "CONTROLLER_USERNAME": admin["username"],
            "CONTROLLER_PASSWORD": admin["password"],
            "CONTROLLER_VERIFY_SSL": "false",
            "ANSIBLE_COLLECTIONS_PATH": f"{awx_tool.awx_collection_root()}{os.pathsep}{COLLECTIONS_ROOT}",
        }
    )
    return env


def run_configure(admin: dict, extra_vars: dict, check: bool = True) -> subprocess.CompletedProcess:
    """extensions/awx/configure_awx.yml as docs/awx.md runs it, its variables from a file
    (the token is one of them: never on the command line)."""
    vars_file = REPO / ".tmp" / f"awx-config-{os.getpid()}.json"
    vars_file.write_text(json.dumps(extra_vars))
    vars_file.chmod(0o600)
    try:
        proc = subprocess.run(
            [str(REPO / ".venv" / "bin" / "ansible-playbook"), str(AWX_DIR / "configure_awx.yml"), "-e", f"@{vars_file}"],
            check=False,
            capture_output=True,
            text=True,
            env=configure_env(admin),
            cwd=REPO,
            timeout=900,
        )
    finally:
        vars_file.unlink()
    if check and proc.returncode != 0:
        raise AwxError(f"configure_awx.yml failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def awx_configured(awx_admin: dict, kube: KubeApi, kubeconfig: str) -> dict:
    """AWX set up from the collection's recipes for this session's control plane: the shipped
    RBAC, a token of its ServiceAccount with the API server's CA as the Kubernetes credential,
    and everything configure_awx.yml creates. Returns what the tests need to know."""
    for item in yaml.safe_load(RBAC.read_text())["items"]:
        apply(kube, item)
    host, ca = api_server_and_ca(kubeconfig)
    token = service_account_token(kube, SA_NAME, seconds=7200)
    extra_vars = {
        "lifecycle_awx_project_url": f"file://{admin_project(awx_admin)}",
        "lifecycle_awx_ee_image": awx_admin["ee_image"],
        "lifecycle_awx_k8s_host": host,
        "lifecycle_awx_k8s_token": token,
        "lifecycle_awx_k8s_ca_cert": ca,
    }
    proc = run_configure(awx_admin, extra_vars)
    return {"admin": awx_admin, "token": token, "ca": ca, "host": host, "extra_vars": extra_vars, "configure_output": proc.stdout}


def admin_project(admin: dict) -> Path:
    return Path(admin["project_root"]) / "lifecycle-machine"


@pytest.fixture(scope="session")
def awx(awx_configured: dict) -> Awx:
    return Awx(awx_configured["admin"])


def secrets_in(text: str, *secrets: str) -> list[str]:
    """Which of ``secrets`` (or a recognisable piece of one) appear in ``text``."""
    return [s[:12] + "..." for s in secrets if s and (s in text or s[-24:] in text)]


def audit_sa_refusals(audit_events) -> list[str]:
    """Requests of the shipped ServiceAccount that the API server refused for want of a permission."""
    return [f"{e['verb']} {e['requestURI']}" for e in audit_events() if e["user"]["username"] == SA_USER and (e.get("responseStatus") or {}).get("code") == 403]


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except (urllib.error.URLError, OSError):
        return False
