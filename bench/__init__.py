"""`make bench`: measures speed and memory against same-run baselines and writes BENCHMARKS.md."""
