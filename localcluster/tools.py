"""The Go programs the local cluster runs, built from the Go module proxy once and cached by version.

Every version is pinned in one place, the wrapper modules under tools/go/ (go.mod and go.sum, with the
proxy's checksums): this table names only what to build from each. A build goes into
`.cluster-tools/<tool>-<version>-<digest>/bin/` (the digest covers go.mod, go.sum and the link flags), with
the module and build caches under `.cluster-tools/` too, so a second run builds nothing and removing the
folder is a clean start. Nothing here falls back to another version: a module the proxy refuses stops the
build with the proxy's own answer."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / "tools" / "go"
CACHE = ROOT / ".cluster-tools"
# k8s.io/component-base/version/base.go: the variables `-X` stamps (the module build of k8s.io/kubernetes
# leaves them at v0.0.0-master, which Helm's kubeVersion constraints and `GET /version` would show).
VERSION_PACKAGE = "k8s.io/component-base/version"


class ToolError(Exception):
    """One line: which tool could not be built and why (the proxy's answer, quoted, when it refused)."""


@dataclass(frozen=True)
class GoTool:
    name: str  # the folder under tools/go/
    module: str  # the module whose version is pinned there
    packages: tuple[str, ...]  # main packages to build, one binary each (named by the last path element)
    stamp_kubernetes_version: bool = False

    @property
    def folder(self) -> Path:
        return MODULES / self.name

    def version(self, modules: Path = MODULES) -> str:
        """The version go.mod requires of `module`."""
        text = (modules / self.name / "go.mod").read_text()
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\S+)", text, re.MULTILINE)
        if not match:
            raise ToolError(f"tools/go/{self.name}/go.mod does not require {self.module}")
        return match.group(1)

    def binaries(self) -> tuple[str, ...]:
        return tuple(package.rstrip("/").rsplit("/", 1)[-1] for package in self.packages)

    def ldflags(self, modules: Path = MODULES) -> str:
        flags = ["-s", "-w"]
        if self.stamp_kubernetes_version:
            version = self.version(modules)
            major, minor = version.lstrip("v").split(".")[:2]
            flags += [
                f"-X {VERSION_PACKAGE}.gitVersion={version}",
                f"-X {VERSION_PACKAGE}.gitMajor={major}",
                f"-X {VERSION_PACKAGE}.gitMinor={minor}",
                f"-X {VERSION_PACKAGE}.gitTreeState=clean",
            ]
        return " ".join(flags)


KUBERNETES = GoTool(
    "kubernetes",
    "k8s.io/kubernetes",
    (
        "k8s.io/kubernetes/cmd/kube-apiserver",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-scheduler",
    ),
    stamp_kubernetes_version=True,
)
ETCD = GoTool("etcd", "go.etcd.io/etcd/server/v3", ("pdinference.local/tools/etcd",))
KWOK = GoTool("kwok", "sigs.k8s.io/kwok", ("sigs.k8s.io/kwok/cmd/kwok",))
KUBERAY_OPERATOR = GoTool(
    "kuberay-operator", "github.com/ray-project/kuberay/ray-operator", ("github.com/ray-project/kuberay/ray-operator",)
)
# Helm is not among them: no chart the stage installs is served by a registry reachable here at its pinned
# version (rehearsal.STAND_INS says what stands in for each), so there is nothing for it to install.
CONTROL_PLANE_TOOLS = (ETCD, KUBERNETES, KWOK)
ALL_TOOLS = CONTROL_PLANE_TOOLS + (KUBERAY_OPERATOR,)


@dataclass
class BuildRecord:
    """What one `ensure` did, for the report and the benchmark."""

    tool: str
    version: str
    built: bool
    seconds: float
    binaries: dict[str, Path] = field(default_factory=dict)


def go_environment(cache: Path = CACHE) -> dict[str, str]:
    """The go command's environment: caches inside `cache`, the machine's own Go (no toolchain download),
    go.mod and go.sum as committed (a build that would change them fails)."""
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(cache / "gomod"),
        GOCACHE=str(cache / "gobuild"),
        GOTOOLCHAIN="local",
        GOFLAGS="-mod=readonly -trimpath -buildvcs=false",
        CGO_ENABLED="0",
    )
    return env


def _digest(tool: GoTool, modules: Path) -> str:
    digest = hashlib.sha256(tool.ldflags(modules).encode())
    for name in ("go.mod", "go.sum"):
        path = modules / tool.name / name
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()[:12]


def install_dir(tool: GoTool, cache: Path = CACHE, modules: Path = MODULES) -> Path:
    return cache / f"{tool.name}-{tool.version(modules)}-{_digest(tool, modules)}"


def refusal(output: str) -> str | None:
    """The proxy's answer in the go command's output, on one line, when a module was refused."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if re.search(r"\b(403|404|410) (Forbidden|Not Found|Gone)\b", line):
            answer = next((l for l in lines[index + 1 : index + 2] if l.startswith("server response:")), "")
            return " ".join(f"{line} {answer}".split())
    return None


def go_command(args: Sequence[str], *, folder: Path, cache: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["go", *args],
            cwd=folder,
            env=go_environment(cache),
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,  # the callers read the exit status and the output
        )
    except FileNotFoundError:
        raise ToolError(
            "the go command is not installed: Go 1.26 is needed to build the local cluster "
            "(README: what the cluster rehearsal needs)"
        ) from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"go {' '.join(args[:2])} in tools/go/{folder.name} took over an hour") from None


def ensure(
    tool: GoTool, *, cache: Path = CACHE, modules: Path = MODULES, progress: Callable[[str], None] = lambda line: None
) -> BuildRecord:
    """The tool's binaries, built unless a build of this exact version and go.sum is cached."""
    version = tool.version(modules)
    target = install_dir(tool, cache, modules)
    binaries = {name: target / "bin" / name for name in tool.binaries()}
    if all(path.is_file() and os.access(path, os.X_OK) for path in binaries.values()):
        return BuildRecord(tool.name, version, built=False, seconds=0.0, binaries=binaries)
    started = time.monotonic()
    progress(
        f"building {tool.name} {version} from the Go module proxy (once; cached in {target.relative_to(cache.parent) if cache.parent in target.parents else target})"
    )
    folder = modules / tool.name
    download = go_command(["mod", "download", f"{tool.module}@{version}"], folder=folder, cache=cache)
    if download.returncode != 0:
        answer = refusal(download.stderr + download.stdout)
        if answer:
            raise ToolError(f"the Go module proxy refused {tool.module}@{version}: {answer}")
        raise ToolError(f"go mod download {tool.module}@{version} failed: {_last_line(download)}")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    build = go_command(
        ["build", "-ldflags", tool.ldflags(modules), "-o", str(staging / "bin") + "/", *tool.packages],
        folder=folder,
        cache=cache,
    )
    if build.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        answer = refusal(build.stderr + build.stdout)
        if answer:
            raise ToolError(f"building {tool.name} {version}: the Go module proxy refused a dependency: {answer}")
        raise ToolError(f"go build in tools/go/{tool.name} failed: {_last_line(build)}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # a half-built folder is never taken for a build
    return BuildRecord(tool.name, version, built=True, seconds=time.monotonic() - started, binaries=binaries)


def _last_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return " ".join(lines[-1].split()) if lines else f"exit {result.returncode}"
