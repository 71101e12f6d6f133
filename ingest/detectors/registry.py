"""Which detectors exist: ours, the peers' ports, and plugins — one registration each.

A detector is a `Detector(name, params, factory, validate, summary)`: `params` is its parameter
schema (defaults, kinds, help: what forms, sweeps and the spec grammar read), `factory(spec)`
builds a fresh `Policy` for a complete `PolicySpec`, `validate(params)` raises `ConfigError` on
cross-field rules (block_at > warn_at, threshold <= window …).

Where detectors come from, in lookup order:
1. built-ins: the modules named in `BUILTINS`, each exposing `DETECTOR` (or several `Detector`
   values at module level);
2. installed plugins: the entry-point group `loopledger.detectors`; each entry point loads to a
   `Detector`, or to a callable returning one (or an iterable of them);
3. `module:factory` names: a detector named e.g. `mypkg.guards:make_guard`, imported by
   `import_factory` and registered under that exact name. Only the person running a command
   names code to import: a `--policy` on its command line or a [[policy]] in their config file
   (PolicySpec.parse(..., trusted=True)). `get` never imports: a name read from a ledger (a
   stored policy, an enforcement) finds a detector registered in this process or none, so a
   ledger writer (a teammate on a shared PostgreSQL ledger) cannot choose code that runs in the
   hook, `guard`, the dashboard or anyone else's process.

Adding a detector is one module and one line in `BUILTINS` (or one entry point).
"""

from __future__ import annotations

import _thread
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loopledger.detectors.base import Param
from loopledger.detectors.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from loopledger.detectors.base import Policy
    from loopledger.detectors.policy import PolicySpec

ENTRY_POINT_GROUP = "loopledger.detectors"

# Every built-in detector's name and the module that defines it, in the order pages and tables
# list them (seeds first, then ours, then peers). A lookup imports only its own module: a live
# hook enforcing `progress` does not pay for the other detectors' imports (test_registry checks
# this table against what the modules define).
BUILTINS: dict[str, str] = {
    "run-length": "loopledger.detectors.run_length",
    "stagnation": "loopledger.detectors.run_length",
    "ladder": "loopledger.detectors.ladder",
    "window": "loopledger.detectors.window",
    "cycle": "loopledger.detectors.cycle",
    "progress": "loopledger.detectors.progress",
    "openhands": "loopledger.detectors.openhands",
    "gemini-cli": "loopledger.detectors.gemini_cli",
    "roo": "loopledger.detectors.roo",
    "kilo": "loopledger.detectors.kilo",
}
BUILTIN_MODULES: tuple[str, ...] = tuple(dict.fromkeys(BUILTINS.values()))


@dataclass(frozen=True)
class Detector:
    name: str
    params: tuple[Param, ...]
    factory: Callable[[PolicySpec], Policy]
    validate: Callable[[Mapping[str, Any]], Any] | None = None
    summary: str = ""
    # Parameters an earlier version had and this one dropped: a stored policy naming them (a
    # ledger's row, an enforced setting) still loads, without them.
    retired: tuple[str, ...] = ()


_registry: dict[str, Detector] = {}
_lock = _thread.allocate_lock()  # threading.Lock(), without importing threading (a hook imports this)
_loaded = False
_builtins_loaded = False


def register(detector: Detector, *, replace: bool = False) -> Detector:
    """Add a detector; a second detector under a taken name is an error unless `replace`."""
    if not isinstance(detector, Detector):
        raise ConfigError("detector", "a Detector", f"not a loopledger Detector: {detector!r}")
    names = [p.name for p in detector.params]
    if len(set(names)) != len(names):
        raise ConfigError("params", "unique names", f"{detector.name}: parameter names repeat: {names}")
    with _lock:
        old = _registry.get(detector.name)
        if old is not None and old is not detector and not replace:
            raise ConfigError("detector", "a free name", f"detector {detector.name!r} is already registered")
        _registry[detector.name] = detector
    return detector


def _detectors_in(obj: Any) -> list[Detector]:
    if isinstance(obj, Detector):
        return [obj]
    if callable(obj):
        return _detectors_in(obj())
    if isinstance(obj, Iterable) and not isinstance(obj, str | bytes):
        out = [d for item in obj for d in _detectors_in(item)]
        if out:
            return out
    raise ConfigError("detector", "a Detector", f"{obj!r} is not a Detector (nor returns one)")


def _import_builtin(modname: str) -> None:
    """Register the detectors one built-in module defines (once)."""
    if modname in _imported:
        return
    mod = importlib.import_module(modname)
    for value in vars(mod).values():
        if isinstance(value, Detector) and value.name not in _registry:
            register(value)
    _imported.add(modname)


