"""GEMM and convolution tuning provenance: what chose the kernels a case ran.

On ROCm and CUDA the kernel a GEMM or a convolution runs depends on tuning kept outside
the stack's versions: PyTorch's TunableOp results file, hipBLASLt and rocBLAS override
files, the BLAS back end PyTorch prefers, MIOpen's find mode and whether its user
database was already filled. Two runs of one stack can differ by tens of percent on
these alone, so every stored measurement carries them (``details["tuning"]``).

The files read here are untrusted input: each is read with a size cap, never followed
(a file is hashed and, for TunableOp, parsed; nothing in it is opened or run), and a bad
line is counted, never fatal. Nothing here imports torch; a torch module is passed in.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The fingerprint's rule: a variable whose name suggests a credential is never recorded.
from accelbench.env.fingerprint import _SECRET

# TunableOp files hold one line per tuned GEMM: a few KiB to a few MiB. Anything larger
# is hashed up to HASH_CAP_BYTES and parsed up to PARSE_CAP_BYTES.
PARSE_CAP_BYTES = 16 * 1024 * 1024
HASH_CAP_BYTES = 256 * 1024 * 1024
MAX_ENTRIES = 100_000
MAX_FIELD_CHARS = 512
MAX_PROBLEMS = 20
# How many untuned GEMM shapes a measurement lists (the count is always exact up to the cap).
MAX_UNTUNED_SHAPES = 50

TUNABLEOP_DEFAULT_FILENAME = "tunableop_results.csv"
TUNABLEOP_DEFAULT_UNTUNED_FILENAME = "tunableop_untuned.csv"

# The variables that steer TunableOp. ENABLED/TUNING/RECORD_UNTUNED are "1" to switch on.
TUNABLEOP_PREFIX = "PYTORCH_TUNABLEOP_"
# hipBLASLt, rocBLAS/Tensile and MIOpen variables recorded; a value that names a regular
# file is hashed. Log destinations change on every run and are recorded but not hashed.
_LIBRARY_PREFIXES = {
    "hipblaslt": ("HIPBLASLT_",),
    "rocblas": ("ROCBLAS_", "TENSILE_"),
}
_NOT_HASHED = re.compile(r"LOG", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# MIOpen find modes by number (MIOPEN_FIND_MODE accepts either form).
_MIOPEN_FIND_MODES = {
    "1": "NORMAL",
    "2": "FAST",
    "3": "HYBRID",
    "5": "DYNAMIC_HYBRID",
    "6": "TRUST_VERIFY",
    "7": "TRUST_VERIFY_FULL",
}


@dataclass(frozen=True)
class TunedGemm:
    """One tuned operator: the op signature, its parameters, the chosen solution, its time."""

    op: str
    params: str
    solution: str
    time_ms: float | None = None


@dataclass(frozen=True)
class TunableTable:
    """A TunableOp results file as read: validators, tuned entries and what was wrong.

    ``sha256`` is the digest of the file's bytes ("" when it could not be read);
    ``problems`` says, in short phrases, what was skipped or refused.
    """

    validators: dict[str, str] = field(default_factory=dict, hash=False)
    entries: tuple[TunedGemm, ...] = ()
    sha256: str = ""
    path: str = ""
    exists: bool = False
    size_bytes: int = 0
    bad_lines: int = 0
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exists and not self.problems


def _clean(text: str) -> str:
    return _CONTROL.sub("", text.strip())[:MAX_FIELD_CHARS]


def _open_regular(path: str) -> tuple[int | None, os.stat_result | None, str | None]:
    """A read-only descriptor on a regular file, or why not. Never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, None, "no such file"
    except OSError as exc:
        return None, None, f"cannot open ({exc.strerror or type(exc).__name__})"
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return None, None, f"cannot stat ({exc.strerror or type(exc).__name__})"
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None, info, "not a regular file"
    return fd, info, None


