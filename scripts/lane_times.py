"""Print where a suite run's time went: seconds per test directory, from pytest's JUnit XML.

Used by scripts/test after both lanes finish, so CI output shows how to rebalance the lanes.
Usage: python scripts/lane_times.py LANE1.xml [LANE2.xml ...]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def main(paths: list[str]) -> None:
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as exc:
            print(f"{path}: no timings ({exc})")
            continue
        per_dir: dict[str, float] = defaultdict(float)
        for case in root.iter("testcase"):
            # classname is the dotted module path: tests.replication.test_isolation.TestX
            parts = case.get("classname", "").split(".")
            key = "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:1])
            per_dir[key] += float(case.get("time", "0") or 0)
        total = sum(per_dir.values())
        print(f"{path}: {total / 60:.1f} min of test time")
        for key, seconds in sorted(per_dir.items(), key=lambda kv: -kv[1]):
            print(f"  {seconds:8.1f} s  {key}")


if __name__ == "__main__":
    main(sys.argv[1:])
