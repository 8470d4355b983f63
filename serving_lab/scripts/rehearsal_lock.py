#!/usr/bin/env python3
"""Resolve the wheels carried to the offline rehearsal host: serving_lab/pins/serve.lock and serving_lab/pins/bench.lock.

  serving_lab/scripts/rehearsal_lock.py [--only serve|bench] [--python PYTHON3.12]   write the lock files
  serving_lab/scripts/rehearsal_lock.py --check [...]                                re-resolve, compare, exit 1 if stale
  serving_lab/scripts/rehearsal_lock.py --target-args                                print pip's target-platform flags

For each lock, pip 26.3 resolves serving_lab/pins/requirements-<name>.in against PyPI for the host (CPython 3.12,
cp312 manylinux x86_64, glibc 2.39; binary wheels only; uploads before UPLOADED_PRIOR_TO, so a re-run gives
the same set), with every package of serving_lab/pins/host-packages.txt as a constraint, so that the resolved set
agrees with what the host already has. What the host has is then dropped; the `#:` lines of the .in file
name the exceptions (host-wins, carry, skip: see requirements-serve.in). The lock holds what remains, one
`name==version --hash=sha256:...` a line (pip's hash-checking format), sorted. Every requirement of a
carried package is checked against the host plus the carried set; one that is unmet and not explained by a
`#:` line stops the run, the explained ones are listed in the lock's header. torch is never carried.

pip evaluates environment markers with the interpreter it runs on, so it runs on a Python 3.12: --python,
$REHEARSAL_PYTHON, python3.12 on PATH or a pyenv 3.12, in a venv of its own (.rehearsal/lock-venv, with pip
pinned). The machine's pip configuration (find-links, extra indexes, global constraints) is ignored.
Exit codes: 0 done (--check: up to date), 1 stale lock (--check) or a failed resolution, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:  # no standalone packaging in this interpreter: pip's vendored copy (pip always has one)
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REHEARSAL = ROOT / "serving_lab" / "pins"
HOST_PACKAGES = REHEARSAL / "host-packages.txt"
LOCK_NAMES = ("serve", "bench")
LOCK_VENV = ROOT / ".rehearsal" / "lock-venv"

INDEX_URL = "https://pypi.org/simple"
# Bump to take newer releases of what the .in files leave open; the same date gives the same locks.
UPLOADED_PRIOR_TO = "2026-11-30T00:00:00Z"
PIP_VERSION = "26.3"
PYTHON_VERSION = "3.12"
HOST_GLIBC_MINOR = 39  # Ubuntu 24.04
NEVER_CARRY = frozenset({"torch"})
DIRECTIVES = ("host-wins", "carry", "skip")


class LockError(Exception):
    """One line for the user; exit code 1 unless `code` says otherwise."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def target_args() -> list[str]:
    """pip's flags for the host: CPython 3.12, cp312, every manylinux tag its glibc runs (newest first)."""
    args = ["--python-version", PYTHON_VERSION, "--implementation", "cp", "--abi", "cp312"]
    for minor in range(HOST_GLIBC_MINOR, 16, -1):
        args += ["--platform", f"manylinux_2_{minor}_x86_64"]
    # manylinux2014 expands to manylinux2010 and manylinux1 in pip.
    return args + ["--platform", "manylinux2014_x86_64"]


def rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------------------
# Inputs


@dataclass
class Spec:
    """A requirements-<name>.in file: its requirements (nested -r files included) and `#:` directives."""

    path: Path
    requirements: list[Requirement] = field(default_factory=list)
    directives: dict[str, dict[str, str]] = field(default_factory=lambda: {d: {} for d in DIRECTIVES})

    @property
    def pinned(self) -> set[str]:
        return {canonicalize_name(r.name) for r in self.requirements}

    def names(self, directive: str) -> set[str]:
        return set(self.directives[directive])


def _strip_comment(line: str) -> str:
    return line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""


def read_spec(path: Path) -> Spec:
    spec = Spec(path)
    _read_into(spec, path, seen=set())
    seen: dict[str, str] = {}
    for directive, names in spec.directives.items():
        for name in names:
            if name in seen:
                raise LockError(f"{rel(path)}: {name} is named by both `#: {seen[name]}` and `#: {directive}`", 2)
            seen[name] = directive
            if name in spec.pinned:
                raise LockError(f"{rel(path)}: {name} is pinned and named by `#: {directive}`", 2)
    return spec


