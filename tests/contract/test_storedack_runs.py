"""Stored-acknowledgement runs (stormwatch/storedack.py): the one-run shortcut gives the runs the
loop gives, for any seqs."""

from __future__ import annotations

import random

import pytest

from stormwatch.storedack import decode, encode, runs


def _runs_plainly(seqs: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for seq in sorted(set(seqs)):
        if out and seq == out[-1][1] + 1:
            out[-1][1] = seq
        else:
            out.append([seq, seq])
    return out


@pytest.mark.parametrize("seed", range(200))
def test_runs_are_the_loops_runs(seed: int) -> None:
    rng = random.Random(seed)
    start = rng.randrange(10**6)
    seqs = [start + rng.choice((i, i, i, rng.randrange(3 * 40))) for i in range(rng.randrange(0, 40))]
    rng.shuffle(seqs)
    assert runs(seqs) == _runs_plainly(seqs)
    assert runs(seqs + seqs[:3]) == _runs_plainly(seqs)  # repeats


def test_a_batch_of_one_gateway_is_one_run_and_round_trips() -> None:
    assert runs([7, 5, 6, 6]) == [[5, 7]]
    assert runs([5, 7]) == [[5, 5], [7, 7]]
    assert runs([]) == []
    confirmed = decode(encode("ingest-1", {"b1": range(100, 5100)}))
    assert confirmed == [("b1", 100, 5099)]
