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

import pytest
from _pytest.doctest import DoctestItem
from _pytest.unittest import TestCaseFunction

from .backends import LABEL_ALIASES

LABEL_KEY = pytest.StashKey[str]()
# Attribute of test reports that carries the item's label to the controller.
LABEL_ATTR = "pytest_lyapax_label"


class BackendTestCaseFunction(TestCaseFunction):
    """A unittest test method run under one backend: its item name carries
    the label, so the ``TestCase`` is built from the method's own name."""

    def _getinstance(self):  # type: ignore[override]
        return self.parent.obj(self.originalname)


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


def _copy_for(item: pytest.Item, label: str) -> pytest.Item:
    name = f"{item.name}[{label}]"
    if isinstance(item, DoctestItem):
        dtest = copy.copy(item.dtest)
        dtest.globs = dict(item.dtest.globs)
        clone: pytest.Item = DoctestItem.from_parent(
            item.parent, name=name, runner=item.runner, dtest=dtest
        )
    elif isinstance(item, TestCaseFunction):
        clone = BackendTestCaseFunction.from_parent(
            item.parent, name=name, originalname=item.originalname
        )
    elif type(item) is pytest.Function:
        clone = pytest.Function.from_parent(
            item.parent,
            name=name,
            callobj=item.obj,
            originalname=item.originalname,
        )
    else:
        clone = _shallow_copy(item, label)
    clone.own_markers = list(item.own_markers)
    clone.extra_keyword_matches.update(item.extra_keyword_matches)
    clone.stash[LABEL_KEY] = label
    return clone


def _shallow_copy(item: pytest.Item, label: str) -> pytest.Item:
    """Any other item type: a copy with its own name, id, markers and stash.

    Uses pytest's node attributes (``_nodeid``, ``NodeKeywords``); a test
    checks that they still exist.
    """
    from _pytest.mark.structures import NodeKeywords

    clone = copy.copy(item)
    clone.name = f"{item.name}[{label}]"
    clone._nodeid = f"{item.nodeid}[{label}]"
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
        result += [_copy_for(item, label) for label in labels]
    return result
