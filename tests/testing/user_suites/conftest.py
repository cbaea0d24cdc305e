"""Not collected here: these are user test files, each run in a fresh pytest process by
``tests/testing/test_user_suites.py``."""

collect_ignore_glob = ["test_*.py"]
