"""Tools that run around the controller, not in it: the controller benchmark (bench.py, `make
bench-controller`) and the PostgreSQL process manager (pgserver.py: the tests, make run, make
stop and the benchmark start their clusters with it). They import terrapin; terrapin never
imports them (tests/test_layout.py)."""
