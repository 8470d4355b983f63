"""Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback, and stop them.

The API server runs as a real one does: TLS on its secure port only, RBAC, the default admission plugins
(PodSecurity among them: kube-apiserver --help lists the defaults), privileged containers allowed (EKS
allows them; Pod Security decides per namespace), service-account tokens signed with the cluster's key.
Identities are static bearer tokens (--token-auth-file: user, uid, groups), so a test can hold a token of
exactly one group, as an EKS access entry maps an IAM role to a group. Every process logs to a file in
the cluster's folder; its last lines go into the error when it fails."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clients.kube import KubeApi, KubeError
from clients.signals import deferred

from . import pki as pki_module
from .pki import LOOPBACK

ADMIN_USER, ADMIN_GROUP = "rehearsal-admin", "system:masters"
# Cluster ranges that no traffic goes to: Service and pod addresses exist only in the API's objects.
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_CIDR = "10.244.0.0/16"
START_TIMEOUT = 120.0


class ClusterError(Exception):
    """One line: what did not start or answer, with the process's last log lines after it."""


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    token: str


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, lines: int = 8) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(f"    {self.name}: {line}" for line in text[-lines:])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


# Every process a LocalCluster of this Python process started and has not stopped, in start order: what
# stop_everything ends when a signal or an error leaves processes that no caller holds a cluster for (start()
# had started some and had not returned the cluster yet, or had returned it and its caller not yet in `try`).
RUNNING: list[Process] = []


def _popen(name: str, argv: Sequence[str], log, folder: Path, env: Mapping[str, str] | None) -> subprocess.Popen:
    """The child in a session (and process group) of its own: `end` signals the whole group, so nothing it
    starts outlives it, and a terminal's Ctrl-C or hangup reaches this process alone, which ends it."""
    try:
        return subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    except OSError as exc:  # ENOEXEC, EACCES: a cached binary that is not one any more
        raise ClusterError(unrunnable(name, Path(argv[0]), exc)) from None


def unrunnable(name: str, binary: Path, exc: OSError) -> str:
    """One line for a cached binary that cannot be executed: the file, why, and the folder to delete."""
    folder = binary.parent.parent if binary.parent.name == "bin" else binary.parent
    return f"{name}: {binary} cannot be run ({exc.strerror or exc}): delete {folder} and run scripts/setup.sh --cluster"


def end(process: Process) -> None:
    """SIGTERM to its process group, SIGKILL after 10 s; no longer in RUNNING."""
    if process.popen.poll() is None:
        try:
            os.killpg(process.popen.pid, signal.SIGTERM)
            process.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.popen.pid, signal.SIGKILL)
            process.popen.wait(timeout=10)
        except ProcessLookupError:
            pass
    if process in RUNNING:
        RUNNING.remove(process)


def stop_everything() -> None:
    """End every process still in RUNNING, last started first (no signal cuts it short)."""
    with deferred():
        for process in reversed(list(RUNNING)):
            end(process)


