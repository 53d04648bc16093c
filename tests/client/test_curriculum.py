from rubricate_client.curriculum import windowed_curriculum


def test_items_are_batched_then_windowed() -> None:
    steps = list(windowed_curriculum(range(8), k=2, batch_size=3))
    assert steps == [
        ([0, 1, 2], "cross"),
        ([3, 4, 5], "cross"),
        ([0, 1, 2], "within"),
        ([3, 4, 5], "within"),
        ([6, 7], "cross"),
        ([6, 7], "within"),
    ]


def test_batches_given_as_they_are_with_the_default_window() -> None:
    modes = [mode for _, mode in windowed_curriculum([["a"], ["b"], ["c"], ["d"]])]
    assert modes == ["cross"] * 3 + ["within"] * 3 + ["cross", "within"]
