"""A deep copy of rule state for the engine's hourly snapshots, without ``copy.deepcopy``'s detours.

``copy.deepcopy`` copies an immutable ``datetime`` or ``Fraction`` through its pickle protocol (about
20 µs each here) and a plain object through ``__reduce_ex__``; a rule's state is mostly such values
in a few lists, dicts, deques and plain objects. :func:`state_copy` shares what cannot change
(numbers, text, times, zones, frozen models and dataclasses), rebuilds containers and plain objects
(``__dict__`` or ``__slots__``) as ``deepcopy`` does -- one copy per object, shared references kept
shared through the memo -- and hands anything else to ``copy.deepcopy`` with the same memo. A class
names in ``state_flat`` its fields that hold a container of values only (copied with ``.copy()``).
The design: docs/scaling.md ("Alert engine"); tests/alerts/test_statecopy.py holds it equal to deepcopy.
"""

from __future__ import annotations

import copy
import enum
import fractions
from collections import deque
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from stormwatch.rain import TipResolution

_ATOMIC, _LIST, _DICT, _DEQUE, _TUPLE, _NAMED, _PLAIN, _OTHER = range(8)
_SHARED_TYPES = (str, int, float, bool, bytes, complex, type(None), datetime, date, time, timedelta, tzinfo,
                 fractions.Fraction, Decimal, range, type, enum.Enum, frozenset,
                 TipResolution)  # a value: its inches never change (its texts are made from them, once)
_EXACT: dict[type, int] = {list: _LIST, dict: _DICT, deque: _DEQUE, tuple: _TUPLE}
#: type -> how it is copied (found once per type)
_KINDS: dict[type, int] = {}
#: a plain type -> the names of its slots (found once per type)
_SLOTS: dict[type, tuple[str, ...]] = {}


def _slots_of(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [s for s in slots if s not in ("__dict__", "__weakref__")]
    return tuple(names)


def _kind_of(cls: type) -> int:
    if issubclass(cls, _SHARED_TYPES):
        return _ATOMIC
    if issubclass(cls, BaseModel):
        return _ATOMIC if cls.model_config.get("frozen") else _OTHER
    params = getattr(cls, "__dataclass_params__", None)
    if params is not None and params.frozen:
        return _ATOMIC
    exact = _EXACT.get(cls)
    if exact is not None:
        return exact
    if issubclass(cls, tuple) and hasattr(cls, "_fields") and cls.__reduce_ex__ is object.__reduce_ex__:
        return _NAMED
    if issubclass(cls, (list, dict, set, deque, tuple, bytearray)):
        return _OTHER  # a container's subclass: its items are not in its __dict__
    plain: bool = (cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
                   and getattr(cls, "__deepcopy__", None) is None and cls.__getstate__ is object.__getstate__
                   and getattr(cls, "__setstate__", None) is None and cls.__new__ is object.__new__)
    return _PLAIN if plain else _OTHER


def state_copy(x: Any, memo: dict[int, Any]) -> Any:
    """A deep copy of ``x`` (objects in ``memo`` by id are shared, as ``copy.deepcopy``'s memo)."""
    cls = type(x)
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _kind_of(cls)
    if kind == _ATOMIC:
        return x
    i = id(x)
    done = memo.get(i)
    if done is not None:
        return done
    if kind == _LIST:
        new_list: list[Any] = []
        memo[i] = new_list
        kinds = _KINDS  # a value is taken as it is without a call (most items are)
        new_list += [v if kinds.get(type(v)) == _ATOMIC else state_copy(v, memo) for v in x]
        return new_list
    if kind == _DICT:
        new_dict: dict[Any, Any] = {}
        memo[i] = new_dict
        kinds = _KINDS
        for k, v in x.items():
            new_dict[k if kinds.get(type(k)) == _ATOMIC else state_copy(k, memo)] = (
                v if kinds.get(type(v)) == _ATOMIC else state_copy(v, memo))
        return new_dict
    if kind == _DEQUE:
        new_deque: deque[Any] = deque(maxlen=x.maxlen)
        memo[i] = new_deque
        new_deque.extend([state_copy(v, memo) for v in x])
        return new_deque
    if kind == _TUPLE:
        items = [state_copy(v, memo) for v in x]
        if all(a is b for a, b in zip(items, x, strict=True)):
            return x  # as deepcopy: a tuple of shared values is itself shared
        done = memo.get(i)  # a cycle through the tuple made it already
        return done if done is not None else memo.setdefault(i, tuple(items))
    if kind == _PLAIN:
        return _copy_plain(x, cls, i, memo)
    if kind == _NAMED and all(state_copy(v, memo) is v for v in x):
        return x  # a named tuple of values, shared as deepcopy shares a plain tuple of values
    return copy.deepcopy(x, memo)


def _copy_plain(x: Any, cls: type, i: int, memo: dict[int, Any]) -> Any:
    """A plain object (its state its ``__dict__`` and ``__slots__``) rebuilt with copied values."""
    new: Any = object.__new__(cls)
    memo[i] = new
    flat: frozenset[str] = getattr(cls, "state_flat", frozenset())
    state = getattr(x, "__dict__", None)
    if state is not None:
        kinds = _KINDS  # a value is taken as it is without a call (most fields are)
        new.__dict__.update({k: v if kinds.get(type(v)) == _ATOMIC else v.copy() if k in flat and v is not None
                             else state_copy(v, memo) for k, v in state.items()})
    slots = _SLOTS.get(cls)
    if slots is None:
        slots = _SLOTS[cls] = _slots_of(cls)
    for name in slots:
        if hasattr(x, name):
            v = getattr(x, name)
            object.__setattr__(new, name, v.copy() if name in flat and v is not None else state_copy(v, memo))
    return new
