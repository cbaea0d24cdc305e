"""What every World shares around the rules, written once over a few primitives each World implements:
the ``WorldBase`` every World is (``world``), streams (``streams``, ``write_sessions``), the queue's
consumer (``queue_consumer``), storage (``storage``) and answers (``answers``)."""
