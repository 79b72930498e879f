"""Checkpoints that carry data only, sealed per app: no code crosses from one app to another.

Checkpoints used to be pickles under one storage tree: app M's code wrote
``<storage>/victim/t000/checkpoint.pkl`` before ``victim`` was submitted, and victim's
job ran M's code when it resumed. Two changes close that:

**A data format.** A checkpoint is a tree of ``None``, booleans, integers, floats,
strings, bytes, lists, tuples, sets and dicts (any of these keys), numpy arrays and
scalars, and torch tensors, written as JSON (the tree) plus NumPy's ``.npz`` (the
arrays), read back with ``allow_pickle=False``: reading one never runs code, whatever
the file holds. Why this and not the alternatives: torch's ``weights_only`` load needs
torch, which most apps (and the arbiter) do not have; safetensors holds a flat mapping
of tensors only, not the nested state training code saves (optimizer state with integer
keys, RNG states with 128-bit integers, step lists), and would be a new dependency.
JSON + ``.npz`` needs nothing beyond numpy, a dependency already, and round-trips
exactly what the examples save (``tests/runtime/test_examples.py``). Object arrays
(pickles in disguise) and any other type are refused at save with one line.

**A seal.** The file starts with ``MAGIC`` and an HMAC-SHA256 of the app, the trial and
the payload, keyed by the app's own checkpoint key (``app_key``: derived from the
arbiter's secret, which never leaves its state directory, and the app's submission; the
arbiter hands it only to that app's jobs, in their ``TrialSpec``). A file planted by
another app, altered, or copied from another trial fails the check and is refused
before anything in it is parsed (:class:`CheckpointRefused`). What a same-user
deployment can and cannot isolate is in docs/runtime.md (Security).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import io
import json
import os
import secrets
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"THEMIS-CKPT-2\n"
_MAC_BYTES = 32
#: The arbiter's secret, in its state directory (0600): per-app keys derive from it.
SECRET_FILE = "checkpoint.key"
#: The largest checkpoint written or read (bytes, seal included): a bound on what one
#: resume loads into memory, whatever sits at the path. 16 GiB holds the state of a model
#: of a few billion parameters with its optimizer; larger checkpoints are refused at save
#: with one line rather than written and never read back.
MAX_BYTES = 16 << 30


#: Why a checkpoint was refused, as :attr:`CheckpointRefused.why` names it (a closed set:
#: the arbiter counts refusals by it, ``themis_checkpoints_refused_total{why}``).
REFUSALS = ("unsafe", "invalid", "stale", "newer")


class CheckpointRefused(Exception):
    """A checkpoint that is not read: not a regular file within the size limit
    (``unsafe``), fails its integrity check or is not a themis checkpoint (``invalid``),
    or is sealed but older or newer than the arbiter's count allows (``stale``,
    ``newer``)."""

    def __init__(self, message: str, why: str = "invalid") -> None:
        super().__init__(message)
        self.why = why if why in REFUSALS else "invalid"


# -- keys -------------------------------------------------------------------------------


def load_or_create_secret(state_dir: str | Path) -> bytes:
    """The arbiter's checkpoint secret: 32 random bytes in ``<state>/checkpoint.key``
    (0600), made at the first start. Losing it makes every checkpoint unreadable (the
    trials restart from step 0), never readable by another app."""
    path = Path(state_dir) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        data = path.read_bytes()
        if len(data) != 32:
            raise ValueError(f"{path}: not a themis checkpoint secret (32 bytes)") from None
        return data
    secret = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as f:
        f.write(secret)
        f.flush()
        os.fsync(f.fileno())
    return secret


def app_key(secret: bytes, app_id: str, submitted_at: float) -> str:
    """The checkpoint key of one app (hex): the submission instant makes an app submitted
    again under the same name (in a new state) a different app."""
    message = f"themis-checkpoint\0{app_id}\0{submitted_at!r}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


# -- the sealed file --------------------------------------------------------------------


def write(path: str | Path, key: str, app_id: str, trial_id: str, tree: Any) -> None:
    """Seal ``tree`` and write it atomically (a crash at any instant leaves the previous
    checkpoint or this one, whole), the trial's directory 0700 and the file 0600."""
    if not key:
        raise ValueError("no checkpoint key: the arbiter gives one to every job")
    path = Path(path)
    payload = _encode(tree)
    if len(MAGIC) + _MAC_BYTES + len(payload) > MAX_BYTES:
        raise ValueError(
            f"a checkpoint of {len(payload)} bytes is over the {MAX_BYTES}-byte limit "
            "(checkpoint.MAX_BYTES): it could not be read back"
        )
    mac = _mac(key, app_id, trial_id, payload)
    trial_dirs(path)
    fd, tmp = tempfile.mkstemp(prefix=".ckpt-", dir=path.parent)  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + mac + payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read(path: str | Path, key: str, app_id: str, trial_id: str) -> Any | None:
    """The tree of the checkpoint at ``path``, None if there is none; a file that is not
    this trial's sealed checkpoint raises :class:`CheckpointRefused` unparsed."""
    data = read_file(path)
    if data is None:
        return None
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _MAC_BYTES:
        raise CheckpointRefused("not a themis checkpoint (no seal)")
    mac = data[len(MAGIC) : len(MAGIC) + _MAC_BYTES]
    payload = data[len(MAGIC) + _MAC_BYTES :]
    if not key or not hmac.compare_digest(mac, _mac(key, app_id, trial_id, payload)):
        raise CheckpointRefused(
            f"its seal does not match {app_id}/{trial_id}: not written by this trial's jobs "
            "(planted, altered or copied)"
        )
    return _decode(payload)


