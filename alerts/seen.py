"""The reading identities an engine has seen, kept as runs of sequence numbers (compact at county scale).

A gateway numbers its readings ``seq`` 0, 1, 2, ... within one ``boot``, and every reading of a
site's gateway goes to that site's engine: what an engine has seen of one ``(gateway, boot)`` is
almost always one unbroken run of seqs. Kept as runs ``[first, last, newest event time]`` instead of
one dict entry per identity, the memory is a few runs per site instead of ~250 bytes per reading
(hours of 1-minute readings x thousands of sites; docs/scaling.md).

Forgetting is by event time, a whole run at a time, and only when the run's newest reading is older
than the cut: a run that straddles the cut is remembered a little longer, which can only make a
redelivered reading count as a duplicate (as it is), never a new reading as seen.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime

Identity = tuple[str, str, int]


class SeenIdentities:
    """A set of identities ``(gateway, boot, seq)`` with the event time of each run's newest one."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], list[list[int]]] = {}  # (gateway, boot) -> [first, last] runs, by first
        self._newest: dict[tuple[str, str], list[datetime]] = {}  # the same runs' newest event times
        self.count = 0  #: identities remembered (len() without a call: the engine checks it per release)

    def __len__(self) -> int:
        """Identities remembered."""
        return self.count

    def _find(self, identity: Identity) -> tuple[list[list[int]], int]:
        runs = self._runs.get((identity[0], identity[1]), [])
        return runs, bisect_right(runs, identity[2], key=lambda run: run[0]) - 1

    def __contains__(self, identity: Identity) -> bool:
        runs = self._runs.get((identity[0], identity[1]))
        if not runs:
            return False
        seq, last = identity[2], runs[-1]
        if seq > last[1]:  # the next reading of the newest run (nearly always): not seen
            return False
        if seq >= last[0]:
            return True
        runs, i = self._find(identity)
        return i >= 0 and runs[i][0] <= seq <= runs[i][1]

    def fresh_from(self, gateway: str, boot: str) -> int:
        """The lowest ``seq`` from which every ``seq`` of ``(gateway, boot)`` is unseen (after its newest
        run; ``-1`` when none is seen): a message's run of new readings is checked once."""
        runs = self._runs.get((gateway, boot))
        return runs[-1][1] + 1 if runs else -1

    def take_run(self, gateway: str, boot: str, first: int, last: int, time: datetime) -> bool:
        """Remember ``first`` .. ``last`` of ``(gateway, boot)``, the newest measured at ``time``, when
        none of them is seen (``first`` at or after :meth:`fresh_from`); else nothing (``False``)."""
        key = (gateway, boot)
        runs = self._runs.get(key)
        if runs:
            newest_run = runs[-1]
            if first <= newest_run[1]:
                return False
            if newest_run[1] == first - 1:  # the next of the newest run (nearly always)
                newest_run[1] = last
                newest = self._newest[key]
                if time > newest[-1]:
                    newest[-1] = time
                self.count += last - first + 1
                return True
        self.extend(gateway, boot, first, last, time)
        return True

    def extend(self, gateway: str, boot: str, first: int, last: int, time: datetime) -> None:
        """Remember ``first`` .. ``last`` of ``(gateway, boot)`` (all unseen, ``first`` at or after
        :meth:`fresh_from`), the newest measured at ``time``."""
        key = (gateway, boot)
        runs = self._runs.get(key)
        if runs and runs[-1][1] == first - 1:
            runs[-1][1] = last
            newest = self._newest[key]
            if time > newest[-1]:
                newest[-1] = time
        else:
            self._runs.setdefault(key, []).append([first, last])
            self._newest.setdefault(key, []).append(time)
        self.count += last - first + 1

    def add(self, identity: Identity, time: datetime) -> None:
        """Remember ``identity`` (measured at ``time``); one already remembered is left as it is."""
        key, seq = (identity[0], identity[1]), identity[2]
        runs = self._runs.get(key)
        if runs:
            last = runs[-1]
            if seq == last[1] + 1:  # extends the newest run (nearly always)
                last[1] = seq
                newest = self._newest[key]
                if time > newest[-1]:
                    newest[-1] = time
                self.count += 1
                return
        else:
            runs = self._runs[key] = []
        newest = self._newest.setdefault(key, [])
        i = bisect_right(runs, seq, key=lambda run: run[0]) - 1
        if i >= 0 and runs[i][0] <= seq <= runs[i][1]:
            return
        self.count += 1
        joins_left = i >= 0 and runs[i][1] == seq - 1
        joins_right = i + 1 < len(runs) and runs[i + 1][0] == seq + 1
        if joins_left and joins_right:
            runs[i][1] = runs[i + 1][1]
            newest[i] = max(newest[i], newest[i + 1], time)
            del runs[i + 1], newest[i + 1]
        elif joins_left:
            runs[i][1] = seq
            newest[i] = max(newest[i], time)
        elif joins_right:
            runs[i + 1][0] = seq
            newest[i + 1] = max(newest[i + 1], time)
        else:
            runs.insert(i + 1, [seq, seq])
            newest.insert(i + 1, time)

    def forget(self, until: datetime, *, including: bool = False) -> None:
        """Forget the runs whose newest reading is older than ``until`` (``including``: or at ``until``)."""
        for key in list(self._runs):
            runs, newest = self._runs[key], self._newest[key]
            keep = [j for j, t in enumerate(newest) if t > until or (t == until and not including)]
            if len(keep) == len(runs):
                continue
            kept = set(keep)
            self.count -= sum(runs[j][1] - runs[j][0] + 1 for j in range(len(runs)) if j not in kept)
            if keep:
                self._runs[key] = [runs[j] for j in keep]
                self._newest[key] = [newest[j] for j in keep]
            else:
                del self._runs[key], self._newest[key]
