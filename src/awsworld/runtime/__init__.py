"""Old import paths, kept for code written against them: the runtime now lives in ``awsworld.authoring`` (what a
workflow is written with), ``awsworld.engine`` (replay), ``awsworld.worker`` (one delivery) and
``awsworld.client`` (``Client``, ``Run``, replay tools). Only what the README once documented is kept here:
``awsworld.runtime.replayer`` (now ``awsworld.client.replay``)."""
