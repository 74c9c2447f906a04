"""``TypedTuple`` (zsarchive/typedtuple.py) behaves as ``typing.NamedTuple`` for the same declaration:
the same tuples from the same calls, the same fields and defaults, copies, pickles and refusals."""

from __future__ import annotations

import copy
import pickle
from typing import NamedTuple

import pytest

from zsarchive.typedtuple import TypedTuple


class Theirs(NamedTuple):
    kind: int
    location: str | None = None
    offset: int = 0

    def twice(self) -> int:
        return 2 * self.offset


class Ours(TypedTuple):
    kind: int
    location: str | None = None
    offset: int = 0

    def twice(self) -> int:
        return 2 * self.offset


CALLS = [
    ((1,), {}),
    ((1, "s3://b/k"), {}),
    ((1, "s3://b/k", 5), {}),
    ((1,), {"offset": 5}),
    ((), {"kind": 2, "location": "x"}),
    ((1,), {"offset": 3, "location": "y"}),
]


@pytest.mark.parametrize("args, kwargs", CALLS)
def test_the_same_calls_make_the_same_tuples(args, kwargs):
    ours, theirs = Ours(*args, **kwargs), Theirs(*args, **kwargs)
    assert ours == theirs and tuple(ours) == tuple(theirs) and hash(ours) == hash(theirs)
    assert (ours.kind, ours.location, ours.offset, ours.twice()) == (
        theirs.kind,
        theirs.location,
        theirs.offset,
        theirs.twice(),
    )
    assert repr(ours) == repr(theirs).replace("Theirs", "Ours")
    assert ours._replace(offset=9) == theirs._replace(offset=9) and type(ours._replace(offset=9)) is Ours
    for again in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours)):
        assert again == ours and type(again) is Ours
    assert Ours._fields == Theirs._fields and Ours._field_defaults == Theirs._field_defaults
    assert Ours.__match_args__ == Theirs.__match_args__
    assert not hasattr(ours, "__dict__")


@pytest.mark.parametrize("args, kwargs", [((), {}), ((1, 2, 3, 4), {}), ((1,), {"kind": 2}), ((1,), {"nope": 2})])
def test_the_same_calls_are_refused(args, kwargs):
    with pytest.raises(TypeError):
        Theirs(*args, **kwargs)
    with pytest.raises(TypeError):
        Ours(*args, **kwargs)


def test_fields_are_read_only_and_a_default_cannot_come_first():
    with pytest.raises(AttributeError):
        Ours(1).offset = 2
    with pytest.raises(ValueError):
        Ours(1)._replace(nope=1)
    with pytest.raises(TypeError, match="follows one with a default"):

        class Wrong(TypedTuple):
            first: int = 0
            second: int
