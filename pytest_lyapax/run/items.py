"""Every collected item, of any kind, once per requested backend.

Test functions get the backend as their first parametrization
(``test_x[cpu]``, via the ``jax_backend`` fixture). Items that pytest does not
parametrize -- unittest/absltest ``TestCase`` methods, doctests, items made by
other plugins -- are copied here, once per backend, with the label appended to
their name (``TestX::test_a[cpu]``). Each worker keeps only its own backend's
copies, so copies that share state never run in one process (without xdist,
only one backend's copies run; the others are skipped). Either way the item's
label is stored on the item, and everything downstream (routing, skipping,
results) reads it from there, never from the test id.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from typing import Any

import pytest
from _pytest import python as _python
from _pytest.doctest import DoctestItem
from _pytest.scope import Scope
from _pytest.unittest import TestCaseFunction

from pytest_lyapax.backends.labels import LABEL_ALIASES

# CallSpec since pytest 9.2 (where the old name CallSpec2 warns), before: CallSpec2.
_CallSpec: Any = getattr(_python, "CallSpec", None) or _python.CallSpec2

LABEL_KEY = pytest.StashKey[str]()
# Attribute of test reports that carries the item's label to the controller.
LABEL_ATTR = "pytest_lyapax_label"


class BackendTestCaseFunction(TestCaseFunction):
    """A unittest test method run under one backend: its item name carries
    the label, so the ``TestCase`` is built from the method's own name."""

    def _getinstance(self):  # type: ignore[override]
        return self.parent.obj(self.originalname)

    def setup(self) -> None:
        if hasattr(TestCaseFunction, "_getinstance"):
            super().setup()
            return
        # pytest < 8.2 builds the TestCase in setup() from the item's name;
        # the same steps, from the method's name.
        self._explicit_tearDown = None
        self._testcase = self.parent.obj(self.originalname)  # type: ignore
        self._obj = getattr(self._testcase, self.originalname)
        pytest.Function.setup(self)


