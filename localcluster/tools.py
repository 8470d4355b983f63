"""The Go programs the local cluster runs, built from the Go module proxy once and cached by version.

Every version is pinned in one place, the wrapper modules under tools/go/ (go.mod and go.sum, with the
proxy's checksums): this table names only what to build from each. Go's own module and build caches are
used (`go env GOMODCACHE GOCACHE`, outside the clone), and the linked binaries go beside them into
`<user cache>/pd-inference/cluster-tools/<tool>-<version>-<digest>/bin/` (the digest covers go.mod, go.sum
and the build flags): a second clone on the same machine builds nothing. Nothing here falls back to another
version: a module the proxy refuses stops the build with the proxy's own answer."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import children

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / "tools" / "go"
# k8s.io/component-base/version/base.go: the variables `-X` stamps (the module build of k8s.io/kubernetes
# leaves them at v0.0.0-master, which Helm's kubeVersion constraints and `GET /version` would show).
VERSION_PACKAGE = "k8s.io/component-base/version"
# No DWARF from the compiler (`-s -w` strips it at link anyway: ~7% of a cold compile) and no inlining (-l:
# ~23% of it, for ~15% more CPU when the cluster tests run the binaries): docs/DECISIONS.md, "The cold Go build".
COMPILER_FLAGS = "all=-dwarf=false -l"
COMPILER_GOGC = "400"


class ToolError(Exception):
    """One line: which tool could not be built and why (the proxy's answer, quoted, when it refused)."""


@dataclass(frozen=True)
class GoTool:
    name: str  # the folder under tools/go/
    module: str  # the module whose version is pinned there
    packages: tuple[str, ...]  # main packages to build, one binary each (named by the last path element)
    stamp_kubernetes_version: bool = False
    compiler_flags: str = COMPILER_FLAGS

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

    def build_flags(self, modules: Path = MODULES) -> list[str]:
        """The flags of `go build` that shape the binaries (the cached folder's digest covers them)."""
        return ["-gcflags", self.compiler_flags, "-ldflags", self.ldflags(modules)]


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
# Helm and kubectl are not built: the local cluster runs the very binaries of the stage's kubectl layer
# (kubectl_layer.py), which is what installs the charts on EKS.
ALL_TOOLS = (ETCD, KUBERNETES, KWOK, KUBERAY_OPERATOR)


@dataclass(frozen=True)
class ModuleSource:
    """A module read from the module cache and never built (a chart, CRDs), pinned by its wrapper's go.sum."""

    name: str  # the folder under tools/go/
    module: str

    def version(self, modules: Path = MODULES) -> str:
        return GoTool(self.name, self.module, ()).version(modules)


KUBERAY_CHART = ModuleSource("kuberay-chart", "github.com/ray-project/kuberay")
# The release before the stage's, whose CRDs an operator bump starts from (the root module, with the 1.5
# chart, is refused by the proxy; ray-operator@v1.5.0 is served and holds the same CRDs: docs/DECISIONS.md).
KUBERAY_PREVIOUS_CRDS = ModuleSource("kuberay-previous", "github.com/ray-project/kuberay/ray-operator")
MODULE_SOURCES = (KUBERAY_CHART, KUBERAY_PREVIOUS_CRDS)


@dataclass(frozen=True)
class GoCaches:
    """Where Go keeps modules and compiled packages (its own defaults, shared by every clone), and where the
    linked binaries are kept by digest."""

    gomodcache: Path
    gocache: Path
    binaries: Path

    def environment(self) -> dict[str, str]:
        """The go command's environment: these caches, the machine's own Go (no toolchain download),
        go.mod and go.sum as committed (a build that would change them fails)."""
        env = dict(os.environ)
        # The compiler's garbage collector at GOGC=400, unless the caller set one: it collects a quarter as
        # often, 7-15% less compile time for ~8% more memory; the binaries are the same (docs/DECISIONS.md).
        env.setdefault("GOGC", COMPILER_GOGC)
        env.update(
            GOMODCACHE=str(self.gomodcache),
            GOCACHE=str(self.gocache),
            GOTOOLCHAIN="local",
            GOFLAGS="-mod=readonly -trimpath -buildvcs=false",
            CGO_ENABLED="0",
        )
        return env

    @classmethod
    def under(cls, folder: Path) -> GoCaches:
        """Every cache inside one folder: a cold build that leaves Go's own caches alone."""
        return cls(folder / "gomod", folder / "gobuild", folder / "bin")


def user_cache_dir() -> Path:
    """The folder Go's os.UserCacheDir names on Linux (GOCACHE's default parent)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base)


def default_caches() -> GoCaches:
    """Go's own caches, as `go env` reports them, and the binaries beside its build cache."""
    gomodcache, gocache = _go_env("GOMODCACHE", "GOCACHE")
    return GoCaches(Path(gomodcache), Path(gocache), user_cache_dir() / "pd-inference" / "cluster-tools")


def _go_env(*names: str) -> list[str]:
    try:
        result = subprocess.run(["go", "env", *names], capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise ToolError(go_unrunnable(exc)) from None
    values = result.stdout.splitlines()
    if result.returncode != 0 or len(values) != len(names) or not all(values):
        raise ToolError(f"go env {' '.join(names)} failed: {_last_line(result)}")
    return values


MISSING_GO = (
    "the go command is not installed: Go 1.26 is needed to build the local cluster "
    "(README: which command needs which set-up)"
)


@dataclass
class BuildRecord:
    """What one `ensure` did, for the report and the benchmark."""

    tool: str
    version: str
    built: bool
    seconds: float
    binaries: dict[str, Path] = field(default_factory=dict)


def _digest(tool: GoTool, modules: Path) -> str:
    digest = hashlib.sha256(" ".join(tool.build_flags(modules)).encode())
    for name in ("go.mod", "go.sum"):
        path = modules / tool.name / name
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()[:12]


def install_dir(tool: GoTool, caches: GoCaches, modules: Path = MODULES) -> Path:
    return caches.binaries / f"{tool.name}-{tool.version(modules)}-{_digest(tool, modules)}"


def refusal(output: str) -> str | None:
    """The proxy's answer in the go command's output, on one line, when a module was refused."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if re.search(r"\b(403|404|410) (Forbidden|Not Found|Gone)\b", line):
            answer = next((l for l in lines[index + 1 : index + 2] if l.startswith("server response:")), "")
            return " ".join(f"{line} {answer}".split())
    return None


HEARTBEAT_S = 60.0


def go_command(
    args: Sequence[str], *, folder: Path, caches: GoCaches, progress: Callable[[str], None] | None = None
) -> subprocess.CompletedProcess:
    """The go command's result; `progress` hears how long it has run, once a minute (a cold build is minutes).
    go runs in a process group of its own, ended whole (its compile and link children too) if this returns
    early: Popen's own `with` would wait for a build of minutes to finish after a SIGTERM."""
    started, child = time.monotonic(), None
    stdout = stderr = ""
    try:
        child = _start_go(args, folder, caches)
        while True:
            try:
                stdout, stderr = child.communicate(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > 3600:
                    raise ToolError(f"go {' '.join(args[:2])} in tools/go/{folder.name} took over an hour") from None
                if progress:
                    progress(f"  go {args[0]} in tools/go/{folder.name}: {elapsed / 60:.0f} min so far")
    except BaseException:
        if child is not None:
            children.end_group(child)
        raise
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def _start_go(args: Sequence[str], folder: Path, caches: GoCaches) -> subprocess.Popen:
    try:
        return children.start(["go", *args], cwd=folder, env=caches.environment())
    except OSError as exc:
        raise ToolError(go_unrunnable(exc)) from None


def go_unrunnable(exc: OSError) -> str:
    """Go missing (FileNotFoundError), or a go binary that cannot be executed (ENOEXEC, EACCES)."""
    if isinstance(exc, FileNotFoundError):
        return MISSING_GO
    where = shutil.which("go", mode=os.F_OK) or "go"  # F_OK: one without its x bit too
    return f"the go command ({where}) cannot be run ({exc.strerror or exc}): reinstall Go 1.26 (README: set-up)"


def module_dir(source: ModuleSource, caches: GoCaches, modules: Path = MODULES) -> Path:
    """The module's files in the module cache, downloaded and checked against go.sum if missing."""
    version = source.version(modules)
    download = go_command(["mod", "download", "-json", source.module], folder=modules / source.name, caches=caches)
    if download.returncode != 0:
        answer = refusal(download.stderr + download.stdout)
        raise ToolError(f"the Go module proxy refused {source.module}@{version}: {answer or _last_line(download)}")
    return caches.gomodcache / f"{_escaped(source.module)}@{version}"


def _escaped(module: str) -> str:
    """The module cache's path for a module: upper-case letters as '!' and the lower-case letter."""
    return re.sub(r"[A-Z]", lambda match: "!" + match.group(0).lower(), module)


def built(tool: GoTool, caches: GoCaches, modules: Path = MODULES) -> bool:
    """Whether a build of this exact version and go.sum is cached (nothing is checked or built)."""
    target = install_dir(tool, caches, modules)
    return all((target / "bin" / name).is_file() for name in tool.binaries())


def downloaded(source: ModuleSource, caches: GoCaches, modules: Path = MODULES) -> bool:
    return (caches.gomodcache / f"{_escaped(source.module)}@{source.version(modules)}").is_dir()


def ensure(
    tool: GoTool, *, caches: GoCaches, modules: Path = MODULES, progress: Callable[[str], None] = lambda line: None
) -> BuildRecord:
    """The tool's binaries, built unless a build of this exact version and go.sum is cached. One build of a
    tool at a time on the machine: another caller (a second clone's set-up, or `ops local-cluster` while
    set-up builds) waits for it, then finds the build cached."""
    version = tool.version(modules)
    target = install_dir(tool, caches, modules)
    binaries = {name: target / "bin" / name for name in tool.binaries()}
    with _one_build(target, f"{tool.name} {version}", progress):
        if all(path.is_file() and os.access(path, os.X_OK) for path in binaries.values()):
            check_intact(target, binaries)
            return BuildRecord(tool.name, version, built=False, seconds=0.0, binaries=binaries)
        started = time.monotonic()
        progress(f"building {tool.name} {version} from the Go module proxy (once; kept in {target})")
        _download(tool, version, caches, modules, progress)
        _build(tool, version, target, caches, modules, progress)
    return BuildRecord(tool.name, version, built=True, seconds=time.monotonic() - started, binaries=binaries)


@contextmanager
def _one_build(target: Path, what: str, progress: Callable[[str], None]) -> Iterator[None]:
    """An exclusive lock on `<target>.lock` while the build is checked and made (flock(2): the kernel frees it
    when its holder exits, however it ends)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for the build of {what} that another process runs")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _download(tool: GoTool, version: str, caches: GoCaches, modules: Path, progress: Callable[[str], None]) -> None:
    download = go_command(
        ["mod", "download", f"{tool.module}@{version}"], folder=modules / tool.name, caches=caches, progress=progress
    )
    if download.returncode != 0:
        answer = refusal(download.stderr + download.stdout)
        if answer:
            raise ToolError(f"the Go module proxy refused {tool.module}@{version}: {answer}")
        raise ToolError(f"go mod download {tool.module}@{version} failed: {_last_line(download)}")


def _build(
    tool: GoTool, version: str, target: Path, caches: GoCaches, modules: Path, progress: Callable[[str], None]
) -> None:
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    build = go_command(
        ["build", *tool.build_flags(modules), "-o", str(staging / "bin") + "/", *tool.packages],
        folder=modules / tool.name,
        caches=caches,
        progress=progress,
    )
    if build.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        answer = refusal(build.stderr + build.stdout)
        if answer:
            raise ToolError(f"building {tool.name} {version}: the Go module proxy refused a dependency: {answer}")
        raise ToolError(f"go build in tools/go/{tool.name} failed: {_last_line(build)}")
    _write_digests(staging, {name: staging / "bin" / name for name in tool.binaries()})
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # a half-built folder is never taken for a build


DIGESTS = "sha256.json"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_digests(folder: Path, binaries: dict[str, Path]) -> None:
    (folder / DIGESTS).write_text(json.dumps({name: _file_digest(path) for name, path in binaries.items()}))


def check_intact(folder: Path, binaries: dict[str, Path]) -> None:
    """A cached binary that is not what was built (truncated, overwritten) stops with the folder to delete."""
    try:
        recorded = json.loads((folder / DIGESTS).read_text())
    except (OSError, ValueError):
        recorded = {}
    for name, path in binaries.items():
        if recorded.get(name) != _file_digest(path):
            raise ToolError(corrupted(folder, name))


def corrupted(folder: Path, binary: str) -> str:
    return f"the cached {binary} in {folder} is corrupted: delete that folder and run scripts/setup.sh --cluster"


def _last_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return " ".join(lines[-1].split()) if lines else f"exit {result.returncode}"
