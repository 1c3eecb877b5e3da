"""Site partitions (``--partition K/N``, ``--site-id``): each site in exactly one part, decided by its id alone."""

from __future__ import annotations

import pytest

from stormwatch.runtime.partition import Partition, jump_hash, site_bucket


def test_jump_hash_gives_the_published_buckets() -> None:
    # the test vectors of the reference implementations (github.com/dgryski/go-jump jump_test.go),
    # from Lamping & Veach's algorithm (arXiv:1406.2294, Figure 1)
    vectors = [(1, 1, 0), (42, 57, 43), (0xDEAD10CC, 1, 0), (0xDEAD10CC, 666, 361), (256, 1024, 520)]
    assert [jump_hash(key, n) for key, n, _ in vectors] == [b for _, _, b in vectors]


def test_growing_from_n_to_n_plus_1_parts_moves_sites_only_to_the_new_part() -> None:
    ids = [f"site-{i}" for i in range(2000)]
    for n in (1, 2, 3, 7):
        before = {s: site_bucket(s, n) for s in ids}
        after = {s: site_bucket(s, n + 1) for s in ids}
        moved = [s for s in ids if before[s] != after[s]]
        assert all(after[s] == n for s in moved)  # only to the new bucket
        assert abs(len(moved) - len(ids) / (n + 1)) < 0.15 * len(ids) / (n + 1) + 30  # about 1/(N+1) of them


def test_every_site_belongs_to_exactly_one_part() -> None:
    parts = [Partition.parse(f"{k}/4") for k in range(1, 5)]
    for i in range(500):
        assert sum(p.owns(f"fleet-{i:04d}") for p in parts) == 1
    assert Partition.parse(None).owns("anything") and Partition.parse(None).is_everything


def test_a_named_list_and_bad_specs() -> None:
    named = Partition.parse(None, ["a", "b"])
    assert named.owns("a") and not named.owns("c") and named.describe() == "2 named sites"
    for spec in ("0/2", "3/2", "1-2", "two"):
        with pytest.raises(ValueError, match="--partition"):
            Partition.parse(spec)
    with pytest.raises(ValueError, match="not both"):
        Partition.parse("1/2", ["a"])