def _read_into(spec: Spec, path: Path, seen: set[Path]) -> None:
    if path in seen:
        return
    seen.add(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise LockError(f"{rel(path)}: {err.strerror}", 2) from None
    for number, raw in enumerate(lines, 1):
        where = f"{rel(path)}:{number}"
        if raw.startswith("#:"):
            _read_directive(spec, raw, where)
            continue
        line = _strip_comment(raw)
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            _read_into(spec, (path.parent / line.split(None, 1)[1]).resolve(), seen)
            continue
        if line.startswith("-"):
            raise LockError(f"{where}: option {line.split()[0]} is not supported here (requirements and -r only)", 2)
        try:
            spec.requirements.append(Requirement(line))
        except InvalidRequirement as err:
            raise LockError(f"{where}: {err}", 2) from None


def _read_directive(spec: Spec, raw: str, where: str) -> None:
    """A `#: DIRECTIVE NAME ... -- reason` line of an .in file, into spec.directives."""
    body, _, reason = raw[2:].partition("--")
    words = body.split()
    if len(words) < 2 or words[0] not in DIRECTIVES:
        raise LockError(f"{where}: `#:` needs one of {', '.join(DIRECTIVES)} and package names", 2)
    if not reason.strip():
        raise LockError(f"{where}: `#: {words[0]}` needs a reason after --", 2)
    for name in words[1:]:
        spec.directives[words[0]][canonicalize_name(name)] = reason.strip()


def read_host(path: Path = HOST_PACKAGES) -> dict[str, str]:
    """{canonical name: version} of the host's packages (name==version lines)."""
    host: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = _strip_comment(raw)
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise LockError(f"{rel(path)}:{number}: expected name==version, got {line!r}", 2)
        host[canonicalize_name(name.strip())] = version.strip()
    return host


# ---------------------------------------------------------------------------------------------------------
# Resolving with pip


def _clean_env() -> dict[str, str]:
    """This machine's pip settings (find-links, extra indexes, global constraints) must not leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_CACHE_DIR")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PIP_DEFAULT_TIMEOUT="180",
        PYTHONNOUSERSITE="1",
    )
    return env


def _python_version(python: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,  # the exit code is read below: not that version of Python
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(explicit: str | None) -> str:
    if explicit is not None and not explicit.strip():  # given, but empty: not "find one for me"
        raise LockError("--python: empty (give a Python's path or name)", 2)
    candidates = (
        [explicit]
        if explicit
        else [
            os.environ.get("REHEARSAL_PYTHON"),
            shutil.which(f"python{PYTHON_VERSION}"),
            *sorted(
                glob.glob(os.path.expanduser(f"~/.pyenv/versions/{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}")),
                reverse=True,
            ),
        ]
    )
    for python in filter(None, candidates):
        if _python_version(python) == PYTHON_VERSION:
            return python
    if explicit:
        raise LockError(f"--python {explicit}: not a working Python {PYTHON_VERSION}", 2)
    raise LockError(
        f"no Python {PYTHON_VERSION} found (pip evaluates markers with its own interpreter); "
        f"pass --python /path/to/python{PYTHON_VERSION} or set REHEARSAL_PYTHON"
    )


def lock_venv(python: str) -> Path:
    """A venv of Python 3.12 with pip pinned, made once under .rehearsal/."""
    venv_python = LOCK_VENV / "bin" / "python"
    stamp = LOCK_VENV / ".lock-stamp"
    want = f"{PYTHON_VERSION} pip=={PIP_VERSION}"
    if (
        venv_python.exists()
        and stamp.exists()
        and stamp.read_text().strip() == want
        and _python_version(str(venv_python)) == PYTHON_VERSION
    ):
        return venv_python
    subprocess.run([python, "-m", "venv", "--clear", str(LOCK_VENV)], check=True)
    result = subprocess.run(
        [str(venv_python), "-m", "pip", "install", "--quiet", f"pip=={PIP_VERSION}", "--index-url", INDEX_URL],
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=False,  # a failure is reported below, with pip's output
    )
    if result.returncode != 0:
        raise LockError(
            f"installing pip=={PIP_VERSION} into {rel(LOCK_VENV)} failed: "
            f"{(result.stderr.strip().splitlines() or ['?'])[-1]}"
        )
    stamp.write_text(want + "\n")
    return venv_python


def resolve(venv_python: Path, spec: Spec, host: dict[str, str], work: Path) -> dict:
    """pip's installation report for the .in file, the host's packages as constraints."""
    free = spec.pinned | spec.names("host-wins") | spec.names("carry")
    constraints = work / "host-constraints.txt"
    constraints.write_text(
        "".join(f"{name}=={version}\n" for name, version in sorted(host.items()) if name not in free)
    )
    report = work / "report.json"
    cmd = [
        str(venv_python),
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--report",
        str(report),
        "--only-binary=:all:",
        *target_args(),
        "--target",
        str(work / "target"),
        "--index-url",
        INDEX_URL,
        "--uploaded-prior-to",
        UPLOADED_PRIOR_TO,
        "-r",
        str(spec.path),
        "-c",
        str(constraints),
    ]
    result = subprocess.run(  # a failure is reported below, with the end of pip's output
        cmd, env=_clean_env(), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )
    if result.returncode != 0:
        tail = result.stdout[result.stdout.find("ERROR:") :] if "ERROR:" in result.stdout else result.stdout
        sys.stderr.write(tail[-6000:])
        raise LockError(
            f"pip could not resolve {rel(spec.path)} with the host's packages as constraints "
            f"(above); name the conflicting host package on a `#: host-wins` or `#: carry` line"
        )
    data = json.loads(report.read_text())
    env = data.get("environment", {})
    if (env.get("python_version"), env.get("sys_platform")) != (PYTHON_VERSION, "linux"):
        raise LockError(
            f"pip ran on Python {env.get('python_version')} / {env.get('sys_platform')}, "
            f"not {PYTHON_VERSION} / linux: markers would be evaluated for the wrong host"
        )
    return data


# ---------------------------------------------------------------------------------------------------------
# From pip's report to the lock


@dataclass
class Item:
    name: str
    version: str
    sha256: str
    requires: list[Requirement]


@dataclass
class Lock:
    name: str
    spec: Spec
    carried: dict[str, Item]
    host_kept: list[str]  # resolved and already on the host at that version
    host_wins: dict[str, str]  # name -> the version the resolver picked
    skipped: dict[str, str]
    pruned: dict[str, str]  # needed only by skipped packages
    unmet: list[str]


def _items(report: dict) -> dict[str, Item]:
    items = {}
    for entry in report["install"]:
        meta = entry["metadata"]
        info = entry.get("download_info", {})
        sha = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not sha:
            raise LockError(f"pip's report has no sha256 for {meta['name']} {meta['version']}")
        items[canonicalize_name(meta["name"])] = Item(
            canonicalize_name(meta["name"]),
            meta["version"],
            sha,
            [Requirement(r) for r in meta.get("requires_dist") or []],
        )
    return items


def build_lock(name: str, spec: Spec, host: dict[str, str], report: dict) -> Lock:
    items = _items(report)
    env = {k: v for k, v in report["environment"].items() if isinstance(v, str)}
    resolved = _Resolution(spec, host, items, env)
    _check_directives(resolved)
    carried, edges = _walk(resolved)
    if carried & NEVER_CARRY:
        raise LockError(
            f"{resolved.where}: the lock would carry {', '.join(sorted(carried & NEVER_CARRY))}: never "
            f"carried (the host's own build); is it missing from serving_lab/pins/host-packages.txt?"
        )
    unmet = _unmet(resolved, carried, edges)
    host_wins, skip = spec.names("host-wins"), spec.names("skip")
    resolved_off_host = {p for p in items if p not in host}
    return Lock(
        name=name,
        spec=spec,
        carried={p: items[p] for p in sorted(carried)},
        host_kept=sorted(p for p in items if p in host and p not in carried and p not in host_wins),
        host_wins={p: items[p].version for p in sorted(host_wins)},
        skipped={p: items[p].version for p in sorted(skip)},
        pruned={p: items[p].version for p in sorted(resolved_off_host - carried - skip)},
        unmet=unmet,
    )


@dataclass(frozen=True)
class _Resolution:
    """pip's resolved set for one .in file beside the host's packages: what each package is to the lock."""

    spec: Spec
    host: dict[str, str]
    items: dict[str, Item]
    env: dict[str, str]  # the marker environment pip resolved for

    @property
    def where(self) -> str:
        return rel(self.spec.path)

    def applies(self, req: Requirement, extra: str = "") -> bool:
        return req.marker is None or req.marker.evaluate({**self.env, "extra": extra})

    def kind(self, pkg: str) -> str:
        """skip, host-wins (the .in's `#:` lines), host (the host's version serves) or carry."""
        if pkg in self.spec.names("skip"):
            return "skip"
        if pkg in self.spec.names("host-wins"):
            return "host-wins"
        host, items = self.host, self.items
        if pkg in host and (
            items[pkg].version == host[pkg] or pkg not in (self.spec.names("carry") | self.spec.pinned)
        ):
            return "host"
        return "carry"


def _check_directives(resolved: _Resolution) -> None:
    """Every `#:` line names a resolved package it changes something for (else: drop the line)."""
    host, items, where = resolved.host, resolved.items, resolved.where
    for directive in ("host-wins", "carry", "skip"):
        for pkg in sorted(resolved.spec.names(directive)):
            if pkg not in items:
                raise LockError(f"{where}: `#: {directive} {pkg}`: not in the resolved set (drop the line)")
            if directive == "skip":
                if pkg in host:
                    raise LockError(f"{where}: `#: skip {pkg}`: the host has it (nothing to skip)")
                continue
            if pkg not in host:
                raise LockError(
                    f"{where}: `#: {directive} {pkg}`: not a host package (serving_lab/pins/host-packages.txt)"
                )
            if items[pkg].version == host[pkg]:
                raise LockError(
                    f"{where}: `#: {directive} {pkg}`: the resolver takes the host's {host[pkg]} (drop the line)"
                )


def _walk(resolved: _Resolution) -> tuple[set[str], list[tuple[str, Requirement]]]:
    """The carried packages and their requirements (edges), walking the dependency graph from the .in's
    requirements: through carried packages only, and into a host package only for what an extra asked
    of it adds."""
    carried: set[str] = set()
    done: dict[str, set[str]] = {}
    queue = [
        (canonicalize_name(req.name), set(req.extras)) for req in resolved.spec.requirements if resolved.applies(req)
    ]
    edges: list[tuple[str, Requirement]] = []
    while queue:
        pkg, extras = queue.pop()
        if pkg not in resolved.items:
            raise LockError(f"{pkg} is required but not in pip's resolved set")
        before = done.get(pkg)
        if before is not None and extras <= before:
            continue
        done[pkg] = (before or set()) | extras
        what = resolved.kind(pkg)
        if what in ("skip", "host-wins"):
            continue
        if what == "carry":
            carried.add(pkg)
        for req in _followed(resolved, pkg, what, extras - (before or set()), first_visit=before is None):
            if what == "carry":
                edges.append((pkg, req))
            queue.append((canonicalize_name(req.name), set(req.extras)))
    return carried, edges


def _followed(resolved: _Resolution, pkg: str, what: str, new_extras: set[str], first_visit: bool) -> list[Requirement]:
    """The requirements of `pkg` the walk follows: a first visit of a carried package takes the plain
    requirements too; a host package only what an extra adds."""
    followed = []
    for req in resolved.items[pkg].requires:
        base = resolved.applies(req)
        via_extra = req.marker is not None and not base and any(resolved.applies(req, e) for e in new_extras)
        if via_extra or (base and first_visit and what == "carry"):
            followed.append(req)
    return followed


def _unmet(resolved: _Resolution, carried: set[str], edges: list[tuple[str, Requirement]]) -> list[str]:
    """The carried packages' requirements unmet by the host plus the carried set, explained by a `#: skip`
    or `#: host-wins` line (any other stops the run), as the lock's header lists them."""
    items, host = resolved.items, resolved.host
    skip, host_wins = resolved.spec.names("skip"), resolved.spec.names("host-wins")
    unexplained, unmet = [], set()
    for pkg, req in edges:
        target = canonicalize_name(req.name)
        have = items[target].version if target in carried else host.get(target)
        if target in skip:
            unmet.add(f"{pkg} {items[pkg].version}: {req.name} (skipped)")
        elif have is None:
            unexplained.append(f"{pkg} needs {req}, which is neither carried nor on the host")
        elif not req.specifier.contains(Version(have), prereleases=True):
            line = f"{pkg} {items[pkg].version}: {req.name}{req.specifier} (host {have})"
            (unmet.add if target in host_wins else unexplained.append)(line)
    if unexplained:
        raise LockError(f"{resolved.where}: {'; '.join(sorted(unexplained))}")
    return sorted(unmet)


def render(lock: Lock, host: dict[str, str]) -> str:
    def wrapped(label: str, words: list[str]) -> list[str]:
        text = f"{label}: {', '.join(words) if words else 'none'}."
        return ["# " + line for line in textwrap.wrap(text, 110, subsequent_indent="  ", break_on_hyphens=False)]

    intro = (
        f"Generated by serving_lab/scripts/rehearsal_lock.py with pip {PIP_VERSION} on CPython {PYTHON_VERSION} (do not "
        f"edit): binary wheels for cp312 manylinux_2_17..2_{HOST_GLIBC_MINOR} x86_64 from {INDEX_URL}, uploaded "
        f"before {UPLOADED_PRIOR_TO}, with serving_lab/pins/host-packages.txt as constraints. {len(lock.carried)} "
        f"wheels; {len(lock.host_kept)} resolved packages are the host's own and not carried."
    )
    out = [
        f"# serving_lab/pins/{lock.name}.lock: the wheels carried to the rehearsal host for {rel(lock.spec.path)}.",
        *("# " + line for line in textwrap.wrap(intro, 110, break_on_hyphens=False)),
        *wrapped(
            "Carried over the host's own version (pinned, or #: carry)",
            [f"{p} {item.version} (host {host[p]})" for p, item in lock.carried.items() if p in host],
        ),
        *wrapped(
            "The host's version stays (#: host-wins)",
            [f"{p} {host[p]} (resolved {v})" for p, v in lock.host_wins.items()],
        ),
        *wrapped("Not carried (#: skip)", [f"{p} {v}" for p, v in lock.skipped.items()]),
        *wrapped("Not carried, needed only by those", [f"{p} {v}" for p, v in lock.pruned.items()]),
        "# Requirements knowingly unmet on the host:" if lock.unmet else "# Requirements unmet on the host: none.",
        *(f"#   {line}" for line in lock.unmet),
    ]
    out += [f"{item.name}=={item.version} --hash=sha256:{item.sha256}" for item in lock.carried.values()]
    return "\n".join(out) + "\n"


def generate(name: str, venv_python: Path, host: dict[str, str]) -> str:
    spec = read_spec(REHEARSAL / f"requirements-{name}.in")
    with tempfile.TemporaryDirectory(prefix=f"rehearsal-lock-{name}-") as tmp:
        report = resolve(venv_python, spec, host, Path(tmp))
    return render(build_lock(name, spec, host, report), host)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="re-resolve and compare with the committed locks")
    parser.add_argument("--only", choices=LOCK_NAMES, help="one lock only")
    parser.add_argument("--python", help=f"a Python {PYTHON_VERSION} to resolve with")
    parser.add_argument("--target-args", action="store_true", help="print pip's target-platform flags, one a line")
    args = parser.parse_args(argv)
    if args.target_args:
        print("\n".join(target_args()))
        return 0
    try:
        host = read_host()
        venv_python = lock_venv(find_python(args.python))
        stale = 0
        for name in [args.only] if args.only else LOCK_NAMES:
            path = REHEARSAL / f"{name}.lock"
            text = generate(name, venv_python, host)
            old = path.read_text() if path.exists() else ""
            if args.check:
                if text == old:
                    print(f"rehearsal_lock: {rel(path)} is up to date")
                else:
                    stale += 1
                    sys.stdout.writelines(
                        difflib.unified_diff(
                            old.splitlines(True),
                            text.splitlines(True),
                            f"{rel(path)} (committed)",
                            f"{rel(path)} (resolved now)",
                        )
                    )
                    print(f"rehearsal_lock: {rel(path)} is stale: run serving_lab/scripts/rehearsal_lock.py")
            else:
                path.write_text(text)
                count = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
                print(f"rehearsal_lock: wrote {rel(path)} ({count} wheels){'' if text != old else ', unchanged'}")
        return 1 if stale else 0
    except LockError as err:
        print(f"rehearsal_lock: {err}", file=sys.stderr)
        return err.code
    except subprocess.CalledProcessError as err:
        print(f"rehearsal_lock: {' '.join(map(str, err.cmd[:3]))} ... failed (exit {err.returncode})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