def _read_capped(fd: int, parse_cap: int, hash_cap: int) -> tuple[bytes, str, bool]:
    """The first ``parse_cap`` bytes, the sha256 of up to ``hash_cap`` bytes, and whether
    the file went on past ``hash_cap`` (then the digest covers only its beginning)."""
    digest = hashlib.sha256()
    head = bytearray()
    total = 0
    with os.fdopen(fd, "rb", closefd=True) as handle:
        while total < hash_cap:
            chunk = handle.read(min(1 << 20, hash_cap - total))
            if not chunk:
                return bytes(head), digest.hexdigest(), False
            digest.update(chunk)
            if len(head) < parse_cap:
                head.extend(chunk[: parse_cap - len(head)])
            total += len(chunk)
        more = bool(handle.read(1))
    return bytes(head), digest.hexdigest(), more


def hash_file(path: str, cap: int = HASH_CAP_BYTES) -> dict[str, Any]:
    """{"path", "exists", "sha256", "size_bytes"} of a file named by a variable; a
    directory or anything else is recorded as such, not read."""
    fd, info, why = _open_regular(path)
    out: dict[str, Any] = {"path": path, "exists": info is not None or fd is not None}
    if fd is None:
        if info is not None and stat.S_ISDIR(info.st_mode):
            out["kind"] = "directory"
        elif why and why != "no such file":
            out["problem"] = why
        return out
    assert info is not None
    out["size_bytes"] = info.st_size
    try:
        _, digest, more = _read_capped(fd, 0, cap)
    except OSError as exc:
        out["problem"] = f"cannot read ({exc.strerror or type(exc).__name__})"
        return out
    out["sha256"] = digest
    if more:
        out["problem"] = f"larger than {cap} bytes; digest covers the first {cap}"
    return out


def parse_tunableop(text: str) -> tuple[dict[str, str], list[TunedGemm], int, list[str]]:
    """Validators, entries, bad-line count and problems of a TunableOp results text."""
    validators: dict[str, str] = {}
    entries: list[TunedGemm] = []
    bad = 0
    problems: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if parts[0] == "Validator":
            if len(parts) < 3 or not parts[1]:
                bad += 1
                continue
            name = _clean(parts[1])
            value = _clean(",".join(parts[2:]))
            if name in validators and validators[name] != value:
                problems.append(f"validator {name} given twice")
            validators[name] = value
            continue
        if len(parts) < 3 or not all(parts[:3]):
            bad += 1
            continue
        time_ms: float | None = None
        if len(parts) > 3 and parts[3]:
            try:
                time_ms = float(parts[3])
            except ValueError:
                bad += 1
                continue
            if not (time_ms >= 0.0 and time_ms < float("inf")):
                bad += 1
                continue
        if len(entries) >= MAX_ENTRIES:
            problems.append(f"more than {MAX_ENTRIES} entries; the rest not read")
            break
        entries.append(TunedGemm(_clean(parts[0]), _clean(parts[1]), _clean(parts[2]), time_ms))
    if bad:
        problems.append(f"{bad} malformed line{'s' if bad != 1 else ''} skipped")
    return validators, entries, bad, problems


def read_tunableop(path: str | os.PathLike[str]) -> TunableTable:
    """Read a TunableOp results file. Never raises for the file's content or absence:
    what went wrong is in the table's ``problems``."""
    name = os.fspath(path)
    fd, info, why = _open_regular(name)
    if fd is None:
        return TunableTable(path=name, exists=info is not None, problems=(why or "unreadable",))
    assert info is not None
    try:
        head, digest, more = _read_capped(fd, PARSE_CAP_BYTES, HASH_CAP_BYTES)
    except OSError as exc:
        problem = f"cannot read ({exc.strerror or type(exc).__name__})"
        return TunableTable(path=name, exists=True, size_bytes=info.st_size, problems=(problem,))
    problems: list[str] = []
    if len(head) >= PARSE_CAP_BYTES and (more or info.st_size > PARSE_CAP_BYTES):
        problems.append(f"larger than {PARSE_CAP_BYTES} bytes; only the beginning was read")
        # Drop the partial last line rather than count it as malformed.
        head = head[: head.rfind(b"\n") + 1]
    if more:
        problems.append(f"larger than {HASH_CAP_BYTES} bytes; digest covers the beginning")
    if b"\x00" in head:
        problems.append("binary content")
        return TunableTable(
            path=name, exists=True, size_bytes=info.st_size, sha256=digest, problems=tuple(problems)
        )
    text = head.decode("utf-8", errors="replace")
    validators, entries, bad, parse_problems = parse_tunableop(text)
    problems.extend(parse_problems)
    return TunableTable(
        validators=validators,
        entries=tuple(entries),
        sha256=digest,
        path=name,
        exists=True,
        size_bytes=info.st_size,
        bad_lines=bad,
        problems=tuple(problems[:MAX_PROBLEMS]),
    )


