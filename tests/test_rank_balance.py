"""Dealing a minibatch's rows to the data-parallel ranks by tokens (gropd/train/rank_balance.py deal_rows), by hand;
tests/test_data_parallel.py checks on 2 gloo ranks that the dealt and token-packed update is the unbalanced one."""

from __future__ import annotations

import pytest

from gropd.train.rank_balance import deal_rows


def test_the_longest_rows_go_one_a_rank_then_each_to_the_lightest() -> None:
    """Costs 10, 9, 8, 3, 2, 1 on 2 ranks: 10 to rank 0, 9 to rank 1; 8 to rank 1 (9 < 10: 17); 3, 2 and 1 to rank 0
    (10, 13, 15 < 17): loads 16 and 17, where the rows as they came (every other one) load 20 and 13."""
    assert deal_rows([10, 9, 8, 3, 2, 1], 2) == [[0, 3, 4, 5], [1, 2]]
    assert deal_rows([1, 2, 3, 10, 9, 8], 2) == [[0, 1, 2, 3], [4, 5]]  # the same deal by cost, not by position


def test_ties_go_to_the_lower_rank_and_every_rank_gets_a_row() -> None:
    """Equal costs alternate from rank 0; one row a rank at the least (a rank without one would have no forward to
    keep the collectives in step with); fewer rows than ranks are refused."""
    assert deal_rows([5, 5, 5, 5], 2) == [[0, 2], [1, 3]]
    assert deal_rows([100, 1, 1], 3) == [[0], [1], [2]]
    with pytest.raises(ValueError, match="2 rows cannot give each of 3 ranks one"):
        deal_rows([4, 4], 3)
