"""Tools that run around the controller, not in it: the controller benchmark (bench.py, `make
bench-controller`), the PostgreSQL process manager (pgserver.py: the tests, make run, make stop
and the benchmark start their clusters with it), and the switches without interfaces that the
benchmark and the failover drills start beside the controller (processes.py). They import
terrapin; terrapin never imports them (tests/test_layout.py)."""