def write_tunableop(table: TunableTable, path: str | os.PathLike[str]) -> None:
    """Write a table in TunableOp's results format (validators first, one entry a line)."""
    lines = [f"Validator,{name},{value}" for name, value in table.validators.items()]
    for e in table.entries:
        time = "" if e.time_ms is None else f",{e.time_ms:g}"
        lines.append(f"{e.op},{e.params},{e.solution}{time}")
    with open(os.fspath(path), "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


# --- what a case runs under ----------------------------------------------------------------

# Digests are computed once per file version (device, inode, size, mtime) in a process.
_CACHE_LIMIT = 64
_table_cache: dict[tuple[str, int, int, int, int], TunableTable] = {}
_hash_cache: dict[tuple[str, int, int, int, int], dict[str, Any]] = {}


def _file_key(path: str) -> tuple[str, int, int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _cached_table(path: str) -> TunableTable:
    key = _file_key(path)
    if key is not None and key in _table_cache:
        return _table_cache[key]
    table = read_tunableop(path)
    if key is not None:
        if len(_table_cache) >= _CACHE_LIMIT:
            _table_cache.clear()
        _table_cache[key] = table
    return table


def _cached_hash(path: str) -> dict[str, Any]:
    key = _file_key(path)
    if key is not None and key in _hash_cache:
        return dict(_hash_cache[key])
    info = hash_file(path)
    if key is not None:
        if len(_hash_cache) >= _CACHE_LIMIT:
            _hash_cache.clear()
        _hash_cache[key] = info
    return dict(info)


def _on(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip() == "1"


def _call(fn: Any, *args: Any) -> Any:
    """fn(*args), or None when it is missing or fails (older or unusual torch builds)."""
    if not callable(fn):
        return None
    try:
        return fn(*args)
    except Exception:
        return None


def _attr(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def with_ordinal(filename: str, ordinal: int) -> str:
    """The name PyTorch uses for one device: "%d" replaced by the ordinal, else the ordinal
    inserted before the last '.' (or appended when there is none)."""
    if "%d" in filename:
        return filename.replace("%d", str(ordinal), 1)
    dot = filename.rfind(".")
    if dot == -1:
        return f"{filename}{ordinal}"
    return f"{filename[:dot]}{ordinal}{filename[dot:]}"


def tunableop_filename(environ: Mapping[str, str], ordinal: int, torch_module: Any = None) -> str:
    """The results file TunableOp reads for this device, as PyTorch resolves it: a name set
    through torch.cuda.tunable.set_filename wins, else PYTORCH_TUNABLEOP_FILENAME (or the
    default) with the device ordinal inserted."""
    set_name = _call(_attr(torch_module, "cuda.tunable.get_filename"))
    if isinstance(set_name, str) and set_name:
        return set_name
    name = environ.get("PYTORCH_TUNABLEOP_FILENAME") or TUNABLEOP_DEFAULT_FILENAME
    return with_ordinal(name, ordinal)


def untuned_filename(environ: Mapping[str, str], ordinal: int) -> str:
    """The file TunableOp appends untuned GEMMs to (the ordinal goes before the last '.')."""
    name = environ.get("PYTORCH_TUNABLEOP_UNTUNED_FILENAME") or TUNABLEOP_DEFAULT_UNTUNED_FILENAME
    dot = name.rfind(".")
    return f"{name}{ordinal}" if dot == -1 else f"{name[:dot]}{ordinal}{name[dot:]}"


def _switch(torch_module: Any, getter: str, environ: Mapping[str, str], name: str) -> bool:
    value = _call(_attr(torch_module, f"cuda.tunable.{getter}"))
    return value if isinstance(value, bool) else _on(environ, name)


def _stack_validators(torch_module: Any) -> dict[str, str] | None:
    pairs = _call(_attr(torch_module, "cuda.tunable.get_validators"))
    if not pairs:
        return None
    try:
        return {_clean(str(k)): _clean(str(v)) for k, v in pairs}
    except (TypeError, ValueError):
        return None


def _tunableop(environ: Mapping[str, str], torch_module: Any, ordinal: int) -> dict[str, Any]:
    state: dict[str, Any] = {
        "applies": True,
        "enabled": _switch(torch_module, "is_enabled", environ, "PYTORCH_TUNABLEOP_ENABLED"),
        "tuning": _switch(torch_module, "tuning_is_enabled", environ,
                          "PYTORCH_TUNABLEOP_TUNING"),
        "record_untuned": _switch(torch_module, "record_untuned_is_enabled", environ,
                                  "PYTORCH_TUNABLEOP_RECORD_UNTUNED"),
    }
    path = tunableop_filename(environ, ordinal, torch_module)
    table = _cached_table(path)
    state.update(file=path, file_existed=table.exists)
    if table.exists:
        state.update(sha256=table.sha256, entries=len(table.entries),
                     validators=dict(table.validators))
        if table.problems:
            state["problems"] = list(table.problems)
    stack = _stack_validators(torch_module)
    if stack is not None:
        state["stack_validators"] = stack
        if table.exists and table.validators:
            keys = sorted(set(stack) | set(table.validators))
            differ = [k for k in keys if stack.get(k) != table.validators.get(k)]
            state["validators_match"] = not differ
            if differ:
                state["mismatched_validators"] = differ
    settings = {
        name: _clean(value) for name, value in sorted(environ.items())
        if name.startswith(TUNABLEOP_PREFIX) and not _SECRET.search(name)
    }
    if settings:
        state["settings"] = settings
    return state


def _library_files(environ: Mapping[str, str], prefixes: tuple[str, ...]) -> dict[str, Any]:
    """The library's variables, and the digest of every regular file one of them names."""
    variables = {
        name: _clean(value) for name, value in sorted(environ.items())
        if name.startswith(prefixes) and not _SECRET.search(name)
    }
    files: dict[str, Any] = {}
    for name, value in variables.items():
        if not value or _NOT_HASHED.search(name) or not os.path.exists(value):
            continue
        info = _cached_hash(value)
        if info.get("exists"):
            files[name] = info
    out: dict[str, Any] = {}
    if variables:
        out["variables"] = variables
    if files:
        out["files"] = files
    return out


def miopen_find_mode(environ: Mapping[str, str]) -> str:
    """MIOPEN_FIND_MODE by name ("NORMAL", "FAST", ...), or "default" when unset."""
    raw = environ.get("MIOPEN_FIND_MODE", "").strip()
    if not raw:
        return "default"
    return _MIOPEN_FIND_MODES.get(raw, _clean(raw).upper())


def miopen_user_db(environ: Mapping[str, str]) -> tuple[str, bool]:
    """MIOpen's user database folder and whether it already held anything."""
    path = environ.get("MIOPEN_USER_DB_PATH") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".config", "miopen")
    try:
        with os.scandir(path) as entries:
            existed = any(True for _ in entries)
    except OSError:
        existed = False
    return path, existed


def _miopen(environ: Mapping[str, str], torch_module: Any) -> dict[str, Any]:
    path, existed = miopen_user_db(environ)
    out: dict[str, Any] = {
        "find_mode": miopen_find_mode(environ),
        "user_db_path": path,
        "user_db_existed": existed,
    }
    enforce = environ.get("MIOPEN_FIND_ENFORCE")
    if enforce:
        out["find_enforce"] = _clean(enforce)
    benchmark = _attr(torch_module, "backends.cudnn.benchmark")
    if isinstance(benchmark, bool):
        out["exhaustive_search"] = benchmark
    return out


def blas_backend(torch_module: Any, platform: str) -> str | None:
    """The BLAS a GEMM goes to: hipblaslt/rocblas on ROCm, cublaslt/cublas on CUDA, the
    CPU BLAS PyTorch was built with on the CPU."""
    from accelbench.env.fingerprint import _blas_library, parse_torch_config

    if platform in ("cuda", "rocm"):
        return _blas_library(torch_module, platform)
    if platform == "cpu":
        config = parse_torch_config(_call(_attr(torch_module, "__config__.show")))
        return config.get("blas")
    return None


_NOT_APPLICABLE = "TunableOp tunes GEMMs on ROCm and CUDA devices only; it does not apply on {}"


def tuning_state(environ: Mapping[str, str], torch_module: Any, device_type: str,
                 platform: str, ordinal: int | None = None) -> dict[str, Any]:
    """What selects the GEMM and convolution kernels a case on this device runs (plain JSON).

    Read before the case: file digests and "existed" say what the case started from.
    """
    state: dict[str, Any] = {"platform": platform}
    blas = blas_backend(torch_module, platform)
    if blas:
        state["blas"] = blas
    if device_type == "cuda" and platform in ("cuda", "rocm"):
        index = ordinal if ordinal is not None else _call(_attr(torch_module,
                                                               "cuda.current_device"))
        state["tunableop"] = _tunableop(environ, torch_module,
                                        index if isinstance(index, int) else 0)
    else:
        state["tunableop"] = {"applies": False,
                              "reason": _NOT_APPLICABLE.format(platform.upper() if platform
                                                               == "cpu" else platform)}
    if platform == "rocm":
        for library, prefixes in _LIBRARY_PREFIXES.items():
            found = _library_files(environ, prefixes)
            if found:
                state[library] = found
        state["miopen"] = _miopen(environ, torch_module)
    elif platform == "cuda":
        benchmark = _attr(torch_module, "backends.cudnn.benchmark")
        if isinstance(benchmark, bool):
            state["cudnn_benchmark"] = benchmark
    return state


def read_untuned(path: str, offset: int = 0, cap: int = 1 << 20) -> tuple[list[str], int]:
    """The distinct "op,params" lines of an untuned-GEMM file from ``offset`` (capped at
    MAX_UNTUNED_SHAPES listed), and how many distinct lines there were."""
    fd, _, _ = _open_regular(path)
    if fd is None:
        return [], 0
    with os.fdopen(fd, "rb", closefd=True) as handle:
        handle.seek(offset)
        data = handle.read(cap)
    seen: dict[str, None] = {}
    for raw in data.decode("utf-8", errors="replace").splitlines():
        parts = [p.strip() for p in raw.split(",")]
        if len(parts) < 2 or not parts[0] or not parts[1] or parts[0] == "Validator":
            continue
        seen.setdefault(f"{_clean(parts[0])},{_clean(parts[1])}", None)
    shapes = list(seen)
    return shapes[:MAX_UNTUNED_SHAPES], len(shapes)


@dataclass
class CaseTuning:
    """The tuning state read before a case, finished after it (``finish``)."""

    state: dict[str, Any]
    untuned_path: str | None = None
    untuned_offset: int = 0
    results_key: tuple[str, int, int, int, int] | None = None

    def finish(self) -> dict[str, Any]:
        """The state, plus the GEMMs that ran untuned during the case (when recorded) and
        whether the results file changed under it."""
        state = dict(self.state)
        tunableop = state.get("tunableop")
        if not isinstance(tunableop, dict) or not tunableop.get("applies"):
            return state
        tunableop = dict(tunableop)
        if self.untuned_path is not None:
            shapes, count = read_untuned(self.untuned_path, self.untuned_offset)
            tunableop["untuned"] = {"file": self.untuned_path, "count": count,
                                    "shapes": shapes}
        path = tunableop.get("file")
        if isinstance(path, str) and _file_key(path) != self.results_key:
            tunableop["file_changed"] = True
        state["tunableop"] = tunableop
        return state


def begin_case(environ: Mapping[str, str], torch_module: Any, device_type: str,
               platform: str, ordinal: int | None = None) -> CaseTuning:
    """Read the tuning state a case starts from; call ``finish`` on the result after it."""
    state = tuning_state(environ, torch_module, device_type, platform, ordinal)
    probe = CaseTuning(state)
    tunableop = state.get("tunableop") or {}
    if tunableop.get("applies"):
        path = tunableop.get("file")
        probe.results_key = _file_key(path) if isinstance(path, str) else None
        if tunableop.get("enabled") and tunableop.get("record_untuned"):
            index = ordinal if ordinal is not None else 0
            probe.untuned_path = untuned_filename(environ, index)
            try:
                probe.untuned_offset = os.stat(probe.untuned_path).st_size
            except OSError:
                probe.untuned_offset = 0
    return probe