def inspect(path: str | Path) -> Any | None:
    """The tree of a checkpoint *without* checking its seal, for tests and tools (it
    still never runs code); resuming always goes through :func:`read`."""
    data = read_file(path)
    if data is None:
        return None
    if not data.startswith(MAGIC):
        raise CheckpointRefused("not a themis checkpoint (no seal)")
    return _decode(data[len(MAGIC) + _MAC_BYTES :])


def read_file(path: str | Path, limit: int | None = None) -> bytes | None:
    """The bytes of the regular file at ``path`` (at most ``limit``, by default
    :data:`MAX_BYTES`), None if nothing is there.

    Anyone who runs as the same user can put something else at a trial's checkpoint
    path, and a plain ``read_bytes`` follows it: a FIFO blocks the reader for ever (and
    its GPUs with it), a symlink reads another file, ``/dev/zero`` or a sparse terabyte
    fill its memory. So the file is opened without following a final symlink and without
    blocking (``O_NOFOLLOW | O_NONBLOCK``), checked with ``fstat`` on the open descriptor
    (no race between check and read) and refused with :class:`CheckpointRefused` unless it
    is a regular file within the limit; the read itself stops one byte past the limit, in
    case the file grows meanwhile."""
    limit = MAX_BYTES if limit is None else limit
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink; ENOTDIR: a file where a directory goes
        raise CheckpointRefused(f"cannot be opened safely ({exc.strerror})", "unsafe") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointRefused(f"not a regular file ({_kind(info.st_mode)})", "unsafe")
        if info.st_size > limit:
            raise CheckpointRefused(f"{info.st_size} bytes, over the {limit}-byte limit", "unsafe")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 24, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise CheckpointRefused(f"grew past the {limit}-byte limit while read", "unsafe")
        return b"".join(chunks)
    except OSError as exc:
        raise CheckpointRefused(f"cannot be read ({exc.strerror})", "unsafe") from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISREG, "a file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _mac(key: str, app_id: str, trial_id: str, payload: bytes) -> bytes:
    h = hmac.new(bytes.fromhex(key), MAGIC + f"{app_id}\0{trial_id}\0".encode(), hashlib.sha256)
    h.update(payload)
    return h.digest()


