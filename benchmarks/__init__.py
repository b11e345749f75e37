"""Benchmarks and profiles, each a script run from the project root (``python
benchmarks/<name>.py``); a package only so that tests can import one of them by name
(tests/unit/test_fuzz_decoder.py)."""