@dataclass
class LocalCluster:
    """A running control plane. `api(identity)` is a client over TLS with that identity's token."""

    folder: Path
    pki: pki_module.Pki
    endpoint: str
    identities: dict[str, Identity]
    processes: list[Process] = field(default_factory=list)

    @property
    def ca_data(self) -> str:
        """The CA as EKS's DescribeCluster returns it: base64 of the PEM."""
        return base64.b64encode(self.pki.ca_cert.read_bytes()).decode()

    def api(self, name: str = "admin", timeout: float = 30.0) -> KubeApi:
        return KubeApi(endpoint=self.endpoint, token=self.identities[name].token, ca_data=self.ca_data, timeout=timeout)

    def kubeconfig(self, name: str = "admin") -> Path:
        """A kubeconfig for `name` (for the Go programs; JSON is YAML)."""
        path = self.folder / f"{name}.kubeconfig"
        if not path.exists():
            self.token_kubeconfig(name, self.identities[name].token)
        return path

    def token_kubeconfig(self, name: str, token: str) -> Path:
        """A kubeconfig in the cluster's folder that authenticates with `token` (a service account's, say)."""
        path = self.folder / f"{name}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "rehearsal",
            "clusters": [
                {
                    "name": "rehearsal",
                    "cluster": {"server": self.endpoint, "certificate-authority": str(self.pki.ca_cert)},
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "rehearsal", "context": {"cluster": "rehearsal", "user": name}}],
        }
        path.touch(mode=0o600)
        path.write_text(json.dumps(config, indent=1))
        return path

    def process(self, name: str) -> Process | None:
        return next((p for p in self.processes if p.name == name), None)

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Process:
        log = self.folder / f"{name}.log"
        # Started and recorded in one step no signal cuts in two: a child started but not recorded in RUNNING
        # would outlive a SIGTERM (stop_everything ends what RUNNING holds).
        with log.open("ab") as handle, deferred():
            popen = _popen(name, argv, handle, self.folder, env)
            process = Process(name, popen, log)
            self.processes.append(process)
            RUNNING.append(process)
            _write_pids(self.folder, [p.popen.pid for p in self.processes])
        return process

    def check_alive(self) -> None:
        for process in self.processes:
            if process.popen.poll() is not None:
                raise ClusterError(f"{process.name} exited with code {process.popen.returncode}\n{process.tail()}")

    def stop(self, name: str | None = None) -> None:
        """Stop one process, or all in reverse start order (SIGTERM, then SIGKILL after 10 s); a signal that
        arrives meanwhile is raised once they are all stopped, not half-way."""
        with deferred():
            for process in reversed([p for p in self.processes if name is None or p.name == name]):
                end(process)
                self.processes.remove(process)

    def wait_ready(self, path: str = "/readyz", timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        api = self.api(timeout=5)
        last = ""
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if api.request("GET", path, raw=True).strip() == "ok":
                    return
            except KubeError as exc:
                last = str(exc)
            time.sleep(0.5)
        apiserver = self.process("kube-apiserver")
        raise ClusterError(
            f"the API server was not ready within {timeout:g} s ({last})"
            + (f"\n{apiserver.tail()}" if apiserver else "")
        )


def _token_file(folder: Path, identities: Mapping[str, Identity]) -> Path:
    """kube-apiserver's static token file: token,user,uid,"group1,group2" per line."""
    path = folder / "tokens.csv"
    path.write_text("".join(f'{i.token},{i.user},{i.user},"{",".join(i.groups)}"\n' for i in identities.values()))
    os.chmod(path, 0o600)
    return path


def identities_for(groups: Mapping[str, Sequence[str]]) -> dict[str, Identity]:
    """The admin and one identity per extra name, each holding exactly its groups."""
    made = {"admin": Identity(ADMIN_USER, (ADMIN_GROUP,), secrets.token_urlsafe(32))}
    for name, member_of in groups.items():
        made[name] = Identity(f"rehearsal-{name}", tuple(member_of), secrets.token_urlsafe(32))
    return made


def start(
    folder: Path,
    binaries: Mapping[str, Path],
    *,
    groups: Mapping[str, Sequence[str]] = {},
    progress: Callable[[str], None] = lambda line: None,
) -> LocalCluster:
    """etcd and the API server, then the controller manager and the scheduler; returns once /readyz is ok."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = pki_module.make(folder / "pki")
    identities = identities_for(groups)
    tokens = _token_file(folder, identities)
    api_port, etcd_port, peer_port = free_port(), free_port(), free_port()
    cluster = LocalCluster(folder=folder, pki=keys, endpoint=f"https://{LOOPBACK}:{api_port}", identities=identities)
    try:
        etcd_url, peer_url = f"http://{LOOPBACK}:{etcd_port}", f"http://{LOOPBACK}:{peer_port}"
        progress("starting etcd")
        cluster.start("etcd", _etcd(binaries["etcd"], folder, etcd_url, peer_url))
        progress("starting kube-apiserver")
        apiserver = _apiserver(binaries["kube-apiserver"], folder, keys, tokens, etcd_url, api_port)
        cluster.start("kube-apiserver", apiserver)
        cluster.wait_ready()
        progress("starting kube-controller-manager and kube-scheduler")
        admin = cluster.kubeconfig("admin")
        cluster.start("kube-controller-manager", _controller_manager(binaries["kube-controller-manager"], admin, keys))
        cluster.start("kube-scheduler", _scheduler(binaries["kube-scheduler"], admin))
        return cluster
    except BaseException:
        cluster.stop()
        raise


def _etcd(binary: Path, folder: Path, etcd_url: str, peer_url: str) -> list[str]:
    return [
        str(binary),
        "--name=rehearsal",
        f"--data-dir={folder / 'etcd'}",
        f"--listen-client-urls={etcd_url}",
        f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=rehearsal={peer_url}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def _apiserver(binary: Path, folder: Path, keys: pki_module.Pki, tokens: Path, etcd_url: str, port: int) -> list[str]:
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={port}",
        f"--tls-cert-file={keys.serving_cert}",
        f"--tls-private-key-file={keys.serving_key}",
        f"--client-ca-file={keys.ca_cert}",
        f"--token-auth-file={tokens}",
        "--authorization-mode=RBAC",
        "--anonymous-auth=false",
        "--allow-privileged=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-key-file={keys.service_account_public}",
        f"--service-account-signing-key-file={keys.service_account_key}",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--cert-dir={folder / 'pki'}",
        "--profiling=false",
        "--v=1",
    ]


def _controller_manager(binary: Path, admin: Path, keys: pki_module.Pki) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={admin}",
        f"--authentication-kubeconfig={admin}",
        f"--authorization-kubeconfig={admin}",
        f"--service-account-private-key-file={keys.service_account_key}",
        f"--root-ca-file={keys.ca_cert}",
        f"--cluster-cidr={CLUSTER_CIDR}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allocate-node-cidrs=false",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={free_port()}",
        "--use-service-account-credentials=false",
        (
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route,-persistentvolume-binder,"
            "-attachdetach,-persistentvolume-expander,-ephemeral-volume,-resourceclaim-controller"
        ),
        "--v=1",
    ]


def _scheduler(binary: Path, admin: Path) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={admin}",
        f"--authentication-kubeconfig={admin}",
        f"--authorization-kubeconfig={admin}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={free_port()}",
        "--v=1",
    ]


def _write_pids(folder: Path, pids: list[int]) -> None:
    """The pids file whole or not at all (written aside, then renamed): a reader (`--keep`'s stop command, a
    test) never sees it truncated mid-write."""
    aside = folder / "pids.new"
    aside.write_text(" ".join(map(str, pids)) + "\n")
    os.replace(aside, folder / "pids")
