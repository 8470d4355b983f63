"""`ops bench --compare A B` and `--merge RUN...` read run files someone hands them. Whatever the file is
(nested without end, gigabytes, a FIFO no one writes to, a device, a socket, a folder, a symlink loop,
not UTF-8, JSON of another shape), the command ends at once with one line that names the file and the
problem, exit 2, and writes nothing; never a hang, never a traceback or an internal error (exit 3)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from ops.__main__ import main
from serving_lab.bench import results

from ..helpers import ROOT
from ..serving_lab.bench.runs import make_run

DEADLINE_S = 30  # far above what any of these takes; a hang fails the test instead of blocking the suite


def _valid() -> dict:
    return make_run("pd", {"chat": {1: (100, 20, 900), 8: (150, 22, 1000)}}).model_dump(by_alias=True)


def _within(seconds: float, call):
    """call() in a daemon thread: its result, or a test failure (not a hung suite) after `seconds`."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s: a hang"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _write(tmp_path: Path, content, name: str = "bad.json") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps(content))
    return path


def _changed(change) -> dict:
    data = _valid()
    change(data)
    return data


def _nested(depth: int) -> dict:
    data = _valid()
    inner: dict = {}
    data["settings"]["deep"] = inner
    for _ in range(depth):
        inner["x"] = {}
        inner = inner["x"]
    return data


def _fifo(tmp_path):
    path = tmp_path / "run.fifo"
    os.mkfifo(path)
    return path


_SOCKETS: list[tuple[socket.socket, Path]] = []  # listening until the test ends


@pytest.fixture(autouse=True)
def _close_sockets():
    yield
    while _SOCKETS:
        server, folder = _SOCKETS.pop()
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


def _socket(tmp_path):
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="sock-"))  # a socket path must be short (108 bytes)
    path = folder / "s.json"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    _SOCKETS.append((server, folder))
    return path


