from .checker import check


def test_clean_history_passes() -> None:
    log = {0: b"a", 1: b"b"}
    verdict = check({b"a": 0, b"b": 1}, [b"a", b"b"], {1: log, 2: dict(log)})
    assert verdict.ok() and verdict.acknowledged == 2


def test_each_anomaly_is_counted() -> None:
    replicas = {1: {0: b"b", 1: b"a", 2: b"a"}, 2: {0: b"x"}}
    verdict = check({b"a": 0, b"c": 3}, [b"a", b"b"], replicas)
    assert (verdict.lost, verdict.duplicated, verdict.inconsistent_offsets) == (2, 1, 1)
    assert verdict.reordered == 1 and not verdict.ok()
