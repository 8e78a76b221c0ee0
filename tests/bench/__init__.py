"""Tests of bench/: the benches' pure parts and smoke runs on tiny shapes."""