def item_label(item: pytest.Item) -> str | None:
    """The backend label of an item (None for items of an inactive plugin)."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "jax_backend" in callspec.params:
        return callspec.params["jax_backend"]
    return item.stash.get(LABEL_KEY, None)


def marker_labels(node: pytest.Item, known: Collection[str]) -> set[str]:
    """Labels named by the closest ``jax_backend`` marker (empty: no marker).

    Raises ValueError for a label that is neither built in nor mapped with
    ``--jax-backend-platform`` (most likely a typo).
    """
    marker = node.get_closest_marker("jax_backend")
    if marker is None:
        return set()
    labels = {LABEL_ALIASES.get(str(a), str(a)) for a in marker.args}
    unknown = sorted(label for label in labels if label not in known)
    if unknown:
        raise ValueError(
            f"@pytest.mark.jax_backend names {unknown[0]!r}, which is not a known "
            f"backend label ({', '.join(known)}); map new labels with "
            f"--jax-backend-platform={unknown[0]}=PLATFORM"
        )
    return labels


def _labelled(text: str, label: str) -> str:
    """``name[label]``, or ``name[params-label]`` for a parametrized name."""
    if text.endswith("]") and "[" in text.rpartition("::")[2]:
        return f"{text[:-1]}-{label}]"
    return f"{text}[{label}]"


def _backend_callspec(item: pytest.Item, label: str, index: int) -> Any:
    """The item's parametrization (if any) with the backend added as its last
    axis, as ``metafunc.parametrize("jax_backend", ...)`` would have made it.

    pytest builds a function's id from its ``callspec`` (pytest >= 9.2) or
    from its name (earlier releases); a copy given both gets ``[..-LABEL]``
    on every release.  pytest has no public constructor for a callspec; its
    fields (the same from 8.1 to 9.2) are pinned by
    ``tests/test_plugin/test_plugin_ids.py``.
    """
    base = getattr(item, "callspec", None)
    params = dict(base.params) if base is not None else {}
    indices = dict(base.indices) if base is not None else {}
    arg2scope = dict(base._arg2scope) if base is not None else {}
    idlist = list(base._idlist) if base is not None else []
    marks = list(base.marks) if base is not None else []
    params["jax_backend"] = label
    indices["jax_backend"] = index
    arg2scope["jax_backend"] = Scope.Function
    return _CallSpec(
        params=params,
        indices=indices,
        _arg2scope=arg2scope,
        _idlist=[*idlist, label],
        marks=marks,
    )


def _copy_for(item: pytest.Item, label: str, index: int) -> pytest.Item:
    clone: pytest.Item
    if isinstance(item, DoctestItem):
        # A doctest's id is its name (no parametrization) on every release.
        dtest = copy.copy(item.dtest)
        dtest.globs = dict(item.dtest.globs)
        clone = DoctestItem.from_parent(
            item.parent,
            name=f"{item.name}[{label}]",
            runner=item.runner,
            dtest=dtest,
        )
    elif isinstance(item, TestCaseFunction) or type(item) is pytest.Function:
        callspec = _backend_callspec(item, label, index)
        kind = (
            BackendTestCaseFunction
            if isinstance(item, TestCaseFunction)
            else pytest.Function
        )
        extra = {} if kind is BackendTestCaseFunction else {"callobj": item.obj}
        clone = kind.from_parent(
            item.parent,
            name=f"{item.originalname}[{callspec.id}]",
            originalname=item.originalname,
            callspec=callspec,
            **extra,
        )
    else:
        clone = _shallow_copy(item, label)
    clone.own_markers = list(item.own_markers)
    clone.extra_keyword_matches.update(item.extra_keyword_matches)
    clone.stash[LABEL_KEY] = label
    return clone


def _shallow_copy(item: pytest.Item, label: str) -> pytest.Item:
    """Any other item type: a copy with its own name, id, markers and stash.

    Item classes of other plugins take constructor arguments unknown here, so
    the copy is made with ``copy.copy`` and its id set where pytest keeps it:
    ``_id`` (a structured ``NodeId``, pytest >= 9.2) or ``_nodeid`` (before);
    ``tests/test_plugin/test_plugin_ids.py`` checks both still hold.
    """
    from _pytest.mark.structures import NodeKeywords

    clone = copy.copy(item)
    clone.name = _labelled(item.name, label)
    nodeid = _labelled(item.nodeid, label)
    structured = getattr(item, "_id", None)
    if structured is not None and not isinstance(structured, str):
        clone._id = type(structured).parse(nodeid)  # type: ignore[attr-defined]
    else:
        clone._nodeid = nodeid  # type: ignore[attr-defined]
    clone.keywords = NodeKeywords(clone)
    clone.extra_keyword_matches = set()
    clone.stash = clone._store = pytest.Stash()
    clone.user_properties = []
    clone._report_sections = []
    return clone


def per_backend_items(
    items: Sequence[pytest.Item], labels: Sequence[str], known: Collection[str]
) -> list[pytest.Item]:
    """Each item once per label, in collection order (copies where needed).

    Raises ``pytest.UsageError`` for a copied item whose ``jax_backend``
    marker names an unknown label (functions get a collection error instead).
    """
    result = []
    for item in items:
        if item_label(item) is not None:
            result.append(item)
            continue
        try:
            marker_labels(item, known)
        except ValueError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        result += [_copy_for(item, label, i) for i, label in enumerate(labels)]
    return result


def count_copies(config: pytest.Config, added: int) -> None:
    """Add the copies made after collection to pytest's count of collected items.

    The terminal reporter counts items as collectors report them, before
    ``pytest_collection_modifyitems`` makes the copies, and prints "collected
    / deselected / selected" from that count (selected = collected -
    deselected, negative once ``-k`` deselects copies).  pytest has no public
    way to change it; the counter (``_numcollected``, 8.1 to 9.2) is pinned by
    ``tests/test_plugin/test_plugin_ids.py``.
    """
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if added and reporter is not None and hasattr(reporter, "_numcollected"):
        reporter._numcollected += added
