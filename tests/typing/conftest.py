"""``sample_usage.py`` is read by pyright only (``test_typing.py``): never collected or imported."""

collect_ignore = ["sample_usage.py"]
