"""One way to name the parts infermeter can be extended with (backends, suites, workloads, schedulers): a `Registry`
of named entries, each imported when first used, holding infermeter's own and those other installed packages declare
as entry points (group `infermeter.<kind>s`).  Entry points are read only when a name infermeter does not have is
looked up or the names are listed, so a command that never asks (`infermeter --help`) never reads them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")

BUILTIN = "infermeter"  # the package of infermeter's own entries


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A named part: where it is imported from ("module:attribute"), one line saying what it is (None: the first
    line of its docstring, read once it is imported) and the package that provides it."""

    name: str
    target: str
    description: str | None = None
    package: str = BUILTIN

    def load(self) -> T:
        module, _, path = self.target.partition(":")
        found: Any = importlib.import_module(module.strip())
        for attr in filter(None, path.strip().split(".")):
            found = getattr(found, attr)
        return cast(T, found)


def first_line(obj: object) -> str:
    """The first line of an object's docstring: what a part says of itself when its package gives no description."""
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def warn(message: str) -> None:
    """One line on stderr (a plugin's failure is the user's environment, never infermeter's traceback)."""
    print("warning: " + " ".join(message.split()), file=sys.stderr)


def entry_points(group: str) -> list[Entry[Any]]:
    """The entries installed packages declare in `group`, not imported."""
    from importlib.metadata import entry_points as installed

    found: list[Entry[Any]] = []
    for point in installed(group=group):
        package = point.dist.name if point.dist is not None else "an unknown package"
        found.append(Entry(point.name, point.value.partition("[")[0].strip(), None, package))
    return found


class Registry(Mapping[str, Entry[T]]):
    """The entries of one kind by name: infermeter's own first, then other packages' (a package's entry that takes a
    name already held is ignored with a warning).  `load` imports an entry once; one of another package that fails to
    import, or is not what `check` accepts, is dropped with a one-line warning naming its entry point and package."""

    def __init__(
        self,
        kind: str,
        entries: Iterable[Entry[T]],
        check: Callable[[str, object], str | None] | None = None,
        describe: Callable[[T], str] = first_line,
    ) -> None:
        self.kind = kind
        self.group = f"infermeter.{kind}s"
        self._entries: dict[str, Entry[T]] = {e.name: e for e in entries}
        self._check = check  # what is wrong with an imported object (None: nothing), for other packages' entries
        self._describe = describe  # the line of an entry that has no description, from the imported object
        self._loaded: dict[str, T] = {}
        self._discovered = False

    def _discover(self) -> dict[str, Entry[T]]:
        if not self._discovered:
            self._discovered = True
            for entry in entry_points(self.group):
                held = self._entries.get(entry.name)
                if held is not None:
                    warn(f"ignoring {self._where(entry)}: the {self.kind} {entry.name!r} is {held.package}'s")
                else:
                    self._entries[entry.name] = entry
        return self._entries

    def _where(self, entry: Entry[T]) -> str:
        return f"entry point {self.group}: {entry.name} = {entry.target} of package {entry.package}"

    def __getitem__(self, name: str) -> Entry[T]:
        entry = self._entries.get(name) or self._discover().get(name)
        if entry is None:
            raise KeyError(name)
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._discover()))

    def __len__(self) -> int:
        return len(self._discover())

    def __setitem__(self, name: str, entry: Entry[T] | str) -> None:
        """Register (or replace) an entry; a string is its "module:attribute" target."""
        self._entries[name] = Entry(name, entry) if isinstance(entry, str) else entry
        self._loaded.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._loaded.pop(name, None)

    def load(self, name: str) -> T | None:
        """The object named, imported once; None when no entry has the name or another package's entry is broken."""
        entry = self.get(name)
        if entry is None:
            return None
        if name not in self._loaded:
            if entry.package == BUILTIN:
                self._loaded[name] = entry.load()
                return self._loaded[name]
            try:
                obj = entry.load()
                problem = self._check(name, obj) if self._check is not None else None
            except Exception as exc:  # anything a plugin's import raises is its own failure
                problem = f"it failed to import ({type(exc).__name__}: {exc})"
            if problem is not None:
                warn(f"ignoring {self._where(entry)}: {problem}")
                del self._entries[name]
                return None
            self._loaded[name] = obj
        return self._loaded[name]

    def describe(self, name: str) -> str:
        """The entry's one line: its description, else what the imported object says of itself."""
        entry = self[name]
        if entry.description is not None:
            return entry.description
        obj = self.load(name)
        return "" if obj is None else " ".join(self._describe(obj).split())

    def loaded(self) -> Mapping[str, T]:
        """The objects by name, each imported when first asked for (a broken plugin's is left out)."""
        return Loaded(self)


class Loaded(Mapping[str, T]):
    """A registry seen as its objects: `loaded[name]` imports the entry; iterating imports them all."""

    def __init__(self, registry: Registry[T]) -> None:
        self.registry = registry

    def __getitem__(self, name: str) -> T:
        obj = self.registry.load(name)
        if obj is None:
            raise KeyError(name)
        return obj

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.registry.load(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in self.registry if self.registry.load(name) is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))
