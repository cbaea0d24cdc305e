"""From outside any workflow: ``Client`` and ``Run`` (start, read, resume hooks, cancel, wake: ``client``), limits
across runs as they run (``limits``), an operator's skip of a wait (``skips``), the replay and export tools
(``replay``), and ``HttpClient`` (``http_client``) on ``HttpWorld`` (``http_world``: every World call over ``awsworld
serve``). The messages a Client queues for the worker are the contract's (``awsworld.world.messages``)."""
