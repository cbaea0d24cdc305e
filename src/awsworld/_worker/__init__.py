"""One delivery: the dispatch of a queue record, the inline flow loop, the step runner, run ends and child
reports, limits across runs (``limiter``, ``run_limits``, ``step_limits``), a delivery handed to its run's deployment
(``rerouting``), and the periodic tick (the watchdog). Hosts (``lambda_host``, ``local``, ``testing``) hand it
records."""