def trial_dirs(path: str | Path) -> list[str]:
    """Make the checkpoint's directory and its app's (``<storage>/<app>/<trial>``) real
    directories, 0700; returns what had to be moved aside, one line each.

    Another app's code runs as the same user and can plant a file, a symlink or a FIFO at
    either level; ``mkdir`` then fails with ``NotADirectoryError`` on every start, and a
    symlink would lead this trial's checkpoints elsewhere. Whatever is not a directory
    there (``lstat``: a symlink to one counts as planted) is renamed aside, kept for the
    operator, and a directory made in its place: the trial loses at most its checkpoint,
    never its app. Several ranks may run this at once: a rename or ``mkdir`` another one
    won is fine."""
    trial_dir = Path(path).parent
    trial_dir.parent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # the storage
    moved: list[str] = []
    for d in (trial_dir.parent, trial_dir):
        for _ in range(3):  # a rank racing on the same directory: look again
            try:
                info = os.lstat(d)
            except FileNotFoundError:
                try:
                    os.mkdir(d, 0o700)
                except FileExistsError:
                    continue
                break
            if stat.S_ISDIR(info.st_mode):
                if info.st_mode & 0o077 and info.st_uid == os.getuid():
                    with contextlib.suppress(OSError):
                        os.chmod(d, 0o700)
                break
            aside = f"{d}.planted-{int(time.time())}-{secrets.token_hex(3)}"
            try:
                os.rename(d, aside)
            except FileNotFoundError:
                continue
            moved.append(f"{d} was {_kind(info.st_mode)}, not a directory: moved to {aside}")
    return moved


# -- the tree <-> JSON + npz ------------------------------------------------------------


def _encode(tree: Any) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    doc = json.dumps(_to_json(tree, arrays), separators=(",", ":"))
    arrays["__tree__"] = np.frombuffer(doc.encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # no object arrays: no pickle
    return buffer.getvalue()


def _decode(payload: bytes) -> Any:
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        doc = json.loads(arrays.pop("__tree__").tobytes().decode("utf-8"))
        return _from_json(doc, arrays)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise CheckpointRefused(f"a sealed checkpoint that cannot be read: {exc}") from None


def _to_json(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Plain JSON scalars stay; every container or array is a one-key tagged object."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}  # exact, and nan/inf without JSON extensions
    if isinstance(value, list):
        return {"list": [_to_json(v, arrays) for v in value]}
    if isinstance(value, tuple):
        return {"tuple": [_to_json(v, arrays) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"set": [_to_json(v, arrays) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_to_json(k, arrays), _to_json(v, arrays)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        return {"ndarray": _array(value, arrays)}
    if isinstance(value, np.generic):
        return {"npscalar": _array(np.asarray(value), arrays)}
    if type(value).__module__.startswith("torch") and type(value).__name__ in (
        "Tensor",
        "Parameter",
    ):
        return _torch_to_json(value, arrays)
    raise TypeError(
        f"a checkpoint cannot hold a {type(value).__module__}.{type(value).__qualname__}: "
        "it holds numbers, strings, bytes, lists, tuples, sets, dicts, numpy arrays and "
        "torch tensors (data only: no pickle)"
    )


def _array(value: np.ndarray, arrays: dict[str, np.ndarray]) -> str:
    if value.dtype.hasobject:
        raise TypeError("a checkpoint cannot hold numpy arrays of Python objects (pickles)")
    name = f"a{len(arrays)}"
    arrays[name] = value
    return name


def _torch_to_json(tensor: Any, arrays: dict[str, np.ndarray]) -> Any:
    import torch

    t = tensor.detach().cpu()
    dtype = str(t.dtype).removeprefix("torch.")
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits as int16
        t = t.view(torch.int16)
    return {"tensor": [_array(t.numpy(), arrays), dtype]}


def _from_json(doc: Any, arrays: dict[str, np.ndarray]) -> Any:
    if not isinstance(doc, dict):
        return doc
    ((tag, body),) = doc.items()
    if tag == "float":
        return float(body)
    if tag == "list":
        return [_from_json(v, arrays) for v in body]
    if tag == "tuple":
        return tuple(_from_json(v, arrays) for v in body)
    if tag == "set":
        return {_from_json(v, arrays) for v in body}
    if tag == "dict":
        return {_from_json(k, arrays): _from_json(v, arrays) for k, v in body}
    if tag == "bytes":
        return base64.b64decode(body)
    if tag == "ndarray":
        return arrays[body]
    if tag == "npscalar":
        return arrays[body][()]
    if tag == "tensor":
        import torch

        name, dtype = body
        t = torch.from_numpy(arrays[name].copy())
        return t.view(torch.bfloat16) if dtype == "bfloat16" else t
    raise ValueError(f"unknown tag {tag!r}")
