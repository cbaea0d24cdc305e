"""One delivery: the dispatch of a queue record, the inline flow loop, the step runner, run ends and child
reports, and the periodic tick (the watchdog). Hosts (``lambda_host``, ``local``, ``testing``) hand it records."""
