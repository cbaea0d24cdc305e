"""The durable format: what the event log stores for a workflow's values and calls, and how it is read back.

Below both the workflow code's API (``authoring``) and the replay (``_engine``), because both write and read it,
and so do the worker, the client and the viewers: values to JSON and back (``serde``, typed by ``json_data``,
user classes by their path, ``class_paths``), a user's codec and the values stored through it (``codecs``), how
a child call is recorded (``child_calls``: the child's run id and its parent's hook token), and a hook's failure
and heartbeat envelopes (``hook_payloads``). What is here is read by runs recorded long ago: a change must keep
reading what was stored before.
"""
