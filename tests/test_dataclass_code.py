"""loopledger.live.dataclass_code: the code `dataclasses` generates, kept between hook processes,
makes the very classes exec() of the generated text makes (each process here is a fresh
interpreter, as a hook is)."""

from __future__ import annotations

import os
import subprocess
import sys

# What a hook's classes do, printed: repr, equality and hash, the frozen guard, a pickle round
# trip, and the generated __init__'s defaults.
PROBE = r"""
import dataclasses, pickle, sys
from loopledger.live import dataclass_code
if sys.argv[1] == "kept":
    dataclass_code.install()
from loopledger.events import Answer, Batch, Call
from loopledger.detectors.policy import PolicySpec
c = Call("toolu_1", "Bash", {"command": "ls"})
print(repr(c), repr(Answer("toolu_1", "out")), repr(Batch((c,))))
print(c == Call("toolu_1", "Bash", {"command": "ls"}), c == Call("toolu_2", "Bash", {}), hash(Answer("i", "t")) == hash(Answer("i", "t")))
try:
    c.name = "Read"
except dataclasses.FrozenInstanceError as e:
    print("frozen", type(e).__name__)
print(pickle.loads(pickle.dumps(c)) == c, [f.name for f in dataclasses.fields(Answer)])
print(PolicySpec("ladder").label)
if sys.argv[1] == "kept":
    print("compiled here:", dataclass_code._new, dataclasses.exec is dataclass_code._exec)
    dataclass_code.save()
"""


def _run(mode: str, cache) -> list[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_classes_built_from_kept_code_are_the_classes_exec_builds(tmp_path):
    plain = _run("plain", tmp_path)
    first = _run("kept", tmp_path)  # nothing kept yet: compiles, then writes the file
    kept_file = tmp_path / "loopledger" / "pycache" / f"dataclass-code.{sys.implementation.cache_tag}.marshal"
    assert kept_file.is_file() and kept_file.stat().st_size > 0
    second = _run("kept", tmp_path)  # every text found in the file
    assert first[:-1] == plain and second[:-1] == plain
    assert first[-1] == "compiled here: True True"
    assert second[-1] == "compiled here: False True"
    assert "frozen FrozenInstanceError" in plain


def test_a_damaged_or_foreign_file_is_ignored(tmp_path):
    plain = _run("plain", tmp_path)
    kept_file = tmp_path / "loopledger" / "pycache" / f"dataclass-code.{sys.implementation.cache_tag}.marshal"
    kept_file.parent.mkdir(parents=True)
    for junk in (b"", b"not marshal at all", b"loopledger-dataclass-code/1\0another python\0" + b"\xff" * 40):
        kept_file.write_bytes(junk)
        out = _run("kept", tmp_path)
        assert out[:-1] == plain and out[-1] == "compiled here: True True"