def _symlink_loop(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    return a


def _self_loop(tmp_path):
    path = tmp_path / "self.json"
    path.symlink_to(path)
    return path


def _link_to_fifo(tmp_path):
    path = tmp_path / "link.json"
    path.symlink_to(_fifo(tmp_path))
    return path


def _sparse(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(2 * 1024**3)  # 2 GiB, no disk used
    return path


def _padded(tmp_path):
    path = tmp_path / "padded.json"
    path.write_text(json.dumps(_valid()) + " " * (results.MAX_BYTES + 1))
    return path


def _bytes(content: bytes):
    return lambda tmp_path: _write(tmp_path, content)


def _json(data):
    return lambda tmp_path: _write(tmp_path, json.dumps(data))


def _text(text: str):
    return lambda tmp_path: _write(tmp_path, text)


def _level(data) -> dict:
    return data["profiles"][0]["levels"][0]


VALID_TEXT = json.dumps(_valid())
assert all(
    part in VALID_TEXT
    for part in ('"label": "pd"', '"requests_per_s": 0.5', '"duration_s": 10.0', '"requests": 5', '"ttft_ms": [')
)

# (id, make(tmp_path) -> path, a phrase of the one line)
HOSTILE = [
    # nested past any sense: json's own recursion, and depths json parses but nothing else should read
    ("deep-arrays", _text("[" * 200_000), "nested more than 32 levels deep"),
    ("deep-objects", _text('{"a":' * 100_000 + "1" + "}" * 100_000), "nested more than 32 levels deep"),
    ("deep-in-settings", _json(_nested(40)), "nested more than 32 levels deep"),
    (
        "deep-in-samples",
        _text(VALID_TEXT.replace('"ttft_ms": [', '"ttft_ms": [' + "[" * 40 + "1.0" + "]" * 40 + ", ", 1)),
        "nested more than 32 levels deep",
    ),
    # large: by size, and by what is read when the size is not known (or lies)
    ("2-GiB-sparse-file", _sparse, "larger than 64 MiB: not a results file"),
    ("64-MiB-plus-one", _padded, "larger than 64 MiB: not a results file"),
    ("dev-zero", lambda tmp_path: Path("/dev/zero"), "a character device, not a regular file"),
    ("dev-null", lambda tmp_path: Path("/dev/null"), "a character device, not a regular file"),
    ("dev-urandom", lambda tmp_path: Path("/dev/urandom"), "a character device, not a regular file"),
    # special files
    ("folder", lambda tmp_path: tmp_path, "a folder, not a regular file"),
    ("fifo-without-writer", _fifo, "a FIFO (named pipe), not a regular file"),
    ("symlink-to-fifo", _link_to_fifo, "a FIFO (named pipe), not a regular file"),
    ("unix-socket", _socket, "a socket"),
    ("symlink-loop", _symlink_loop, "a symbolic link loop"),
    ("symlink-to-itself", _self_loop, "a symbolic link loop"),
    (
        "dangling-symlink",
        lambda tmp_path: (tmp_path / "d.json").symlink_to(tmp_path / "gone") or tmp_path / "d.json",
        "no such file: not a results file",
    ),
    ("missing", lambda tmp_path: tmp_path / "nope.json", "no such file: not a results file"),
    # not UTF-8
    ("utf-16", _bytes(VALID_TEXT.encode("utf-16")), "not UTF-8: byte 0xff at offset 0"),
    (
        "latin-1-label",
        _bytes(VALID_TEXT.replace('"label": "pd"', '"label": "caf\u00e9"').encode("latin-1")),
        "not UTF-8: byte 0xe9",
    ),
    ("binary", _bytes(bytes(range(256)) * 8), "not UTF-8"),
    ("utf-8-bom", _bytes(b"\xef\xbb\xbf" + VALID_TEXT.encode()), "not a results JSON file (Unexpected UTF-8 BOM"),
    # JSON of the wrong shape
    ("empty-file", _text(""), "not a results JSON file (Expecting value"),
    ("truncated", _text(VALID_TEXT[: len(VALID_TEXT) // 2]), "not a results JSON file"),
    ("list", _json([_valid()]), "(top): a JSON array, not a benchmark run"),
    ("string", _json("pd-inference/bench-run/v1"), "(top): a JSON string, not a benchmark run"),
    ("number", _text("5"), "(top): a JSON number, not a benchmark run"),
    ("null", _text("null"), "(top): a JSON null, not a benchmark run"),
    ("empty-object", _json({}), "schema: None is not a benchmark run"),
    ("other-schema", _json(_changed(lambda d: d.update(schema="aiperf/v2"))), "schema: 'aiperf/v2' is not a"),
    ("schema-as-list", _json(_changed(lambda d: d.update(schema=[results.SCHEMA]))), "schema: <a list of 1 items>"),
    (
        "concurrency-as-string",
        _json(_changed(lambda d: _level(d).update(concurrency="1"))),
        "profiles.0.levels.0.concurrency: Input should be a valid integer",
    ),
    (
        "ms-as-string",
        _json(_changed(lambda d: _level(d)["ttft_ms"].update(p50="100.0"))),
        "profiles.0.levels.0.ttft_ms.p50: Input should be a valid number",
    ),
    (
        "sample-as-string",
        _json(_changed(lambda d: _level(d)["samples"]["itl_ms"].__setitem__(0, "20"))),
        "profiles.0.levels.0.samples.itl_ms.0: Input should be a valid number",
    ),
    (
        "count-as-bool",
        _json(_changed(lambda d: _level(d).update(requests=True))),
        "profiles.0.levels.0.requests: Input should be a valid integer",
    ),
    (
        "count-as-float",
        _json(_changed(lambda d: d["hardware"].update(gpu_nodes=2.5))),
        "hardware.gpu_nodes: Input should be a valid integer",
    ),
    ("label-as-number", _json(_changed(lambda d: d.update(label=5))), "label: Input should be a valid string"),
    (
        "NaN",
        _text(VALID_TEXT.replace('"requests_per_s": 0.5', '"requests_per_s": NaN', 1)),
        "NaN is not a number (JSON has no NaN or Infinity)",
    ),
    (
        "Infinity",
        _text(VALID_TEXT.replace('"duration_s": 10.0', '"duration_s": Infinity', 1)),
        "Infinity is not a number",
    ),
    (
        "-Infinity",
        _text(VALID_TEXT.replace('"duration_s": 10.0', '"duration_s": -Infinity', 1)),
        "-Infinity is not a number",
    ),
    (
        "1e999",
        _text(VALID_TEXT.replace('"duration_s": 10.0', '"duration_s": 1e999', 1)),
        "profiles.0.levels.0.duration_s: the number inf is out of range",
    ),
    (
        "1e300",
        _text(VALID_TEXT.replace('"duration_s": 10.0', '"duration_s": -1e300', 1)),
        "profiles.0.levels.0.duration_s: the number -1e+300 is out of range",
    ),
    (
        "huge-integer",
        _text(VALID_TEXT.replace('"requests": 5', '"requests": ' + "9" * 400, 1)),
        "profiles.0.levels.0.requests: the number <an integer of more than 19 digits> is out of range",
    ),
    (
        "5000-digit-integer",
        _text(VALID_TEXT.replace('"requests": 5', '"requests": ' + "9" * 5000, 1)),
        "not a results JSON file (Exceeds the limit (4300 digits)",
    ),
    ("missing-label", _json(_changed(lambda d: d.pop("label"))), "label: Field required"),
    (
        "missing-samples",
        _json(_changed(lambda d: _level(d).pop("samples"))),
        "profiles.0.levels.0.samples: Field required",
    ),
    ("hardware-null", _json(_changed(lambda d: d.update(hardware=None))), "hardware: Input should be"),
    (
        "profiles-as-object",
        _json(_changed(lambda d: d.update(profiles={"chat": {}}))),
        "profiles: Input should be a valid list",
    ),
    ("extra-field", _json(_changed(lambda d: d.update(surprise=1))), "surprise: Extra inputs are not permitted"),
    (
        "settings-as-list",
        _json(_changed(lambda d: d.update(settings=[]))),
        "settings: Input should be a valid dictionary",
    ),
    # types right, values the report or merge cannot use
    (
        "profile-name-path",
        _json(_changed(lambda d: d["profiles"][0].update(name="../../etc/x"))),
        "profiles.0.name: '../../etc/x' is not a profile name",
    ),
    (
        "concurrency-0",
        _json(_changed(lambda d: _level(d).update(concurrency=0))),
        "profiles.0.levels.0.concurrency: 0 (allowed: 1 or more)",
    ),
    (
        "negative-requests",
        _json(_changed(lambda d: _level(d).update(requests=-1))),
        "profiles.0.levels.0.requests: -1 (allowed: 0 or more)",
    ),
    ("tex-in-label", _json(_changed(lambda d: d.update(label="$\\frac{$"))), "label: '$\\\\frac{$' has a '$'"),
    (
        "engine-as-string",
        _json(_changed(lambda d: d["settings"].update(engine="vllm"))),
        "settings.engine: 'vllm' (allowed: an object)",
    ),
    (
        "skipped-of-objects",
        _json(_changed(lambda d: d["settings"].update(skipped=[{}]))),
        "settings.skipped: <a list of 1 items> (allowed: a list of strings)",
    ),
    (
        "overrides-as-string",
        _json(_changed(lambda d: d["settings"].update(rehearsal={"overrides": "x"}))),
        "settings.rehearsal.overrides: 'x' (allowed: a list of strings)",
    ),
    (
        "kv-override-not-a-literal",
        _json(
            _changed(
                lambda d: d["settings"].update(
                    rehearsal={
                        "overrides": [
                            "override a.kv_connector_extra_config.backends: ['LIBFABRIC'] -> __import__('os') (why)"
                        ]
                    }
                )
            )
        ),
        "settings.rehearsal.overrides.0: the new value of 'a.kv_connector_extra_config.backends' is not a list",
    ),
]


@pytest.mark.parametrize("case_id, make, phrase", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_load_refuses_with_one_line_naming_the_file(case_id, make, phrase, tmp_path):
    path = make(tmp_path)
    with pytest.raises(results.ResultsError) as info:
        _within(DEADLINE_S, lambda: results.load(path))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    assert phrase in message, message


@pytest.mark.parametrize("form", ["compare-first", "compare-second", "merge"])
@pytest.mark.parametrize("case_id, make, phrase", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_bench_exits_2_with_one_line_and_writes_nothing(case_id, make, phrase, form, tmp_path, capsys):
    bad = make(tmp_path)
    good = make_run("pd", {"chat": {1: (100, 20, 900)}}).save(tmp_path / "good.json")
    out = tmp_path / "out"
    if form == "merge":
        argv = ["bench", "--merge", str(good), str(bad), "--out", str(out / "merged.json")]
    else:
        pair = [str(bad), str(good)] if form == "compare-first" else [str(good), str(bad)]
        argv = ["bench", "--compare", *pair, "--out", str(out)]
    assert _within(DEADLINE_S, lambda: main(argv)) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    command = "merge" if form == "merge" else "compare"
    assert lines[0].startswith(f"bench --{command}: {bad}: "), lines[0]
    assert phrase in lines[0]
    assert captured.out == ""
    assert not out.exists()


def test_a_file_name_with_a_newline_is_refused_escaped_on_one_line(tmp_path, capsys):
    path = _write(tmp_path, "[1]", name="two\nlines.json")
    good = make_run("pd", {"chat": {1: (100, 20, 900)}}).save(tmp_path / "good.json")
    with pytest.raises(SystemExit) as info:
        main(["bench", "--compare", str(path), str(good), "--out", str(tmp_path / "out")])
    assert info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert "error: argument --compare: " in error and error.endswith(
        "has a control character (allowed: printable text)"
    )


def test_a_size_unknown_up_front_is_counted_while_reading(monkeypatch):
    # /proc files report st_size 0: the cap holds on what is read, not on what stat says
    monkeypatch.setattr(results, "MAX_BYTES", 16)
    assert os.stat("/proc/self/environ").st_size == 0
    with pytest.raises(results.ResultsError, match=r"^/proc/self/environ: larger than 16 bytes: not a results file$"):
        results.load(Path("/proc/self/environ"))


@pytest.mark.parametrize("stdin_path", ["/dev/stdin", "/proc/self/fd/0"])
def test_dev_stdin_of_an_idle_pipe_does_not_block(stdin_path, tmp_path):
    """A real process whose stdin is a pipe nobody writes to: reading it would block forever."""
    good = make_run("pd", {"chat": {1: (100, 20, 900)}}).save(tmp_path / "good.json")
    with subprocess.Popen(
        [sys.executable, "-m", "ops", "bench", "--compare", stdin_path, str(good), "--out", str(tmp_path / "out")],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            _, err = proc.communicate(timeout=60)  # stdin stays open and empty until it ends
        finally:
            proc.kill()
    assert proc.returncode == 2, err
    assert err.splitlines() == [
        f"bench --compare: {stdin_path}: a FIFO (named pipe), not a regular file: not a results file"
    ]


def _linked_run(tmp_path):
    (tmp_path / "link.json").symlink_to(make_run("pd", {"chat": {1: (100, 20, 900)}}).save(tmp_path / "run.json"))
    return tmp_path / "link.json"


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp_path: make_run("pd", {"chat": {1: (100, 20, 900)}}).save(tmp_path / "run.json"),
        _linked_run,
        lambda tmp_path: make_run("pd", {"chat": {1: (9e14, 0.0, -9e14)}}).save(tmp_path / "edge.json"),
    ],
    ids=["run", "symlink-to-a-run", "numbers-at-the-limit"],
)
def test_a_real_run_still_loads(make, tmp_path):
    path = make(tmp_path)
    assert results.load(path).profiles[0].name == "chat"


def test_the_committed_runs_pass_the_checks():
    for path in sorted((ROOT / "docs").rglob("*.json")):
        try:
            head = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(head, dict) and head.get("schema") == results.SCHEMA:
            results.load(path)  # raises on a false refusal


# --- --compare in a Python without the bench set-up's packages: one line naming the set-up, exit 2 ------------


@pytest.mark.parametrize("package", ["matplotlib", "numpy"])
def test_compare_without_the_plot_packages_names_the_set_up_in_one_line(tmp_path, package):
    runs = [_write(tmp_path, _valid(), name) for name in ("a.json", "b.json")]
    out = tmp_path / "report"
    probe = (
        f"import sys; sys.modules[{package!r}] = None\n"  # as in a venv without it: importing it fails
        "from ops.__main__ import main\n"
        f"sys.exit(main(['bench', '--compare', {str(runs[0])!r}, {str(runs[1])!r}, '--out', {str(out)!r}]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE_S, check=False
    )
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stderr)
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0], lines
    assert lines[0].startswith(f"bench --compare: this Python ({sys.executable}) lacks the package {package} ")
    assert "run scripts/setup.sh --bench, then scripts/bench.sh --compare" in lines[0]
    assert not out.exists()  # nothing written, not even the folder
