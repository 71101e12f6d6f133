"""loopledger.snapshots' code digests and signatures: the format's bytes (a blob is
HMAC-SHA256(key, version NUL pickle) + pickle, so snapshots sealed before stay valid), and the
digest kept under the files' stat stamps is the digest of what the files hold now."""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import zlib

import pytest
from loopledger import snapshots


def _by_hand(paths: list[str]) -> str:
    """The digest as the format defines it, computed with hashlib: FORMAT, then each file's
    name, NUL and contents, in path order."""
    h = hashlib.sha256(snapshots.FORMAT.encode())
    for p in sorted(paths, key=lambda p: p.split(os.sep)):
        with open(p, "rb") as fh:
            h.update(os.path.basename(p).encode() + b"\0" + fh.read())
    return h.hexdigest()[:32]


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "pkg").mkdir()
    paths = [tmp_path / "pkg" / "a.py", tmp_path / "pkg" / "b.py", tmp_path / "pkg.py"]
    for i, p in enumerate(paths):
        p.write_text(f"x = {i}\n")
    return [str(p) for p in paths]


def test_a_blob_sealed_with_the_hmac_module_unseals_and_the_reverse(monkeypatch):
    monkeypatch.setenv("LOOPLEDGER_STATE_KEY", "a key of this test")
    monkeypatch.setattr(snapshots, "_key", None)
    key = hashlib.sha256(b"a key of this test").digest()
    raw = zlib.compress(pickle.dumps({"n": 1}, protocol=5), 1)
    old = hmac.new(key, b"v1\0" + raw, hashlib.sha256).digest() + raw  # as sealed before this change
    assert snapshots.unseal(old, "v1") == {"n": 1}
    assert snapshots.unseal(old, "v2") is None  # another code version: not unpickled
    assert snapshots.seal({"n": 1}, "v1")[:32] == hmac.new(key, b"v1\0" + snapshots.seal({"n": 1}, "v1")[32:],
                                                          hashlib.sha256).digest()


def test_file_digest_is_the_formats_digest_cold_and_cached(files, monkeypatch, tmp_path):
    assert snapshots.file_digest(files) == _by_hand(files)
    assert not (tmp_path / "cache" / "loopledger" / "digests").exists()  # files written just now: not kept
    monkeypatch.setattr(snapshots, "_SETTLED_NS", -10**12)
    assert snapshots.file_digest(files) == _by_hand(files)
    assert len(os.listdir(tmp_path / "cache" / "loopledger" / "digests")) == 1
    assert snapshots.file_digest(reversed(files)) == _by_hand(files)  # from the cache: the same


def test_a_file_changed_after_its_digest_was_kept_is_read_again(files, monkeypatch):
    monkeypatch.setattr(snapshots, "_SETTLED_NS", -10**12)
    before = snapshots.file_digest(files)
    st = os.stat(files[0])
    with open(files[0], "w") as fh:  # same size, other contents
        fh.write("y = 0\n")
    os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    after = snapshots.file_digest(files)
    assert after != before and after == _by_hand(files)


def test_a_missing_file_is_digested_as_missing_every_time(files, monkeypatch):
    monkeypatch.setattr(snapshots, "_SETTLED_NS", -10**12)
    gone = files[0] + ".gone"
    h = hashlib.sha256(snapshots.FORMAT.encode())
    for p in sorted([*files, gone], key=lambda p: p.split(os.sep)):
        name = os.path.basename(p).encode()
        h.update(name + b"\0?" if p == gone else name + b"\0" + open(p, "rb").read())
    assert snapshots.file_digest([*files, gone]) == h.hexdigest()[:32]