def _load_builtins() -> None:
    """Every built-in detector (no plugin scan)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    for modname in BUILTIN_MODULES:
        _import_builtin(modname)
    _builtins_loaded = True


def _load() -> None:
    """Built-ins and entry points, once per process (lazily: importing the registry is cheap)."""
    global _loaded
    if _loaded:
        return
    _load_builtins()
    _scan_entry_points()
    _loaded = True


def _scan_entry_points() -> list[str]:
    # Imported here: importlib.metadata and the scan of every installed distribution cost a
    # `loopledger hook` process (one per tool call) more than its whole decision.
    from importlib import metadata

    added = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            for det in _detectors_in(ep.load()):
                if det.name not in _registry:
                    register(det)
                    added.append(det.name)
            _broken.pop(ep.name, None)
        except Exception as e:  # noqa: BLE001 — one broken plugin must not take the others down
            _broken[ep.name] = f"{type(e).__name__}: {e}"
    return added


def rescan() -> tuple[str, ...]:
    """Read the entry points again: a plugin installed (or put on sys.path) after the first
    lookup in this process. Returns the names it added; known names are left as they are."""
    global _loaded
    _load_builtins()
    _loaded = True  # this scan is the process's first look at the entry points, or a second one
    return tuple(_scan_entry_points())


def unregister(name: str) -> None:
    """Forget a plugin (a reload, a test that installed one); built-ins stay."""
    if name in BUILTINS:
        raise ConfigError("detector", "a plugin", f"{name!r} is built in; it cannot be unregistered")
    with _lock:
        _registry.pop(name, None)


def builtin_names() -> tuple[str, ...]:
    """The detectors LoopLedger ships (seeds, ours, the peer ports), in display order: the
    default policy set. `names()` adds the plugins. Imports nothing."""
    return tuple(BUILTINS)


_imported: set[str] = set()
_broken: dict[str, str] = {}


def broken_plugins() -> dict[str, str]:
    """Entry points that failed to load, with why (shown by `loopledger policies`)."""
    _load()
    return dict(_broken)


def import_factory(name: str) -> Detector:
    """Import `module:factory` and register the detector it returns under that name. Only for a
    name the person running the command gave (command line, their config file): this runs code."""
    _load_builtins()
    with _lock:
        known = _registry.get(name)
    if known is not None:
        return known
    if not is_factory_name(name):
        raise ConfigError("detector", "module:factory", f"{name!r} is not a module:factory name")
    module, _, attr = name.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError("detector", "an importable module:factory",
                          f"cannot load detector {name!r}: {e}") from None
    (det, *more) = _detectors_in(obj)
    if more:
        raise ConfigError("detector", "one Detector", f"{name} returns {1 + len(more)} detectors; name one")
    # Registered under the module:factory name itself, which is what the ledger stores.
    return register(Detector(name, det.params, det.factory, det.validate, det.summary), replace=True)


def get(name: str) -> Detector:
    """The detector registered under `name` (built-ins, then installed entry points). Never
    imports a module the name spells: see `import_factory` (a built-in's own module, named in
    BUILTINS, is imported on its first lookup)."""
    det = _registry.get(name)
    if det is None and name in BUILTINS:
        _import_builtin(BUILTINS[name])
        det = _registry.get(name)
    if det is None:
        _load()  # not built in: the plugins' entry points are scanned only now
        det = _registry.get(name)
    if det is not None:
        return det
    if is_factory_name(name):
        raise ConfigError("detector", "registered detector",
                          f"detector {name!r} is not registered in this process; a module:factory name is "
                          "imported only when given on the command line or in your loopledger.toml, never "
                          "when read from a ledger")
    raise ConfigError("detector", "known detector", f"unknown detector {name!r}; known: {', '.join(names())}")


def is_registered(name: str) -> bool:
    """Whether `get(name)` finds a detector here (nothing is imported to find out)."""
    try:
        get(name)
    except ConfigError:
        return False
    return True


def names() -> tuple[str, ...]:
    """Built-ins in display order, then plugins in the order they registered."""
    _load()
    return (*BUILTINS, *(n for n in _registry if n not in BUILTINS))


def is_factory_name(text: str) -> bool:
    """`pkg.module:factory` (no `=`): how a spec names a plugin by import path."""
    module, colon, attr = text.partition(":")
    return bool(colon) and "=" not in attr and attr.replace(".", "_").isidentifier() and all(
        part.isidentifier() for part in module.split("."))


class ParamsView(Mapping[str, tuple[Param, ...]]):
    """`PARAMS[detector]` for every registered detector, plugins included, as they register."""

    def __getitem__(self, name: str) -> tuple[Param, ...]:
        try:
            return get(name).params
        except ConfigError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())
